"""Starting the real upstream binaries (built by shared/tools/build-upstream) for tests and
benchmarks: ANP's proxy-server (konnectivity.stock), upstream's karmada-agent
(`UpstreamKarmadaAgent`), karmada-aggregated-apiserver with Debian's etcd (`Etcd`,
`KarmadaAggregatedApiserver`).

`binary(name)` finds one in $KARMADA_UPSTREAM_BIN (None when the variable or the file is
missing, so callers skip with a visible reason); `UpstreamProcess` runs it with a private
temporary directory, its output in a log file there, waits until a readiness check passes and
stops it (SIGTERM, then SIGKILL). `free_port()` picks a port in the range Go components accept
for their listeners (ANP refuses ports above 49151, where Linux hands out ephemeral ones).

`KarmadaAggregatedApiserver` runs the server as Karmada's
artifacts/deploy/karmada-aggregated-apiserver.yaml does (its flags, TLS 1.3, its own etcd over
mutual TLS, delegated authentication and authorization against the control plane), with a
serving certificate for its Service's name, and gives the ExternalName Service and the
APIService of artifacts/deploy/karmada-aggregated-apiserver-apiservice.yaml that register it on
the control plane.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import random
import shutil
import socket
import ssl
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Self

import yaml

from .https import load_key_pair
from .pki import CertificateAuthority

ENV = "KARMADA_UPSTREAM_BIN"
_PORT_RANGE = (20000, 32000)
# Debian's etcd-server: what karmada-aggregated-apiserver keeps its Clusters in here.
ETCD = Path("/usr/bin/etcd")
AGGREGATED_APISERVER = "karmada-aggregated-apiserver"


def upstream_dir() -> Path | None:
    value = os.environ.get(ENV)
    return Path(value) if value else None


def binary(name: str) -> Path | None:
    directory = upstream_dir()
    if directory is None:
        return None
    path = directory / name
    return path if path.is_file() and os.access(path, os.X_OK) else None


def missing_reason(name: str) -> str:
    directory = upstream_dir()
    if directory is None:
        return f"{ENV} is not set (build the upstream binaries with shared/tools/build-upstream)"
    return f"{directory / name} is missing or not executable"


def etcd_missing_reason() -> str | None:
    """Why etcd cannot run here, or None when it can."""
    if ETCD.is_file() and os.access(ETCD, os.X_OK):
        return None
    return f"{ETCD} is missing (apt-get install etcd-server)"


def aggregated_apiserver_missing_reason() -> str | None:
    """Why karmada-aggregated-apiserver cannot run here (binary or etcd), or None."""
    if binary(AGGREGATED_APISERVER) is None:
        return missing_reason(AGGREGATED_APISERVER)
    return etcd_missing_reason()


# Ports already handed out by this process: free while nobody listens yet, so a second caller
# would otherwise get the same one before the first binary binds it (a fleet of upstream
# processes picks hundreds).
_handed_out: set[int] = set()


def free_port(host: str = "127.0.0.1") -> int:
    """A port free now, below the ephemeral range (a Go server may refuse those), and not one
    this process handed out before."""
    for _ in range(200):
        port = random.randint(*_PORT_RANGE)
        if port in _handed_out:
            continue
        with socket.socket() as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            _handed_out.add(port)
            return port
    raise RuntimeError("no free port found")


async def _http_ok(url: str) -> bool:
    """A plain HTTP GET answered 200 (no TLS, no dependencies: readiness of local servers)."""
    rest = url.removeprefix("http://")
    authority, _, path = rest.partition("/")
    host, _, port = authority.rpartition(":")
    try:
        reader, writer = await asyncio.open_connection(host, int(port))
    except OSError:
        return False
    try:
        writer.write(
            f"GET /{path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n".encode()
        )
        status = await asyncio.wait_for(reader.readline(), 2.0)
        return status.split(b" ")[1:2] == [b"200"]
    except (OSError, TimeoutError, IndexError):
        return False
    finally:
        writer.close()


def http_ready(url: str) -> Callable[[], Awaitable[bool]]:
    return lambda: _http_ok(url)


async def _https_ok(host: str, port: int, path: str, context: ssl.SSLContext) -> bool:
    """GET over TLS answered 200."""
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, ssl=context), 2.0
        )
    except (OSError, ssl.SSLError, TimeoutError):
        return False
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        status = await asyncio.wait_for(reader.readline(), 2.0)
        return status.split(b" ")[1:2] == [b"200"]
    except (OSError, TimeoutError, IndexError, ssl.SSLError):
        return False
    finally:
        writer.close()


def _client_certificate(kubeconfig: Path) -> tuple[bytes, bytes] | None:
    """The client certificate and key embedded in a kubeconfig's current user, if any."""
    config = yaml.safe_load(kubeconfig.read_text()) or {}
    context_name = config.get("current-context")
    context = next(
        (
            c.get("context") or {}
            for c in config.get("contexts") or []
            if c.get("name") == context_name
        ),
        {},
    )
    user = next(
        (
            u.get("user") or {}
            for u in config.get("users") or []
            if u.get("name") == context.get("user")
        ),
        {},
    )
    cert, key = user.get("client-certificate-data"), user.get("client-key-data")
    if not cert or not key:
        return None
    return base64.b64decode(cert), base64.b64decode(key)


