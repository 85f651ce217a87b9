"""The tunnel: one `AgentService.Connect` call to every proxy-server instance, kept up.

A proxy-server deployment of N instances (each started with `--server-count=N`) sits behind one
address; each new connection lands on one instance, which answers with its `serverID` and the
`serverCount`. The agent connects until it holds a call to `serverCount` distinct instances
(a connection that lands on an instance already held is closed and tried again shortly, as the
konnectivity agent does), because a CONNECT arriving at any instance can only be routed to an
agent connected to that instance.

Connection attempts follow the agent's reconnect schedule for the control plane (the same
jittered, capped Backoff) and go again at once when the control plane answers the agent's other
requests after an outage, so the tunnel is back within one backoff slot of the hub's recovery.
Credentials are taken fresh at every connection: the agent's current control-plane client
certificate (certRotation replaces it; mTLS against the proxy-server's `--cluster-ca-cert`),
and, for the proxy-server's token review (`--agent-namespace/--agent-service-account/
--authentication-audience`), a bound token of --tunnel-service-account that the agent requests
itself (agent.tunnel.token_request), or one re-read from --tunnel-token-file.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from agent.events import EventEmitter
from agent.kube.backoff import Backoff
from agent.kube.client import KubeClient
from agent.kube.config import ClientConfig, ConfigError
from agent.kube.reachability import Reachability, sleep_unless_answered
from agent.kube.transport import build_ssl_context
from agent.logs import get_logger
from agent.options import Options
from agent.tunnel.grpc_call import GrpcCall, GrpcError
from agent.tunnel.limits import StreamLimit
from agent.tunnel.member import MemberEndpoint
from agent.tunnel.metrics import TunnelMetrics
from agent.tunnel.route import DialPolicy, Route, TunnelPublication, route_for
from agent.tunnel.route_ca import RouteCA
from agent.tunnel.route_check import Probe, RouteCheck
from agent.tunnel.session import Session
from agent.tunnel.token_request import TunnelTokens

CONNECT_PATH = "/AgentService/Connect"
# The konnectivity agent's --sync-interval: the wait before trying again after landing on an
# instance already held.
DUPLICATE_RETRY = 1.0
# How long a stopping agent waits for relayed connections after DRAIN.
DRAIN_TIMEOUT = 5.0

log = get_logger(__name__)


@dataclass(frozen=True)
class TunnelSettings:
    server_host: str
    server_port: int
    route: Route
    agent_id: str
    proxy_url: str = ""
    server_name: str = ""
    ca_pem: bytes | None = dataclasses.field(default=None, repr=False)
    token_file: str = ""
    service_account: str = ""
    token_audience: str = ""
    keepalive_interval: float = 40.0
    keepalive_timeout: float = 20.0
    user_agent: str = "karmada-agent"
    max_streams: int = 500


class Tunnel:
    def __init__(
        self,
        settings: TunnelSettings,
        *,
        credentials: Callable[[], ClientConfig],
        member: MemberEndpoint,
        route_ca: RouteCA,
        metrics: TunnelMetrics,
        backoff: Backoff,
        reachability: Reachability | None = None,
        tokens: TunnelTokens | None = None,
    ) -> None:
        self.settings = settings
        self._tokens = tokens
        self._credentials = credentials
        self._member = member
        self._route_ca = route_ca
        self._metrics = metrics
        self._backoff = backoff
        self._reachability = reachability
        self.policy = DialPolicy(settings.route, on_refused=metrics.refused_dials.inc)
        self.limit = StreamLimit(settings.max_streams)
        metrics.max_streams.set(settings.max_streams)
        self.sessions: dict[str, Session] = {}
        self.server_count = 1
        self._session_tasks: dict[str, asyncio.Task[str]] = {}
        self._changed = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None
        self._stopping = False
        self.connected = asyncio.Event()
        self._failing = False

    def route_check(
        self,
        probe: Probe,
        *,
        karmada: KubeClient | None = None,
        events: EventEmitter | None = None,
    ) -> RouteCheck:
        """A check that the cluster's route answers for this tunnel (agent.tunnel.route_check)."""
        return RouteCheck(
            cluster=self._route_ca.cluster,
            probe=probe,
            route_dials=lambda: self.policy.allowed,
            connected=self.connected.is_set,
            metrics=self._metrics,
            karmada=karmada,
            events=events,
        )

    async def publication(self) -> TunnelPublication:
        """The route and CA registration publishes (loads or creates the tunnel CA)."""
        await self._route_ca.load()
        return TunnelPublication(
            api_endpoint=self.settings.route.api_endpoint,
            proxy_url=self.settings.proxy_url,
            ca_bundle=self._route_ca.ca_bundle,
        )

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        self._runner = asyncio.create_task(self._run(), name="tunnel")

    async def stop(self) -> None:
        """DRAIN every call, give open connections a moment, then close."""
        self._stopping = True
        if self._runner is not None:
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner
        sessions = list(self.sessions.values())
        for session in sessions:
            await session.drain()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(
                asyncio.gather(*(s.idle.wait() for s in sessions)), DRAIN_TIMEOUT
            )
        for session in sessions:
            await session.stream.close()
        for task in list(self._session_tasks.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # --- connecting ------------------------------------------------------------------------

    def _ssl_context(self) -> ssl.SSLContext:
        current = self._credentials()
        config = ClientConfig(
            host=f"https://{self.settings.server_host}",
            ca_pem=self.settings.ca_pem or current.ca_pem,
            client_cert_pem=current.client_cert_pem,
            client_key_pem=current.client_key_pem,
        )
        return build_ssl_context(config)

    async def _metadata(self) -> list[tuple[str, str]]:
        metadata = [
            ("agentID", self.settings.agent_id),
            ("agentIdentifiers", self.settings.route.agent_identifiers),
        ]
        if self.settings.token_file:
            path = Path(self.settings.token_file)
            try:
                token = (await asyncio.to_thread(path.read_text)).strip()
            except OSError as exc:
                raise GrpcError(f"cannot read --tunnel-token-file: {exc.strerror}") from exc
            metadata.append(("Authorization", f"Bearer {token}"))
        elif self._tokens is not None:
            metadata.append(("Authorization", f"Bearer {await self._tokens.token()}"))
        return metadata

    async def connect_once(self) -> Session:
        """One connection to whichever instance the address leads to."""
        s = self.settings
        stream = await GrpcCall.open(
            host=s.server_host,
            port=s.server_port,
            ssl_context=self._ssl_context(),
            server_hostname=s.server_name or s.server_host,
            path=CONNECT_PATH,
            metadata=await self._metadata(),
            user_agent=s.user_agent,
            keepalive_interval=s.keepalive_interval,
            keepalive_timeout=s.keepalive_timeout,
            on_ping=self._metrics.keepalives.inc,
        )
        try:
            server_id = _one(stream.metadata, "serverid")
            count = int(_one(stream.metadata, "servercount"))
        except (GrpcError, ValueError) as exc:
            await stream.close()
            raise GrpcError(f"the proxy-server's response headers: {exc}") from exc
        self.server_count = max(count, 1)
        self._metrics.known_server_count.set(self.server_count)
        return Session(
            stream,
            server_id=server_id,
            policy=self.policy,
            member=self._member,
            server_context=self._route_ca.server_context,
            http1_context=self._route_ca.http1_context,
            metrics=self._metrics,
            limit=self.limit,
            cluster=self._route_ca.cluster,
        )

    async def _run(self) -> None:
        while not self._stopping:
            if len(self.sessions) >= self.server_count:
                self._changed.clear()
                await self._changed.wait()
                continue
            try:
                session = await self.connect_once()
            except GrpcError as exc:
                if exc.status is not None and self._tokens is not None:
                    self._tokens.forget()  # refused: the next attempt asks for a new token
                await self._failed(str(exc))
                continue
            if session.server_id in self.sessions:
                self._metrics.connects.labels("duplicate").inc()
                await session.stream.close()
                await asyncio.sleep(DUPLICATE_RETRY * random.uniform(0.9, 1.1))
                continue
            self._metrics.connects.labels("success").inc()
            self._backoff.reset()
            self._failing = False
            log.info(
                "tunnel connected to the proxy-server",
                server_id=session.server_id,
                server_count=self.server_count,
                route=self.settings.route.address,
            )
            self._add(session)

    async def _failed(self, error: str) -> None:
        self._metrics.connects.labels("error").inc()
        delay = self._backoff.next()
        if not self._failing:
            self._failing = True
            log.warning(
                "cannot connect the tunnel to the proxy-server; retrying",
                server=f"{self.settings.server_host}:{self.settings.server_port}",
                error=error,
            )
        else:
            log.debug("tunnel connection attempt failed", error=error, delay=round(delay, 1))
        if self._reachability is not None and not self._reachability.reachable:
            # The hub is down for the agent's other requests too: go again as soon as it
            # answers them, not a slot later.
            await sleep_unless_answered(delay, [self._reachability])
        else:
            await asyncio.sleep(delay)

    def _add(self, session: Session) -> None:
        self.sessions[session.server_id] = session
        self._metrics.open_server_connections.set(len(self.sessions))
        self.connected.set()
        task = asyncio.create_task(session.run(), name=f"tunnel-{session.server_id}")
        self._session_tasks[session.server_id] = task
        task.add_done_callback(lambda done: self._ended(session, done))

    def _ended(self, session: Session, task: asyncio.Task[str]) -> None:
        if self.sessions.get(session.server_id) is session:
            del self.sessions[session.server_id]
            self._session_tasks.pop(session.server_id, None)
        self._metrics.open_server_connections.set(len(self.sessions))
        if not self.sessions:
            self.connected.clear()
        if self._stopping:
            return
        reason = "cancelled" if task.cancelled() else (task.exception() or task.result())
        log.warning(
            "tunnel call to the proxy-server ended; reconnecting",
            server_id=session.server_id,
            reason=str(reason),
        )
        self._changed.set()


def build_tunnel(
    options: Options,
    *,
    agent_id: str,
    member: KubeClient,
    member_config: ClientConfig,
    credentials: Callable[[], ClientConfig],
    metrics: TunnelMetrics,
    backoff: Backoff,
    reachability: Reachability | None = None,
    user_agent: str = "karmada-agent",
    karmada: KubeClient | None = None,
) -> Tunnel:
    """The tunnel the options describe (options.tunnel_enabled). ConfigError for a CA file
    that cannot be read or a member that is not reached over https."""
    host, _, port = options.tunnel_server_address.rpartition(":")
    ca_pem: bytes | None = None
    if options.tunnel_server_ca_file:
        try:
            ca_pem = Path(options.tunnel_server_ca_file).read_bytes()
        except OSError as exc:
            raise ConfigError(f"--tunnel-server-ca-file: {exc.strerror or exc}") from exc
    route = route_for(options.cluster_name, options.tunnel_domain)
    try:
        endpoint = MemberEndpoint(member_config)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    settings = TunnelSettings(
        server_host=host.strip("[]"),
        server_port=int(port),
        route=route,
        agent_id=agent_id,
        proxy_url=options.tunnel_proxy_url,
        server_name=options.tunnel_server_name,
        ca_pem=ca_pem,
        token_file=options.tunnel_token_file,
        keepalive_interval=options.tunnel_keepalive_time.total_seconds(),
        user_agent=user_agent,
        max_streams=options.tunnel_max_streams,
    )
    tokens = None
    if options.tunnel_service_account:
        if karmada is None:
            raise ConfigError("--tunnel-service-account needs the Karmada control-plane client")
        tokens = TunnelTokens(
            karmada, options.tunnel_service_account, options.tunnel_token_audience
        )
    route_ca = RouteCA(
        member,
        namespace=options.karmada_kubeconfig_namespace,
        cluster=options.cluster_name,
        host=route.host,
    )
    return Tunnel(
        settings,
        credentials=credentials,
        member=endpoint,
        route_ca=route_ca,
        metrics=metrics,
        backoff=backoff,
        reachability=reachability,
        tokens=tokens,
    )


def _one(metadata: Mapping[str, str], key: str) -> str:
    value = metadata.get(key)
    if value is None or "," in value:  # repeated fields arrive joined with commas
        raise GrpcError(f"expected one {key} header, got {value!r}")
    return value
