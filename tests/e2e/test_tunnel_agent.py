"""The whole agent in tunnel mode: registration publishes the route, the proxy and the tunnel CA,
and a client built only from what the control plane holds (the Cluster, its Secret's caBundle,
the impersonator Secret's token), as karmada-aggregated-apiserver builds it, reaches the member.

Twice: with the control-plane emulator serving Clusters itself, and behind its aggregation layer
with cluster.karmada.io aggregated to a second Karmada emulator standing in for
karmada-aggregated-apiserver (no upstream binaries needed; tests/e2e/test_tunnel_aggregated.py
runs the real one): there the agent's registration lands in the aggregated server, and the
control plane's controllers read the Cluster there. Either way the impersonator's RBAC reaches
the member as unified-auth's Works, applied by the agent: alice allowed, mallory Forbidden.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.kube.resources import SECRETS
from agent.tunnel.route import TunnelPublication
from emulator.emulator import Emulator, run_emulator
from emulator.upstream import KarmadaAggregatedApiserver
from tests import polling
from tests.agent.tunnel.harness import HUB_KINDS, control_plane_client, open_hub
from tests.e2e.cluster_proxy import grant, ship_impersonation, tunnelled_agent
from tests.e2e.support import CLUSTERS, client_for
from tests.emulator.aggregation.harness import aggregate_clusters, aggregated

CLUSTER = "edge-7"
CLUSTERS_GR = ("cluster.karmada.io", "clusters")


@contextlib.asynccontextmanager
async def control_plane(where: str) -> AsyncIterator[tuple[Emulator, Emulator | None]]:
    """The control plane, and the aggregated server Clusters live in (None: the control plane)."""
    if where == "served":
        async with run_emulator("karmada", name="karmada") as cp:
            yield cp, None
        return
    service = KarmadaAggregatedApiserver.SERVICE_DNS_NAME
    async with aggregated("karmada", "karmada", widgets=False, service=service) as bed:
        await aggregate_clusters(bed)
        yield bed.front, bed.backend


@pytest.mark.timeout(120)
@pytest.mark.parametrize("where", ["served", "aggregated"])
@pytest.mark.parametrize("kind", HUB_KINDS)
async def test_agent_registers_the_route_and_the_control_plane_reaches_the_member(
    kind: str, where: str, tmp_path: Path
) -> None:
    async with (
        control_plane(where) as (cp, clusters_server),
        run_emulator("member", name=CLUSTER) as member,
        open_hub(kind, cluster_ca_pem=cp.ca_pem) as hub,
    ):
        member_kc = member.write_kubeconfig(tmp_path / "member")
        async with tunnelled_agent(cp, member_kc, hub, tmp_path, CLUSTER) as tunnel:
            karmada = await client_for(cp.write_kubeconfig(tmp_path / "cp-admin"))
            cluster = await polling.eventually(
                lambda: karmada.get(CLUSTERS, CLUSTER), retry_on=(Exception,), what="registered"
            )
            spec = cluster["spec"]
            assert spec["apiEndpoint"] == f"https://{CLUSTER}.karmada-tunnel.invalid:443"
            assert spec["proxyURL"] == hub.connect_url
            assert spec["insecureSkipTLSVerification"] is False
            assert spec["secretRef"] == {"namespace": "karmada-cluster", "name": CLUSTER}
            if clusters_server is not None:
                # Registered through the aggregation layer: the Cluster is the aggregated
                # server's, and the control plane's controllers read it there.
                stored = clusters_server.api.storage.get(CLUSTERS_GR, "", CLUSTER)
                assert stored is not None
                assert stored["metadata"]["uid"] == cluster["metadata"]["uid"]
                assert cp.api.storage.get(CLUSTERS_GR, "", CLUSTER) is None
            secret = await karmada.get(SECRETS, CLUSTER, namespace="karmada-cluster")
            ca_secret = await (await client_for(member_kc)).get(
                SECRETS, "karmada-agent-tunnel-ca", namespace="karmada-system"
            )
            assert secret["data"]["caBundle"] == ca_secret["data"]["tls.crt"]
            impersonator = await karmada.get(
                SECRETS, f"{CLUSTER}-impersonator", namespace="karmada-cluster"
            )
            token = base64.b64decode(impersonator["data"]["token"]).decode()
            assert tunnel.settings.route.api_endpoint == spec["apiEndpoint"]
            await karmada.close()
            async with cp.client() as front, member.client() as admin:
                # The execution namespace is there once the Cluster was read (here or there).
                await ship_impersonation(front, admin, CLUSTER)
                view = {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list"]}
                await grant(admin, "alice-view", [view], ["alice"])
            from_control_plane = TunnelPublication(
                spec["apiEndpoint"], spec["proxyURL"], secret["data"]["caBundle"]
            )
            async with control_plane_client(
                from_control_plane, token=token, impersonate="alice"
            ) as client:
                allowed = await client.get("/api/v1/namespaces")
            assert allowed.status_code == 200, allowed.text
            assert "kube-system" in {i["metadata"]["name"] for i in allowed.json()["items"]}
            async with control_plane_client(
                from_control_plane, token=token, impersonate="mallory"
            ) as client:
                denied = await client.get("/api/v1/namespaces")
            assert denied.status_code == 403
            assert 'User "mallory" cannot list resource "namespaces"' in denied.json()["message"]
