"""A tunnel test bed: a member emulator, the agent's tunnel to a proxy-server (the test double or
the stock binary), and a client that reaches the member as karmada-aggregated-apiserver does.

The control-plane client is what upstream's cluster proxy does (karmada pkg/util/proxy): an HTTP
CONNECT to spec.proxyURL for spec.apiEndpoint's host:port, TLS verified against the Cluster
Secret's caBundle (nothing else trusted), the impersonator's bearer token, Impersonate-User.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import ssl
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from agent.kube.backoff import Backoff
from agent.kube.client import KubeClient
from agent.kube.config import ClientConfig, load_kubeconfig
from agent.kube.transport import Transport
from agent.options import Options, parse_options
from agent.tunnel.metrics import TunnelMetrics
from agent.tunnel.route import TunnelPublication
from agent.tunnel.tunnel import Tunnel, build_tunnel
from emulator import upstream
from emulator.emulator import Emulator
from emulator.konnectivity import ProxyServerDouble
from emulator.konnectivity.agent_server import Authenticate, token_review_authenticator
from emulator.konnectivity.stock import StockProxyServer
from emulator.pki import CertificateAuthority

AGENT_USER = "system:karmada:agent:{cluster}"
AGENT_GROUPS = ("system:karmada:agents",)


def tunnel_options(cluster: str, server_address: str, proxy_url: str, *extra: str) -> Options:
    return parse_options(
        [
            f"--cluster-name={cluster}",
            f"--tunnel-server-address={server_address}",
            f"--tunnel-proxy-url={proxy_url}",
            *extra,
        ]
    )


@dataclass
class AgentTunnel:
    """One cluster's tunnel, as the agent runs it, plus what registration publishes."""

    tunnel: Tunnel
    publication: TunnelPublication
    member: KubeClient
    registry: CollectorRegistry
    options: Options

    def metric(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels) or 0.0


@contextlib.asynccontextmanager
async def agent_tunnel(
    *,
    cluster: str,
    member_emulator: Emulator,
    karmada_ca_pem: bytes,
    client_cert: tuple[bytes, bytes],
    server_address: str,
    proxy_url: str,
    server_ca_pem: bytes,
    backoff: Backoff | None = None,
    extra: tuple[str, ...] = (),
    start: bool = True,
    karmada_client: KubeClient | None = None,
) -> AsyncIterator[AgentTunnel]:
    """The agent's side: a member client (admin kubeconfig), control-plane credentials with the
    agent's client certificate, the tunnel built from command-line options and started."""
    with tempfile.TemporaryDirectory(prefix="tunnel-test-") as tmp:
        ca_file = Path(tmp, "proxy-server-ca.crt")
        await asyncio.to_thread(ca_file.write_bytes, server_ca_pem)
        options = tunnel_options(
            cluster,
            server_address,
            proxy_url,
            f"--tunnel-server-ca-file={ca_file}",
            "--tunnel-server-name=localhost",
            *extra,
        )
        member_config = await load_kubeconfig(
            str(member_emulator.write_kubeconfig(Path(tmp, "member.kubeconfig")))
        )
        member = KubeClient(Transport(member_config))
        karmada_credentials = ClientConfig(
            host="https://karmada.invalid",
            ca_pem=karmada_ca_pem,
            client_cert_pem=client_cert[0],
            client_key_pem=client_cert[1],
        )
        registry = CollectorRegistry()
        tunnel = build_tunnel(
            options,
            agent_id=f"{cluster}-test",
            member=member,
            member_config=member_config,
            credentials=lambda: karmada_credentials,
            metrics=TunnelMetrics(registry),
            backoff=backoff or Backoff(initial=0.2, cap=1.0),
            karmada=karmada_client,
        )
        publication = await tunnel.publication()
        if start:
            await tunnel.start()
        try:
            yield AgentTunnel(tunnel, publication, member, registry, options)
        finally:
            await tunnel.stop()
            await member.close()


def control_plane_client(
    publication: TunnelPublication,
    *,
    token: str,
    impersonate: str | None = None,
    proxy_url: str | None = None,
    http2: bool = False,
    **kwargs: Any,
) -> httpx.AsyncClient:
    """A client that reaches the member as karmada-aggregated-apiserver's cluster proxy does."""
    context = ssl.create_default_context(cadata=base64.b64decode(publication.ca_bundle).decode())
    headers = {"Authorization": f"Bearer {token}"}
    if impersonate:
        headers["Impersonate-User"] = impersonate
    return httpx.AsyncClient(
        base_url=publication.api_endpoint,
        proxy=proxy_url or publication.proxy_url,
        verify=context,
        headers=headers,
        http2=http2,
        trust_env=False,
        timeout=15.0,
        **kwargs,
    )


