from typing import Any

import pytest

from agent.karmada.health import interpret_health


def deployment(
    replicas: int | None, *, gen: int = 2, observed: int = 2, **status: Any
) -> dict[str, Any]:
    spec = {} if replicas is None else {"replicas": replicas}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "generation": gen},
        "spec": spec,
        "status": {"observedGeneration": observed, **status},
    }


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (deployment(3, updatedReplicas=3, availableReplicas=3), "Healthy"),
        (deployment(3, observed=1, updatedReplicas=3, availableReplicas=3), "Unhealthy"),
        (deployment(3, updatedReplicas=2, availableReplicas=2), "Unhealthy"),
        (deployment(3, updatedReplicas=3, availableReplicas=2), "Unhealthy"),
        (deployment(None, updatedReplicas=0), "Healthy"),
        (deployment(3, updatedReplicas="x"), "Unknown"),
    ],
)
def test_deployment_rules(obj: dict[str, Any], expected: str) -> None:
    assert interpret_health(obj) == expected


def sts(replicas: int, partition: int | None, updated: int, available: int) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicas": replicas}
    if partition is not None:
        spec["updateStrategy"] = {"rollingUpdate": {"partition": partition}}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"generation": 1},
        "spec": spec,
        "status": {
            "observedGeneration": 1,
            "updatedReplicas": updated,
            "availableReplicas": available,
        },
    }


def test_statefulset_partition_counts_only_updatable_pods() -> None:
    assert interpret_health(sts(5, 3, updated=2, available=5)) == "Healthy"
    assert interpret_health(sts(5, 3, updated=1, available=5)) == "Unhealthy"
    assert interpret_health(sts(5, None, updated=5, available=4)) == "Unhealthy"


def test_daemonset_replicaset_rules() -> None:
    ds = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"generation": 1},
        "status": {
            "observedGeneration": 1,
            "desiredNumberScheduled": 3,
            "updatedNumberScheduled": 3,
            "numberAvailable": 3,
        },
    }
    assert interpret_health(ds) == "Healthy"
    ds["status"]["numberAvailable"] = 2
    assert interpret_health(ds) == "Unhealthy"
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"generation": 1},
        "spec": {"replicas": 2},
        "status": {"observedGeneration": 1, "availableReplicas": 1},
    }
    assert interpret_health(rs) == "Unhealthy"
    rs["status"]["availableReplicas"] = 2
    assert interpret_health(rs) == "Healthy"


def test_service_ingress_pvc_pod_pdb() -> None:
    svc = {"apiVersion": "v1", "kind": "Service", "spec": {"type": "ClusterIP"}}
    assert interpret_health(svc) == "Healthy"
    lb = {"apiVersion": "v1", "kind": "Service", "spec": {"type": "LoadBalancer"}, "status": {}}
    assert interpret_health(lb) == "Unhealthy"
    lb["status"] = {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}}
    assert interpret_health(lb) == "Healthy"
    ing = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "status": {"loadBalancer": {}}}
    assert interpret_health(ing) == "Unhealthy"
    ing["status"]["loadBalancer"]["ingress"] = [{"hostname": "a.example"}]
    assert interpret_health(ing) == "Healthy"
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "status": {"phase": "Pending"}}
    assert interpret_health(pvc) == "Unhealthy"
    pvc["status"]["phase"] = "Bound"
    assert interpret_health(pvc) == "Healthy"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]},
    }
    assert interpret_health(pod) == "Unhealthy"
    pod["status"]["conditions"][0]["status"] = "True"
    assert interpret_health(pod) == "Healthy"
    assert (
        interpret_health({"apiVersion": "v1", "kind": "Pod", "status": {"phase": "Succeeded"}})
        == "Healthy"
    )
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "status": {"currentHealthy": 1, "desiredHealthy": 2},
    }
    assert interpret_health(pdb) == "Unhealthy"
    pdb["status"]["currentHealthy"] = 2
    assert interpret_health(pdb) == "Healthy"


def test_kinds_without_rule_are_healthy() -> None:
    assert interpret_health({"apiVersion": "v1", "kind": "ConfigMap"}) == "Healthy"
    assert interpret_health({"apiVersion": "batch/v1", "kind": "Job", "status": {}}) == "Healthy"
