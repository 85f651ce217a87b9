"""The bundled customizations: health from each project's documented status fields, one healthy
and one unhealthy object per kind, and the status they reflect."""

from __future__ import annotations

from typing import Any

import pytest

from agent.interpreter import Interpreter
from agent.interpreter.customizations import INTERPRET_HEALTH, REFLECT_STATUS, bundled
from agent.karmada import names

Obj = dict[str, Any]


def ready(status: str) -> Obj:
    return {"conditions": [{"type": "Ready", "status": status, "reason": "x"}]}


# (apiVersion, kind) -> [(healthy, spec, status or None)]
Sample = tuple[bool, Obj, Obj | None]
SAMPLES: dict[tuple[str, str], list[Sample]] = {
    ("argoproj.io/v1alpha1", "Rollout"): [
        (True, {"replicas": 2}, {"phase": "Healthy", "observedGeneration": "3"}),
        (True, {"replicas": 2}, {"phase": "Paused", "observedGeneration": "3"}),
        (False, {"replicas": 2}, {"phase": "Degraded", "observedGeneration": "3"}),
        (False, {"replicas": 2}, {"phase": "Healthy", "observedGeneration": "2"}),
        (False, {"replicas": 2}, None),
    ],
    ("argoproj.io/v1alpha1", "Workflow"): [
        (True, {}, {"phase": "Running"}),
        (True, {}, {"phase": "Succeeded"}),
        (False, {}, {"phase": "Failed"}),
        (False, {}, {"phase": "Error"}),
    ],
    ("apps.kruise.io/v1alpha1", "CloneSet"): [
        (
            True,
            {"replicas": 3},
            {
                "observedGeneration": 3,
                "expectedUpdatedReplicas": 3,
                "updatedReadyReplicas": 3,
                "availableReplicas": 3,
            },
        ),
        (
            True,
            {"replicas": 3, "updateStrategy": {"partition": 2}},
            {
                "observedGeneration": 3,
                "expectedUpdatedReplicas": 1,
                "updatedReadyReplicas": 1,
                "availableReplicas": 3,
            },
        ),
        (
            False,
            {"replicas": 3},
            {
                "observedGeneration": 3,
                "expectedUpdatedReplicas": 3,
                "updatedReadyReplicas": 1,
                "availableReplicas": 3,
            },
        ),
    ],
    ("apps.kruise.io/v1beta1", "StatefulSet"): [
        (
            True,
            {"replicas": 2},
            {"observedGeneration": 3, "updatedReplicas": 2, "availableReplicas": 2},
        ),
        (
            True,
            {"replicas": 2, "updateStrategy": {"rollingUpdate": {"partition": 1}}},
            {"observedGeneration": 3, "updatedReplicas": 1, "availableReplicas": 2},
        ),
        (
            False,
            {"replicas": 2},
            {"observedGeneration": 3, "updatedReplicas": 2, "availableReplicas": 1},
        ),
        (
            False,
            {"replicas": 2},
            {"observedGeneration": 2, "updatedReplicas": 2, "availableReplicas": 2},
        ),
    ],
    ("apps.kruise.io/v1alpha1", "DaemonSet"): [
        (
            True,
            {},
            {
                "observedGeneration": 3,
                "desiredNumberScheduled": 4,
                "updatedNumberScheduled": 4,
                "numberAvailable": 4,
            },
        ),
        (
            False,
            {},
            {
                "observedGeneration": 3,
                "desiredNumberScheduled": 4,
                "updatedNumberScheduled": 2,
                "numberAvailable": 4,
            },
        ),
    ],
    ("helm.toolkit.fluxcd.io/v2", "HelmRelease"): [
        (True, {}, {"observedGeneration": 3, **ready("True")}),
        (False, {}, {"observedGeneration": 3, **ready("False")}),
        (False, {}, {"observedGeneration": 2, **ready("True")}),
        (False, {}, None),
    ],
    ("kustomize.toolkit.fluxcd.io/v1", "Kustomization"): [
        (True, {}, ready("True")),
        (False, {}, ready("Unknown")),
    ],
    ("source.toolkit.fluxcd.io/v1", "GitRepository"): [
        (True, {}, ready("True")),
        (False, {}, ready("False")),
    ],
    ("sparkoperator.k8s.io/v1beta2", "SparkApplication"): [
        (True, {}, {"applicationState": {"state": "RUNNING"}}),
        (True, {}, {"applicationState": {"state": "COMPLETED"}}),
        (False, {}, {"applicationState": {"state": "FAILED"}}),
        (False, {}, {"applicationState": {"state": "SUBMISSION_FAILED"}}),
    ],
    ("flink.apache.org/v1beta1", "FlinkDeployment"): [
        (True, {}, {"jobManagerDeploymentStatus": "READY", "jobStatus": {"state": "RUNNING"}}),
        (False, {}, {"jobManagerDeploymentStatus": "ERROR", "jobStatus": {"state": "CREATED"}}),
        (False, {}, {"jobManagerDeploymentStatus": "READY", "jobStatus": {"state": "FAILED"}}),
        (False, {}, {"lifecycleState": "FAILED"}),
    ],
    ("kyverno.io/v1", "ClusterPolicy"): [
        (True, {}, ready("True")),
        (False, {}, ready("False")),
        (True, {}, {"ready": True}),
        (False, {}, None),
    ],
    ("kyverno.io/v1", "Policy"): [(True, {}, ready("True")), (False, {}, {"ready": False})],
    ("ray.io/v1", "RayCluster"): [
        (True, {}, {"state": "ready"}),
        (False, {}, {"state": "suspended"}),
        (True, {}, {"conditions": [{"type": "HeadPodReady", "status": "True"}]}),
        (
            False,
            {},
            {
                "state": "ready",
                "conditions": [{"type": "ReplicaFailure", "status": "True"}],
            },
        ),
    ],
    ("ray.io/v1", "RayJob"): [
        (True, {}, {"jobStatus": "RUNNING", "jobDeploymentStatus": "Running"}),
        (False, {}, {"jobStatus": "FAILED", "jobDeploymentStatus": "Complete"}),
        (False, {}, {"jobDeploymentStatus": "Failed"}),
    ],
    ("batch.volcano.sh/v1alpha1", "Job"): [
        (True, {}, {"state": {"phase": "Running"}}),
        (True, {}, {"state": {"phase": "Completed"}}),
        (False, {}, {"state": {"phase": "Failed"}}),
        (False, {}, {"state": {"phase": "Aborted"}}),
    ],
}
for _kind in ("TFJob", "PyTorchJob", "MPIJob", "XGBoostJob", "PaddleJob", "JAXJob"):
    SAMPLES[("kubeflow.org/v1", _kind)] = [
        (
            True,
            {},
            {
                "conditions": [
                    {"type": "Created", "status": "True"},
                    {"type": "Running", "status": "True"},
                ]
            },
        ),
        (
            False,
            {},
            {
                "conditions": [
                    {"type": "Running", "status": "False"},
                    {"type": "Failed", "status": "True"},
                ]
            },
        ),
    ]