def _write_private(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    os.chmod(path, 0o600)
    return path


class UpstreamProcess:
    """One upstream binary, running. Use `async with` or start()/stop()."""

    def __init__(
        self,
        name: str,
        args: Sequence[str],
        *,
        ready: Callable[[], Awaitable[bool]] | None = None,
        env: dict[str, str] | None = None,
        workdir: Path | None = None,
        path: Path | None = None,
    ) -> None:
        """`path`: a binary from elsewhere than $KARMADA_UPSTREAM_BIN (Debian's etcd)."""
        path = path or binary(name)
        if path is None:
            raise FileNotFoundError(missing_reason(name))
        self.name = name
        self.path = path
        self.args = list(args)
        self.ready = ready
        self.env = env
        self._own_dir = workdir is None
        self.dir = workdir or Path(tempfile.mkdtemp(prefix=f"{name}-"))
        self.log_path = self.dir / f"{name}.log"
        self.process: asyncio.subprocess.Process | None = None

    async def start(self, timeout: float = 20.0) -> UpstreamProcess:
        log = self.log_path.open("ab")
        try:
            self.process = await asyncio.create_subprocess_exec(
                str(self.path),
                *self.args,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                stdin=asyncio.subprocess.DEVNULL,
                cwd=self.dir,
                env={**os.environ, **(self.env or {})},
            )
        finally:
            log.close()
        if self.ready is not None:
            await self.wait_ready(timeout)
        return self

    async def wait_ready(self, timeout: float) -> None:
        assert self.ready is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not await self.ready():
            if self.process is not None and self.process.returncode is not None:
                raise RuntimeError(f"{self.name} exited ({self.process.returncode}):\n{self.log()}")
            if loop.time() > deadline:
                raise TimeoutError(f"{self.name} not ready after {timeout}s:\n{self.log()}")
            await asyncio.sleep(0.05)  # poll interval of the readiness wait

    def log(self, tail: int = 4000) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-tail:]
        return ""

    async def stop(self, grace: float = 5.0) -> None:
        process = self.process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
            try:
                await asyncio.wait_for(process.wait(), grace)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()

    def cleanup(self) -> None:
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    async def __aenter__(self) -> UpstreamProcess:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
        self.cleanup()


# --- karmada-agent -------------------------------------------------------------------------------


class UpstreamKarmadaAgent(UpstreamProcess):
    """Upstream's Go karmada-agent against an emulated control plane and member: its
    `--karmada-kubeconfig` and `--kubeconfig` name the emulators' kubeconfigs, metrics and health
    probes listen on free loopback ports, `extra_args` add or override flags (later flags win in
    pflag). Ready once its health probe answers, which is after registration. `stop()` sends
    SIGTERM: controller-runtime stops its controllers and, as upstream configures it, leaves its
    leader-election Lease to expire."""

    def __init__(
        self,
        *,
        karmada_kubeconfig: Path,
        member_kubeconfig: Path,
        cluster_name: str,
        extra_args: Sequence[str] = (),
        workdir: Path | None = None,
    ) -> None:
        self.metrics_port = free_port()
        self.health_port = free_port()
        super().__init__(
            "karmada-agent",
            [
                f"--karmada-kubeconfig={karmada_kubeconfig}",
                f"--kubeconfig={member_kubeconfig}",
                f"--cluster-name={cluster_name}",
                f"--metrics-bind-address=127.0.0.1:{self.metrics_port}",
                f"--health-probe-bind-address=127.0.0.1:{self.health_port}",
                "--v=2",
                *extra_args,
            ],
            ready=http_ready(f"http://127.0.0.1:{self.health_port}/healthz"),
            workdir=workdir,
        )

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    @property
    def returncode(self) -> int | None:
        return None if self.process is None else self.process.returncode


