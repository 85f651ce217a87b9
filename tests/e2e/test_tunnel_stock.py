"""The tunnel against the STOCK ANP proxy-server ($KARMADA_UPSTREAM_BIN/proxy-server).

The control-plane client does what karmada-aggregated-apiserver does: CONNECT the Cluster's
apiEndpoint host:port at its proxyURL (the stock server's unix-socket CONNECT frontend, relayed to
TCP), TLS verified against the Cluster Secret's caBundle only, the impersonator's bearer token and
Impersonate-User.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from emulator import upstream
from emulator.emulator import Emulator, run_emulator
from emulator.konnectivity.stock import StockProxyServer
from emulator.pki import CertificateAuthority
from tests.agent.tunnel.harness import AGENT_GROUPS, agent_tunnel, control_plane_client

pytestmark = pytest.mark.skipif(
    upstream.binary("proxy-server") is None, reason=upstream.missing_reason("proxy-server")
)


@pytest_asyncio.fixture
async def karmada() -> AsyncIterator[Emulator]:
    async with run_emulator("karmada", name="karmada") as emu:
        yield emu


@pytest_asyncio.fixture
async def stock(karmada: Emulator) -> AsyncIterator[tuple[StockProxyServer, CertificateAuthority]]:
    server_ca = CertificateAuthority.generate("konnectivity-ca")
    with tempfile.TemporaryDirectory(prefix="proxy-server-") as tmp:
        server = StockProxyServer(server_ca, cluster_ca_pem=karmada.ca_pem, workdir=Path(tmp))
        async with server:
            yield server, server_ca


async def test_stock_proxy_server_carries_the_control_plane_to_the_member(
    karmada: Emulator,
    stock: tuple[StockProxyServer, CertificateAuthority],
    member_emulator: Emulator,
) -> None:
    server, server_ca = stock
    async with agent_tunnel(
        cluster="member1",
        member_emulator=member_emulator,
        karmada_ca_pem=karmada.ca_pem,
        client_cert=karmada.issue_client_cert("system:karmada:agent:member1", AGENT_GROUPS),
        server_address=server.agent_address,
        proxy_url=server.connect_url,
        server_ca_pem=server_ca.cert_pem,
    ) as bed:
        await asyncio.wait_for(bed.tunnel.connected.wait(), 10)
        async with control_plane_client(
            bed.publication, token=member_emulator.admin_token
        ) as client:
            response = await client.get("/api/v1/namespaces")
        assert response.status_code == 200, response.text + server.log()
        names = {item["metadata"]["name"] for item in response.json()["items"]}
        assert "kube-system" in names
