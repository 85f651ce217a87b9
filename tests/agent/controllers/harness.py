"""Shared harness for the tests of the controllers and the sources they read: an emulated
Karmada control plane and an emulated member cluster, our clients on both, the named controllers
running on the sources the app would build, and Works shaped like the ones the Karmada control
plane writes. (No tests here; the module is imported by the others.)"""

from __future__ import annotations

import copy
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from prometheus_client import CollectorRegistry

from agent.context import AgentContext, Runnable
from agent.controllers import load_builders
from agent.controllers.execution import ExecutionController
from agent.controllers.manager import ControllerManager
from agent.controllers.work_status import WorkStatusController
from agent.events import EventEmitter
from agent.karmada import names
from agent.kube.client import GVR, KubeClient
from agent.kube.config import ClientConfig
from agent.kube.discovery import RESTMapper
from agent.kube.errors import NotFoundError
from agent.kube.metrics import PrometheusMetrics
from agent.kube.reflector import Reflector
from agent.kube.resources import EVENTS, NAMESPACES
from agent.kube.transport import Transport
from agent.options import Options
from agent.resources import CLUSTERS, WORKS
from agent.sources import live_sources
from emulator.controllers import Knobs
from emulator.emulator import Emulator, run_emulator
from tests import polling

JsonDict = dict[str, Any]
T = TypeVar("T")

CLUSTER = "member1"
EXEC_NS = names.execution_namespace(CLUSTER)
# The custom resource of crd() with its defaults: a test's own kind, no fact of the product.
WIDGETS = GVR("example.io", "v1", "widgets")


def kube_client(emu: Emulator, user: str | None = None) -> KubeClient:
    """Our KubeClient talking to the emulator in-process, as its admin (or as `user`, with a
    client certificate and only the permissions RBAC gives that user)."""
    config = ClientConfig(host=emu.url, qps=0)
    return KubeClient(Transport(config, transport_factory=lambda _cfg: emu.transport(user=user)))


async def eventually(
    probe: Callable[[], Awaitable[T]],
    predicate: Callable[[T], bool],
    *,
    timeout: float = 10.0,
    what: str = "condition",
) -> T:
    """Evaluate `probe` until `predicate` holds for its value (NotFound counts as not yet)."""
    value: T = await polling.eventually(
        probe, until=predicate, timeout=timeout, what=what, retry_on=(NotFoundError,)
    )
    return value


class HeldEvents:
    """The watch events of one reflector that `held` picks, kept from it until `release`: a
    watch that lags behind the writes (the API server sends events whenever it gets to them)."""

    def __init__(self, reflector: Reflector, held: Callable[[JsonDict], bool]) -> None:
        self.reflector = reflector
        self.held = held
        self.events: list[JsonDict] = []
        self._deliver = reflector._handle_event
        reflector._handle_event = self._handle  # type: ignore[method-assign]

    def _handle(self, event: JsonDict) -> None:
        if self.held(event):
            self.events.append(event)
        else:
            self._deliver(event)

    async def arrived(self, count: int) -> None:
        """Wait until the watch has brought `count` events that are held."""

        async def held() -> int:
            return len(self.events)

        await eventually(held, lambda n: n >= count, what=f"{count} watch events held")

    def release(self, until: Callable[[JsonDict], bool] | None = None) -> None:
        """Deliver the held events in order: all of them, or up to the first `until` picks."""
        while self.events:
            event = self.events.pop(0)
            self._deliver(event)
            if until is not None and until(event):
                return
        if until is None:
            self.reflector._handle_event = self._deliver  # type: ignore[method-assign]


def named(name: str) -> Callable[[JsonDict], bool]:
    return lambda event: (event.get("object") or {}).get("metadata", {}).get("name") == name


# --- objects as the Karmada control plane writes them ------------------------------------------


def configmap(name: str, namespace: str = "default", data: JsonDict | None = None) -> JsonDict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data if data is not None else {"key": "value"},
    }


def deployment(name: str, namespace: str = "default", replicas: int = 2) -> JsonDict:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(labels)},
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
            },
        },
    }


def service(name: str, namespace: str = "default") -> JsonDict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 8080}]},
    }


