"""The gRPC call under the tunnel, against the double: metadata, refusals, keepalive asked for,
a lost connection, messages whole when a sender is cancelled."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from agent.tunnel import packets
from agent.tunnel.grpc_call import GrpcCall, GrpcError
from emulator.https import server_ssl_context
from emulator.konnectivity import ProxyServerDouble
from emulator.konnectivity.agent_server import AgentCall, AgentServer
from emulator.netproxy import LinkProxy
from emulator.pki import CertificateAuthority
from tests import polling


def client_context(ca: CertificateAuthority) -> ssl.SSLContext:
    return ssl.create_default_context(cadata=ca.cert_pem.decode())


async def open_call(
    ca: CertificateAuthority,
    address: str,
    *,
    metadata: list[tuple[str, str]] | None = None,
    **kw: Any,
) -> GrpcCall:
    host, _, port = address.rpartition(":")
    return await GrpcCall.open(
        host=host,
        port=int(port),
        ssl_context=client_context(ca),
        server_hostname="localhost",
        path="/AgentService/Connect",
        metadata=metadata or [("agentID", "a1"), ("agentIdentifiers", "host=x.invalid")],
        user_agent="test",
        **kw,
    )


async def test_response_headers_carry_server_id_and_count() -> None:
    ca = CertificateAuthority.generate("ca")
    double = await ProxyServerDouble(ca, server_id="s-1", server_count=3).start()
    try:
        call = await open_call(ca, double.agent_address)
        assert call.metadata["serverid"] == "s-1"
        assert call.metadata["servercount"] == "3"
        await polling.eventually(lambda: double.hosts() == ["x.invalid"], what="registered")
        await call.close()
    finally:
        await double.stop()


async def test_a_refused_call_says_why() -> None:
    ca = CertificateAuthority.generate("ca")

    async def deny(metadata: dict[str, list[str]]) -> str | None:
        return (
            "Failed to validate authentication token" if "authorization" not in metadata else None
        )

    double = await ProxyServerDouble(ca, authenticate=deny).start()
    try:
        with pytest.raises(GrpcError, match="Failed to validate authentication token") as caught:
            await open_call(ca, double.agent_address)
        assert caught.value.status == "2"
        call = await open_call(
            ca,
            double.agent_address,
            metadata=[("agentID", "a1"), ("Authorization", "Bearer t")],
        )
        await call.close()
        with pytest.raises(GrpcError, match="expected one agent ID"):
            await open_call(ca, double.agent_address, metadata=[("agentIdentifiers", "host=x")])
    finally:
        await double.stop()


async def test_the_call_pings_when_idle_and_a_broken_link_ends_it_with_a_grpc_error() -> None:
    """The keepalive itself is agent.kube.http2's (tests/agent/kube/test_http2.py): here, that
    the call asks for it, counts its pings, and reports a lost connection as GrpcError."""
    ca = CertificateAuthority.generate("ca")
    double = await ProxyServerDouble(ca).start()
    host, _, port = double.agent_address.rpartition(":")
    try:
        async with LinkProxy(host, int(port)) as link:
            pings: list[int] = []
            call = await open_call(
                ca,
                link.address,
                keepalive_interval=0.2,
                keepalive_timeout=0.5,
                on_ping=lambda: pings.append(1),
            )
            await polling.eventually(lambda: double.agents.pings_received >= 2, what="pings")
            assert len(pings) >= 2
            assert not call.closed
            link.reset()
            with pytest.raises(GrpcError, match="connection was lost"):
                await asyncio.wait_for(call.recv(), 5)
            await call.close()
    finally:
        await double.stop()


async def test_closing_the_call_ends_a_recv_waiting_on_it() -> None:
    """The tunnel stops a session by closing its call while the session waits in `recv`."""
    ca = CertificateAuthority.generate("ca")
    double = await ProxyServerDouble(ca).start()
    try:
        call = await open_call(ca, double.agent_address)
        waiting = asyncio.create_task(call.recv())
        await polling.eventually(
            lambda: waiting.get_coro().cr_await is not None,  # type: ignore[union-attr]
            what="recv waiting",
        )
        await call.close()
        with pytest.raises(GrpcError):
            await asyncio.wait_for(waiting, 5)
    finally:
        await double.stop()


async def test_a_send_cancelled_while_it_waits_for_window_leaves_the_stream_framed() -> None:
    """Every relayed connection shares the call: a relay that goes away while its DATA waits
    for the server's window must not leave part of a message on the stream (the server would
    wait forever for the rest, or read the next message's bytes as a length)."""
    ca = CertificateAuthority.generate("ca")
    cert, key = ca.issue("konnectivity-server", dns_names=["localhost"], usage="server")
    calls: asyncio.Queue[AgentCall] = asyncio.Queue()
    finished = asyncio.Event()

    async def hold(call: AgentCall) -> None:
        await calls.put(call)
        await finished.wait()

    server = await _agent_server(cert, key, hold)
    try:
        call = await open_call(ca, f"127.0.0.1:{server.port}")
        held = await asyncio.wait_for(calls.get(), 5)
        # Nothing read yet: the server's 65,535-byte window takes three of these messages and
        # most of the fourth, whose send then waits for window.
        payload = [bytes([n]) * 20_000 for n in range(1, 5)]
        for n, data in enumerate(payload[:3], 1):
            await asyncio.wait_for(call.send(_data_packet(n, data)), 5)
        cut = asyncio.create_task(call.send(_data_packet(4, payload[3])))
        await polling.eventually(
            lambda: (call.send_window, cut.done()),
            until=lambda v: v == (0, False),
            what="the send waits for window",
        )
        queued = asyncio.create_task(call.send(_data_packet(5, b"withdrawn")))
        await polling.eventually(
            lambda: queued.get_coro().cr_await is not None,  # type: ignore[union-attr]
            what="the next one waiting",
        )
        cut.cancel()
        queued.cancel()
        after = asyncio.create_task(call.send(_data_packet(6, b"after the cancel")))
        received = [await asyncio.wait_for(held.recv(), 5) for _ in range(5)]
        await asyncio.wait_for(after, 5)
        assert [(p.get("connectID"), p.get("data")) for p in received if p is not None] == [
            (1, payload[0]),
            (2, payload[1]),
            (3, payload[2]),
            (4, payload[3]),  # begun before the cancel: sent whole
            (6, b"after the cancel"),  # the queued one was withdrawn; the stream goes on
        ]
        assert cut.cancelled()
        assert queued.cancelled()
        await call.close()
    finally:
        finished.set()
        await server.stop()


