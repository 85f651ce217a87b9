"""Built-in defaulting (defaults.py) through TypeSchema.default()."""

from __future__ import annotations

from typing import Any

import pytest

from emulator.defaults import image_pull_policy
from emulator.schema import builtin_schema


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("nginx", "Always"),
        ("nginx:latest", "Always"),
        ("nginx:1.27", "IfNotPresent"),
        ("registry:5000/team/app", "Always"),
        ("registry:5000/team/app:v2", "IfNotPresent"),
        ("nginx@sha256:abcd", "IfNotPresent"),
    ],
)
def test_image_pull_policy(image: str, policy: str) -> None:
    assert image_pull_policy(image) == policy


def test_deployment_defaults() -> None:
    obj: dict[str, Any] = {
        "spec": {
            "selector": {"matchLabels": {"a": "b"}},
            "template": {
                "spec": {
                    "containers": [
                        {"name": "c", "image": "nginx", "ports": [{"containerPort": 80}]}
                    ]
                }
            },
        }
    }
    builtin_schema("apps", "v1", "Deployment").default(obj)
    spec = obj["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
    }
    assert spec["revisionHistoryLimit"] == 10
    assert spec["progressDeadlineSeconds"] == 600
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Always"
    assert pod["dnsPolicy"] == "ClusterFirst"
    assert pod["terminationGracePeriodSeconds"] == 30
    assert pod["schedulerName"] == "default-scheduler"
    container = pod["containers"][0]
    assert container["imagePullPolicy"] == "Always"
    assert container["terminationMessagePath"] == "/dev/termination-log"
    assert container["terminationMessagePolicy"] == "File"
    assert container["ports"] == [{"containerPort": 80, "protocol": "TCP"}]


def test_explicit_values_are_kept() -> None:
    obj: dict[str, Any] = {
        "spec": {
            "replicas": 0,
            "strategy": {"type": "Recreate"},
            "template": {"spec": {"containers": []}},
        }
    }
    builtin_schema("apps", "v1", "Deployment").default(obj)
    assert obj["spec"]["replicas"] == 0
    assert obj["spec"]["strategy"] == {"type": "Recreate"}


def test_service_defaults() -> None:
    obj: dict[str, Any] = {
        "spec": {"ports": [{"port": 80}, {"port": 53, "protocol": "UDP", "targetPort": "dns"}]}
    }
    builtin_schema("", "v1", "Service").default(obj)
    spec = obj["spec"]
    assert spec["type"] == "ClusterIP"
    assert spec["sessionAffinity"] == "None"
    assert spec["ports"][0] == {"port": 80, "protocol": "TCP", "targetPort": 80}
    assert spec["ports"][1] == {"port": 53, "protocol": "UDP", "targetPort": "dns"}


def test_pod_admission_defaults() -> None:
    obj: dict[str, Any] = {"spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}
    builtin_schema("", "v1", "Pod").default(obj)
    spec = obj["spec"]
    assert spec["serviceAccountName"] == "default"
    assert spec["enableServiceLinks"] is True
    assert {t["key"] for t in spec["tolerations"]} == {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    }
    assert spec["containers"][0]["imagePullPolicy"] == "IfNotPresent"


def test_workload_defaults() -> None:
    sts: dict[str, Any] = {"spec": {"template": {"spec": {"containers": []}}}}
    builtin_schema("apps", "v1", "StatefulSet").default(sts)
    assert sts["spec"]["podManagementPolicy"] == "OrderedReady"
    assert sts["spec"]["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"partition": 0},
    }
    ds: dict[str, Any] = {"spec": {"template": {"spec": {"containers": []}}}}
    builtin_schema("apps", "v1", "DaemonSet").default(ds)
    assert ds["spec"]["updateStrategy"]["rollingUpdate"] == {"maxUnavailable": 1, "maxSurge": 0}
    job: dict[str, Any] = {"spec": {"template": {"spec": {"containers": []}}}}
    builtin_schema("batch", "v1", "Job").default(job)
    assert (
        job["spec"]["completions"],
        job["spec"]["parallelism"],
        job["spec"]["backoffLimit"],
    ) == (1, 1, 6)
    cron: dict[str, Any] = {
        "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {}}}}}
    }
    builtin_schema("batch", "v1", "CronJob").default(cron)
    assert cron["spec"]["concurrencyPolicy"] == "Allow"
    assert cron["spec"]["successfulJobsHistoryLimit"] == 3
    assert cron["spec"]["jobTemplate"]["spec"]["backoffLimit"] == 6


def test_other_defaults() -> None:
    secret: dict[str, Any] = {}
    builtin_schema("", "v1", "Secret").default(secret)
    assert secret["type"] == "Opaque"
    ns: dict[str, Any] = {"metadata": {"name": "team"}}
    builtin_schema("", "v1", "Namespace").default(ns)
    assert ns["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team"}
    binding: dict[str, Any] = {
        "subjects": [
            {"kind": "User", "name": "u"},
            {"kind": "ServiceAccount", "name": "s", "namespace": "n"},
        ]
    }
    builtin_schema("rbac.authorization.k8s.io", "v1", "RoleBinding").default(binding)
    assert binding["subjects"][0]["apiGroup"] == "rbac.authorization.k8s.io"
    assert binding["subjects"][1]["apiGroup"] == ""
    crd: dict[str, Any] = {"spec": {"names": {"kind": "Widget", "plural": "widgets"}}}
    builtin_schema("apiextensions.k8s.io", "v1", "CustomResourceDefinition").default(crd)
    assert crd["spec"]["names"]["singular"] == "widget"
    assert crd["spec"]["names"]["listKind"] == "WidgetList"
