"""Reflected statuses, kind by kind, as upstream Karmada's default interpreter reflects them.

Expected outputs follow karmada-io/karmada pkg/resourceinterpreter/default/native/
reflectstatus.go, status_type.go and their tests (v1.10 onwards), with the Go JSON tags of the
k8s.io/api status structs deciding which zero values are kept (no `omitempty`) or left out.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent.karmada.names import RESOURCE_TEMPLATE_GENERATION_ANNOTATION, generate_work_name
from agent.karmada.reflect import ReflectError, reflect_status

Obj = dict[str, Any]


def member(
    api_version: str,
    kind: str,
    status: Any = None,
    *,
    generation: int | None = 2,
    template_generation: str | None = "1",
    spec: Obj | None = None,
) -> Obj:
    """A member object as the agent reads it back: metadata, optional spec and status."""
    meta: Obj = {"name": "web", "namespace": "default"}
    if generation is not None:
        meta["generation"] = generation
    if template_generation is not None:
        meta["annotations"] = {RESOURCE_TEMPLATE_GENERATION_ANNOTATION: template_generation}
    obj: Obj = {"apiVersion": api_version, "kind": kind, "metadata": meta}
    if spec is not None:
        obj["spec"] = spec
    if status is not None:
        obj["status"] = status
    return obj


CONDITIONS = [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}]


@pytest.mark.parametrize(
    ("status", "meta", "expected"),
    [
        pytest.param(
            {
                "observedGeneration": 2,
                "replicas": 3,
                "updatedReplicas": 3,
                "readyReplicas": 3,
                "availableReplicas": 3,
                "conditions": CONDITIONS,
                "collisionCount": 1,
            },
            {},
            {
                "generation": 2,
                "resourceTemplateGeneration": 1,
                "observedGeneration": 2,
                "replicas": 3,
                "updatedReplicas": 3,
                "readyReplicas": 3,
                "availableReplicas": 3,
            },
            id="rollout-done-observedGeneration-kept-conditions-dropped",
        ),
        pytest.param(
            {
                "observedGeneration": 4,
                "replicas": 3,
                "updatedReplicas": 1,
                "unavailableReplicas": 2,
            },
            {"generation": 5, "template_generation": "9"},
            {
                "generation": 5,
                "resourceTemplateGeneration": 9,
                "observedGeneration": 4,
                "replicas": 3,
                "updatedReplicas": 1,
                "unavailableReplicas": 2,
            },
            id="rollout-in-progress",
        ),
        pytest.param(
            {"replicas": 0, "readyReplicas": 0},
            {"generation": None, "template_generation": "0"},
            None,
            id="all-zero-serialises-to-empty-so-nothing",
        ),
        pytest.param({}, {}, {"generation": 2, "resourceTemplateGeneration": 1}, id="empty-status"),
        pytest.param(None, {"template_generation": None}, None, id="no-status"),
    ],
)
def test_deployment(status: Any, meta: Obj, expected: Obj | None) -> None:
    assert reflect_status(member("apps/v1", "Deployment", status, **meta)) == expected


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        pytest.param(
            {
                "currentNumberScheduled": 3,
                "numberMisscheduled": 0,
                "desiredNumberScheduled": 3,
                "numberReady": 3,
                "observedGeneration": 2,
                "updatedNumberScheduled": 3,
                "numberAvailable": 3,
                "numberUnavailable": 0,
                "collisionCount": 0,
                "conditions": [],
            },
            {
                "generation": 2,
                "resourceTemplateGeneration": 1,
                "currentNumberScheduled": 3,
                "numberMisscheduled": 0,
                "desiredNumberScheduled": 3,
                "numberReady": 3,
                "observedGeneration": 2,
                "updatedNumberScheduled": 3,
                "numberAvailable": 3,
            },
            id="full",
        ),
        pytest.param(
            {"numberReady": 0},
            {
                "generation": 2,
                "resourceTemplateGeneration": 1,
                "currentNumberScheduled": 0,
                "numberMisscheduled": 0,
                "desiredNumberScheduled": 0,
                "numberReady": 0,
            },
            id="counts-without-omitempty-kept-at-zero",
        ),
        pytest.param(None, None, id="no-status"),
    ],
)
def test_daemonset(status: Any, expected: Obj | None) -> None:
    assert reflect_status(member("apps/v1", "DaemonSet", status)) == expected


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        pytest.param(
            {
                "observedGeneration": 2,
                "replicas": 3,
                "readyReplicas": 3,
                "currentReplicas": 3,
                "updatedReplicas": 3,
                "availableReplicas": 3,
                "currentRevision": "web-abc",
                "updateRevision": "web-abc",
                "collisionCount": 0,
            },
            {
                "generation": 2,
                "resourceTemplateGeneration": 1,
                "observedGeneration": 2,
                "replicas": 3,
                "readyReplicas": 3,
                "currentReplicas": 3,
                "updatedReplicas": 3,
                "availableReplicas": 3,
            },
            id="revisions-and-collisionCount-not-reflected",
        ),
        pytest.param(
            {"replicas": 2, "readyReplicas": 1, "currentReplicas": 1},
            {
                "generation": 2,
                "resourceTemplateGeneration": 1,
                "replicas": 2,
                "readyReplicas": 1,
                "currentReplicas": 1,
                "availableReplicas": 0,
            },
            id="partial-availableReplicas-kept-at-zero",
        ),
        pytest.param(
            {},
            {
                "generation": 2,
                "resourceTemplateGeneration": 1,
                "replicas": 0,
                "availableReplicas": 0,
            },
            id="empty-status",
        ),
    ],
)
def test_statefulset(status: Any, expected: Obj | None) -> None:
    assert reflect_status(member("apps/v1", "StatefulSet", status)) == expected


# The ReplicaSet rule (upstream v1.16, karmada-io/karmada#6833) is inferred by analogy with
# Deployment's: the counts and observedGeneration, no conditions (see agent/karmada/reflect.py).
@pytest.mark.parametrize(
    ("status", "expected"),
    [
        pytest.param(
            {
                "replicas": 2,
                "fullyLabeledReplicas": 2,
                "readyReplicas": 2,
                "availableReplicas": 2,
                "terminatingReplicas": 0,
                "observedGeneration": 2,
                "conditions": [{"type": "ReplicaFailure", "status": "False"}],
            },
            {
                "generation": 2,
                "resourceTemplateGeneration": 1,
                "replicas": 2,
                "fullyLabeledReplicas": 2,
                "readyReplicas": 2,
                "availableReplicas": 2,
                "observedGeneration": 2,
            },
            id="full",
        ),
        pytest.param(
            {},
            {"generation": 2, "resourceTemplateGeneration": 1, "replicas": 0},
            id="empty-status-replicas-kept-at-zero",
        ),
        pytest.param(None, None, id="no-status"),
    ],
)
def test_replicaset(status: Any, expected: Obj | None) -> None:
    assert reflect_status(member("apps/v1", "ReplicaSet", status)) == expected


JOB_CONDITIONS = [
    {
        "type": "Complete",
        "status": "True",
        "lastProbeTime": "2026-01-01T00:00:05Z",
        "lastTransitionTime": "2026-01-01T00:00:05Z",
        "reason": "CompletionsReached",
        "message": "Reached expected number of succeeded pods",
    }
]


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        pytest.param(
            {
                "conditions": JOB_CONDITIONS,
                "startTime": "2026-01-01T00:00:00Z",
                "completionTime": "2026-01-01T00:00:05Z",
                "active": 0,
                "succeeded": 2,
                "failed": 0,
                "ready": 0,
                "terminating": 0,
                "uncountedTerminatedPods": {},
            },
            {
                "conditions": JOB_CONDITIONS,
                "startTime": "2026-01-01T00:00:00Z",
                "completionTime": "2026-01-01T00:00:05Z",
                "succeeded": 2,
            },
            id="complete",
        ),
        pytest.param(
            {"active": 1, "startTime": "2026-01-01T00:00:00Z", "conditions": []},
            {"startTime": "2026-01-01T00:00:00Z", "active": 1},
            id="running-empty-conditions-left-out",
        ),
        pytest.param({}, {}, id="empty-status"),
        pytest.param(None, None, id="no-status"),
    ],
)
def test_job(status: Any, expected: Obj | None) -> None:
    # No generation facts for a Job: the annotation is not even read.
    assert reflect_status(member("batch/v1", "Job", status, template_generation=None)) == expected


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        pytest.param(
            {
                "observedGeneration": 1,
                "disruptedPods": {"web-0": "2026-01-01T00:00:00Z"},
                "disruptionsAllowed": 1,
                "currentHealthy": 2,
                "desiredHealthy": 3,
                "expectedPods": 3,
                "conditions": [{"type": "DisruptionAllowed", "status": "True"}],
            },
            {
                "disruptedPods": {"web-0": "2026-01-01T00:00:00Z"},
                "disruptionsAllowed": 1,
                "currentHealthy": 2,
                "desiredHealthy": 3,
                "expectedPods": 3,
            },
            id="full",
        ),
        pytest.param(
            {"disruptedPods": {}},
            {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0},
            id="counts-kept-at-zero",
        ),
    ],
)
def test_pod_disruption_budget(status: Any, expected: Obj | None) -> None:
    assert reflect_status(member("policy/v1", "PodDisruptionBudget", status)) == expected


@pytest.mark.parametrize(
    ("api_version", "status", "expected"),
    [
        pytest.param(
            "autoscaling/v2",
            {
                "observedGeneration": 1,
                "lastScaleTime": "2026-01-01T00:00:00Z",
                "currentReplicas": 2,
                "desiredReplicas": 3,
                "currentMetrics": [{"type": "Resource"}],
                "conditions": [{"type": "AbleToScale", "status": "True"}],
            },
            {"currentReplicas": 2, "desiredReplicas": 3},
            id="v2",
        ),
        pytest.param(
            "autoscaling/v2",
            {"currentReplicas": 0},
            {"desiredReplicas": 0},
            id="v2-desiredReplicas-kept-at-zero",
        ),
        pytest.param(
            "autoscaling/v1",
            {"currentReplicas": 2, "desiredReplicas": 3, "currentCPUUtilizationPercentage": 50},
            {"currentReplicas": 2, "desiredReplicas": 3, "currentCPUUtilizationPercentage": 50},
            id="v1-has-no-rule-whole-status",
        ),
    ],
)
def test_horizontal_pod_autoscaler(api_version: str, status: Any, expected: Obj | None) -> None:
    assert reflect_status(member(api_version, "HorizontalPodAutoscaler", status)) == expected


LB_STATUS = {
    "loadBalancer": {
        "ingress": [
            {"ip": "192.0.2.1", "ipMode": "VIP", "ports": [{"port": 80, "protocol": "TCP"}]},
            {"hostname": "lb.example.com", "ip": ""},
        ]
    },
    "conditions": [{"type": "LoadBalancerReady", "status": "True"}],
}


@pytest.mark.parametrize(
    ("spec", "status", "expected"),
    [
        pytest.param(
            {"type": "LoadBalancer"},
            LB_STATUS,
            {
                "loadBalancer": {
                    "ingress": [
                        {
                            "ip": "192.0.2.1",
                            "ipMode": "VIP",
                            "ports": [{"port": 80, "protocol": "TCP"}],
                        },
                        {"hostname": "lb.example.com"},
                    ]
                }
            },
            id="load-balancer",
        ),
        pytest.param(
            {"type": "LoadBalancer"}, {}, {"loadBalancer": {}}, id="load-balancer-not-ready"
        ),
        pytest.param({"type": "LoadBalancer"}, None, None, id="load-balancer-no-status"),
        pytest.param({"type": "ClusterIP"}, {"loadBalancer": {}}, None, id="cluster-ip"),
        pytest.param({"type": "NodePort"}, LB_STATUS, None, id="node-port"),
        pytest.param({}, {"loadBalancer": {}}, None, id="no-type"),
    ],
)
def test_service(spec: Obj, status: Any, expected: Obj | None) -> None:
    assert reflect_status(member("v1", "Service", status, spec=spec)) == expected


WHOLE_STATUSES = [
    pytest.param(
        "networking.k8s.io/v1",
        "Ingress",
        {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}},
        id="ingress",
    ),
    pytest.param(
        "v1",
        "Pod",
        {"phase": "Running", "podIP": "10.1.1.1", "conditions": [{"type": "Ready"}]},
        id="pod",
    ),
    pytest.param(
        "batch/v1",
        "CronJob",
        {"active": [{"name": "web-1"}], "lastScheduleTime": "2026-01-01T00:00:00Z"},
        id="cronjob",
    ),
    pytest.param(
        "v1",
        "PersistentVolumeClaim",
        {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}},
        id="pvc",
    ),
    pytest.param("example.io/v1", "Widget", {"ready": True, "count": 0}, id="custom-resource"),
    pytest.param("v1", "Namespace", {}, id="empty-status-is-reported-empty"),
]


@pytest.mark.parametrize(("api_version", "kind", "status"), WHOLE_STATUSES)
def test_kinds_without_a_rule_reflect_their_whole_status(
    api_version: str, kind: str, status: Obj
) -> None:
    obj = member(api_version, kind, status, template_generation=None)
    assert reflect_status(obj) == status
    assert reflect_status(member(api_version, kind, template_generation=None)) is None


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        pytest.param(
            member("apps/v1", "Deployment", {"replicas": 1}, template_generation=None),
            "resourcetemplate.karmada.io/generation",
            id="deployment-without-template-generation",
        ),
        pytest.param(
            member("apps/v1", "DaemonSet", {"numberReady": 1}, template_generation="invalid"),
            "'invalid' is not an integer",
            id="daemonset-invalid-template-generation",
        ),
        pytest.param(
            member("apps/v1", "StatefulSet", {"replicas": 1}, template_generation=" 1"),
            "is not an integer",
            id="statefulset-template-generation-with-space",
        ),
        pytest.param(
            member("policy/v1", "PodDisruptionBudget", "invalid"),
            "status is not an object",
            id="status-not-an-object",
        ),
        pytest.param(
            member("batch/v1", "Job", {"active": "invalid"}),
            "status.active is not a valid int",
            id="job-field-of-wrong-type",
        ),
        pytest.param(
            member("v1", "Pod", "invalid"), "status is not an object", id="whole-status-not-object"
        ),
    ],
)
def test_statuses_upstream_fails_to_reflect(obj: Obj, message: str) -> None:
    with pytest.raises(ReflectError, match=message):
        reflect_status(obj)


def test_generate_work_name_is_stable_and_safe() -> None:
    name = generate_work_name("Deployment", "Nginx:Web", "default")
    assert name.startswith("nginx.web-")
    suffix = name.removeprefix("nginx.web-")
    assert suffix
    assert set(suffix) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert name == generate_work_name("Deployment", "Nginx:Web", "default")
    assert name != generate_work_name("Deployment", "Nginx:Web", "other")
