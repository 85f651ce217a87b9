"""The agent in tunnel mode behind the control plane's aggregation layer, without the upstream
binaries: cluster.karmada.io is aggregated to a second Karmada emulator standing in for
karmada-aggregated-apiserver, the proxy-server is the double (and the stock one when present).

The agent's registration reaches the aggregated server (its Cluster is there, not in the
control plane's storage), the control plane's controllers read it there (the execution
namespace), unified-auth's Works reach the member through the agent, and a client built only
from what the control plane serves (the Cluster, its Secret's caBundle, the impersonator
token), as karmada-aggregated-apiserver builds it, reaches the member as the impersonator:
alice allowed, mallory Forbidden.
"""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import pytest

from agent.tunnel.route import TunnelPublication
from emulator.emulator import run_emulator
from emulator.upstream import KarmadaAggregatedApiserver
from tests import polling
from tests.agent.tunnel.harness import HUB_KINDS, control_plane_client, open_hub
from tests.e2e.cluster_proxy import CLUSTER_API, PROXY_RULE, grant, ship_impersonation
from tests.e2e.support import running_agent
from tests.emulator.aggregation.harness import aggregate_clusters, aggregated

CLUSTER = "edge-9"
SECRETS = "/api/v1/namespaces/karmada-cluster/secrets"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", HUB_KINDS)
async def test_the_agent_registers_through_the_aggregation_layer(kind: str, tmp_path: Path) -> None:
    service = KarmadaAggregatedApiserver.SERVICE_DNS_NAME
    async with (
        aggregated("karmada", "karmada", widgets=False, service=service) as bed,
        open_hub(kind, cluster_ca_pem=bed.front.ca_pem) as hub,
        run_emulator("member", name=CLUSTER) as member,
    ):
        await aggregate_clusters(bed)
        async with bed.front.client() as front:
            rule = {**PROXY_RULE, "resourceNames": [CLUSTER]}
            await grant(front, "edge-proxy", [rule], ["alice", "mallory"])
        ca_file = tmp_path / "proxy-server-ca.crt"
        ca_file.write_bytes(hub.server_ca.cert_pem)
        agent_kc = bed.front.write_kubeconfig(
            tmp_path / "agent", user=f"system:karmada:agent:{CLUSTER}", groups=["system:masters"]
        )
        async with running_agent(
            agent_kc,
            member.write_kubeconfig(tmp_path / "member"),
            CLUSTER,
            f"--tunnel-server-address={hub.agent_address}",
            f"--tunnel-server-ca-file={ca_file}",
            "--tunnel-server-name=localhost",
            f"--tunnel-proxy-url={hub.connect_url}",
        ) as (_, agent):
            tunnel = await polling.eventually(lambda: agent.tunnel, what="the tunnel built")
            await asyncio.wait_for(tunnel.connected.wait(), 20)
            stored = await polling.eventually(
                lambda: bed.backend.api.storage.get(
                    ("cluster.karmada.io", "clusters"), "", CLUSTER
                ),
                timeout=20,
                what="the agent's Cluster in the aggregated server",
            )
            assert stored["spec"]["apiEndpoint"] == tunnel.settings.route.api_endpoint
            assert (
                bed.front.api.storage.get(("cluster.karmada.io", "clusters"), "", CLUSTER) is None
            )
            async with bed.front.client() as front, member.client() as admin:
                await polling.eventually(
                    lambda: front.get(f"/api/v1/namespaces/karmada-es-{CLUSTER}"),
                    until=lambda r: r.status_code == 200,
                    what="the execution namespace, from a Cluster read through the API",
                )
                await ship_impersonation(front, admin, CLUSTER)
                view = {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list"]}
                await grant(admin, "alice-view", [view], ["alice"])
                cluster = (await front.get(f"{CLUSTER_API}/{CLUSTER}")).json()
                secret = (await front.get(f"{SECRETS}/{CLUSTER}")).json()
                impersonator = (await front.get(f"{SECRETS}/{CLUSTER}-impersonator")).json()
            token = base64.b64decode(impersonator["data"]["token"]).decode()
            route = TunnelPublication(
                cluster["spec"]["apiEndpoint"],
                cluster["spec"]["proxyURL"],
                secret["data"]["caBundle"],
            )
            async with control_plane_client(route, token=token, impersonate="alice") as client:
                allowed = await client.get("/api/v1/namespaces")
            assert allowed.status_code == 200, allowed.text
            assert "kube-system" in {i["metadata"]["name"] for i in allowed.json()["items"]}
            async with control_plane_client(route, token=token, impersonate="mallory") as client:
                denied = await client.get("/api/v1/namespaces")
            assert denied.status_code == 403
            assert 'User "mallory" cannot list resource "namespaces"' in denied.json()["message"]
