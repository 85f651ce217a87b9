"""A TCP proxy for tests that makes a link slow or lossy: latency, a bandwidth limit, resets,
a blackhole, refused connections.

It forwards bytes (TLS and HTTP/2 pass through untouched), so a client pointed at
`proxy.address` talks to the upstream server as before, over a link the test shapes while it
runs:

- `latency`: seconds added to every chunk in each direction (half a round trip);
- `bandwidth`: bytes per second in each direction (0: unlimited);
- `reset()`: every open connection is reset (RST), new ones go through;
- `blackhole = True`: connections are accepted but nothing is forwarded either way, as on a
  link that silently drops packets (clients see timeouts, not errors);
- `refuse = True`: new connections are closed at once (a server that is down).

`connections` counts the connections clients opened, `attempts_since(t)` those after a moment
(loop time), so a test can measure how hard a client retries while the link is down;
`bytes_up` and `bytes_down` count what crossed the link towards the server and back (TLS and
all), so a benchmark can tell what a slow link carried.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from dataclasses import dataclass, field
from typing import Any

CHUNK = 16 * 1024


@dataclass
class LinkProxy:
    upstream_host: str
    upstream_port: int
    latency: float = 0.0
    bandwidth: int = 0
    blackhole: bool = False
    refuse: bool = False
    connections: int = 0
    opened_at: list[float] = field(default_factory=list)
    bytes_up: int = 0
    bytes_down: int = 0
    _server: asyncio.Server | None = None
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)
    _tasks: set[asyncio.Task[Any]] = field(default_factory=set)

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> LinkProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        self.reset()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def __aenter__(self) -> LinkProxy:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def attempts_since(self, moment: float) -> int:
        return sum(1 for opened in self.opened_at if opened >= moment)

    def reset(self) -> int:
        """Reset every open connection (both sides see a connection reset); returns how many."""
        writers, self._writers = self._writers, set()
        for writer in writers:
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    # SO_LINGER 0: close sends RST, not FIN.
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        return len(writers) // 2

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.opened_at.append(asyncio.get_running_loop().time())
        if self.refuse:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(
                self.upstream_host, self.upstream_port
            )
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await asyncio.gather(
                self._pipe(reader, up_writer, up=True), self._pipe(up_reader, writer, up=False)
            )
        except asyncio.CancelledError:
            # Ended by close(): the handler returns, not cancelled (Python 3.11's stream server
            # asks a cancelled handler task for its exception, which raises in its callback).
            pass
        finally:
            self._tasks.discard(task)
            for w in (writer, up_writer):
                self._writers.discard(w)
                w.transport.abort()

    async def _pipe(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, *, up: bool
    ) -> None:
        """One direction: a delay line (each chunk leaves `latency` after it arrived) feeding a
        sender paced by `bandwidth`."""
        line: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        async def receive() -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while data := await src.read(CHUNK):
                    if not self.blackhole:  # swallowed: the other side never hears of it
                        line.put_nowait((loop.time(), data))
            line.put_nowait((loop.time(), b""))

        receiver = asyncio.create_task(receive())
        free_at = 0.0
        try:
            with contextlib.suppress(ConnectionError, OSError):
                while True:
                    arrived, data = await line.get()
                    if not data:
                        break
                    due = arrived + self.latency
                    if self.bandwidth:
                        free_at = max(free_at, due) + len(data) / self.bandwidth
                        due = free_at
                    wait = due - loop.time()
                    if wait > 0:
                        await asyncio.sleep(wait)
                    dst.write(data)
                    if up:
                        self.bytes_up += len(data)
                    else:
                        self.bytes_down += len(data)
                    await dst.drain()
        finally:
            receiver.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await receiver
            dst.transport.abort()
