"""One relayed connection, driven packet by packet: TLS for the route, the member behind it."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ssl
from collections.abc import Callable
from pathlib import Path

from cryptography import x509

from agent.kube.client import KubeClient
from agent.kube.config import load_kubeconfig
from agent.kube.resources import SECRETS
from agent.kube.transport import Transport
from agent.tunnel import packets
from agent.tunnel.member import MemberEndpoint
from agent.tunnel.packets import Packet, PacketType
from agent.tunnel.relay import CALL_WINDOW_BYTES, Relay
from agent.tunnel.route import DialPolicy, route_for
from agent.tunnel.route_ca import RouteCA, issue_serving
from agent.tunnel.window import SendWindow
from emulator.emulator import Emulator
from tests import polling


class Client:
    """The control plane's TLS session, over packets instead of a socket."""

    def __init__(self, ca_pem: bytes, host: str) -> None:
        ctx = ssl.create_default_context(cadata=ca_pem.decode())
        ctx.set_alpn_protocols(["http/1.1"])
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = ctx.wrap_bio(self.incoming, self.outgoing, server_hostname=host)


async def test_a_request_in_the_same_packet_as_the_clients_finished_is_served(
    member_emulator: Emulator, tmp_path: Path
) -> None:
    config = await load_kubeconfig(str(member_emulator.write_kubeconfig(tmp_path / "k")))
    member_client = KubeClient(Transport(config))
    route = route_for("member1")
    route_ca = RouteCA(
        member_client, namespace="karmada-system", cluster="member1", host=route.host
    )
    await route_ca.load()
    member = MemberEndpoint(config)
    reader, writer = await member.dial()
    sent: list[Packet] = []
    relay = Relay(
        1,
        reader,
        writer,
        member=member,
        server_context=route_ca.server_context(),
        submit=_collect(sent),
        call_window=SendWindow(CALL_WINDOW_BYTES),
    )
    running = asyncio.create_task(relay.run())
    client = Client(route_ca.ca_pem, route.host)

    async def exchange() -> None:
        """Move the client's bytes to the relay, then the relay's DATA back to the client."""
        await relay.deliver(client.outgoing.read())
        await asyncio.sleep(0)

    with contextlib.suppress(ssl.SSLWantReadError):
        client.tls.do_handshake()
    await exchange()
    await polling.eventually(lambda: sent, what="the server's handshake")
    for packet in _drain(sent):
        client.incoming.write(packet.data)
    client.tls.do_handshake()  # completes: the client's Finished is now in `outgoing`
    request = (
        f"GET /api/v1/namespaces/default HTTP/1.1\r\nHost: {route.host}\r\n"
        f"Authorization: Bearer {member_emulator.admin_token}\r\nConnection: close\r\n\r\n"
    )
    client.tls.write(request.encode())
    await exchange()  # Finished and the request in ONE packet

    response = b""

    async def answered() -> bool:
        nonlocal response
        for packet in _drain(sent):
            if packet.type is PacketType.DATA:
                client.incoming.write(packet.data)
        try:
            while chunk := client.tls.read(65536):
                response += chunk
        except (ssl.SSLWantReadError, ssl.SSLZeroReturnError):
            pass
        return b'"name":"default"' in response

    await polling.eventually(answered, timeout=10, what="the member's answer")
    assert response.startswith(b"HTTP/1.1 200")
    relay.end_of_input()
    await asyncio.wait_for(running, 5)
    assert packets.close_response(1) in sent
    await member_client.close()


def _collect(sent: list[Packet]) -> Callable[[Packet], asyncio.Future[None]]:
    """A stream that takes every packet at once."""

    def submit(packet: Packet) -> asyncio.Future[None]:
        sent.append(packet)
        written: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        written.set_result(None)
        return written

    return submit


def _drain(sent: list[Packet]) -> list[Packet]:
    taken = [p for p in sent if p.type is PacketType.DATA]
    sent[:] = [p for p in sent if p.type is not PacketType.DATA]
    return taken


def test_dial_policy_allows_only_the_route() -> None:
    refused: list[int] = []
    policy = DialPolicy(route_for("edge-7"), on_refused=lambda: refused.append(1))
    assert policy.refusal("tcp", "edge-7.karmada-tunnel.invalid:443") is None
    assert policy.refusal("tcp", "EDGE-7.karmada-tunnel.invalid.:443") is None
    for protocol, address in (
        ("tcp", "edge-7.karmada-tunnel.invalid:6443"),
        ("tcp", "10.0.0.1:443"),
        ("udp", "edge-7.karmada-tunnel.invalid:443"),
        ("tcp", "edge-8.karmada-tunnel.invalid:443"),
        ("tcp", "10.0.0.1:443"),
    ):
        assert "dial refused" in (policy.refusal(protocol, address) or "")
    assert len(refused) == policy.refused == 5


async def test_replicas_share_one_tunnel_ca_kept_in_a_member_secret(
    member_emulator: Emulator, tmp_path: Path
) -> None:
    config = await load_kubeconfig(str(member_emulator.write_kubeconfig(tmp_path / "k")))
    client = KubeClient(Transport(config))
    host = route_for("member1").host
    first = RouteCA(client, namespace="karmada-system", cluster="member1", host=host)
    second = RouteCA(client, namespace="karmada-system", cluster="member1", host=host)
    await asyncio.gather(first.load(), second.load())
    assert first.ca_pem == second.ca_pem
    secret = await client.get(SECRETS, "karmada-agent-tunnel-ca", namespace="karmada-system")
    assert secret["type"] == "kubernetes.io/tls"
    assert base64.b64decode(secret["data"]["tls.crt"]) == first.ca_pem
    assert base64.b64decode(first.ca_bundle) == first.ca_pem
    assert b"PRIVATE KEY" not in base64.b64decode(first.ca_bundle)
    # The serving certificate names the route and chains to the published CA.
    serving = x509.load_pem_x509_certificate(
        issue_serving(first.ca_pem, base64.b64decode(secret["data"]["tls.key"]), host).cert_pem
    )
    names = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == [host]
    ca = x509.load_pem_x509_certificate(first.ca_pem)
    serving.verify_directly_issued_by(ca)
    # A restart reads the same CA back.
    third = RouteCA(client, namespace="karmada-system", cluster="member1", host=host)
    await third.load()
    assert third.ca_pem == first.ca_pem
    await client.close()