def obj(api_version: str, kind: str, spec: Obj, status: Obj | None) -> Obj:
    out: Obj = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "name": "x",
            "namespace": "default",
            "generation": 3,
            "annotations": {"resourcetemplate.karmada.io/generation": "7"},
        },
        "spec": spec,
    }
    if status is not None:
        out["status"] = status
    return out


CASES = [
    pytest.param(key, sample, id=f"{key[1]}-{i}")
    for key, samples in SAMPLES.items()
    for i, sample in enumerate(samples)
]


@pytest.fixture(scope="module")
def chain() -> Interpreter:
    return Interpreter()


@pytest.mark.parametrize(("key", "sample"), CASES)
def test_health(chain: Interpreter, key: tuple[str, str], sample: Sample) -> None:
    healthy, spec, status = sample
    expected = names.HEALTHY if healthy else names.UNHEALTHY
    assert chain.interpret_health(obj(*key, spec, status)) == expected


def test_every_issue_kind_is_bundled_with_health_and_status() -> None:
    targets = {(c.api_version, c.kind): c for c in bundled()}
    assert set(SAMPLES) <= set(targets)
    for customization in targets.values():
        assert set(customization.scripts) == {INTERPRET_HEALTH, REFLECT_STATUS}, customization.name


@pytest.mark.parametrize(("key", "sample"), CASES)
def test_reflected_status_is_taken_from_the_status(
    chain: Interpreter, key: tuple[str, str], sample: Sample
) -> None:
    _, spec, status = sample
    reflected = chain.reflect_status(obj(*key, spec, status))
    assert reflected is not None
    for field, value in reflected.items():
        if field == "generation":
            assert value == 3
        elif field == "resourceTemplateGeneration":
            assert value == 7
        else:
            assert status is not None
            assert status[field] == value
    if status is None:
        assert reflected == {}


def test_workload_kinds_reflect_generations_for_the_control_plane(chain: Interpreter) -> None:
    status = {"observedGeneration": 3, "replicas": 2, "readyReplicas": 2, "unrelated": 1}
    reflected = chain.reflect_status(obj("apps.kruise.io/v1alpha1", "CloneSet", {}, status))
    assert reflected == {
        "observedGeneration": 3,
        "replicas": 2,
        "readyReplicas": 2,
        "generation": 3,
        "resourceTemplateGeneration": 7,
    }
