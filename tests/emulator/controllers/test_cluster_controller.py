"""karmada-controller-manager's cluster controller and the Cluster type's server behaviour."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from emulator import karmada_types
from emulator.controllers import cluster_controller
from emulator.karmada import crds
from emulator.storage import Event
from emulator.timefmt import micro_time

from .harness import ControlPlane, Running, eventually

CLUSTERS = "/apis/cluster.karmada.io/v1alpha1/clusters"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/karmada-cluster/leases"


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


def cluster(name: str = "member1", mode: str = "Pull") -> dict[str, Any]:
    return {
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {"syncMode": mode},
    }


async def karmada(**knobs: Any) -> ControlPlane:
    """A Karmada control plane as karmadactl init leaves it (namespaces, CRDs, RBAC)."""
    plane = ControlPlane("karmada", name="karmada", **knobs)
    await plane.seed(plane.ctx)
    return plane


def ready(plane: ControlPlane, name: str = "member1") -> dict[str, Any] | None:
    obj = plane.stored(f"{CLUSTERS}/{name}") or {}
    return cluster_controller.ready_condition(obj)


async def set_ready(plane: ControlPlane, status: str, name: str = "member1") -> None:
    api = plane.api
    obj = await api.get(f"{CLUSTERS}/{name}")
    obj["status"] = {
        "conditions": [
            {
                "type": "Ready",
                "status": status,
                "reason": "ClusterReady",
                "message": "cluster is healthy and ready to accept workloads",
                "lastTransitionTime": "2025-01-01T00:00:00Z",
            }
        ]
    }
    await api.update(f"{CLUSTERS}/{name}/status", obj)


async def test_new_cluster_gets_namespace_finalizer_and_taints() -> None:
    plane = await karmada(cluster_monitor_period=3600)
    api = plane.api
    async with Running(cluster_controller.run(plane.ctx)):
        await api.create(CLUSTERS, cluster())
        obj = await eventually(
            lambda: (
                (c := plane.stored(f"{CLUSTERS}/member1"))
                and "karmada.io/cluster-controller" in (c["metadata"].get("finalizers") or [])
                and c
            )
        )
        assert plane.stored("/api/v1/namespaces/karmada-es-member1") is not None
        labels = plane.stored("/api/v1/namespaces/karmada-es-member1")["metadata"]["labels"]  # type: ignore[index]
        assert labels == {
            "karmada.io/system": "true",
            "kubernetes.io/metadata.name": "karmada-es-member1",
        }
        assert [(t["key"], t["effect"]) for t in obj["spec"]["taints"]] == [
            ("cluster.karmada.io/not-ready", "NoSchedule")
        ]
        await set_ready(plane, "True")
        await eventually(
            lambda: not (plane.stored(f"{CLUSTERS}/member1") or {})["spec"].get("taints")
        )
        await set_ready(plane, "Unknown")
        taints = await eventually(
            lambda: (plane.stored(f"{CLUSTERS}/member1") or {})["spec"].get("taints")
        )
        assert [t["key"] for t in taints] == ["cluster.karmada.io/unreachable"]


async def monitor_passes(plane: ControlPlane, count: int) -> None:
    """Wait until the monitor has read the Lease `count` more times."""

    def reads() -> int:
        return plane.calls("get", f"{LEASES}/member1")

    start = reads()
    await eventually(lambda: reads() >= start + count)


async def test_stale_lease_makes_pull_cluster_unknown() -> None:
    plane = await karmada(cluster_monitor_period=0.02, cluster_monitor_grace_period=40)
    api, ctx = plane.api, plane.ctx
    clock = Clock()
    ctx.clock = clock
    await api.create(CLUSTERS, cluster())
    await api.create(CLUSTERS, cluster("pusher", "Push"))
    await set_ready(plane, "True")
    await set_ready(plane, "True", "pusher")
    lease = await api.create(
        LEASES,
        {
            "metadata": {"name": "member1"},
            "spec": {"holderIdentity": "member1", "renewTime": micro_time(clock.now)},
        },
    )
    async with Running(cluster_controller.run(ctx)):
        await eventually(
            lambda: (
                "karmada.io/cluster-controller"
                in ((plane.stored(f"{CLUSTERS}/member1") or {})["metadata"].get("finalizers") or [])
            )
        )
        clock.now += timedelta(seconds=30)
        lease["spec"]["renewTime"] = micro_time(clock.now)
        lease = await api.update(f"{LEASES}/member1", lease)
        await monitor_passes(plane, 2)
        clock.now += timedelta(seconds=30)
        # Renewed 30 s ago: within the 40 s grace period, so still Ready after a few periods.
        await monitor_passes(plane, 3)
        assert ready(plane)["status"] == "True"  # type: ignore[index]
        clock.now += timedelta(seconds=15)
        condition = await eventually(lambda: (c := ready(plane)) and c["status"] == "Unknown" and c)
    assert condition["reason"] == "ClusterStatusUnknown"
    assert condition["message"] == "Cluster status controller stopped posting cluster status."
    # Push clusters are not judged by a Lease.
    assert ready(plane, "pusher")["status"] == "True"  # type: ignore[index]


async def test_cluster_that_never_posted_status_after_startup_grace() -> None:
    plane = await karmada(cluster_monitor_period=0.02, cluster_startup_grace_period=60)
    api, ctx = plane.api, plane.ctx
    clock = Clock()
    ctx.clock = clock
    created = await api.create(CLUSTERS, cluster())
    clock.now = datetime.fromisoformat(
        created["metadata"]["creationTimestamp"].replace("Z", "+00:00")
    )
    clock.now += timedelta(seconds=61)
    async with Running(cluster_controller.run(ctx)):
        condition = await eventually(lambda: ready(plane))
    assert condition["status"] == "Unknown"
    assert condition["reason"] == "ClusterStatusNeverUpdated"
    assert condition["message"] == "Cluster status controller never posted cluster status."


async def test_deleting_cluster_removes_execution_space_then_finalizer() -> None:
    plane = await karmada(cluster_monitor_period=3600, cluster_cleanup_check_interval=0.05)
    api = plane.api
    works = "/apis/work.karmada.io/v1alpha1/namespaces/karmada-es-member1/works"
    # The finalizers of w1 at each of its changes, as the storage makes them.
    w1: list[tuple[str, list[str]]] = []

    def on_write(gr: tuple[str, str], ev: Event) -> None:
        if gr == ("work.karmada.io", "works") and ev.name == "w1":
            w1.append((ev.type, list(ev.obj["metadata"].get("finalizers") or [])))

    plane.server.storage.listeners.append(on_write)
    async with Running(cluster_controller.run(plane.ctx)):
        await api.create(CLUSTERS, cluster())
        await eventually(lambda: plane.stored("/api/v1/namespaces/karmada-es-member1"))
        await eventually(
            lambda: (plane.stored(f"{CLUSTERS}/member1") or {})["metadata"].get("finalizers")
        )
        await api.create(
            works,
            {
                "metadata": {"name": "w1", "finalizers": ["karmada.io/execution-controller"]},
                "spec": {"workload": {"manifests": []}},
            },
        )
        await api.delete(f"{CLUSTERS}/member1")
        await eventually(lambda: plane.stored(f"{CLUSTERS}/member1") is None)
    assert plane.stored("/api/v1/namespaces/karmada-es-member1") is None
    # An unready Pull cluster's Works lose the execution finalizer (the agent will not come
    # back); then the execution namespace goes, and the Work with it.
    assert ("MODIFIED", []) in w1
    assert w1[-1][0] == "DELETED"
    assert plane.stored(f"{works}/w1") is None


def test_cluster_create_strategy_defaults_models_and_migrates_zone() -> None:
    obj: dict[str, Any] = {
        "metadata": {"name": "m1"},
        "spec": {
            "syncMode": "Pull",
            "zone": "z1",
            "taints": [{"key": "a", "effect": "NoExecute"}, {"key": "b", "effect": "NoSchedule"}],
        },
        "status": {"kubernetesVersion": "v1"},
    }
    karmada_types.prepare_cluster_for_create(obj)
    assert "status" not in obj
    assert obj["spec"]["zones"] == ["z1"]
    assert "zone" not in obj["spec"]
    assert "timeAdded" in obj["spec"]["taints"][0]
    assert "timeAdded" not in obj["spec"]["taints"][1]
    models = obj["spec"]["resourceModels"]
    assert [m["grade"] for m in models] == list(range(9))
    assert models[0]["ranges"] == [
        {"name": "cpu", "min": "0", "max": "1"},
        {"name": "memory", "min": "0", "max": "4Gi"},
    ]
    assert models[2]["ranges"] == [
        {"name": "cpu", "min": "2", "max": "4"},
        {"name": "memory", "min": "16Gi", "max": "32Gi"},
    ]
    assert models[8]["ranges"] == [
        {"name": "cpu", "min": "128", "max": "9223372036854775807"},
        {"name": "memory", "min": "1024Gi", "max": "9223372036854775807"},
    ]


def test_cluster_given_models_are_standardised() -> None:
    models = [
        {"grade": 2, "ranges": [{"name": "cpu", "min": "2", "max": "8"}]},
        {"grade": 1, "ranges": [{"name": "cpu", "min": "1", "max": "2"}]},
    ]
    obj: dict[str, Any] = {
        "metadata": {"name": "m1"},
        "spec": {"syncMode": "Pull", "resourceModels": models},
    }
    karmada_types.prepare_cluster_for_create(obj)
    assert obj["spec"]["resourceModels"] == [
        {"grade": 1, "ranges": [{"name": "cpu", "min": "0", "max": "2"}]},
        {"grade": 2, "ranges": [{"name": "cpu", "min": "2", "max": "9223372036854775807"}]},
    ]


def test_cluster_validation_causes() -> None:
    causes = karmada_types.validate_cluster(
        {
            "metadata": {"name": "a" * 49},
            "spec": {
                "syncMode": "Sideways",
                "apiEndpoint": "https://u@h:6443/?q=1",
                "proxyURL": "ftp://proxy",
                "secretRef": {"name": "x"},
            },
        }
    )
    fields = [(c["field"], c["reason"]) for c in causes]
    assert fields == [
        ("metadata.name", "FieldValueInvalid"),
        ("spec.syncMode", "FieldValueNotSupported"),
        ("spec.apiEndpoint", "FieldValueInvalid"),
        ("spec.apiEndpoint", "FieldValueInvalid"),
        ("spec.secretRef.namespace", "FieldValueRequired"),
        ("spec.proxyURL", "FieldValueInvalid"),
    ]
    assert causes[1]["message"] == 'Unsupported value: "Sideways": supported values: "Pull", "Push"'
    assert (
        karmada_types.validate_cluster(
            {
                "metadata": {"name": "member1"},
                "spec": {"syncMode": "Pull", "apiEndpoint": "https://10.0.0.1:6443"},
            }
        )
        == []
    )


def test_work_crd_keeps_upstream_structure() -> None:
    crd = crds.work_crd()
    assert crd["metadata"]["name"] == "works.work.karmada.io"
    assert crd["spec"]["names"]["shortNames"] == ["wk"]
    version = crd["spec"]["versions"][0]
    assert [c["name"] for c in version["additionalPrinterColumns"]] == [
        "WORKLOAD-KIND",
        "APPLIED",
        "AGE",
    ]
    assert version["subresources"] == {"status": {}}
    identifier = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"][
        "manifestStatuses"
    ]["items"]["properties"]["identifier"]
    assert identifier["required"] == ["kind", "name", "ordinal", "resource", "version"]
