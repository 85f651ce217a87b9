"""The whole agent in tunnel mode: registration publishes the route, the proxy and the tunnel CA,
and a client built only from what the control plane holds (the Cluster, its Secret's caBundle,
the impersonator Secret's token), as karmada-aggregated-apiserver builds it, reaches the member.
"""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import httpx
import pytest

from agent.kube.resources import SECRETS
from agent.tunnel.route import TunnelPublication
from emulator.emulator import run_emulator
from tests import polling
from tests.agent.tunnel.harness import HUB_KINDS, control_plane_client, open_hub
from tests.e2e.support import CLUSTERS, client_for, running_agent

CLUSTER = "edge-7"


async def bind(admin: httpx.AsyncClient, role: str, subject: dict[str, str]) -> None:
    """A ClusterRoleBinding of `role` to `subject` on the member."""
    response = await admin.post(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        json={
            "metadata": {"name": f"{role}-{subject['name']}".replace(":", "-")},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [subject],
        },
    )
    response.raise_for_status()


@pytest.mark.parametrize("kind", HUB_KINDS)
async def test_agent_registers_the_route_and_the_control_plane_reaches_the_member(
    kind: str, tmp_path: Path
) -> None:
    async with (
        run_emulator("karmada", name="karmada") as cp,
        run_emulator("member", name=CLUSTER) as member,
        open_hub(kind, cluster_ca_pem=cp.ca_pem) as hub,
    ):
        # The agent's control-plane credential is a client certificate: it also authenticates
        # the agent to the proxy-server (mTLS against the control plane's CA).
        karmada_kc = cp.write_kubeconfig(
            tmp_path / "karmada", user=f"system:karmada:agent:{CLUSTER}", groups=["system:masters"]
        )
        member_kc = member.write_kubeconfig(tmp_path / "member")
        ca_file = tmp_path / "proxy-server-ca.crt"
        ca_file.write_bytes(hub.server_ca.cert_pem)
        # What upstream's unified-auth ships to members: karmada-impersonator may impersonate.
        admin = member.client()
        await admin.post(
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            json={
                "metadata": {"name": "karmada-impersonator"},
                "rules": [
                    {"apiGroups": [""], "resources": ["users", "groups"], "verbs": ["impersonate"]}
                ],
            },
        )
        await bind(
            admin,
            "karmada-impersonator",
            {
                "kind": "ServiceAccount",
                "name": "karmada-impersonator",
                "namespace": "karmada-cluster",
            },
        )
        async with running_agent(
            karmada_kc,
            member_kc,
            CLUSTER,
            f"--tunnel-server-address={hub.agent_address}",
            f"--tunnel-server-ca-file={ca_file}",
            "--tunnel-server-name=localhost",
            f"--tunnel-proxy-url={hub.connect_url}",
        ) as (_, agent):
            tunnel = await polling.eventually(lambda: agent.tunnel, what="the tunnel built")
            await asyncio.wait_for(tunnel.connected.wait(), 20)
            karmada = await client_for(cp.write_kubeconfig(tmp_path / "cp-admin"))
            cluster = await karmada.get(CLUSTERS, CLUSTER)
            spec = cluster["spec"]
            assert spec["apiEndpoint"] == f"https://{CLUSTER}.karmada-tunnel.invalid:443"
            assert spec["proxyURL"] == hub.connect_url
            assert spec["insecureSkipTLSVerification"] is False
            assert spec["secretRef"] == {"namespace": "karmada-cluster", "name": CLUSTER}
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
            from_control_plane = TunnelPublication(
                spec["apiEndpoint"], spec["proxyURL"], secret["data"]["caBundle"]
            )
            async with control_plane_client(
                from_control_plane, token=token, impersonate="system:admin"
            ) as client:
                await bind(
                    admin,
                    "cluster-admin",
                    {
                        "kind": "User",
                        "name": "system:admin",
                        "apiGroup": "rbac.authorization.k8s.io",
                    },
                )
                response = await polling.eventually(
                    lambda: client.get("/api/v1/namespaces"),
                    until=lambda r: r.status_code == 200,
                    what="the member's namespaces through the tunnel",
                )
                assert "kube-system" in {i["metadata"]["name"] for i in response.json()["items"]}
            async with control_plane_client(
                from_control_plane, token=token, impersonate="mallory"
            ) as client:
                assert (await client.get("/api/v1/namespaces")).status_code == 403
            await karmada.close()