class Etcd:
    """Debian's etcd for one aggregated API server: clients over TLS with client certificates
    (as Karmada's etcd serves karmada-aggregated-apiserver), peers on loopback, data in
    `workdir`."""

    def __init__(self, workdir: Path, ca: CertificateAuthority) -> None:
        self.dir = workdir
        self.client_port = free_port()
        self.peer_port = free_port()
        self.ca = ca
        server_cert, server_key = ca.issue(
            "etcd-server", dns_names=["localhost"], ips=["127.0.0.1"], usage="server"
        )
        client_cert, client_key = ca.issue("etcd-client", usage="client")
        self.ca_file = _write_private(workdir / "etcd-ca.crt", ca.cert_pem)
        self.client_cert_file = _write_private(workdir / "etcd-client.crt", client_cert)
        self.client_key_file = _write_private(workdir / "etcd-client.key", client_key)
        server_files = (
            _write_private(workdir / "etcd-server.crt", server_cert),
            _write_private(workdir / "etcd-server.key", server_key),
        )
        peer = f"http://127.0.0.1:{self.peer_port}"
        args = [
            "--name=etcd",
            f"--data-dir={workdir / 'etcd-data'}",
            f"--listen-client-urls={self.url}",
            f"--advertise-client-urls={self.url}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=etcd={peer}",
            f"--cert-file={server_files[0]}",
            f"--key-file={server_files[1]}",
            f"--trusted-ca-file={self.ca_file}",
            "--client-cert-auth",
            "--logger=zap",
        ]
        context = ssl.create_default_context(cafile=str(self.ca_file))
        context.load_cert_chain(self.client_cert_file, self.client_key_file)
        self.process = UpstreamProcess(
            "etcd",
            args,
            ready=lambda: _https_ok("127.0.0.1", self.client_port, "/health", context),
            workdir=workdir,
            path=ETCD,
        )

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.client_port}"

    def client_args(self) -> list[str]:
        """The flags a Karmada server reaches this etcd with."""
        return [
            f"--etcd-servers={self.url}",
            f"--etcd-cafile={self.ca_file}",
            f"--etcd-certfile={self.client_cert_file}",
            f"--etcd-keyfile={self.client_key_file}",
        ]

    async def start(self) -> Etcd:
        await self.process.start()
        return self

    async def stop(self) -> None:
        await self.process.stop()


def _kubeconfig_args(kubeconfig: Path) -> list[str]:
    """An extension API server reaches the control plane, and checks its callers, with one
    kubeconfig."""
    return [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
    ]