@dataclass
class Hub:
    """A proxy-server (the double or the stock binary), as the tests drive it."""

    kind: str
    agent_address: str
    connect_url: str
    server_ca: CertificateAuthority
    restart: Callable[[], Awaitable[None]]
    log: Callable[[], str]


HUB_KINDS = [
    "double",
    pytest.param(
        "stock",
        marks=pytest.mark.skipif(
            upstream.binary("proxy-server") is None,
            reason=upstream.missing_reason("proxy-server"),
        ),
    ),
]


@contextlib.asynccontextmanager
async def open_hub(
    kind: str,
    *,
    cluster_ca_pem: bytes,
    server_count: int = 1,
    server_id: str = "",
    server_ca: CertificateAuthority | None = None,
    token_auth: TokenAuth | None = None,
) -> AsyncIterator[Hub]:
    """A proxy-server authenticating agents by client certificate (mTLS against
    `cluster_ca_pem`), or, with `token_auth`, by service-account token review instead."""
    server_ca = server_ca or CertificateAuthority.generate("konnectivity-ca")
    if kind == "double":
        double = ProxyServerDouble(
            server_ca,
            cluster_ca_pem=None if token_auth else cluster_ca_pem,
            server_count=server_count,
            server_id=server_id or None,
            authenticate=token_auth.authenticator() if token_auth else None,
        )
        await double.start()
        try:
            yield Hub(
                kind,
                double.agent_address,
                double.connect_url,
                server_ca,
                double.restart,
                lambda: f"dials: {double.dials}",
            )
        finally:
            await double.stop()
        return
    with tempfile.TemporaryDirectory(prefix="proxy-server-") as tmp:
        stock = StockProxyServer(
            server_ca,
            cluster_ca_pem=None if token_auth else cluster_ca_pem,
            server_count=server_count,
            server_id=server_id,
            extra_args=token_auth.stock_flags(Path(tmp)) if token_auth else (),
            workdir=Path(tmp),
        )
        async with stock:
            yield Hub(
                kind, stock.agent_address, stock.connect_url, server_ca, stock.restart, stock.log
            )


@dataclass
class TokenAuth:
    """The proxy-server's token review against the control-plane emulator."""

    karmada: Emulator
    namespace: str = "karmada-system"
    service_account: str = "karmada-tunnel-agent"
    audience: str = "karmada-tunnel"

    def authenticator(self) -> Authenticate:
        async def review(token: str, audience: str) -> dict[str, Any]:
            body = {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "spec": {"token": token, "audiences": [audience]},
            }
            async with self.karmada.client() as client:
                answer = await client.post("/apis/authentication.k8s.io/v1/tokenreviews", json=body)
            return dict(answer.json().get("status") or {})

        return token_review_authenticator(
            review,
            namespace=self.namespace,
            service_account=self.service_account,
            audience=self.audience,
        )

    def stock_flags(self, directory: Path) -> list[str]:
        kubeconfig = self.karmada.write_kubeconfig(directory / "karmada.kubeconfig")
        return [
            f"--agent-namespace={self.namespace}",
            f"--agent-service-account={self.service_account}",
            f"--authentication-audience={self.audience}",
            f"--kubeconfig={kubeconfig}",
            "--kube-api-content-type=application/json",
        ]

    async def token(self, service_account: str | None = None) -> str:
        """A bound token for the agent's ServiceAccount (TokenRequest), with the audience."""
        name = service_account or self.service_account
        async with self.karmada.client() as client:
            await client.post(
                f"/api/v1/namespaces/{self.namespace}/serviceaccounts",
                json={"metadata": {"name": name}},
            )
            answer = await client.post(
                f"/api/v1/namespaces/{self.namespace}/serviceaccounts/{name}/token",
                json={"spec": {"audiences": [self.audience], "expirationSeconds": 3600}},
            )
        return str(answer.json()["status"]["token"])


class RoundRobin:
    """One address in front of several proxy-server instances, each new connection to the next
    (a Service's load balancing, made deterministic)."""

    def __init__(self, upstreams: list[str]) -> None:
        self.upstreams = upstreams
        self._next = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> RoundRobin:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    @property
    def address(self) -> str:
        assert self._server is not None
        return f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, _, port = self.upstreams[self._next % len(self.upstreams)].rpartition(":")
        self._next += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            writer.close()
            return

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()


def member_kubeconfig(
    path: Path, publication: TunnelPublication, *, token: str, impersonate: str | None = None
) -> Path:
    """A kubeconfig that reaches the member as the control plane does: the route, the proxy,
    the tunnel CA (for kubectl)."""
    user: dict[str, Any] = {"token": token}
    if impersonate:
        user["as"] = impersonate
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "tunnel",
                "cluster": {
                    "server": publication.api_endpoint,
                    "proxy-url": publication.proxy_url,
                    "certificate-authority-data": publication.ca_bundle,
                },
            }
        ],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "tunnel", "user": "u"}}],
        "current-context": "c",
    }
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return path
