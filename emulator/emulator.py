"""The emulator facade: one object that builds, runs and hands out an emulated API server.

    async with run_emulator("member", name="member1") as emu:
        emu.write_kubeconfig(tmp_path / "kubeconfig")      # for kubectl or the agent
        async with emu.client() as client:                  # in-process httpx, admin
            await client.get("/api/v1/namespaces")
        emu.faults.fail_next(2, 503, verb="list", resource="pods")
        assert emu.accounting.counts(verb="list", resource="pods") == 2

It builds CORE's ApiServer with AUTH's CA, authenticator and authorizer, registers the
profile's types, seeds it and runs its controllers, and serves it over HTTPS on
127.0.0.1 with fault injection and request accounting in front.

Like a kubeadm control plane it has a second CA for its front proxy (`front_proxy_ca`): the
aggregation layer presents its `front-proxy-client` certificate to aggregated API servers, and
the server itself trusts that CA's front proxies to name users in headers (`requestheader`;
another front proxy's configuration can be given instead, to run the emulator as an aggregated
API server behind another emulator).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import secrets
import ssl
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from .accounting import Accounting
from .aggregator import Aggregator, availability, registration
from .controllers import Controller, ControllerContext, Knobs, tolerate
from .faults import ControlRouter, Faults, Route
from .https import HttpsServer, load_key_pair
from .kubeconfig import build_kubeconfig, write_kubeconfig
from .metrics_server import MetricsApi, metrics_https_server, registration_objects
from .pki import CertificateAuthority, ServiceAccountTokenIssuer
from .profiles import profile_by_name
from .requestheader import FRONT_PROXY_CLIENT, RequestHeaderConfig
from .transport import EmulatorTransport
from .wire import UserInfo
from .wiring import build_api_server

log = logging.getLogger(__name__)

ADMIN_USER = UserInfo("kubernetes-admin", ("system:masters", "system:authenticated"))
SERVING_DNS_NAMES = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
DEFAULT_NAMES = {"member": "member1", "karmada": "karmada"}


async def _run_controller(controller: Controller, ctx: ControllerContext) -> None:
    await controller(ctx)


def _der(cert_pem: bytes) -> bytes:
    return x509.load_pem_x509_certificate(cert_pem).public_bytes(serialization.Encoding.DER)


class Emulator:
    def __init__(
        self,
        profile: str = "member",
        *,
        name: str | None = None,
        port: int = 0,
        authorization: bool = True,
        knobs: Knobs | None = None,
        fault_seed: int | None = None,
        admin_token: str | None = None,
        all_crds: bool = False,
        requestheader: RequestHeaderConfig | None = None,
        serving_names: Sequence[str] = (),
    ) -> None:
        self.profile_name = profile
        self.name = name or DEFAULT_NAMES.get(profile, profile)
        self.profile = profile_by_name(profile, self.name, all_crds=all_crds)
        self.ca = CertificateAuthority.generate(f"{self.name}-ca")
        self.front_proxy_ca = CertificateAuthority.generate(f"{self.name}-front-proxy-ca")
        self.front_proxy_client = self.front_proxy_ca.issue(FRONT_PROXY_CLIENT, usage="client")
        self.requestheader = requestheader or RequestHeaderConfig(self.front_proxy_ca.cert_pem)
        self.sa_tokens = ServiceAccountTokenIssuer.generate()
        self.admin_token = admin_token or secrets.token_urlsafe(32)
        self.api = build_api_server(
            ca=self.ca,
            sa_tokens=self.sa_tokens,
            static_tokens={self.admin_token: ADMIN_USER},
            authorization=authorization,
            fixed_uids=self.profile.fixed_uids,
            requestheader=self.requestheader,
        )
        self.knobs = knobs or Knobs()
        for resource_type in self.profile.types:
            self.api.register_type(resource_type)
        for group, resource, sub, make in self.profile.subresources:
            self.api.add_subresource(group, resource, sub, make(self.api.storage, self.knobs))
        # kube-aggregator in front of the API, as in every kube-apiserver.
        self.aggregator = Aggregator(
            self.api.registry, self.api.storage, self.api.services, self.front_proxy_client
        )
        self.api.aggregator = self.aggregator
        self.accounting = Accounting()
        self.faults = Faults(self.api.storage, seed=fault_seed)
        # Accounting first: requests failed by an injected fault are still calls made.
        self.api.hooks.append(self.accounting.hook)
        self.api.response_hooks.append(self.accounting.response_hook)
        self.api.hooks.append(self.faults.hook)
        routes: dict[str, Route] = {"faults": self.faults.http, "requests": self.accounting.http}
        self.front = ControlRouter(self.api, self.api.authenticator.authenticate, routes)
        cert_pem, key_pem = self.ca.issue(
            "kube-apiserver",
            dns_names=(*SERVING_DNS_NAMES, *serving_names),
            ips=("127.0.0.1",),
            usage="server",
        )
        # kube-apiserver's TLS accepts client certificates of both CAs; each authenticator then
        # checks the one it trusts.
        client_cas = self.ca.cert_pem + self.requestheader.ca_pem
        self.server = HttpsServer(self.front, cert_pem, key_pem, client_cas, port=port)
        routes["connections"] = self.server.connection_log.http
        self.faults.attach(self.server)
        self.clock_offset = 0.0
        # metrics-server beside the member's API server, when the profile runs it.
        self.metrics_server: HttpsServer | None = None
        if self.profile.metrics_server:
            metrics = MetricsApi(
                self.api.storage, self.requestheader, self.api.authorizer, self._time
            )
            self.metrics_server = metrics_https_server(metrics, self.ca, self.requestheader.ca_pem)
        self._controllers: list[asyncio.Task[None]] = []
        self.controller_errors: list[BaseException] = []

    # --- the server's clock ------------------------------------------------------------

    def set_clock_offset(self, seconds: float) -> None:
        """Run the server's clock `seconds` ahead of this host's (negative: behind): what it
        stamps on objects and answers (Date), and what its controllers and token checks take
        for now. A client on this host then sees its own clock off by -`seconds`."""
        self.clock_offset = seconds
        self.api.config.clock = self._time
        if self.api.authenticator is not None:
            self.api.authenticator.clock = self._now

    def _time(self) -> float:
        return time.time() + self.clock_offset

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._time(), UTC)

    # --- lifecycle ----------------------------------------------------------------------

    async def __aenter__(self) -> Emulator:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> None:
        await self.server.start()
        ctx = ControllerContext(
            api=self.api.loopback(),
            storage=self.api.storage,
            ca=self.ca,
            sa_tokens=self.sa_tokens,
            cluster_name=self.name,
            clock=self._now,
            knobs=self.knobs,
            server_url=self.url,
            authentication_info=self.requestheader.configmap_data(self.ca.cert_pem),
            aggregation=self.aggregator,
        )
        await self.profile.seed(ctx)
        await self._start_metrics_server(ctx)
        # The local APIServices, each Available, before the server reports ready (as
        # kube-apiserver's readyz waits for autoregistration).
        await registration.sync(ctx, self.aggregator)
        for obj in self.aggregator.apiservices():
            await availability.sync(ctx, self.aggregator, obj["metadata"]["name"])
        aggregator_controllers: list[Controller] = [
            functools.partial(registration.run, aggregator=self.aggregator),
            functools.partial(availability.run, aggregator=self.aggregator),
        ]
        for controller in [*self.profile.controllers, *aggregator_controllers]:
            task = asyncio.create_task(
                _run_controller(controller, ctx),
                name=f"controller {getattr(controller, 'func', controller).__module__}",
            )
            task.add_done_callback(self._controller_done)
            self._controllers.append(task)
        await self.wait_ready()

    async def _start_metrics_server(self, ctx: ControllerContext) -> None:
        """Serve metrics.k8s.io as metrics-server does: its own server behind its Service and
        APIService (registered before the server reports ready)."""
        if self.metrics_server is None:
            return
        await self.metrics_server.start()
        self.api.services["kube-system/metrics-server"] = f"127.0.0.1:{self.metrics_server.port}"
        for path, obj in registration_objects():
            await tolerate(ctx.api.create(path, obj), 409)

    async def stop(self) -> None:
        for task in self._controllers:
            task.cancel()
        await asyncio.gather(*self._controllers, return_exceptions=True)
        self._controllers.clear()
        await self.faults.close()
        await self.server.stop()
        if self.metrics_server is not None:
            await self.metrics_server.stop()
        for handler in self.api.subresource_handlers.values():
            release = getattr(handler, "aclose", None)
            if release is not None:
                await release()
        await self.api.admission.client.aclose()
        await self.aggregator.aclose()

    def _controller_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self.controller_errors.append(exc)
            log.error("emulator controller %s failed", task.get_name(), exc_info=exc)

    async def wait_ready(self, timeout: float = 10.0) -> None:
        """Return once the server answers /readyz over HTTPS (so it accepts requests)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        async with self.https_client(timeout=2.0) as client:
            while True:
                with contextlib.suppress(httpx.TransportError):
                    if (await client.get("/readyz")).status_code == 200:
                        return
                if loop.time() > deadline:
                    raise TimeoutError(f"emulator at {self.url} not ready after {timeout}s")
                await asyncio.sleep(0.02)

    # --- addresses and credentials ------------------------------------------------------

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def ca_pem(self) -> bytes:
        return self.ca.cert_pem

    def issue_client_cert(
        self,
        user: str,
        groups: tuple[str, ...] | list[str] = (),
        *,
        lifetime: timedelta | None = None,
    ) -> tuple[bytes, bytes]:
        """A client certificate (CN=user, O=groups) signed by the emulator's CA: (cert, key)."""
        if lifetime is None:
            return self.ca.issue(user, tuple(groups), usage="client")
        return self.ca.issue(user, tuple(groups), usage="client", lifetime=lifetime)

    def kubeconfig(
        self,
        *,
        user: str | None = None,
        groups: tuple[str, ...] | list[str] = (),
        token: str | None = None,
        namespace: str | None = None,
    ) -> dict[str, Any]:
        """A kubeconfig for this emulator: the admin (bearer token) by default, `token=` for
        another bearer token, or `user=`/`groups=` for an embedded client certificate."""
        if user is not None:
            cert, key = self.issue_client_cert(user, groups)
            return build_kubeconfig(
                self.url,
                self.ca_pem,
                cluster=self.name,
                user=user,
                client_cert_pem=cert,
                client_key_pem=key,
                namespace=namespace,
            )
        return build_kubeconfig(
            self.url,
            self.ca_pem,
            cluster=self.name,
            user="admin" if token is None else "token-user",
            token=token or self.admin_token,
            namespace=namespace,
        )

    def write_kubeconfig(self, path: str | os.PathLike[str], **kwargs: Any) -> Path:
        """Write `kubeconfig(**kwargs)` to `path` with mode 0600."""
        return write_kubeconfig(path, self.kubeconfig(**kwargs))

    # --- clients ------------------------------------------------------------------------

    def transport(
        self,
        *,
        user: str | None = None,
        groups: tuple[str, ...] | list[str] = (),
        token: str | None = None,
    ) -> EmulatorTransport:
        """An in-process transport: as the admin, a bearer `token`, or a client cert `user`."""
        if user is not None:
            cert, _ = self.issue_client_cert(user, groups)
            transport = EmulatorTransport(self.front, peer_cert_der=_der(cert))
        else:
            transport = EmulatorTransport(
                self.front, headers={"Authorization": f"Bearer {token or self.admin_token}"}
            )
        self.faults.attach(transport)
        return transport

    def client(
        self,
        *,
        user: str | None = None,
        groups: tuple[str, ...] | list[str] = (),
        token: str | None = None,
        **httpx_kwargs: Any,
    ) -> httpx.AsyncClient:
        """An httpx client calling the emulator in-process (no TLS, no socket)."""
        return httpx.AsyncClient(
            transport=self.transport(user=user, groups=groups, token=token),
            base_url=self.url,
            **httpx_kwargs,
        )

    def client_for(self, user: str, groups: tuple[str, ...] | list[str] = ()) -> httpx.AsyncClient:
        return self.client(user=user, groups=groups)

    def ssl_context(self, cert_key: tuple[bytes, bytes] | None = None) -> ssl.SSLContext:
        """A client TLS context trusting the emulator's CA, optionally with a client cert."""
        ctx = ssl.create_default_context(cadata=self.ca_pem.decode())
        if cert_key is not None:
            load_key_pair(ctx, *cert_key)
        return ctx

    def https_client(
        self,
        *,
        user: str | None = None,
        groups: tuple[str, ...] | list[str] = (),
        token: str | None = None,
        **httpx_kwargs: Any,
    ) -> httpx.AsyncClient:
        """An httpx client over real HTTPS: as the admin, a bearer `token`, or a client cert."""
        headers = dict(httpx_kwargs.pop("headers", {}) or {})
        cert_key = None
        if user is not None:
            cert_key = self.issue_client_cert(user, groups)
        else:
            headers["Authorization"] = f"Bearer {token or self.admin_token}"
        return httpx.AsyncClient(
            base_url=self.url, verify=self.ssl_context(cert_key), headers=headers, **httpx_kwargs
        )


@asynccontextmanager
async def run_emulator(
    profile: str = "member",
    *,
    name: str | None = None,
    port: int = 0,
    authorization: bool = True,
    knobs: Knobs | None = None,
    fault_seed: int | None = None,
    admin_token: str | None = None,
    all_crds: bool = False,
    requestheader: RequestHeaderConfig | None = None,
    serving_names: Sequence[str] = (),
) -> AsyncIterator[Emulator]:
    """Build, start and (on exit) stop an emulator; yields it once it accepts requests.
    `all_crds` (karmada profile): every CRD Karmada publishes, as a full control plane has.
    `requestheader`: trust this front proxy instead of the emulator's own (to serve as an
    aggregated API server, with `serving_names` such as "<service>.<namespace>.svc" added to its
    certificate)."""
    emu = Emulator(
        profile,
        name=name,
        port=port,
        authorization=authorization,
        knobs=knobs,
        fault_seed=fault_seed,
        admin_token=admin_token,
        all_crds=all_crds,
        requestheader=requestheader,
        serving_names=serving_names,
    )
    await emu.start()
    try:
        yield emu
    finally:
        await emu.stop()
