"""The agent's HTTP/2 (agent/kube/http2.py): through its transport, against the emulator's HTTP/2
front (one connection for requests and watches, abandoned streams reset, quiet watches never in
the way, read timeouts per stream, GOAWAY, gzip); and directly, against a server the test drives
(duplex streams with backpressure and trailers, acknowledgement as the reader takes, GOAWAY and
duplex streams, keepalive pings)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agent.kube.config import ClientConfig
from agent.kube.errors import NotFoundError, TransportError, WatchTimeoutError
from agent.kube.http2 import (
    CLOSED_STREAMS_KEPT,
    ConnectionFailedError,
    ConnectionSettings,
    Http2Client,
)
from agent.kube.transport import Transport
from emulator.https import HttpsServer
from emulator.netproxy import LinkProxy
from emulator.pki import CertificateAuthority
from tests.agent.kube.h2_server import ScriptedH2Server
from tests.emulator.fronts.core import NAMESPACES, Core, eventually

Served = tuple[HttpsServer, Core, bytes]


@pytest.fixture
async def server() -> AsyncIterator[Served]:
    ca = CertificateAuthority.generate("test-ca")
    cert, key = ca.issue("kube-apiserver", ips=("127.0.0.1",), usage="server")
    api = Core()
    async with HttpsServer(api.server, cert, key, ca.cert_pem) as srv:
        yield srv, api, ca.cert_pem


def name_in(line: bytes) -> str:
    """The name of the object a watch event line carries."""
    return str(json.loads(line)["object"]["metadata"]["name"])


def transport_to(srv: HttpsServer, ca_pem: bytes) -> Transport:
    return Transport(ClientConfig(host=srv.url, ca_pem=ca_pem, qps=0, trust_env=False))


async def test_leaving_a_watch_early_ends_it_on_the_server(
    server: Served,
) -> None:
    srv, api, ca_pem = server
    transport = transport_to(srv, ca_pem)
    try:
        async with transport.stream("GET", NAMESPACES, params=api.watch_query()) as resp:
            await api.event("one")
            assert name_in(await anext(resp.lines())) == "one"
        await eventually(lambda: api.watchers() == 0)
        assert (await transport.request("GET", "/version")).status == 200
    finally:
        await transport.close()
    assert [r.protocol for r in srv.connection_log.records] == ["h2"]


async def test_an_abandoned_stream_does_not_exhaust_the_connection_window(
    server: Served,
) -> None:
    """httpcore grants every stream a 16 MiB window, as much as the whole connection's: data
    a server sends to a stream the client left, never acknowledged, would stall every other
    request on the connection for good."""
    srv, api, ca_pem = server
    transport = transport_to(srv, ca_pem)
    try:
        bulk = await api.bulk(20 * 1024 * 1024)
        async with transport.stream("GET", bulk, params={"watch": "1"}) as resp:
            await anext(resp.lines())
        await eventually(lambda: api.watchers() == 0)
        version = await transport.request("GET", "/version", timeout=5)
        assert version.status == 200
    finally:
        await transport.close()
    assert srv.connection_log.count() == 1


async def test_a_connection_remembers_a_bounded_number_of_closed_streams(
    server: Served,
) -> None:
    """h2 remembers how each closed stream ended; a long-lived connection does not keep all of
    them (h2's default kept 65,536, megabytes per connection)."""
    srv, _api, ca_pem = server
    context = ssl.create_default_context(cadata=ca_pem.decode())
    context.set_alpn_protocols(["h2"])
    client = Http2Client(srv.url, context, default_timeout=5)
    try:
        for _ in range(CLOSED_STREAMS_KEPT + 50):
            assert (await client.request("GET", "/version", headers={})).status == 200
        connection = client._connection
        assert connection is not None
        assert len(connection.h2._closed_streams) == CLOSED_STREAMS_KEPT
    finally:
        await client.aclose()
    assert srv.connection_log.count() == 1


async def test_requests_are_answered_while_quiet_watches_share_the_connection(
    server: Served,
) -> None:
    """With watches open and silent on the same connection, every request still gets its
    answer as soon as it arrives: none waits for a watch to receive something."""
    srv, api, ca_pem = server
    transport = transport_to(srv, ca_pem)
    try:
        async with contextlib.AsyncExitStack() as stack:
            readers = []
            for _ in range(3):
                watch = await stack.enter_async_context(
                    transport.stream("GET", NAMESPACES, params=api.watch_query())
                )
                # Each watch waits for its next event, as a reflector does.
                readers.append(asyncio.create_task(anext(watch.lines())))
            await eventually(lambda: api.watchers() == 3)
            for _ in range(5):
                answers = await asyncio.gather(
                    *(transport.request("GET", "/version", timeout=5) for _ in range(10))
                )
                assert {a.status for a in answers} == {200}
            for reader in readers:
                reader.cancel()
            await asyncio.gather(*readers, return_exceptions=True)
    finally:
        await transport.close()
    assert srv.connection_log.count() == 1


async def test_a_stream_read_timeout_fails_that_stream_only(
    server: Served,
) -> None:
    srv, api, ca_pem = server
    transport = transport_to(srv, ca_pem)
    try:
        async with transport.stream("GET", NAMESPACES, params=api.watch_query()) as other:
            async with transport.stream(
                "GET", NAMESPACES, params=api.watch_query(), read_timeout=0.2
            ) as quiet:
                with pytest.raises(WatchTimeoutError):
                    await anext(quiet.lines())
            await api.event("still-here")
            assert name_in(await anext(other.lines())) == "still-here"
    finally:
        await transport.close()


async def test_a_watch_on_a_closed_connection_ends_at_once(
    server: Served,
) -> None:
    """A certificate rotation retires the old connections; a watch still on one must end
    (and be restarted by its reflector), not wait forever for a reader that is gone."""
    srv, api, ca_pem = server
    transport = transport_to(srv, ca_pem)
    async with transport.stream("GET", NAMESPACES, params=api.watch_query()) as watch:
        waiting = asyncio.create_task(anext(watch.lines()))
        await eventually(lambda: api.watchers() == 1)
        await transport.close()
        with pytest.raises(TransportError):
            await asyncio.wait_for(waiting, 5)


async def test_after_goaway_requests_go_to_a_new_connection(
    server: Served,
) -> None:
    """A server that shuts down sends GOAWAY; once it listens again, the next request opens a
    new connection instead of failing on the old one."""
    srv, api, ca_pem = server
    transport = transport_to(srv, ca_pem)
    try:
        async with transport.stream("GET", NAMESPACES, params=api.watch_query()) as watch:
            waiting = asyncio.create_task(anext(watch.lines()))
            await eventually(lambda: api.watchers() == 1)
            await srv.stop()
            with pytest.raises((TransportError, StopAsyncIteration)):
                await asyncio.wait_for(waiting, 5)
        await srv.start()
        assert (await transport.request("GET", "/version", timeout=5)).status == 200
    finally:
        await transport.close()
    assert [r.protocol for r in srv.connection_log.records] == ["h2", "h2"]


async def test_large_responses_reach_the_agent_gzip_compressed(
    server: Served,
) -> None:
    """The agent asks for gzip, as client-go does; a large answer crosses the link compressed
    and arrives whole."""
    srv, api, ca_pem = server
    transport = transport_to(srv, ca_pem)
    size = 1024 * 1024
    path, answer = await api.sized(size)
    try:
        resp = await transport.request("GET", path)
    finally:
        await transport.close()
    assert len(resp.content) == size
    assert resp.content == answer
    assert [r.gzipped for r in srv.connection_log.records] == [1]


# --- the client's general capabilities, against a server the test drives ---------------------


@pytest.fixture
async def scripted() -> AsyncIterator[ScriptedH2Server]:
    async with ScriptedH2Server() as srv:
        yield srv


def client_of(srv: ScriptedH2Server, url: str = "", **settings: Any) -> Http2Client:
    return Http2Client(
        url or srv.url,
        srv.client_context(),
        default_timeout=5,
        settings=ConnectionSettings(**settings),
    )


async def test_a_duplex_stream_sends_its_body_as_the_server_window_allows_and_keeps_trailers(
    scripted: ScriptedH2Server,
) -> None:
    client = client_of(scripted)
    scripted.answer_headers = [("content-type", "application/grpc")]
    try:
        async with client.stream("POST", "/call", headers={}, duplex=True) as answer:
            assert answer.headers["content-type"] == "application/grpc"
            body = bytes(100 * 1024)
            sending = asyncio.create_task(answer.send(body))
            # The server grants 64 KiB (its initial window) and acknowledges nothing yet.
            await eventually(lambda: scripted.received[1] == 65535)
            assert not sending.done()
            scripted.acknowledge(1)
            await asyncio.wait_for(sending, 5)
            await eventually(lambda: scripted.received[1] == len(body))
            await answer.send(b"more")
            await eventually(lambda: scripted.received[1] == len(body) + 4)
            scripted.send(1, b"reply")
            scripted.end_with_trailers(1, [("grpc-status", "0"), ("grpc-message", "done")])
            assert await answer.read() == b"reply"
            assert answer.trailers == {"grpc-status": "0", "grpc-message": "done"}
            assert answer.finished
    finally:
        await client.aclose()


async def test_a_stream_is_acknowledged_only_as_its_reader_takes_the_data(
    scripted: ScriptedH2Server,
) -> None:
    """A reader that stops taking stops the sender: what the window allowed arrives, and no
    WINDOW_UPDATE goes back until the reader takes it."""
    window = 256 * 1024
    client = client_of(scripted, stream_window=window, connection_window=window)
    try:
        async with client.stream("GET", "/watch", headers={}) as answer:
            data = bytes(range(256)) * (3 * window // 256)
            sent = scripted.send(1, data)
            assert sent == window
            scripted.ping()
            await eventually(lambda: scripted.ping_acks == 1)
            assert scripted.send(1, data[sent:]) == 0  # the client has processed it, unread
            received = bytearray()
            chunks = answer.chunks()
            while len(received) < len(data):
                while len(received) < sent:
                    received += await anext(chunks)
                if sent < len(data):
                    await eventually(lambda: scripted.conn.local_flow_control_window(1) > 0)
                    sent += scripted.send(1, data[sent:])
            assert received == data
    finally:
        await client.aclose()


async def test_goaway_ends_duplex_streams_and_lets_others_finish(
    scripted: ScriptedH2Server,
) -> None:
    """A duplex stream has no end of its own the server could wait for: at GOAWAY it ends, so
    its owner reconnects; a plain stream the server still serves stays open."""
    client = client_of(scripted)
    try:
        async with (
            client.stream("GET", "/watch", headers={}) as watch,
            client.stream("POST", "/call", headers={}, duplex=True) as call,
        ):
            scripted.goaway(last_stream_id=3)
            with pytest.raises(ConnectionFailedError, match="GOAWAY"):
                await asyncio.wait_for(call.read(), 5)
            assert not watch.finished
    finally:
        await client.aclose()


async def test_keepalive_pings_when_idle_and_gives_up_on_a_dead_link(
    scripted: ScriptedH2Server,
) -> None:
    async with LinkProxy("127.0.0.1", scripted.port) as link:
        pings: list[int] = []
        client = client_of(
            scripted,
            f"https://{link.address}",
            keepalive_interval=0.2,
            keepalive_timeout=0.5,
            on_ping=lambda: pings.append(1),
        )
        try:
            async with client.stream("GET", "/watch", headers={}) as answer:
                # Acknowledged pings keep the connection: the idle stream stays open.
                await eventually(lambda: scripted.pings >= 3)
                assert not answer.finished
                link.blackhole = True  # packets vanish: no ACK will come
                loop = asyncio.get_running_loop()
                started = loop.time()
                with pytest.raises(ConnectionFailedError, match="keepalive"):
                    await asyncio.wait_for(answer.read(), 5)
                assert loop.time() - started < 0.2 + 0.5 + 0.5
                assert len(pings) >= 4
        finally:
            await client.aclose()


async def test_request_paths_stay_out_of_the_header_compression_table(server: Served) -> None:
    """The table keeps the headers every request repeats, not one entry per path (searched
    entry by entry at every header); the server reads the requests the same."""
    srv, _api, ca_pem = server
    transport = transport_to(srv, ca_pem)
    try:
        for name in ("a", "b", "c"):
            with pytest.raises(NotFoundError):
                await transport.request("GET", f"{NAMESPACES}/{name}")
        engine: Any = transport._connections.slot.engine
        table = engine.client._connection.h2.encoder.header_table
        names = [name for name, _ in table.dynamic_entries]
        assert b":path" not in names
        assert b"accept" in names
        # Literal octets, not Huffman-coded: the path is readable in the header block.
        block = engine.client._connection.h2.encoder.encode([(b":path", b"/readable")])
        assert b"/readable" in block
    finally:
        await transport.close()