class ExtensionApiserver:
    """An upstream extension API server Karmada's control plane aggregates: it serves
    `GROUP_VERSION` on 127.0.0.1:`port` behind the Service karmada-system/`SERVICE` (which the
    control plane must map to `address`) and Karmada's APIService, with a serving certificate
    from a CA of its own, reaching the control plane with `kubeconfig`."""

    NAMESPACE = "karmada-system"
    SERVICE = ""
    GROUP_VERSION = ""
    # The ServiceNetwork key the control plane maps to `address`.
    SERVICE_KEY = ""
    SERVICE_DNS_NAME = ""

    def __init_subclass__(cls) -> None:
        cls.SERVICE_KEY = f"{cls.NAMESPACE}/{cls.SERVICE}"
        cls.SERVICE_DNS_NAME = f"{cls.SERVICE}.{cls.NAMESPACE}.svc"

    def __init__(self, workdir: Path, file_stem: str, extra_dns_names: Sequence[str] = ()) -> None:
        self.dir = workdir
        self.port = free_port()
        self.ca = CertificateAuthority.generate(f"{self.SERVICE}-ca")
        cert, key = self.ca.issue(
            self.SERVICE,
            dns_names=[
                self.SERVICE_DNS_NAME,
                f"{self.SERVICE_DNS_NAME}.cluster.local",
                *extra_dns_names,
            ],
            ips=["127.0.0.1"],
            usage="server",
        )
        self.cert_file = _write_private(workdir / f"{file_stem}.crt", cert)
        self.key_file = _write_private(workdir / f"{file_stem}.key", key)
        self.process: UpstreamProcess | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _serving_args(self) -> list[str]:
        """The serving flags every Karmada deployment of it gives."""
        return [
            f"--tls-cert-file={self.cert_file}",
            f"--tls-private-key-file={self.key_file}",
            "--audit-log-path=-",
            "--audit-log-maxage=0",
            "--audit-log-maxbackup=0",
            "--tls-min-version=VersionTLS13",
        ]

    def args(self, kubeconfig: Path) -> list[str]:
        raise NotImplementedError

    async def start(self, kubeconfig: Path, timeout: float = 60.0) -> Self:
        """Run the binary and wait until it is ready; stop everything if it never is."""
        context = ssl.create_default_context(cadata=self.ca.cert_pem.decode())
        # Ready is more than /readyz: the server reads the client and front-proxy CAs from the
        # control plane a moment after it serves, and until then takes everyone for anonymous.
        # It is ready once it knows its own client certificate (the kubeconfig's) for who it is.
        path = "/readyz"
        identity = _client_certificate(kubeconfig)
        if identity is not None:
            load_key_pair(context, *identity)
            path = f"/apis/{self.GROUP_VERSION}"
        self.process = UpstreamProcess(
            self.SERVICE,
            self.args(kubeconfig),
            ready=lambda: _https_ok("127.0.0.1", self.port, path, context),
            workdir=self.dir,
        )
        try:
            await self.process.start(timeout=timeout)
        except BaseException:
            await self.stop()
            raise
        return self

    async def stop(self) -> None:
        if self.process is not None:
            await self.process.stop()

    def log(self, tail: int = 4000) -> str:
        return self.process.log(tail) if self.process is not None else ""

    def apiservice(self) -> dict[str, Any]:
        """Karmada's APIService for `GROUP_VERSION`, with the server's CA."""
        return _apiservice(self.SERVICE, self.NAMESPACE, self.GROUP_VERSION, self.ca.cert_pem)


def _apiservice(service: str, namespace: str, group_version: str, ca_pem: bytes) -> dict[str, Any]:
    """Karmada's APIService (artifacts/deploy) for `group_version` behind `service`."""
    group, version = group_version.split("/")
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {
            "name": f"{version}.{group}",
            "labels": {"app": service, "apiserver": "true"},
        },
        "spec": {
            "caBundle": base64.b64encode(ca_pem).decode(),
            "group": group,
            "groupPriorityMinimum": 2000,
            "service": {"name": service, "namespace": namespace},
            "version": version,
            "versionPriority": 10,
        },
    }


