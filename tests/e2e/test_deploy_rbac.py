"""The agent runs under exactly the RBAC that deploy/ grants, on both sides (issue 5).

Rendered with the real kubectl's kustomize and applied with `kubectl apply --server-side`;
the member credential is the token of the ServiceAccount that deploy/base creates, the
control-plane credential a client certificate for system:karmada:agent:member1.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent.app import run
from agent.kube.errors import ForbiddenError, NotFoundError
from agent.kube.resources import CONFIGMAPS, LEASES, NAMESPACES, SECRETS
from agent.resources import (
    CLUSTERS,
    RESOURCE_INTERPRETER_CUSTOMIZATIONS,
    RESOURCE_INTERPRETER_WEBHOOK_CONFIGURATIONS,
    WORKS,
)
from emulator.emulator import run_emulator
from emulator.kubeconfig import build_kubeconfig, write_kubeconfig
from emulator.works import control_plane_work, deployment

from .support import (
    DEPLOY,
    agent_options,
    client_for,
    cluster_ready,
    eventually,
    kubectl,
    service_account_token,
    work_applied,
)

CLUSTER = "member1"
ES = f"karmada-es-{CLUSTER}"


def exported_service(name: str) -> list[dict[str, object]]:
    labels = {"app": name}
    return [
        deployment(name),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": labels, "ports": [{"port": 80}]},
        },
        {
            "apiVersion": "multicluster.x-k8s.io/v1alpha1",
            "kind": "ServiceExport",
            "metadata": {"name": name, "namespace": "default"},
        },
    ]


@pytest.mark.timeout(120)
async def test_register_apply_status_delete_under_deploy_rbac(tmp_path: Path) -> None:
    async with (
        run_emulator(profile="karmada", name="karmada") as cp,
        run_emulator(profile="member", name=CLUSTER) as member,
    ):
        cp_admin = cp.write_kubeconfig(tmp_path / "cp-admin")
        member_admin = member.write_kubeconfig(tmp_path / "member-admin")

        # Both sides take every rendered object, schema-validated where the server validates.
        for kubeconfig, tree in ((cp_admin, "control-plane"), (member_admin, "base")):
            rendered = await kubectl(None, "kustomize", str(DEPLOY / tree))
            applied = await kubectl(kubeconfig, "apply", "--server-side", "-f", "-", stdin=rendered)
            assert "serverside-applied" in applied

        token = await service_account_token(member_admin)
        member_agent = write_kubeconfig(
            tmp_path / "member-agent", build_kubeconfig(member.url, member.ca_pem, token=token)
        )
        karmada_agent = cp.write_kubeconfig(
            tmp_path / "karmada-agent",
            user=f"system:karmada:agent:{CLUSTER}",
            groups=["system:karmada:agents"],
        )
        options = agent_options(
            karmada_agent,
            member_agent,
            CLUSTER,
        )
        stop = asyncio.Event()
        agent = asyncio.create_task(run(options, stop_event=stop, install_signal_handlers=False))
        admin = await client_for(cp_admin)
        as_agent = await client_for(karmada_agent)
        member_client = await client_for(member_admin)
        try:

            async def agent_cluster_ready() -> bool:
                assert not agent.done(), f"agent exited with {agent.result()}"
                return await cluster_ready(admin, CLUSTER)

            await eventually(agent_cluster_ready, timeout=30, what="Cluster Ready")
            cluster = await admin.get(CLUSTERS, CLUSTER)
            kube_system = await member_client.get(NAMESPACES, "kube-system")
            assert cluster["spec"]["syncMode"] == "Pull"
            assert cluster["spec"]["id"] == kube_system["metadata"]["uid"]
            assert cluster["status"]["nodeSummary"]["totalNum"] >= 1

            # The heartbeat and leader election (upstream's Lease) live on the control plane.
            lease = await admin.get(LEASES, CLUSTER, namespace="karmada-cluster")
            assert lease["spec"]["holderIdentity"] == CLUSTER
            assert lease["metadata"]["ownerReferences"][0]["kind"] == "Cluster"
            leader = await admin.get(LEASES, f"karmada-agent-{CLUSTER}", namespace="karmada-system")
            assert leader["spec"]["holderIdentity"]

            config = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "rbac-probe", "namespace": "default"},
                "data": {"k": "v"},
            }
            # The agent reads the interpreter configuration: a customization of the control
            # plane's decides the ConfigMap's health.
            await admin.create(
                RESOURCE_INTERPRETER_CUSTOMIZATIONS,
                {
                    "apiVersion": "config.karmada.io/v1alpha1",
                    "kind": "ResourceInterpreterCustomization",
                    "metadata": {"name": "configmaps"},
                    "spec": {
                        "target": {"apiVersion": "v1", "kind": "ConfigMap"},
                        "customizations": {
                            "healthInterpretation": {
                                "luaScript": "function InterpretHealth(o) return o.data.k == 'ok' end"
                            }
                        },
                    },
                },
            )
            assert (await as_agent.list(RESOURCE_INTERPRETER_WEBHOOK_CONFIGURATIONS))["items"] == []
            await admin.create(
                WORKS, control_plane_work(CLUSTER, "rbac-probe", [config]), namespace=ES
            )

            async def applied_with_status() -> bool:
                work = await work_applied(admin, CLUSTER, "rbac-probe")
                statuses = (work or {}).get("status", {}).get("manifestStatuses") or []
                return bool(statuses) and statuses[0]["health"] == "Unhealthy"

            await eventually(applied_with_status, what="the Work to be Applied with status")
            live = await member_client.get(CONFIGMAPS, "rbac-probe", namespace="default")
            assert live["data"] == {"k": "v"}

            await admin.delete(WORKS, "rbac-probe", namespace=ES)

            async def gone() -> bool:
                for client, gvr, ns in ((member_client, CONFIGMAPS, "default"), (admin, WORKS, ES)):
                    try:
                        await client.get(gvr, "rbac-probe", namespace=ns)
                        return False
                    except NotFoundError:
                        continue
                return True

            await eventually(gone, what="the ConfigMap and the Work to go")

            # serviceExport (on by default) reports the exported Service's EndpointSlices as
            # Works in its own execution namespace, under the same rules.
            await admin.create(
                WORKS,
                control_plane_work(CLUSTER, "svc-probe", exported_service("svc-probe")),
                namespace=ES,
            )

            async def reported_slices() -> list[dict[str, object]]:
                listed = await admin.list(
                    WORKS,
                    namespace=ES,
                    label_selector="endpointslice.karmada.io/managed-by=ServiceExport,"
                    "endpointslice.karmada.io/name=svc-probe",
                )
                return [
                    w
                    for w in listed["items"]
                    if w["spec"]["workload"]["manifests"][0].get("endpoints")
                ]

            await eventually(reported_slices, what="the exported Service's EndpointSlices")

            # Outside its rights: another cluster's Works, Secrets elsewhere, another Cluster.
            with pytest.raises(ForbiddenError):
                await as_agent.list(WORKS, namespace="karmada-es-other")
            with pytest.raises(ForbiddenError):
                await as_agent.create(
                    WORKS,
                    control_plane_work("other", "forged", [config]),
                    namespace="karmada-es-other",
                )
            with pytest.raises(ForbiddenError):
                await as_agent.list(SECRETS, namespace="karmada-system")
            with pytest.raises(ForbiddenError):
                await as_agent.get(SECRETS, "other", namespace="karmada-cluster")
            with pytest.raises(ForbiddenError):
                await as_agent.delete(CLUSTERS, "other")
        finally:
            stop.set()
            code = await asyncio.wait_for(agent, 30)
            for client in (admin, as_agent, member_client):
                await client.close()
        assert code == 0