def crd(
    group: str = "example.io",
    kind: str = "Widget",
    plural: str = "widgets",
    *,
    version: str = "v1",
    status: bool = False,
) -> JsonDict:
    """A namespaced CRD keeping every field; with `status`, a status subresource."""
    served: JsonDict = {"name": version, "served": True, "storage": True}
    if status:
        served["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "plural": plural,
                "singular": kind.lower(),
                "listKind": f"{kind}List",
            },
            "versions": [
                {
                    **served,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


@dataclass
class WorkIds:
    work: str = field(default_factory=lambda: str(uuid.uuid4()))
    binding: str = field(default_factory=lambda: str(uuid.uuid4()))
    template: str = field(default_factory=lambda: str(uuid.uuid4()))


def karmada_manifest(obj: JsonDict, work_name: str, ids: WorkIds) -> JsonDict:
    """A manifest as the binding controller renders it into a Work."""
    manifest = copy.deepcopy(obj)
    meta = manifest.setdefault("metadata", {})
    labels = meta.setdefault("labels", {})
    labels.update(
        {
            names.MANAGED_LABEL: "true",
            names.WORK_PERMANENT_ID_LABEL: ids.work,
            names.BINDING_PERMANENT_ID_LABEL: ids.binding,
        }
    )
    annotations = meta.setdefault("annotations", {})
    annotations.update(
        {
            names.WORK_NAMESPACE_ANNOTATION: EXEC_NS,
            names.WORK_NAME_ANNOTATION: work_name,
            names.BINDING_NAMESPACE_ANNOTATION: meta.get("namespace", ""),
            names.BINDING_NAME_ANNOTATION: f"{meta.get('name')}-{str(manifest.get('kind', '')).lower()}",
            names.RESOURCE_TEMPLATE_UID_ANNOTATION: ids.template,
            names.RESOURCE_TEMPLATE_GENERATION_ANNOTATION: "1",
            names.MANAGED_LABELS_ANNOTATION: ",".join(sorted(labels)),
            names.MANAGED_ANNOTATIONS_ANNOTATION: ",".join(
                sorted(
                    [
                        *annotations,
                        names.MANAGED_ANNOTATIONS_ANNOTATION,
                        names.MANAGED_LABELS_ANNOTATION,
                    ]
                )
            ),
        }
    )
    return manifest


def karmada_work(
    name: str,
    objects: list[Any],
    *,
    suspend: bool | None = None,
    preserve: bool | None = None,
    annotations: dict[str, str] | None = None,
    raw: bool = False,
) -> JsonDict:
    """A Work as karmada-controller-manager creates it (finalizer, labels, annotations)."""
    ids = WorkIds()
    manifests = objects if raw else [karmada_manifest(o, name, ids) for o in objects]
    spec: JsonDict = {"workload": {"manifests": manifests}}
    if suspend is not None:
        spec["suspendDispatching"] = suspend
    if preserve is not None:
        spec["preserveResourcesOnDeletion"] = preserve
    return {
        "apiVersion": names.WORK_API_VERSION,
        "kind": "Work",
        "metadata": {
            "name": name,
            "namespace": EXEC_NS,
            "finalizers": [names.EXECUTION_CONTROLLER_FINALIZER],
            "labels": {
                names.WORK_PERMANENT_ID_LABEL: ids.work,
                names.BINDING_PERMANENT_ID_LABEL: ids.binding,
            },
            "annotations": {
                names.BINDING_NAMESPACE_ANNOTATION: "default",
                names.BINDING_NAME_ANNOTATION: f"{name}-binding",
                **(annotations or {}),
            },
        },
        "spec": spec,
    }


def condition(work: JsonDict, type_: str) -> JsonDict | None:
    for cond in (work.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return cast(JsonDict, cond)
    return None


def has_condition(type_: str, status: str, reason: str | None = None) -> Callable[[JsonDict], bool]:
    def check(work: JsonDict) -> bool:
        cond = condition(work, type_)
        return (
            cond is not None
            and cond.get("status") == status
            and (reason is None or cond.get("reason") == reason)
        )

    return check


APPLIED_OK = has_condition(names.WORK_APPLIED, "True", names.REASON_APPLIED_SUCCESSFUL)
APPLIED_FAILED = has_condition(names.WORK_APPLIED, "False", names.REASON_APPLIED_FAILED)


def applied_message(work: JsonDict) -> str:
    cond = condition(work, names.WORK_APPLIED)
    assert cond is not None
    return str(cond["message"])


def labels(obj: JsonDict) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def annotations_of(obj: JsonDict) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


async def settled_patches(pair: Any, resource: str = "configmaps") -> int:
    """The member PATCH count once the execution controller has been idle for a moment and
    the count stopped moving: a loop keeps it moving."""
    await pair.idle(pair.execution)
    return int(pair.member.accounting.counts(verb="patch", resource=resource))


# --- metrics stand-in ----------------------------------------------------------------------------


class _Observations:
    def __init__(self) -> None:
        self.values: list[tuple[str, float]] = []

    def labels(self, *, result: str) -> _Child:
        return _Child(self, result)


@dataclass
class _Child:
    parent: _Observations
    result: str

    def observe(self, seconds: float) -> None:
        self.parent.values.append((self.result, seconds))


class StubMetrics:
    def __init__(self) -> None:
        self.work_sync_workload_duration = _Observations()
        self.client = PrometheusMetrics(CollectorRegistry())

    def results(self) -> list[str]:
        return [r for r, _ in self.work_sync_workload_duration.values]


# --- the pair --------------------------------------------------------------------------------


@dataclass
class Pair:
    cp: Emulator
    member: Emulator
    karmada: KubeClient
    member_client: KubeClient
    ctx: AgentContext
    metrics: StubMetrics
    manager: ControllerManager | None = None
    controllers: dict[str, Runnable] = field(default_factory=dict)
    execution: ExecutionController | None = None
    work_status: WorkStatusController | None = None

    async def start(self, name: str, runnable: Runnable) -> None:
        """Run one more controller beside the pair's (under the same manager)."""
        assert self.manager is not None
        await self.manager.add(name, runnable)

    async def stop(self, runnable: Runnable) -> None:
        assert self.manager is not None
        await self.manager.remove(runnable)

    async def create_work(self, work: JsonDict) -> JsonDict:
        return await self.karmada.create(WORKS, work, namespace=EXEC_NS)

    async def get_work(self, name: str) -> JsonDict:
        return await self.karmada.get(WORKS, name, namespace=EXEC_NS)

    async def mark_applied(self, name: str) -> JsonDict:
        """Write Applied=True on the Work as the execution controller does after applying it
        (workStatus reports only on Works the execution controller has reported on)."""
        applied = {
            "type": "Applied",
            "status": "True",
            "reason": "AppliedSuccessful",
            "message": "Manifest has been successfully applied",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
        return await self.karmada.patch(
            WORKS,
            name,
            {"status": {"conditions": [applied]}},
            patch_type="merge",
            namespace=EXEC_NS,
            subresource="status",
        )

    async def wait_work(
        self,
        name: str,
        predicate: Callable[[JsonDict], bool],
        what: str = "",
        timeout: float = 10.0,
    ) -> JsonDict:
        return await eventually(
            lambda: self.get_work(name), predicate, timeout=timeout, what=what or f"Work {name}"
        )

    async def wait_work_gone(self, name: str) -> None:
        async def probe() -> bool:
            try:
                await self.get_work(name)
            except NotFoundError:
                return True
            return False

        await eventually(probe, bool, what=f"Work {name} gone")

    async def get_member(self, gvr: GVR, name: str, namespace: str | None = "default") -> JsonDict:
        return await self.member_client.get(gvr, name, namespace=namespace)

    async def wait_member(
        self,
        gvr: GVR,
        name: str,
        predicate: Callable[[JsonDict], bool] = lambda _o: True,
        namespace: str | None = "default",
        what: str = "",
    ) -> JsonDict:
        return await eventually(
            lambda: self.get_member(gvr, name, namespace),
            predicate,
            what=what or f"member {gvr} {namespace}/{name}",
        )

    async def wait_member_gone(
        self, gvr: GVR, name: str, namespace: str | None = "default"
    ) -> None:
        async def probe() -> bool:
            try:
                await self.get_member(gvr, name, namespace)
            except NotFoundError:
                return True
            return False

        await eventually(probe, bool, what=f"member {gvr} {namespace}/{name} gone")

    async def set_cluster_ready(self, status: str = "True") -> None:
        cluster = await self.karmada.get(CLUSTERS, CLUSTER)
        cluster["status"] = {
            "conditions": [
                {
                    "type": "Ready",
                    "status": status,
                    "reason": "ClusterReady" if status == "True" else "ClusterNotReady",
                    "message": "cluster is healthy and ready to accept workloads",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ]
        }
        await self.karmada.update_status(CLUSTERS, cluster)

    async def events_for(self, name: str) -> list[JsonDict]:
        await self.ctx.events.flush(5.0)
        listed = await self.karmada.list(EVENTS, namespace=EXEC_NS)
        return [e for e in listed["items"] if (e.get("involvedObject") or {}).get("name") == name]

    async def idle(self, *controllers: Any) -> None:
        """Wait until the controllers' queues are empty with nothing in flight or scheduled."""

        async def probe() -> bool:
            return all(
                len(c.queue) == 0 and c.queue.processing == 0 and c.queue.waiting == 0
                for c in controllers
            )

        await eventually(probe, bool, what="controllers idle")


@asynccontextmanager
async def running_pair(
    *controllers: str,
    ready: bool = True,
    knobs: Knobs | None = None,
    member_user: str | None = None,
    options: dict[str, Any] | None = None,
) -> AsyncIterator[Pair]:
    """Both emulators, the Cluster registered (Ready unless told otherwise), and the named
    controllers ("execution", "workStatus") running against them; on the member as its admin,
    or as `member_user` (with only the permissions the test gives it); `options` overrides
    the agent's options."""
    async with AsyncExitStack() as stack:
        cp = await stack.enter_async_context(run_emulator("karmada"))
        member = await stack.enter_async_context(
            run_emulator("member", name=CLUSTER, knobs=knobs or Knobs(workload_ready_delay=0.05))
        )
        karmada = kube_client(cp)
        member_client = kube_client(member, member_user)
        stack.push_async_callback(karmada.close)
        stack.push_async_callback(member_client.close)
        await karmada.create(
            CLUSTERS,
            {
                "apiVersion": names.CLUSTER_API_VERSION,
                "kind": "Cluster",
                "metadata": {"name": CLUSTER},
                "spec": {"syncMode": "Pull", "id": str(uuid.uuid4())},
            },
        )
        # The control plane's cluster controller creates the execution namespace.
        await eventually(
            lambda: karmada.get(NAMESPACES, EXEC_NS), lambda _n: True, what="execution namespace"
        )
        metrics = StubMetrics()
        agent_options = Options(
            **{"cluster_name": CLUSTER, "concurrent_work_syncs": 3, **(options or {})}
        )
        sources = live_sources(karmada, member_client, agent_options)
        events = EventEmitter(karmada, component="karmada-agent")
        ctx = AgentContext(
            options=agent_options,
            cluster_name=CLUSTER,
            karmada=karmada,
            member=member_client,
            karmada_mapper=RESTMapper(karmada),
            member_mapper=RESTMapper(member_client),
            events=events,
            metrics=cast(Any, metrics),
            sources=sources,
        )
        pair = Pair(cp, member, karmada, member_client, ctx, metrics)
        if ready:
            await pair.set_cluster_ready()
        stack.push_async_callback(events.stop)
        for name in controllers:
            if name == "execution":
                pair.execution = ExecutionController(ctx)
                runnable: Runnable = pair.execution
            elif name == "workStatus":
                pair.work_status = WorkStatusController(ctx)
                runnable = pair.work_status
            else:
                runnable = load_builders([name]).builders[name](ctx)
            pair.controllers[name] = runnable
        # As the app runs them: the sources they declare started by the manager.
        pair.manager = ControllerManager(
            ctx,
            builders={
                name: (lambda _ctx, runnable=runnable: runnable)
                for name, runnable in pair.controllers.items()
            },
        )
        stack.push_async_callback(pair.manager.stop)
        await pair.manager.start()
        yield pair
