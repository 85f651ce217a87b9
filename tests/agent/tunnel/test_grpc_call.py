"""The gRPC call under the tunnel, against the double: refusals, keepalive, a dead link."""

from __future__ import annotations

import asyncio
import ssl

import pytest

from agent.tunnel.grpc_call import GrpcCall, GrpcError
from emulator.konnectivity import ProxyServerDouble
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
    **kw: float,
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


async def test_keepalive_pings_when_idle_and_gives_up_on_a_dead_link() -> None:
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
            assert not call.closed
            link.blackhole = True  # packets vanish: no ACK will come
            loop = asyncio.get_running_loop()
            started = loop.time()
            with pytest.raises(GrpcError, match="keepalive"):
                await asyncio.wait_for(call.recv(), 5)
            assert loop.time() - started < 0.2 + 0.5 + 0.5
            assert len(pings) >= 3
            await call.close()
    finally:
        await double.stop()
