"""The test proxy shapes a TCP link: latency, bandwidth, resets, a blackhole, refusals."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from emulator.netproxy import LinkProxy
from tests.emulator.fronts.core import eventually


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.close()


@contextlib.asynccontextmanager
async def echo_through_proxy() -> AsyncIterator[LinkProxy]:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with LinkProxy("127.0.0.1", port) as proxy:
            yield proxy
    finally:
        server.close()


async def round_trip(proxy: LinkProxy, payload: bytes) -> tuple[bytes, float]:
    loop = asyncio.get_running_loop()
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    started = loop.time()
    writer.write(payload)
    await writer.drain()
    echoed = await reader.readexactly(len(payload))
    elapsed = loop.time() - started
    writer.close()
    return echoed, elapsed


async def test_forwards_unchanged() -> None:
    async with echo_through_proxy() as proxy:
        echoed, _ = await round_trip(proxy, b"hello" * 1000)
        assert echoed == b"hello" * 1000
        assert proxy.connections == 1
        # What crossed the link each way.
        assert (proxy.bytes_up, proxy.bytes_down) == (5000, 5000)


async def test_latency_is_added_each_way() -> None:
    async with echo_through_proxy() as proxy:
        proxy.latency = 0.15
        _, elapsed = await round_trip(proxy, b"ping")
        assert elapsed >= 0.3


async def test_bandwidth_limits_throughput() -> None:
    async with echo_through_proxy() as proxy:
        proxy.bandwidth = 256 * 1024 // 8  # 256 kbit/s
        _, elapsed = await round_trip(proxy, b"x" * 16 * 1024)
        # 16 KiB at 32 KiB/s is 0.5 s one way; the echo pipelines behind it.
        assert elapsed >= 0.5


async def test_reset_cuts_open_connections_and_lets_new_ones_through() -> None:
    async with echo_through_proxy() as proxy:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(b"a")
        assert await reader.readexactly(1) == b"a"
        assert proxy.reset() == 1
        with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
            await asyncio.wait_for(reader.readexactly(1), 5)
        echoed, _ = await round_trip(proxy, b"again")
        assert echoed == b"again"


async def test_blackhole_swallows_everything() -> None:
    async with echo_through_proxy() as proxy:
        proxy.blackhole = True
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(b"anyone?")
        await writer.drain()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(reader.read(1), 0.3)
        writer.close()
        proxy.blackhole = False
        echoed, _ = await round_trip(proxy, b"back")
        assert echoed == b"back"


async def test_refused_connections_are_closed_and_counted() -> None:
    async with echo_through_proxy() as proxy:
        proxy.refuse = True
        moment = asyncio.get_running_loop().time()
        reader, _ = await asyncio.open_connection("127.0.0.1", proxy.port)
        data = b"?"
        with contextlib.suppress(ConnectionError):
            data = await asyncio.wait_for(reader.read(1), 5)
        assert data in (b"?", b"")  # reset or closed: never an answer
        assert proxy.attempts_since(moment) == 1


async def test_closing_with_traffic_in_flight_logs_no_error() -> None:
    """Closed while a connection's bytes wait on the link: the connection ends, and nothing is
    reported to the loop's exception handler (Python 3.11's stream server calls exception() on
    its handler task, which raises for a cancelled one)."""
    loop = asyncio.get_running_loop()
    reported: list[dict[str, object]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        async with echo_through_proxy() as proxy:
            proxy.latency = 5.0  # the bytes are still on the link when the proxy closes
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(b"in flight")
            await writer.drain()
            await eventually(lambda: proxy.bytes_up == 0 and bool(proxy._tasks))
        with contextlib.suppress(ConnectionError):  # reset: close() ends connections with RST
            assert await asyncio.wait_for(reader.read(), 5) == b""
        writer.close()
        for _ in range(5):
            await asyncio.sleep(0)  # let the server's done-callbacks run
        assert reported == []
    finally:
        loop.set_exception_handler(previous)