def _data_packet(connect_id: int, data: bytes) -> bytes:
    return packets.encode(packets.data(connect_id, data))


async def _agent_server(
    cert: bytes, key: bytes, on_call: Callable[[AgentCall], Awaitable[None]]
) -> AgentServer:
    """One proxy-server instance's agent endpoint, started, handing each call to `on_call`."""
    server = AgentServer(
        server_id="s-1",
        server_count=1,
        ssl_context=server_ssl_context(cert, key, None),
        on_call=on_call,
    )
    await server.start()
    return server


async def test_closing_the_call_fails_the_send_being_written() -> None:
    """A send whose message the writer has begun, stuck on the server's window, ends with a
    GrpcError when the call closes (a relay's window waits on it), instead of never."""
    ca = CertificateAuthority.generate("ca")
    cert, key = ca.issue("konnectivity-server", dns_names=["localhost"], usage="server")
    finished = asyncio.Event()

    async def hold(call: AgentCall) -> None:
        await finished.wait()  # never reads

    server = await _agent_server(cert, key, hold)
    try:
        call = await open_call(ca, f"127.0.0.1:{server.port}")
        stuck = call.submit(_data_packet(1, bytes(100_000)))  # more than the 65,535 window
        await polling.eventually(lambda: call.send_window, until=lambda v: v == 0)
        queued = call.submit(_data_packet(2, b"behind it"))
        await call.close()
        for written in (stuck, queued):
            with pytest.raises(GrpcError, match="the call is closed"):
                await asyncio.wait_for(written, 5)
    finally:
        finished.set()
        await server.stop()
