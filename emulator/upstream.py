"""Starting the real upstream binaries (built by shared/tools/build-upstream) for tests and
benchmarks: ANP's proxy-server, later karmada-aggregated-apiserver with etcd.

`binary(name)` finds one in $KARMADA_UPSTREAM_BIN (None when the variable or the file is
missing, so callers skip with a visible reason); `UpstreamProcess` runs it with a private
temporary directory, its output in a log file there, waits until a readiness check passes and
stops it (SIGTERM, then SIGKILL). `free_port()` picks a port in the range Go components accept
for their listeners (ANP refuses ports above 49151, where Linux hands out ephemeral ones).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import socket
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

ENV = "KARMADA_UPSTREAM_BIN"
_PORT_RANGE = (20000, 32000)


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


def free_port(host: str = "127.0.0.1") -> int:
    """A port free now, below the ephemeral range (a Go server may refuse those)."""
    for _ in range(200):
        port = random.randint(*_PORT_RANGE)
        with socket.socket() as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
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
    ) -> None:
        path = binary(name)
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