def _external_name_service(service: str, namespace: str) -> dict[str, Any]:
    """Karmada's Service for an extension API server (artifacts/deploy: an ExternalName)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": service, "namespace": namespace},
        "spec": {
            "type": "ExternalName",
            "externalName": f"{service}.{namespace}.svc.cluster.local",
        },
    }


class EtcdBackedApiserver(ExtensionApiserver):
    """An extension API server that keeps its objects in an etcd of its own (files under
    `workdir`): etcd starts before the server and stops after it."""

    def __init__(
        self,
        workdir: Path,
        file_stem: str,
        *,
        etcd_ca_name: str,
        extra_dns_names: Sequence[str] = (),
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        super().__init__(workdir, file_stem, extra_dns_names)
        self.etcd = Etcd(workdir, CertificateAuthority.generate(etcd_ca_name))

    async def start(self, kubeconfig: Path, timeout: float = 60.0) -> Self:
        """Start etcd, then the server against the control plane `kubeconfig` names."""
        await self.etcd.start()
        return await super().start(kubeconfig, timeout)

    async def stop(self) -> None:
        await super().stop()
        await self.etcd.stop()


class KarmadaAggregatedApiserver(EtcdBackedApiserver):
    """karmada-aggregated-apiserver with its etcd, reaching the control plane with `kubeconfig`
    (its user needs Karmada's rights: the deployment gives it the admin's).

    Karmada's deployment has it serve on its pod IP behind the Service
    karmada-system/karmada-aggregated-apiserver; here it serves on 127.0.0.1:`port`, which the
    control plane must map that Service to (`python -m emulator --service ...=` `address`)."""

    SERVICE = AGGREGATED_APISERVER
    GROUP_VERSION = "cluster.karmada.io/v1alpha1"

    def __init__(self, workdir: Path, *, extra_args: Sequence[str] = ()) -> None:
        super().__init__(workdir, "server", etcd_ca_name="etcd-ca", extra_dns_names=["localhost"])
        self.extra_args = list(extra_args)

    def args(self, kubeconfig: Path) -> list[str]:
        """The deployment's flags; --bind-address and --secure-port for this machine."""
        return [
            *_kubeconfig_args(kubeconfig),
            *self.etcd.client_args(),
            *self._serving_args(),
            "--logging-format=json",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.port}",
            *self.extra_args,
        ]

    def service(self) -> dict[str, Any]:
        return aggregated_apiserver_service()


def aggregated_apiserver_service() -> dict[str, Any]:
    """The control plane's Service for karmada-aggregated-apiserver (Karmada's apiservice
    artifact: an ExternalName Service)."""
    return _external_name_service(
        KarmadaAggregatedApiserver.SERVICE, KarmadaAggregatedApiserver.NAMESPACE
    )


def aggregated_apiserver_apiservice(ca_pem: bytes) -> dict[str, Any]:
    """Karmada's APIService for cluster.karmada.io/v1alpha1, with the server's CA."""
    server = KarmadaAggregatedApiserver
    return _apiservice(server.SERVICE, server.NAMESPACE, server.GROUP_VERSION, ca_pem)


# --- karmada-metrics-adapter ------------------------------------------------------------------

METRICS_ADAPTER = "karmada-metrics-adapter"


class KarmadaMetricsAdapter(ExtensionApiserver):
    """karmada-metrics-adapter with Karmada's flags, reaching the control plane with
    `kubeconfig`: it serves metrics.k8s.io on karmada-apiserver (behind the Service
    karmada-system/karmada-metrics-adapter and Karmada's APIService), answering from the member
    clusters it reaches with each Cluster's endpoint, proxy and Secret."""

    SERVICE = METRICS_ADAPTER
    GROUP_VERSION = "metrics.k8s.io/v1beta1"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir, "metrics-adapter")
        self.metrics_port = free_port()

    def args(self, kubeconfig: Path) -> list[str]:
        """The chart's flags; --bind-address and the ports for this machine."""
        return [
            f"--kubeconfig={kubeconfig}",
            f"--metrics-bind-address=127.0.0.1:{self.metrics_port}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            *self._serving_args(),
            "--v=2",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.port}",
        ]

    def service(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": self.SERVICE, "namespace": self.NAMESPACE},
            "spec": {"ports": [{"port": 443, "protocol": "TCP", "targetPort": 443}]},
        }


# --- karmada-search --------------------------------------------------------------------------

SEARCH = "karmada-search"


class KarmadaSearch(EtcdBackedApiserver):
    """karmada-search with Karmada's flags and an etcd of its own (files under `workdir`),
    serving search.karmada.io on the control plane behind the Service
    karmada-system/karmada-search and Karmada's APIService; it caches what each
    ResourceRegistry selects from the member clusters, reached with each Cluster's endpoint,
    proxy and Secret."""

    SERVICE = SEARCH
    GROUP_VERSION = "search.karmada.io/v1alpha1"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir, "search", etcd_ca_name="search-etcd-ca")

    def args(self, kubeconfig: Path) -> list[str]:
        """The chart's flags (external etcd); --bind-address and --secure-port for here."""
        return [
            *_kubeconfig_args(kubeconfig),
            *self.etcd.client_args(),
            *self._serving_args(),
            "--v=2",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.port}",
        ]

    def service(self) -> dict[str, Any]:
        return _external_name_service(self.SERVICE, self.NAMESPACE)
