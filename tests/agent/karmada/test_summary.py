from typing import Any

import pytest

from agent.karmada import quantity
from agent.karmada.quantity import parse_quantity
from agent.karmada.summary import (
    allocatable_modelings,
    api_enablements,
    node_summary,
    resource_summary,
)


def node(name: str, cpu: str, memory: str, pods: str = "110", ready: bool = True) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(
    node_name: str, cpu: str, memory: str, phase: str = "Running", init_cpu: str | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "a", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]
    }
    if node_name:
        spec["nodeName"] = node_name
    if init_cpu:
        spec["initContainers"] = [{"name": "i", "resources": {"requests": {"cpu": init_cpu}}}]
    return {"spec": spec, "status": {"phase": phase}}


def test_quantity_canonical_forms_match_go() -> None:
    cases = {
        "2": "2",
        "1500m": "1500m",
        "0.1": "100m",
        "1.5Gi": "1536Mi",
        "1500": "1500",
        "120000": "120k",
        "1e3": "1e3",
    }
    for raw, canonical in cases.items():
        assert str(parse_quantity(raw)) == canonical


def test_node_summary() -> None:
    assert node_summary([node("a", "1", "1Gi"), node("b", "1", "1Gi", ready=False)]) == {
        "totalNum": 2,
        "readyNum": 1,
    }
    assert node_summary([]) == {}


def test_resource_summary_splits_allocating_and_allocated() -> None:
    nodes = [node("a", "4", "8Gi"), node("b", "4", "8Gi")]
    pods = [
        pod("a", "500m", "512Mi"),
        pod("b", "1", "1Gi", init_cpu="2"),  # init container dominates cpu
        pod("a", "3", "1Gi", phase="Succeeded"),  # terminal: not counted
        pod("", "250m", "256Mi", phase="Pending"),  # unscheduled: allocating
    ]
    assert resource_summary(nodes, pods) == {
        "allocatable": {"cpu": "8", "memory": "16Gi", "pods": "220"},
        "allocating": {"cpu": "250m", "memory": "256Mi", "pods": "1"},
        "allocated": {"cpu": "2500m", "memory": "1536Mi", "pods": "2"},
    }


def test_a_request_repeated_across_pods_is_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every status pass sums every Pod's requests; the same few strings recur on thousands."""
    scanned: list[str] = []
    real_scan = quantity._scan

    def counted(text: str) -> Any:
        scanned.append(text)
        return real_scan(text)

    monkeypatch.setattr(quantity, "_scan", counted)
    # Strings no other test parses (a parse they made earlier would be remembered).
    pods = [pod("a", "123m", "321Mi") for _ in range(200)]
    summary = resource_summary([node("a", "64", "256Gi", pods="300")], pods)
    assert summary["allocated"] == {"cpu": "24600m", "memory": "64200Mi", "pods": "200"}
    assert scanned.count("123m") <= 1
    assert scanned.count("321Mi") <= 1


def test_allocatable_modelings_counts_free_capacity_per_grade() -> None:
    models = [
        {
            "grade": 0,
            "ranges": [
                {"name": "cpu", "min": "0", "max": "1"},
                {"name": "memory", "min": "0", "max": "4Gi"},
            ],
        },
        {
            "grade": 1,
            "ranges": [
                {"name": "cpu", "min": "1", "max": "2"},
                {"name": "memory", "min": "4Gi", "max": "16Gi"},
            ],
        },
        {
            "grade": 2,
            "ranges": [
                {"name": "cpu", "min": "2", "max": "4"},
                {"name": "memory", "min": "16Gi", "max": "32Gi"},
            ],
        },
    ]
    nodes = [
        node("big", "4", "32Gi"),
        node("small", "4", "32Gi"),
        node("full", "8", "64Gi", pods="1"),
    ]
    pods = [pod("small", "3", "1Gi"), pod("full", "1", "1Gi")]
    # big: cpu 4 (grade 2), memory 32Gi (grade 2) -> 2; small: cpu 1 left -> grade 1;
    # full has no pod capacity left and is skipped (upstream would stop counting there).
    assert allocatable_modelings(models, nodes, pods) == [
        {"grade": 0, "count": 0},
        {"grade": 1, "count": 1},
        {"grade": 2, "count": 1},
    ]
    assert allocatable_modelings([], nodes, pods) is None


def test_api_enablements_shape() -> None:
    out = api_enablements(
        [
            ("v1", [("pods", "Pod"), ("pods/status", "Pod"), ("configmaps", "ConfigMap")]),
            ("apps/v1", [("deployments", "Deployment")]),
        ]
    )
    assert out == [
        {"groupVersion": "apps/v1", "resources": [{"name": "deployments", "kind": "Deployment"}]},
        {
            "groupVersion": "v1",
            "resources": [
                {"name": "configmaps", "kind": "ConfigMap"},
                {"name": "pods", "kind": "Pod"},
            ],
        },
    ]
