"""The /openapi/v2 and /openapi/v3 documents."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from emulator.openapi import openapi_response
from emulator.protobuf import iter_fields
from emulator.schema import TypeSchema, builtin_schema, crd_schema
from emulator.wire import ApiRequest

from .test_validation import WIDGET, _crd


@dataclass
class FakeType:
    group: str
    version: str
    resource: str
    kind: str
    namespaced: bool
    subresources: tuple[str, ...] = ()
    schema: TypeSchema | None = None
    verbs: tuple[str, ...] = (
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    )


@dataclass
class FakeRegistry:
    items: list[FakeType] = field(default_factory=list)

    def all(self) -> list[FakeType]:
        return self.items


def _builtin(
    group: str,
    version: str,
    resource: str,
    kind: str,
    namespaced: bool = True,
    subresources: tuple[str, ...] = (),
) -> FakeType:
    return FakeType(
        group,
        version,
        resource,
        kind,
        namespaced,
        subresources,
        builtin_schema(group, version, kind),
    )


@pytest.fixture
def registry() -> FakeRegistry:
    return FakeRegistry(
        [
            _builtin("", "v1", "configmaps", "ConfigMap"),
            _builtin(
                "", "v1", "namespaces", "Namespace", namespaced=False, subresources=("status",)
            ),
            _builtin("apps", "v1", "deployments", "Deployment", subresources=("status", "scale")),
            FakeType(
                "authorization.k8s.io",
                "v1",
                "selfsubjectaccessreviews",
                "SelfSubjectAccessReview",
                False,
                (),
                builtin_schema("authorization.k8s.io", "v1", "SelfSubjectAccessReview"),
                verbs=("create",),
            ),
            FakeType(
                "example.com",
                "v1",
                "widgets",
                "Widget",
                True,
                ("status",),
                crd_schema(_crd(WIDGET), "v1"),
            ),
        ]
    )


def get(registry: FakeRegistry, target: str, **headers: str) -> tuple[int, dict[str, str], Any]:
    resp = openapi_response(registry, ApiRequest.from_target("GET", target, headers=headers))
    body: Any = resp.body
    if resp.headers.get("content-type") == "application/json":
        body = json.loads(resp.body)
    return resp.status, resp.headers, body


def test_v3_root_lists_group_versions_with_hash(registry: FakeRegistry) -> None:
    status, _, root = get(registry, "/openapi/v3")
    assert status == 200
    assert set(root["paths"]) == {
        "api/v1",
        "apis/apps/v1",
        "apis/authorization.k8s.io/v1",
        "apis/example.com/v1",
    }
    url = root["paths"]["apis/apps/v1"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/apis/apps/v1?hash=")
    status, headers, doc = get(registry, url)
    assert status == 200
    assert headers["cache-control"] == "public, immutable"
    assert doc["openapi"] == "3.0.0"


def test_stale_hash_redirects_and_unknown_gv_is_404(registry: FakeRegistry) -> None:
    status, headers, _ = get(registry, "/openapi/v3/apis/apps/v1?hash=OLD")
    assert status == 301
    assert headers["location"].startswith("/openapi/v3/apis/apps/v1?hash=")
    assert get(registry, "/openapi/v3/apis/nope/v1")[0] == 404


def _patch_ops(doc: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [
        item["patch"]
        for item in doc["paths"].values()
        if "patch" in item and item["patch"]["x-kubernetes-group-version-kind"]["kind"] == kind
    ]


def test_write_operations_declare_field_validation(registry: FakeRegistry) -> None:
    _, _, doc = get(registry, "/openapi/v3/apis/apps/v1")
    patches = _patch_ops(doc, "Deployment")
    assert len(patches) == 2  # the object and its status
    for op in patches:
        names = {p["name"] for p in op["parameters"]}
        assert {"fieldValidation", "dryRun", "fieldManager", "force"} <= names
        assert op["x-kubernetes-group-version-kind"] == {
            "group": "apps",
            "kind": "Deployment",
            "version": "v1",
        }
        assert "application/strategic-merge-patch+json" in op["requestBody"]["content"]
    post = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments"]["post"]
    assert "fieldValidation" in {p["name"] for p in post["parameters"]}
    scale = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]
    assert scale["put"]["x-kubernetes-group-version-kind"]["kind"] == "Scale"
    assert "io.k8s.api.autoscaling.v1.Scale" in doc["components"]["schemas"]


def test_components_carry_gvk_and_extensions(registry: FakeRegistry) -> None:
    _, _, doc = get(registry, "/openapi/v3/apis/apps/v1")
    schemas = doc["components"]["schemas"]
    deployment = schemas["io.k8s.api.apps.v1.Deployment"]
    assert deployment["x-kubernetes-group-version-kind"] == [
        {"group": "apps", "kind": "Deployment", "version": "v1"}
    ]
    replicas = schemas["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["replicas"]
    assert replicas["type"] == "integer"
    assert "Defaults to 1" in replicas["description"]
    containers = schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    # Every $ref resolves inside the document.
    text = json.dumps(doc)
    for ref in {part.split('"')[0] for part in text.split('"$ref": "#/components/schemas/')[1:]}:
        assert ref in schemas, ref
    assert "io.k8s.api.apps.v1.DeploymentList" in schemas


def test_core_and_cluster_scoped_paths(registry: FakeRegistry) -> None:
    _, _, doc = get(registry, "/openapi/v3/api/v1")
    paths = doc["paths"]
    assert "/api/v1/namespaces/{name}" in paths
    assert "/api/v1/namespaces/{name}/status" in paths
    assert "/api/v1/namespaces/{namespace}/configmaps/{name}" in paths
    assert "/api/v1/configmaps" in paths
    get_op = paths["/api/v1/namespaces/{namespace}/configmaps"]["get"]
    assert get_op["x-kubernetes-action"] == "list"


def test_review_kinds_are_create_only(registry: FakeRegistry) -> None:
    _, _, doc = get(registry, "/openapi/v3/apis/authorization.k8s.io/v1")
    assert list(doc["paths"]) == ["/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"]
    assert set(doc["paths"]["/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"]) == {
        "post",
        "parameters",
    }


def test_crd_document(registry: FakeRegistry) -> None:
    _, _, doc = get(registry, "/openapi/v3/apis/example.com/v1")
    schemas = doc["components"]["schemas"]
    widget = schemas["com.example.v1.Widget"]
    assert widget["x-kubernetes-group-version-kind"] == [
        {"group": "example.com", "kind": "Widget", "version": "v1"}
    ]
    assert "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" in schemas
    assert schemas["com.example.v1.WidgetList"]["properties"]["items"]["items"] == {
        "$ref": "#/components/schemas/com.example.v1.Widget"
    }
    patches = _patch_ops(doc, "Widget")
    assert patches
    for op in patches:
        assert "fieldValidation" in {p["name"] for p in op["parameters"]}
        # Custom resources take no strategic merge patch (kubectl then uses a merge patch).
        assert "application/strategic-merge-patch+json" not in op["requestBody"]["content"]


def test_documents_follow_registry_changes(registry: FakeRegistry) -> None:
    first = get(registry, "/openapi/v3")[2]
    registry.items.pop()
    second = get(registry, "/openapi/v3")[2]
    assert "apis/example.com/v1" in first["paths"]
    assert "apis/example.com/v1" not in second["paths"]


def test_v2_json_and_protobuf(registry: FakeRegistry) -> None:
    status, _, doc = get(registry, "/openapi/v2", accept="application/json")
    assert status == 200
    assert doc["swagger"] == "2.0"
    assert doc["definitions"]["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["format"] == (
        "int-or-string"
    )
    patch = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
    assert "fieldValidation" in {p["name"] for p in patch["parameters"]}
    assert "#/components/" not in json.dumps(doc)
    # kube-apiserver serves the v2 document as gnostic protobuf too; kubectl <= 1.28 asks only
    # for that (the "@" spelling) and its client-side apply needs it.
    resp = openapi_response(
        registry,
        ApiRequest.from_target(
            "GET",
            "/openapi/v2",
            headers={"accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"},
        ),
    )
    assert resp.status == 200
    assert (
        resp.headers["content-type"] == "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    )
    fields = {n: v for n, _, v in iter_fields(resp.body) if n in (1, 9)}
    assert fields[1] == b"2.0"  # Document.swagger
    names = {
        bytes(dict((n, v) for n, _, v in iter_fields(named))[1])  # NamedSchema.name
        for _, _, named in iter_fields(fields[9])  # Definitions.additional_properties
        if isinstance(named, bytes)
    }
    assert b"io.k8s.apimachinery.pkg.util.intstr.IntOrString" in names
    status, _, body = get(registry, "/openapi/v2", accept="text/html")
    assert (status, body) == (406, b"")


def test_only_get(registry: FakeRegistry) -> None:
    resp = openapi_response(registry, ApiRequest.from_target("POST", "/openapi/v3"))
    assert resp.status == 405
    assert json.loads(resp.body)["reason"] == "MethodNotAllowed"
