"""The stock ANP proxy-server binary, run as deploy/control-plane/tunnel-server runs it:
`--mode=http-connect --proxy-strategies=destHost`, the agent port with TLS (mTLS with
`--cluster-ca-cert`, or token review), and the plain CONNECT frontend on a unix socket (the only
place the stock server offers it without client certificates), relayed to TCP by a byte relay as
the deployment's relay container does.

The ports stay the same across `restart()`, as a restarted pod behind its Service.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

from ..pki import CertificateAuthority
from ..upstream import UpstreamProcess, free_port, http_ready

BINARY = "proxy-server"


async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while data := await src.read(64 * 1024):
            dst.write(data)
            await dst.drain()
    with contextlib.suppress(OSError, RuntimeError):
        dst.write_eof()


class UnixRelay:
    """TCP on 127.0.0.1 -> a unix socket, bytes both ways (half-closes passed on)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.connections = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        try:
            up_reader, up_writer = await asyncio.open_unix_connection(self.path)
        except OSError:
            writer.transport.abort()
            return
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            writer.close()
            up_writer.close()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task


class StockProxyServer:
    def __init__(
        self,
        server_ca: CertificateAuthority,
        *,
        cluster_ca_pem: bytes | None = None,
        server_count: int = 1,
        server_id: str = "",
        extra_args: Sequence[str] = (),
        workdir: Path,
    ) -> None:
        self.dir = workdir
        self.agent_port = free_port()
        self.health_port = free_port()
        self.admin_port = free_port()
        self.uds = str(workdir / "konnectivity-server.socket")
        cert, key = server_ca.issue(
            "konnectivity-server", dns_names=["localhost"], ips=["127.0.0.1"], usage="server"
        )
        files = {"server.crt": cert, "server.key": key}
        if cluster_ca_pem is not None:
            files["cluster-ca.crt"] = cluster_ca_pem
        for name, content in files.items():
            path = workdir / name
            path.write_bytes(content)
            os.chmod(path, 0o600)
        self.args = [
            "--mode=http-connect",
            "--proxy-strategies=destHost",
            f"--uds-name={self.uds}",
            "--server-port=0",
            f"--agent-port={self.agent_port}",
            "--agent-bind-address=127.0.0.1",
            f"--health-port={self.health_port}",
            "--health-bind-address=127.0.0.1",
            f"--admin-port={self.admin_port}",
            f"--cluster-cert={workdir / 'server.crt'}",
            f"--cluster-key={workdir / 'server.key'}",
            f"--server-count={server_count}",
            *([f"--server-id={server_id}"] if server_id else []),
            *([f"--cluster-ca-cert={workdir / 'cluster-ca.crt'}"] if cluster_ca_pem else []),
            *extra_args,
        ]
        self.relay = UnixRelay(self.uds)
        self.process: UpstreamProcess | None = None
        self.starts = 0

    @property
    def agent_address(self) -> str:
        return f"127.0.0.1:{self.agent_port}"

    @property
    def connect_url(self) -> str:
        return f"http://127.0.0.1:{self.relay.port}"

    async def _start_process(self) -> None:
        self.starts += 1
        self.process = UpstreamProcess(
            BINARY,
            self.args,
            ready=http_ready(f"http://127.0.0.1:{self.health_port}/healthz"),
            workdir=self.dir,
        )
        await self.process.start()

    async def start(self) -> StockProxyServer:
        await self._start_process()
        await self.relay.start()
        return self

    async def stop(self) -> None:
        await self.relay.stop()
        if self.process is not None:
            await self.process.stop()

    async def kill(self) -> None:
        if self.process is not None:
            await self.process.stop(grace=0.0)

    async def restart(self) -> None:
        if self.process is not None:
            await self.process.stop()
        await self._start_process()

    def log(self) -> str:
        return self.process.log() if self.process is not None else ""

    async def __aenter__(self) -> StockProxyServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
