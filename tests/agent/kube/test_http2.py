"""The agent's HTTP/2 (agent/kube/http2.py) through its transport, against the emulator's HTTP/2
front: one connection for requests and watches, abandoned streams reset, quiet watches never
in the way, read timeouts per stream, GOAWAY, gzip."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import pytest

from agent.kube.config import ClientConfig
from agent.kube.errors import TransportError, WatchTimeoutError
from agent.kube.transport import Transport
from emulator.https import HttpsServer
from emulator.pki import CertificateAuthority
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
