"""Workload simulator and the seeds of a member and a control plane."""

from __future__ import annotations

from typing import Any

from emulator.controllers import seed, workload_simulator
from emulator.profiles import member_profile

from .harness import ControlPlane, Running, eventually

APPS = "/apis/apps/v1/namespaces/web"


async def test_workloads_become_ready() -> None:
    plane = ControlPlane("member", workload_ready_delay=0.01)
    api, ctx = plane.api, plane.ctx
    await seed.seed_member(ctx)
    await plane.namespace("web")
    template = {
        "metadata": {"labels": {"app": "x"}},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]},
    }
    async with Running(workload_simulator.run(ctx)):
        await api.create(
            f"{APPS}/deployments",
            {
                "metadata": {"name": "d"},
                "spec": {
                    "replicas": 2,
                    "selector": {"matchLabels": {"app": "x"}},
                    "template": template,
                },
            },
        )
        await api.create(
            f"{APPS}/daemonsets",
            {
                "metadata": {"name": "ds"},
                "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": template},
            },
        )
        await api.create(
            "/apis/batch/v1/namespaces/web/jobs",
            {"metadata": {"name": "j"}, "spec": {"template": template}},
        )
        await api.create(
            "/api/v1/namespaces/web/services",
            {"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer"}},
        )
        await api.create(
            "/api/v1/namespaces/web/persistentvolumeclaims",
            {
                "metadata": {"name": "data"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            },
        )

        def status(path: str) -> dict[str, Any]:
            return (plane.stored(path) or {}).get("status") or {}

        deploy = await eventually(
            lambda: (
                status(f"{APPS}/deployments/d").get("availableReplicas") == 2
                and status(f"{APPS}/deployments/d")
            )
        )
        ds = await eventually(
            lambda: (
                status(f"{APPS}/daemonsets/ds").get("numberReady")
                and status(f"{APPS}/daemonsets/ds")
            )
        )
        job = await eventually(
            lambda: (
                status("/apis/batch/v1/namespaces/web/jobs/j").get("succeeded")
                and status("/apis/batch/v1/namespaces/web/jobs/j")
            )
        )
        lb = await eventually(
            lambda: status("/api/v1/namespaces/web/services/lb").get("loadBalancer")
        )
        pvc = await eventually(
            lambda: status("/api/v1/namespaces/web/persistentvolumeclaims/data").get("phase")
        )
        pods = await eventually(
            lambda: (
                len(
                    [
                        p
                        for p in plane.items("/api/v1/namespaces/web/pods")
                        if p.get("status", {}).get("phase") == "Running"
                    ]
                )
                == 2
                and plane.items("/api/v1/namespaces/web/pods")
            )
        )
    assert deploy["observedGeneration"] == 1
    assert deploy["readyReplicas"] == deploy["updatedReplicas"] == deploy["replicas"] == 2
    assert {c["type"]: c["reason"] for c in deploy["conditions"]} == {
        "Available": "MinimumReplicasAvailable",
        "Progressing": "NewReplicaSetAvailable",
    }
    assert ds["desiredNumberScheduled"] == ds["numberAvailable"] == seed.NODE_COUNT
    assert job["succeeded"] == 1
    assert [c["type"] for c in job["conditions"]] == ["SuccessCriteriaMet", "Complete"]
    assert job["completionTime"]
    assert lb["ingress"][0]["ip"]
    assert pvc == "Bound"
    node_names = {n["metadata"]["name"] for n in plane.items("/api/v1/nodes")}
    for pod in pods:
        assert pod["spec"]["nodeName"] in node_names
        assert pod["status"]["podIP"]
        assert {c["type"] for c in pod["status"]["conditions"] if c["status"] == "True"} >= {
            "Ready"
        }
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"


async def test_member_seed_nodes_and_namespaces() -> None:
    plane = ControlPlane("member")
    await seed.seed_member(plane.ctx)
    await seed.seed_member(plane.ctx)  # seeding twice is harmless
    names = [n["metadata"]["name"] for n in plane.items("/api/v1/namespaces")]
    assert sorted(names) == sorted(seed.SYSTEM_NAMESPACES)
    nodes = plane.items("/api/v1/nodes")
    assert len(nodes) == seed.NODE_COUNT
    status = nodes[0]["status"]
    assert set(status["allocatable"]) >= {"cpu", "memory", "pods", "ephemeral-storage"}
    assert [c["status"] for c in status["conditions"] if c["type"] == "Ready"] == ["True"]
    assert status["nodeInfo"]["kubeletVersion"].startswith("v1.")
    # kube-apiserver's default RBAC is seeded too.
    assert plane.stored("/apis/rbac.authorization.k8s.io/v1/clusterroles/cluster-admin") is not None


async def test_karmada_seed_objects() -> None:
    plane = ControlPlane("karmada", name="karmada")
    await seed.seed_karmada(plane.ctx)
    names = {n["metadata"]["name"] for n in plane.items("/api/v1/namespaces")}
    assert {"karmada-system", "karmada-cluster", "kube-public"} <= names
    info = plane.stored("/api/v1/namespaces/kube-public/configmaps/cluster-info")
    assert info is not None
    assert "server: https://127.0.0.1:5443" in info["data"]["kubeconfig"]
    crds = {
        c["metadata"]["name"]
        for c in plane.items("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
    }
    assert "works.work.karmada.io" in crds
    binding = plane.stored(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/system:karmada:agent-autoapprove-bootstrap"
    )
    assert binding is not None
    assert binding["subjects"][0]["name"] == "system:bootstrappers:karmada:default-cluster-token"
    role_binding = plane.stored(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-public/rolebindings/system:karmada:bootstrap-signer-clusterinfo"
    )
    assert role_binding["subjects"][0]["name"] == "system:anonymous"  # type: ignore[index]


def test_member_profile() -> None:
    member = member_profile("m1")
    assert member.fixed_uids[("", "namespaces", "", "kube-system")] == seed.stable_uid(
        "m1", "kube-system"
    )
    assert member.fixed_uids == member_profile("m1").fixed_uids
    assert member.fixed_uids != member_profile("m2").fixed_uids
    assert workload_simulator.run in member.controllers
