"""clusterStatus: report the member's health and capacity on its Cluster object.

Every --cluster-status-update-frequency (a periodic job, never overlapping itself):

1. Take the Cluster from the agent's shared watch of it (a GET only while that watch has not
   synced, or to resolve a write conflict): an idle agent never polls its own Cluster. Do
   nothing until karmada-controller-manager has put its finalizer karmada.io/cluster-controller
   on it (as upstream).
2. Probe the member: GET /readyz (falling back to /healthz on 404). No answer at all means
   offline; an answer other than 200 means online but unhealthy.
3. Turn that into the Ready condition, damped by --cluster-success-threshold and
   --cluster-failure-threshold (the first observation after start is published at once).
4. Offline or not Ready: write only the Ready condition. Online, healthy and Ready: start the
   heartbeat (once; it then runs on its own), and collect kubernetesVersion, apiEnablements
   (with the CompleteAPIEnablements condition) and, with --enable-cluster-resource-modeling,
   nodeSummary/resourceSummary/allocatableModelings from Node and Pod watches on the member.
   Until those watches have synced (a LIST of every Pod of a big member takes seconds), a
   pass over a Cluster that has summaries published publishes the rest at once, the summaries
   as they were, then waits for the sync (up to --cluster-cache-sync-timeout) and publishes
   the summaries; a Cluster without any waits for the sync first. Upstream writes nothing
   until the caches have synced, so after an outage the Cluster would stay not Ready, and
   every Work wait, behind a LIST that has nothing to do with the member's health.
5. PUT /status only when the status differs from the Cluster just read (conflicts retried), so a
   steady member causes no Cluster writes: the Lease is the heartbeat.

Also, every pass (ours): the condition ClockSynchronized says whether the agent's clock agrees
with the control plane's and the member's (agent.kube.clock.ServerClock, from the Date of their
answers, within CLOCK_SKEW_TOLERANCE); karmada_agent_clock_skew_seconds{server} measures it, and
a ClockSkewed Warning Event on the Cluster marks the moment it goes off. Its message moves only
when a skew moves by more than a second, so a steady skew causes no writes either.

Deliberate difference: upstream counts any non-2xx answer of /readyz (other than 404) as
"not reachable"; here a server that answers is reachable, and a non-200 answer gives
ClusterNotReady, which tells the operator the member's API server is up but unhealthy.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from agent.context import AgentContext
from agent.controllers.heartbeat import Heartbeat
from agent.events import EventEmitter
from agent.karmada import names
from agent.karmada.cluster import (
    CONDITION_CLOCK_SYNCHRONIZED,
    EVENT_CLOCK_SKEWED,
    clock_condition,
)
from agent.karmada.conditions import find, new_condition, set_condition
from agent.karmada.summary import allocatable_modelings, node_summary, resource_summary
from agent.kube.client import KubeClient
from agent.kube.clock import REAL_CLOCK, Clock, ServerClock
from agent.kube.discovery import DiscoveryCache, api_enablements, discover
from agent.kube.errors import ConflictError, KubeError, NotFoundError, TransportError
from agent.kube.reflector import Answers, Reflector, uncached
from agent.kube.resources import NODES, PODS
from agent.kube.store import Store
from agent.kube.tasks import cancel_and_wait
from agent.logs import get_logger
from agent.metrics import AgentMetrics
from agent.options import Options
from agent.periodic import AsController, Periodic
from agent.resources import CLUSTERS
from agent.sources.cluster import ClusterInformer
from agent.sources.link import ControlPlaneLink

from .watches import Watches

log = get_logger(__name__)

JsonDict = dict[str, Any]
STATUS_WRITE_ATTEMPTS = 5
PROBE_TIMEOUT = 10.0

MESSAGE_READY = "the cluster is healthy and ready to accept workloads"
MESSAGE_NOT_READY = "the cluster answers, but its health endpoint did not report ok"
MESSAGE_NOT_REACHABLE = "the cluster cannot be reached"
MESSAGE_APIS_COMPLETE = "all API enablements were collected from the cluster"
MESSAGE_APIS_PARTIAL = "only part of the API enablements could be collected from the cluster"
MESSAGE_APIS_EMPTY = "no API enablements could be collected from the cluster"


# --- health --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Health:
    online: bool
    healthy: bool
    detail: str = ""


async def probe_health(member: KubeClient, *, timeout: float = PROBE_TIMEOUT) -> Health:
    try:
        response = await member.raw_get("/readyz", timeout=timeout)
        if response.status == 404:
            response = await member.raw_get("/healthz", timeout=timeout)
    except TransportError as exc:
        return Health(False, False, str(exc))
    except KubeError as exc:
        return Health(False, False, str(exc))
    if response.status != 200:
        return Health(True, False, f"HTTP {response.status}")
    return Health(True, True)


def observed_ready_condition(health: Health) -> JsonDict:
    if not health.online:
        return new_condition(
            names.CONDITION_READY,
            "False",
            names.REASON_CLUSTER_NOT_REACHABLE,
            MESSAGE_NOT_REACHABLE,
        )
    if not health.healthy:
        return new_condition(
            names.CONDITION_READY, "False", names.REASON_CLUSTER_NOT_READY, MESSAGE_NOT_READY
        )
    return new_condition(names.CONDITION_READY, "True", names.REASON_CLUSTER_READY, MESSAGE_READY)


class ReadyDamper:
    """Flap damping of the Ready condition.

    A change of the published Ready status (True to not-True, or back) is held back until the
    observed status has stayed the same for the failure (resp. success) threshold; meanwhile the
    published condition is kept. The first observation after start goes out at once.
    """

    def __init__(
        self, *, success_threshold: float, failure_threshold: float, clock: Clock = REAL_CLOCK
    ) -> None:
        self.success_threshold = success_threshold
        self.failure_threshold = failure_threshold
        self._clock = clock
        self._observed: str | None = None
        self._since = 0.0

    def reset(self) -> None:
        self._observed = None

    def adjust(self, published: JsonDict | None, observed: JsonDict) -> JsonDict:
        now = self._clock.now()
        status = str(observed.get("status"))
        if self._observed is None:
            self._observed, self._since = status, now
            return observed
        if status != self._observed:
            self._observed, self._since = status, now
        if published is None:
            return observed
        was_true = published.get("status") == "True"
        is_true = status == "True"
        threshold = self.success_threshold if is_true else self.failure_threshold
        if was_true != is_true and now < self._since + threshold:
            return published
        return observed


# --- trimmed member caches -----------------------------------------------------------------


def _meta(obj: JsonDict, *keys: str) -> JsonDict:
    meta = obj.get("metadata") or {}
    return {k: meta[k] for k in keys if k in meta}


def trim_node(node: JsonDict) -> JsonDict:
    """Only what the summaries read: name, allocatable and the Ready condition."""
    status = node.get("status") or {}
    ready = [c for c in status.get("conditions") or () if c.get("type") == "Ready"]
    trimmed_status: JsonDict = {"allocatable": status.get("allocatable") or {}}
    if ready:
        trimmed_status["conditions"] = [{"type": "Ready", "status": ready[0].get("status")}]
    return {
        "metadata": _meta(node, "name", "resourceVersion"),
        "status": trimmed_status,
    }


def _trim_containers(containers: Any) -> list[JsonDict]:
    out: list[JsonDict] = []
    for container in containers or ():
        requests = (container.get("resources") or {}).get("requests")
        out.append({"resources": {"requests": requests}} if requests else {})
    return out


def trim_pod(pod: JsonDict) -> JsonDict:
    """Only what the summaries read: node, requests, overhead and phase."""
    spec = pod.get("spec") or {}
    trimmed_spec: JsonDict = {}
    if spec.get("nodeName"):
        trimmed_spec["nodeName"] = spec["nodeName"]
    trimmed_spec["containers"] = _trim_containers(spec.get("containers"))
    if spec.get("initContainers"):
        trimmed_spec["initContainers"] = _trim_containers(spec["initContainers"])
    if spec.get("overhead"):
        trimmed_spec["overhead"] = spec["overhead"]
    phase = (pod.get("status") or {}).get("phase")
    return {
        "metadata": _meta(pod, "name", "namespace", "resourceVersion"),
        "spec": trimmed_spec,
        "status": {"phase": phase} if phase else {},
    }


def _published_summaries(cluster: JsonDict) -> bool:
    status = cluster.get("status") or {}
    return bool(status.get("nodeSummary") or status.get("resourceSummary"))


def member_summaries(
    nodes: list[JsonDict], pods: list[JsonDict], models: list[JsonDict]
) -> JsonDict:
    """nodeSummary and resourceSummary (with allocatableModelings when there are `models`)."""
    summary = resource_summary(nodes, pods)
    if models:
        modelings = allocatable_modelings(models, nodes, pods)
        if modelings:
            summary["allocatableModelings"] = modelings
    return {"nodeSummary": node_summary(nodes), "resourceSummary": summary}


class MemberCaches:
    """Node and Pod reflectors on the member (all namespaces, no selector), trimmed objects."""

    def __init__(self, member: KubeClient, *, clock: Clock = REAL_CLOCK) -> None:
        self.nodes = Reflector(
            member, NODES, store=Store(transform=trim_node), name="member nodes", clock=clock
        )
        self.pods = Reflector(
            member, PODS, store=Store(transform=trim_pod), name="member pods", clock=clock
        )
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def started(self) -> bool:
        return bool(self._tasks)

    @property
    def synced(self) -> bool:
        return self.nodes.has_synced and self.pods.has_synced

    def start(self) -> None:
        if not self._tasks:
            self._tasks = [
                asyncio.create_task(self.nodes.run(), name="member-nodes-reflector"),
                asyncio.create_task(self.pods.run(), name="member-pods-reflector"),
            ]

    async def wait_synced(self, timeout: float) -> bool:
        results = await asyncio.gather(
            self.nodes.wait_synced(timeout), self.pods.wait_synced(timeout)
        )
        return all(results)

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(tasks)


# --- the controller ------------------------------------------------------------------------


def api_enablements_condition(collected: list[JsonDict], failed: bool) -> JsonDict:
    kind = names.CONDITION_COMPLETE_API_ENABLEMENTS
    if not collected:
        return new_condition(kind, "False", names.REASON_API_ENABLEMENTS_EMPTY, MESSAGE_APIS_EMPTY)
    if failed:
        return new_condition(
            kind, "False", names.REASON_API_ENABLEMENTS_PARTIAL, MESSAGE_APIS_PARTIAL
        )
    return new_condition(kind, "True", names.REASON_API_ENABLEMENTS_COMPLETE, MESSAGE_APIS_COMPLETE)


StatusMutation = Callable[[JsonDict], None]
HeartbeatFactory = Callable[[], Heartbeat]
# How a skew must move before the condition's message follows it (seconds).
SKEW_REPORTED_WITHIN = 1.0


class ClockSkew:
    """The agent's clock against each API server's, as ClockSynchronized reports it."""

    # The metric's server label, and how the condition names it.
    SERVERS = {"karmada": "the Karmada control plane", "member": "the member cluster"}

    def __init__(self, clocks: dict[str, ServerClock], metrics: AgentMetrics | None) -> None:
        self.clocks = clocks
        self.metrics = metrics
        self._reported: dict[str, float] = {}

    def condition(self) -> JsonDict | None:
        """ClockSynchronized now; None before any server has answered with a Date."""
        skews: dict[str, float] = {}
        for server, clock in self.clocks.items():
            skew = clock.skew()
            if skew is None:
                continue
            if self.metrics is not None:
                with contextlib.suppress(AttributeError):
                    self.metrics.clock_skew_seconds.labels(server=server).set(skew)
            reported = self._reported.get(server)
            if reported is not None and abs(skew - reported) <= SKEW_REPORTED_WITHIN:
                skew = reported
            skews[server] = skew
        self._reported = skews
        if not skews:
            return None
        return clock_condition({self.SERVERS[server]: skew for server, skew in skews.items()})


class ClusterStatusController:
    name = "clusterStatus"

    def __init__(
        self,
        *,
        karmada: KubeClient,
        member: KubeClient,
        options: Options,
        metrics: AgentMetrics | None = None,
        heartbeat: HeartbeatFactory | None = None,
        cluster_informer: ClusterInformer | None = None,
        link: ControlPlaneLink | None = None,
        events: EventEmitter | None = None,
        clock: Clock = REAL_CLOCK,
    ) -> None:
        self.karmada = karmada
        self.link = link
        self.events = events
        self.skew = ClockSkew(
            {"karmada": karmada.transport.server_clock, "member": member.transport.server_clock},
            metrics,
        )
        # Until it has synced, the Cluster is read with a GET.
        self.cluster_informer = cluster_informer
        # Started by the controller manager, not waited for.
        self.watches = (
            Watches() if cluster_informer is None else Watches().cluster(cluster_informer)
        )
        self.member = member
        self.options = options
        self.cluster_name = options.cluster_name
        self.metrics = metrics
        self._clock = clock
        self.damper = ReadyDamper(
            success_threshold=options.cluster_success_threshold.total_seconds(),
            failure_threshold=options.cluster_failure_threshold.total_seconds(),
            clock=clock,
        )
        self._heartbeat_factory = heartbeat or self._default_heartbeat
        self.heartbeat: Heartbeat | None = None
        self.caches: MemberCaches | None = None
        # The last summaries, and the cache revisions and resource models they were made of.
        self._summaries_of: tuple[tuple[int, int, list[JsonDict]], JsonDict] | None = None
        self._periodic: Periodic | None = None
        self.status_writes = 0
        self.last_status: JsonDict | None = None
        # Unchanged discovery documents come back as 304 Not Modified.
        self.discovery_cache = DiscoveryCache()

    def _default_heartbeat(self) -> Heartbeat:
        return Heartbeat(
            self.karmada,
            self.cluster_name,
            lease_duration=self.options.cluster_lease_duration.total_seconds(),
            renew_interval=self.options.cluster_lease_renew_interval.total_seconds(),
            clock=self._clock,
            link=self.link,
            on_renewed=self._lease_renewed,
        )

    def _lease_renewed(self) -> None:
        if self.metrics is not None:
            self.metrics.cluster_lease_renewed.labels(self.cluster_name).set(time.time())

    @property
    def periodic(self) -> Periodic | None:
        """The scheduled sync job while running."""
        return self._periodic

    @property
    def _as_controller(self) -> AsController | None:
        """Each pass is a reconcile of upstream's cluster-status-controller in the metrics."""
        if self.metrics is None:
            return None
        return AsController(
            self.metrics.client,
            names.controller_component(self.name),
            self.options.concurrent_cluster_syncs,
        )

    # --- Runnable ------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._periodic is not None:
            return
        interval = self.options.cluster_status_update_frequency.total_seconds()
        self._periodic = Periodic(
            f"cluster-status-{self.cluster_name}",
            self.sync_once,
            interval,
            jitter=min(2.0, interval * 0.1),
            clock=self._clock,
            as_controller=self._as_controller,
        )
        await self._periodic.start()

    async def stop(self) -> None:
        periodic, self._periodic = self._periodic, None
        if periodic is not None:
            await periodic.stop(timeout=10.0)
        await self._stop_member_side()

    @property
    def has_synced(self) -> bool:
        """For /readyz: the node and pod caches (when they are in use) have synced."""
        return self.caches is None or self.caches.synced

    async def _stop_member_side(self) -> None:
        heartbeat, self.heartbeat = self.heartbeat, None
        if heartbeat is not None:
            await heartbeat.stop()
        caches, self.caches = self.caches, None
        self._summaries_of = None
        if caches is not None:
            await caches.stop()

    # --- one pass --------------------------------------------------------------------------------

    async def sync_once(self) -> None:
        started = time.monotonic()
        cluster = await self._current_cluster()
        if cluster is None:
            log.warning("Cluster %s not found; status reporting paused", self.cluster_name)
            await self._stop_member_side()
            self.damper.reset()
            if self.metrics is not None:
                self.metrics.forget_cluster(self.cluster_name)
            return
        finalizers = (cluster.get("metadata") or {}).get("finalizers") or []
        if names.CLUSTER_CONTROLLER_FINALIZER not in finalizers:
            log.info(
                "waiting for karmada-controller-manager to add finalizer %s to Cluster %s",
                names.CLUSTER_CONTROLLER_FINALIZER,
                self.cluster_name,
            )
            return

        probe_started = time.monotonic()
        health = await probe_health(self.member)
        if self.metrics is not None:
            self.metrics.observe_health_probe(
                self.cluster_name,
                online=health.online,
                healthy=health.healthy,
                seconds=time.monotonic() - probe_started,
            )
        if not (health.online and health.healthy):
            log.info(
                "member health probe: online=%s healthy=%s %s",
                health.online,
                health.healthy,
                health.detail,
            )
        published = find((cluster.get("status") or {}).get("conditions"), names.CONDITION_READY)
        ready = self.damper.adjust(published, observed_ready_condition(health))

        collecting = health.online and health.healthy and ready.get("status") == "True"
        summaries_left_out = False
        if collecting:
            if (cluster.get("spec") or {}).get("syncMode") == "Pull":
                await self._ensure_heartbeat()
            mutate = await self._collect(cluster, ready)
            # Read now, not after the write below: caches that finish syncing while it is on
            # its way still owe this pass the summaries it left out. (Without summaries
            # published, _collect has waited for the caches already.)
            summaries_left_out = self._caches_syncing() and _published_summaries(cluster)
        else:
            mutate = self._conditions_only([ready])
        clock = self.skew.condition()
        if clock is not None:
            mutate = self._with_condition(mutate, clock)
            self._warn_when_skewed(cluster, clock)

        cluster = await self._write_status(cluster, mutate)
        if summaries_left_out:
            summaries = await self._summaries_once_synced(cluster)
            if summaries is not None:
                cluster = await self._write_status(cluster, self._summaries_mutation(summaries))
        self.last_status = cluster.get("status") or {}
        if self.metrics is not None:
            self.metrics.observe_cluster_status(self.cluster_name, self.last_status)
            self.metrics.cluster_sync_status_duration.labels(self.cluster_name).observe(
                time.monotonic() - started
            )

    async def _current_cluster(self) -> JsonDict | None:
        """The Cluster from the shared informer once it has synced, else from the API server;
        None when it does not exist."""
        informer = self.cluster_informer
        if informer is not None and informer.synced:
            return informer.cluster
        try:
            return await self.karmada.get(CLUSTERS, self.cluster_name)
        except NotFoundError:
            return None

    async def _ensure_heartbeat(self) -> None:
        if self.heartbeat is None:
            self.heartbeat = self._heartbeat_factory()
            await self.heartbeat.start()

    @staticmethod
    def _with_condition(mutate: StatusMutation, condition: JsonDict) -> StatusMutation:
        def both(status: JsonDict) -> None:
            mutate(status)
            set_condition(status.setdefault("conditions", []), dict(condition))

        return both

    def _warn_when_skewed(self, cluster: JsonDict, clock: JsonDict) -> None:
        """A Warning Event when ClockSynchronized turns False (as published before)."""
        published = find(
            (cluster.get("status") or {}).get("conditions"), CONDITION_CLOCK_SYNCHRONIZED
        )
        if clock["status"] != "False" or (published or {}).get("status") == "False":
            return
        log.warning("clock skew: %s", clock["message"])
        if self.events is not None:
            self.events.emit(cluster, "Warning", EVENT_CLOCK_SKEWED, str(clock["message"]))

    @staticmethod
    def _conditions_only(conditions: list[JsonDict]) -> StatusMutation:
        def mutate(status: JsonDict) -> None:
            current = status.setdefault("conditions", [])
            for condition in conditions:
                set_condition(current, dict(condition))

        return mutate

    async def _collect(self, cluster: JsonDict, ready: JsonDict) -> StatusMutation:
        """Everything a healthy member reports; returns the mutation to apply to the status."""
        version: str | None = None
        try:
            version = str((await self.member.server_version()).get("gitVersion") or "") or None
        except KubeError as exc:
            log.warning("reading the member's /version failed: %s", exc)

        enablements: list[JsonDict] = []
        partial = False
        try:
            discovered = await discover(self.member, self.discovery_cache)
            enablements = api_enablements(discovered)
            partial = bool(discovered.failed)
        except KubeError as exc:
            log.warning("member discovery failed: %s", exc)
        api_condition = api_enablements_condition(enablements, partial)

        summaries: JsonDict | None = None
        if self.options.enable_cluster_resource_modeling:
            summaries = self._summaries(cluster)
            if summaries is None and not _published_summaries(cluster):
                # Nothing published yet stands for the member meanwhile, and a Ready Cluster
                # without resourceSummary reads as one with no room to Karmada's scheduler:
                # the first status waits for the caches, as upstream's does.
                summaries = await self._summaries_once_synced(cluster)
        with_summaries = self._summaries_mutation(summaries)

        def mutate(status: JsonDict) -> None:
            if version is not None:
                status["kubernetesVersion"] = version
            if enablements:
                status["apiEnablements"] = enablements
            else:
                status.pop("apiEnablements", None)
            with_summaries(status)
            current = status.setdefault("conditions", [])
            set_condition(current, dict(ready))
            set_condition(current, api_condition)

        return mutate

    @staticmethod
    def _summaries_mutation(summaries: JsonDict | None) -> StatusMutation:
        """The summaries set on the status; None leaves the published ones as they are."""

        def mutate(status: JsonDict) -> None:
            for key, value in (summaries or {}).items():
                if value:
                    status[key] = value
                else:
                    status.pop(key, None)

        return mutate

    def _caches_syncing(self) -> bool:
        """The member caches were started and have not synced yet."""
        return self.caches is not None and not self.caches.synced

    async def _summaries_once_synced(self, cluster: JsonDict) -> JsonDict | None:
        """The summaries once the member caches have synced; None (with a warning) when they
        have not within --cluster-cache-sync-timeout."""
        timeout = self.options.cluster_cache_sync_timeout.total_seconds()
        if self.caches is None or not await self.caches.wait_synced(timeout):
            log.warning(
                "member node/pod caches not synced within %.0fs; summaries not updated",
                timeout,
            )
            return None
        return self._summaries(cluster)

    def _summaries(self, cluster: JsonDict) -> JsonDict | None:
        """nodeSummary and resourceSummary from the member caches (started on first use); None
        while they have not synced: a summary of part of the member is never published."""
        if self.caches is None:
            self.caches = MemberCaches(self.member, clock=self._clock)
            self.caches.start()
        if not self.caches.synced:
            return None
        models = (cluster.get("spec") or {}).get("resourceModels") or []
        if not self.options.gate("CustomizedClusterResourceModeling"):
            models = []
        nodes, pods = self.caches.nodes.store, self.caches.pods.store
        # The sums walk every cached Pod: with nothing changed on the member (the caches'
        # revisions) nor in the resource models, the last pass's figures still hold.
        inputs = (nodes.revision, pods.revision, copy.deepcopy(models))
        if self._summaries_of is None or self._summaries_of[0] != inputs:
            self._summaries_of = (inputs, member_summaries(nodes.list(), pods.list(), models))
        return copy.deepcopy(self._summaries_of[1])

    def _writing(self) -> AbstractContextManager[Answers]:
        informer = self.cluster_informer
        return informer.writing() if informer is not None else uncached()

    async def _write_status(self, cluster: JsonDict, mutate: StatusMutation) -> JsonDict:
        """PUT /status when the mutation changes it; re-read and retry on conflict."""
        for attempt in range(STATUS_WRITE_ATTEMPTS):
            live_status = cluster.get("status") or {}
            status = copy.deepcopy(live_status)
            mutate(status)
            if status == live_status:
                return cluster
            try:
                with self._writing() as write:
                    updated = await self.karmada.update_status(
                        CLUSTERS, {**cluster, "status": status}
                    )
                    # The next pass compares against what we wrote, even before the watch
                    # echoes it.
                    write.answered(updated)
            except ConflictError:
                if attempt + 1 == STATUS_WRITE_ATTEMPTS:
                    raise
                cluster = await self.karmada.get(CLUSTERS, self.cluster_name)
                continue
            self.status_writes += 1
            return updated
        return cluster  # unreachable: the loop returns or raises


def build(ctx: AgentContext) -> ClusterStatusController:
    return ClusterStatusController(
        karmada=ctx.karmada,
        member=ctx.member,
        options=ctx.options,
        metrics=ctx.metrics,
        cluster_informer=ctx.sources.cluster,
        link=ctx.sources.link,
        events=ctx.events,
    )
