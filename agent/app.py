"""The agent process: clients -> serving -> registration -> (leader election) -> controllers.

`run(options)` is what `karmada-agent` runs. It returns the exit code: 0 after SIGTERM/SIGINT
(controllers stopped, leadership released, clients closed), 1 when start-up fails.

Leader election uses upstream's Lease by default: `karmada-agent-<cluster>` in
--leader-elect-resource-namespace on the control plane, the one upstream's Go agent holds, so a
rolling replacement in either direction (Go agent -> this one, and back) never has two leaders.
A replica that loses leadership stops its controllers at once and campaigns again; it never exits
for it. (controller-runtime's manager exits instead, and the pod's restart backoff, up to 5
minutes, then delays the agent on exactly the clusters whose link comes and goes.)

With --leader-elect-lease-cluster=member the Lease lives on the member, which the replicas share
and which stays reachable when the control plane is not, so an outage costs no leadership. Before
it campaigns there, a replica waits until the control-plane Lease is released or expired: an
upstream agent still leading is never joined by a second leader (docs/migration.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry

from agent.connections import (
    USER_AGENT,
    KubeconfigReloader,
    RefusedCertificates,
    load_karmada_config,
    load_member_config,
)
from agent.context import AgentContext
from agent.controllers.manager import ControllerManager
from agent.events import EventEmitter
from agent.karmada.names import EVENT_SOURCES, leader_election_id
from agent.kube.backoff import Backoff
from agent.kube.client import KubeClient
from agent.kube.config import ClientConfig, ConfigError
from agent.kube.discovery import RESTMapper
from agent.kube.errors import AlreadyExistsError, KubeError, NotFoundError
from agent.kube.leaderelection import LeaderElectionConfig, LeaderElector
from agent.kube.reachability import Reachability, sleep_unless_answered
from agent.kube.resources import NAMESPACES
from agent.kube.transport import Transport
from agent.logs import bind_contextvars, get_logger
from agent.metrics import AgentMetrics
from agent.offline import OfflineServing, serve_recorded
from agent.options import Options
from agent.registration import RegistrationError, RegistrationResult, register
from agent.serving import Serving
from agent.sources import Sources, live_sources
from agent.sources.works import WorkInformer

if TYPE_CHECKING:
    from agent.tunnel.route_check import RouteCheck
    from agent.tunnel.tunnel import Tunnel

EXIT_OK = 0
EXIT_FAILURE = 1
# Registration retries: 1 s, doubling with +-50% jitter, at most 30 s apart.
REGISTRATION_RETRY_INITIAL = 1.0
REGISTRATION_RETRY_MAX = 30.0
# The control plane's reconnect slots: 1 s, doubling with +-50% jitter, at most 10 s apart.
RECONNECT_INITIAL = 1.0
# While registration waits for a member that is down, how often it asks whether it is back.
MEMBER_PROBE_INTERVAL = 1.0
RECONNECT_CAP = 10.0
DEFAULT_SHUTDOWN_TIMEOUT = 30.0

log = get_logger("karmada-agent.app")


class Agent:
    """One agent process. Tests drive it in-process with `stop_event` and no signal handlers."""

    def __init__(
        self,
        options: Options,
        *,
        registry: CollectorRegistry | None = None,
        stop_event: asyncio.Event | None = None,
        install_signal_handlers: bool = True,
        identity: str | None = None,
        shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT,
    ) -> None:
        self.options = options
        self.registry = registry if registry is not None else CollectorRegistry()
        self.metrics = AgentMetrics(self.registry)
        self.stop_event = stop_event or asyncio.Event()
        self.install_signal_handlers = install_signal_handlers
        self.identity = identity or f"{socket.gethostname()}_{uuid.uuid4()}"
        self.shutdown_timeout = shutdown_timeout
        self.log = log.bind(cluster=options.cluster_name)
        self.karmada: KubeClient | None = None
        self.member: KubeClient | None = None
        self.serving: Serving | None = None
        self.registration: RegistrationResult | None = None
        self.manager: ControllerManager | None = None
        self.elector: LeaderElector | None = None
        self.events: EventEmitter | None = None
        self.reloader: KubeconfigReloader | None = None
        self.leading = asyncio.Event()
        # Serving the recorded Works while registration cannot reach the control plane (tried
        # once, at the first failed registration).
        self.offline: OfflineServing | None = None
        self._offline_tried = False
        # The control plane's Works, watched since the offline start (agent.offline), until the
        # registered agent's controllers have started on them.
        self._early_works: WorkInformer | None = None
        self.lost_leadership = False
        self.tunnel: Tunnel | None = None
        self.route_check: RouteCheck | None = None

    # --- readiness ---------------------------------------------------------------------------

    def ready(self) -> tuple[bool, str]:
        if self.registration is None:
            return False, "cluster registration has not finished"
        if self.manager is not None and not self.manager.has_synced():
            return False, "controller caches have not synced"
        return True, ""

    # --- the whole life ------------------------------------------------------------------------

    async def run(self) -> int:
        bind_contextvars(cluster=self.options.cluster_name)
        loop = asyncio.get_running_loop()
        installed: list[signal.Signals] = []
        if self.install_signal_handlers:
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.add_signal_handler(sig, self._on_signal, sig)
                    installed.append(sig)
        try:
            return await self._run()
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)
            await self._close()

    def _on_signal(self, sig: signal.Signals) -> None:
        self.log.info("signal received; shutting down", signal=sig.name)
        self.stop_event.set()

    async def _run(self) -> int:
        try:
            karmada_config = await load_karmada_config(self.options)
            member_config = await load_member_config(self.options)
        except ConfigError as exc:
            self.log.error("configuration error", error=str(exc))
            return EXIT_FAILURE
        self.karmada = KubeClient(
            Transport(
                karmada_config,
                metrics=self.metrics.client,
                # While the control plane is down, one connection attempt per reconnect slot
                # for all of the agent's requests to it (the member is local: never gated).
                reachability=Reachability(
                    "Karmada control plane",
                    on_lost=self.metrics.control_plane_unreachable.inc,
                    backoff=Backoff(initial=RECONNECT_INITIAL, cap=RECONNECT_CAP),
                ),
            )
        )
        self.member = KubeClient(
            Transport(
                member_config,
                metrics=self.metrics.client,
                reachability=Reachability("member cluster API server"),
            )
        )
        self.karmada.transport.on_unauthorized(
            RefusedCertificates(self.metrics, self.options.cluster_name)
        )
        self.log.info("clients ready", karmada=karmada_config.host, member=member_config.host)
        if self.options.karmada_kubeconfig:
            self.reloader = KubeconfigReloader(self.options, self.karmada.transport)
            await self.reloader.start()

        if self.options.tunnel_enabled:
            try:
                self.tunnel = self._build_tunnel(member_config)
            except ConfigError as exc:
                self.log.error("configuration error", error=str(exc))
                return EXIT_FAILURE

        self.serving = Serving(
            health_address=self.options.health_probe_bind,
            metrics_address=self.options.metrics_bind,
            registry=self.registry,
            ready=self.ready,
        )
        try:
            await self.serving.start()
        except OSError as exc:
            self.log.error(
                "cannot listen (check --health-probe-bind-address and --metrics-bind-address)",
                error=str(exc),
            )
            return EXIT_FAILURE

        registered = await self._until_stopped(self._register(member_config))
        if registered is None:
            return EXIT_OK if self.stop_event.is_set() else EXIT_FAILURE
        if not registered:
            return EXIT_FAILURE
        if self.tunnel is not None:
            await self.tunnel.start()

        ctx = self._context()
        if self.tunnel is not None:
            self._start_route_check(self.tunnel)
        if self.options.leader_elect:
            return await self._run_with_leader_election(ctx)
        self.manager = ControllerManager(ctx, stop_timeout=self.shutdown_timeout)
        await self.manager.start()
        await self._release_early_works()
        self.leading.set()
        await self.stop_event.wait()
        self.log.info("stopping controllers")
        await self.manager.stop()
        return EXIT_OK

    async def _until_stopped(self, work: Awaitable[bool]) -> bool | None:
        """Run `work` unless a stop is asked first (then None)."""
        task = asyncio.ensure_future(work)
        stopper = asyncio.ensure_future(self.stop_event.wait())
        try:
            await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
        if task.done():
            return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        return None

    async def _register(self, member_config: ClientConfig) -> bool:
        try:
            return await self._register_until_done(member_config)
        finally:
            await self._end_offline()

    async def _register_until_done(self, member_config: ClientConfig) -> bool:
        assert self.karmada is not None
        assert self.member is not None
        backoff = Backoff(initial=REGISTRATION_RETRY_INITIAL, cap=REGISTRATION_RETRY_MAX)
        while True:
            try:
                self.registration = await register(
                    self.karmada,
                    self.member,
                    self.options,
                    member_config=member_config,
                    tunnel=self.tunnel,
                )
            except RegistrationError as exc:
                if not exc.retriable:
                    self.log.error("registration failed", error=str(exc))
                    return False
                delay = round(backoff.next(), 1)
                self.log.warning("registration failed; retrying", error=str(exc), delay=delay)
                # A side that did not answer: retry as soon as it answers again (the agent's
                # other requests to it find out, the offline start's among them), not a long
                # backoff later.
                down = [
                    client.transport.reachability
                    for client in (self.karmada, self.member)
                    if not client.transport.reachability.reachable
                ]
                if not self._offline_tried:
                    await self._start_offline()
                if down:
                    await self._sleep_unless_answered(delay, down)
                else:
                    await asyncio.sleep(delay)
                continue
            self.log.info(
                "cluster registered",
                cluster_id=self.registration.cluster_id,
                execution_namespace=f"karmada-es-{self.options.cluster_name}",
            )
            return True

    async def _sleep_unless_answered(self, delay: float, down: list[Reachability]) -> None:
        """Wait `delay`, or until a side that did not answer answers again. The member is local
        and never gated: while it is down it is asked every MEMBER_PROBE_INTERVAL whether it is
        back, so that registration (and with it the whole agent) does not wait out a long
        backoff after a member outage."""
        assert self.member is not None
        member = self.member
        probe = None
        if member.transport.reachability in down:

            async def probe_member() -> None:
                while not member.transport.reachability.reachable:
                    with contextlib.suppress(KubeError):
                        await member.raw_get("/readyz", timeout=MEMBER_PROBE_INTERVAL)
                    await asyncio.sleep(MEMBER_PROBE_INTERVAL)  # the probe's own pace

            probe = asyncio.create_task(probe_member(), name="member probe")
        try:
            await sleep_unless_answered(delay, down)
        finally:
            if probe is not None:
                probe.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await probe

    async def _start_offline(self) -> None:
        """Serve the recorded Works until registration succeeds (agent.offline); when the
        record cannot be read, again at the next registration attempt."""
        assert self.karmada is not None
        assert self.member is not None
        try:
            self.offline = await serve_recorded(
                self.karmada, self.member, self.options, self._new_context
            )
        except KubeError as exc:
            self.log.warning(
                "cannot read the Work records on the member; trying again", error=str(exc)
            )
            return
        self._offline_tried = True

    async def _end_offline(self) -> None:
        """Stop serving the record; report the status it queued, one write per Work."""
        offline = self.offline
        if offline is None:
            return
        await offline.stop()
        await offline.ctx.events.stop()
        self._early_works = offline.live_works
        if self.registration is not None and self.karmada is not None:
            writes = await offline.report(self.karmada)
            self.log.info("status observed while offline reported", works=writes)

    def _new_context(self, sources: Sources) -> AgentContext:
        """A context on `sources`, with an Event emitter of its own."""
        assert self.karmada is not None
        assert self.member is not None
        return AgentContext(
            options=self.options,
            cluster_name=self.options.cluster_name,
            karmada=self.karmada,
            member=self.member,
            karmada_mapper=RESTMapper(self.karmada),
            member_mapper=RESTMapper(self.member),
            # Events count against the control plane's QPS budget, as upstream's do, but take
            # only its spare tokens: a burst of Events never delays Work status writes.
            events=EventEmitter(
                KubeClient(self.karmada.transport.background()),
                component="karmada-agent",
                sources=EVENT_SOURCES,
            ),
            metrics=self.metrics,
            sources=sources,
        )

    def _context(self) -> AgentContext:
        """The context of a registered agent: the control plane's watches, built once here and
        shared by every leadership term."""
        assert self.karmada is not None
        assert self.member is not None
        ctx = self._new_context(
            live_sources(self.karmada, self.member, self.options, works=self._early_works)
        )
        self.events = ctx.events
        return ctx

    # --- leader election -----------------------------------------------------------------------

    async def _run_with_leader_election(self, ctx: AgentContext) -> int:
        assert self.karmada is not None
        assert self.member is not None
        o = self.options
        on_member = o.leader_elect_lease_cluster == "member"
        client = self.member if on_member else self.karmada
        leader_metrics = self.metrics.client
        config = LeaderElectionConfig(
            namespace=o.leader_elect_resource_namespace,
            name=leader_election_id(o.cluster_name),
            identity=self.identity,
            lease_duration=o.leader_elect_lease_duration.total_seconds(),
            renew_deadline=o.leader_elect_renew_deadline.total_seconds(),
            retry_period=o.leader_elect_retry_period.total_seconds(),
        )
        lease = f"{config.namespace}/{config.name}"
        if on_member:
            await self._ensure_namespace(client, config.namespace)
            if await self._until_stopped(self._honour_upstream_lease(config)) is None:
                return EXIT_OK
        loop = asyncio.get_running_loop()
        while True:
            self.elector = LeaderElector(
                client,
                config,
                on_started_leading=lambda: self._lead(ctx),
                on_new_leader=lambda holder: self.log.info("leader observed", leader=holder),
                metrics=leader_metrics,
            )
            self.log.info(
                "campaigning for leadership",
                lease=lease,
                cluster=o.leader_elect_lease_cluster,
                identity=self.identity,
            )
            campaign_started = loop.time()
            election = asyncio.create_task(self.elector.run(), name="leader-election")
            stopper = asyncio.create_task(self.stop_event.wait(), name="stop-wait")
            try:
                await asyncio.wait({election, stopper}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stopper.cancel()
            if not election.done():
                break
            # run() returns only when leadership was lost: the controllers are stopped already.
            self.lost_leadership = True
            with contextlib.suppress(Exception):
                election.result()
            self.log.warning(
                "leadership lost; controllers stopped, campaigning again",
                lease=lease,
                cluster=o.leader_elect_lease_cluster,
            )
            # Never campaign in a tight loop (a leader whose controllers fail at once).
            pause = config.retry_period - (loop.time() - campaign_started)
            if pause > 0 and await self._until_stopped(self._pause(pause)) is None:
                return EXIT_OK
            if self.stop_event.is_set():
                return EXIT_OK
        # Shutdown: cancelling run() stops the controllers, then releases the Lease.
        election.cancel()
        try:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(election, self.shutdown_timeout + 5.0)
        except TimeoutError:
            # Never hang the pod's termination: report the incomplete shutdown and exit.
            self.log.error(
                "shutdown did not finish in time", bound_seconds=self.shutdown_timeout + 5.0
            )
            return EXIT_FAILURE
        return EXIT_OK

    async def _honour_upstream_lease(self, config: LeaderElectionConfig) -> bool:
        """With the Lease on the member: wait while the control-plane Lease of the same name
        (where upstream's agent elects its leader) has a live holder, so that an upstream agent
        still running is never joined by a second leader."""
        assert self.karmada is not None
        elector = LeaderElector(
            self.karmada, config, on_started_leading=_never_leads, on_new_leader=self._waiting_for
        )
        await elector.wait_until_free()
        if elector.leader and elector.leader != self.identity:
            self.log.info(
                "control-plane leader-election Lease is free; campaigning on the member",
                lease=f"{config.namespace}/{config.name}",
            )
        return True

    def _waiting_for(self, holder: str) -> None:
        if holder != self.identity:
            self.log.info(
                "another agent (an upstream karmada-agent?) leads on the control-plane Lease; "
                "waiting until it is released or expires",
                leader=holder,
            )

    async def _ensure_namespace(self, client: KubeClient, namespace: str) -> None:
        """The Lease's namespace on the member: where the agent runs, so normally present;
        created when missing (an agent run from outside the cluster) rather than campaigning
        in vain."""
        try:
            await client.get(NAMESPACES, namespace)
            return
        except NotFoundError:
            pass
        except KubeError as exc:
            self.log.warning("cannot read the leader-election namespace", error=str(exc))
            return
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        try:
            await client.create(NAMESPACES, body)
            self.log.info("created the leader-election namespace", namespace=namespace)
        except AlreadyExistsError:
            pass
        except KubeError as exc:
            self.log.warning("cannot create the leader-election namespace", error=str(exc))

    @staticmethod
    async def _pause(seconds: float) -> bool:
        await asyncio.sleep(seconds)
        return True

    async def _lead(self, ctx: AgentContext) -> None:
        self.log.info("became leader; starting controllers")
        manager = ControllerManager(ctx, stop_timeout=self.shutdown_timeout)
        self.manager = manager
        self.leading.set()
        try:
            await manager.start()
            await self._release_early_works()
            await asyncio.Event().wait()  # lead until cancelled
        finally:
            self.leading.clear()
            if not self.stop_event.is_set():
                # Leadership lost: a successor may take over as soon as the Lease expires, so
                # in-flight work is abandoned, not drained (controller-runtime exits at once).
                manager.stop_timeout = 0.0
            self.log.info("stopping controllers")
            await manager.stop()

    def _build_tunnel(self, member_config: ClientConfig) -> Tunnel:
        """Imported only when the tunnel is on: the default agent does not load it."""
        from agent.tunnel.metrics import TunnelMetrics
        from agent.tunnel.tunnel import build_tunnel

        assert self.karmada is not None
        assert self.member is not None
        transport = self.karmada.transport
        return build_tunnel(
            self.options,
            agent_id=self.identity,
            member=self.member,
            member_config=member_config,
            credentials=lambda: transport.config,
            metrics=TunnelMetrics(self.registry),
            backoff=Backoff(initial=RECONNECT_INITIAL, cap=RECONNECT_CAP),
            reachability=transport.reachability,
            user_agent=USER_AGENT,
            karmada=self.karmada,
        )

    def _start_route_check(self, tunnel: Tunnel) -> None:
        """Check now and then that the cluster's route answers for this agent."""
        karmada = self.karmada
        assert karmada is not None
        path = (
            f"/apis/cluster.karmada.io/v1alpha1/clusters/{self.options.cluster_name}/proxy/version"
        )

        async def probe() -> tuple[int, str]:
            try:
                response = await karmada.raw_get(path, timeout=30.0)
            except KubeError as exc:
                return 0, str(exc)
            return response.status, response.text()

        self.route_check = tunnel.route_check(probe, karmada=karmada, events=self.events)
        self.route_check.start()

    # --- cleanup -------------------------------------------------------------------------------

    async def _release_early_works(self) -> None:
        """The controllers run the Works' watch now (or it was never started early)."""
        works, self._early_works = self._early_works, None
        if works is not None:
            await works.stop()

    async def _close(self) -> None:
        await self._release_early_works()
        if self.route_check is not None:
            await self.route_check.stop()
        if self.tunnel is not None:
            await self.tunnel.stop()
        if self.reloader is not None:
            await self.reloader.stop()
        if self.events is not None:
            # Let Event writes in flight finish while the clients are still open.
            await self.events.stop()
        if self.serving is not None:
            await self.serving.stop()
        for client in (self.karmada, self.member):
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.close()


async def _never_leads() -> None:
    raise AssertionError("wait_until_free never leads")


async def run(
    options: Options,
    *,
    stop_event: asyncio.Event | None = None,
    install_signal_handlers: bool = True,
    registry: CollectorRegistry | None = None,
    on_agent: Callable[[Agent], None] | None = None,
) -> int:
    """karmada-agent's main coroutine; returns the process exit code."""
    agent = Agent(
        options,
        registry=registry,
        stop_event=stop_event,
        install_signal_handlers=install_signal_handlers,
    )
    if on_agent is not None:
        on_agent(agent)
    return await agent.run()
