"""The tunnel end to end against the proxy-server test double (emulator.konnectivity)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from emulator.emulator import Emulator, run_emulator
from emulator.konnectivity import ProxyServerDouble
from emulator.pki import CertificateAuthority
from tests import polling
from tests.agent.tunnel.harness import AGENT_GROUPS, agent_tunnel, control_plane_client


@pytest_asyncio.fixture
async def hub() -> AsyncIterator[tuple[Emulator, CertificateAuthority]]:
    """The control plane's emulator (its CA signs agent certificates) and the proxy-server's CA."""
    async with run_emulator("karmada", name="karmada") as karmada:
        yield karmada, CertificateAuthority.generate("konnectivity-ca")


async def test_control_plane_reaches_the_member_through_the_double(
    hub: tuple[Emulator, CertificateAuthority], member_emulator: Emulator
) -> None:
    karmada, server_ca = hub
    double = await ProxyServerDouble(server_ca, cluster_ca_pem=karmada.ca_pem).start()
    try:
        async with agent_tunnel(
            cluster="member1",
            member_emulator=member_emulator,
            karmada_ca_pem=karmada.ca_pem,
            client_cert=karmada.issue_client_cert("system:karmada:agent:member1", AGENT_GROUPS),
            server_address=double.agent_address,
            proxy_url=double.connect_url,
            server_ca_pem=server_ca.cert_pem,
        ) as bed:
            await polling.eventually(lambda: double.hosts(), what="the agent registered")
            assert double.hosts() == ["member1.karmada-tunnel.invalid"]
            async with control_plane_client(
                bed.publication, token=member_emulator.admin_token
            ) as client:
                response = await client.get("/api/v1/namespaces")
            assert response.status_code == 200, response.text
            names = {item["metadata"]["name"] for item in response.json()["items"]}
            assert "kube-system" in names
            assert double.dials == ["member1.karmada-tunnel.invalid:443"]
    finally:
        await double.stop()
