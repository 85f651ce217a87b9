"""field() metadata of built-in kinds, read from the published schema extensions."""

from __future__ import annotations

import pytest

from emulator.fieldmeta import UNKNOWN, FieldInfo
from emulator.schema import TypeSchema, builtin_schema

POD_SPEC = ("spec", "template", "spec")


@pytest.fixture
def deployment() -> TypeSchema:
    return builtin_schema("apps", "v1", "Deployment")


def test_containers_merge_by_name(deployment: TypeSchema) -> None:
    info = deployment.field((*POD_SPEC, "containers"))
    assert info == FieldInfo(
        list_type="map", list_map_keys=("name",), patch_merge_key="name", patch_strategy="merge"
    )


def test_container_ports_keyed_by_port_and_protocol(deployment: TypeSchema) -> None:
    info = deployment.field((*POD_SPEC, "containers", "ports"))
    assert info.list_map_keys == ("containerPort", "protocol")
    assert info.patch_merge_key == "containerPort"


def test_env_volumes_tolerations(deployment: TypeSchema) -> None:
    assert deployment.field((*POD_SPEC, "containers", "env")).patch_merge_key == "name"
    volumes = deployment.field((*POD_SPEC, "volumes"))
    assert volumes.patch_merge_key == "name"
    assert volumes.patch_strategy == "merge,retainKeys"
    assert deployment.field((*POD_SPEC, "tolerations")).list_type == "atomic"
    assert deployment.field((*POD_SPEC, "containers", "args")).list_type == "atomic"


def test_selector_is_atomic_map_and_strategy_retains_keys(deployment: TypeSchema) -> None:
    assert deployment.field(("spec", "selector")).map_type == "atomic"
    assert deployment.field(("spec", "strategy")).patch_strategy == "retainKeys"
    assert deployment.field(("spec", "template", "metadata", "labels")).map_type == "granular"


def test_metadata_lists() -> None:
    cm = builtin_schema("", "v1", "ConfigMap")
    assert cm.field(("metadata", "finalizers")).list_type == "set"
    owners = cm.field(("metadata", "ownerReferences"))
    assert owners.list_map_keys == ("uid",)
    assert owners.patch_merge_key == "uid"


def test_unknown_paths() -> None:
    cm = builtin_schema("", "v1", "ConfigMap")
    assert cm.field(("nope", "deeper")) is UNKNOWN
    assert cm.field(("data", "some-key")) == FieldInfo()


def test_rbac_and_service_lists() -> None:
    svc = builtin_schema("", "v1", "Service")
    ports = svc.field(("spec", "ports"))
    assert ports.list_map_keys == ("port", "protocol")
    role = builtin_schema("rbac.authorization.k8s.io", "v1", "ClusterRole")
    assert role.field(("rules",)).list_type == "atomic"
    assert role.field(("aggregationRule", "clusterRoleSelectors")).list_type == "atomic"


def test_every_served_kind_has_a_schema() -> None:
    kinds = [
        ("", "v1", k)
        for k in [
            "Namespace",
            "Secret",
            "ConfigMap",
            "Service",
            "ServiceAccount",
            "Pod",
            "Node",
            "Event",
            "Endpoints",
            "PersistentVolumeClaim",
        ]
    ] + [
        ("events.k8s.io", "v1", "Event"),
        ("coordination.k8s.io", "v1", "Lease"),
        ("apps", "v1", "StatefulSet"),
        ("apps", "v1", "DaemonSet"),
        ("apps", "v1", "ReplicaSet"),
        ("batch", "v1", "Job"),
        ("batch", "v1", "CronJob"),
        ("certificates.k8s.io", "v1", "CertificateSigningRequest"),
        ("rbac.authorization.k8s.io", "v1", "Role"),
        ("rbac.authorization.k8s.io", "v1", "RoleBinding"),
        ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"),
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        ("discovery.k8s.io", "v1", "EndpointSlice"),
        ("networking.k8s.io", "v1", "Ingress"),
        ("policy", "v1", "PodDisruptionBudget"),
        ("autoscaling", "v2", "HorizontalPodAutoscaler"),
        ("autoscaling", "v1", "Scale"),
        ("authorization.k8s.io", "v1", "SelfSubjectAccessReview"),
        ("authorization.k8s.io", "v1", "SubjectAccessReview"),
        ("authorization.k8s.io", "v1", "SelfSubjectRulesReview"),
        ("authentication.k8s.io", "v1", "SelfSubjectReview"),
        ("authentication.k8s.io", "v1", "TokenReview"),
    ]
    for gvk in kinds:
        schema = builtin_schema(*gvk)
        assert schema.openapi["x-kubernetes-group-version-kind"] == [
            {"group": gvk[0], "version": gvk[1], "kind": gvk[2]}
        ]
        assert schema.openapi["description"]
    with pytest.raises(KeyError):
        builtin_schema("apps", "v1", "NoSuchKind")
