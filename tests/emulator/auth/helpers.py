"""Shared builders for the auth tests (plain functions, no fixtures)."""

from __future__ import annotations

import base64
from typing import Any

from emulator.requestinfo import RequestAttributes, parse_request_info
from emulator.wire import ApiRequest

UNAUTHORIZED = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "Unauthorized",
    "reason": "Unauthorized",
    "code": 401,
}


class FakeStore:
    """Stored objects keyed by (group, resource, namespace, name), as the lookup sees them."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str, str], dict[str, Any]] = {}

    def put(self, group: str, resource: str, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        self.objects[(group, resource, meta.get("namespace", ""), meta["name"])] = obj
        return obj

    def lookup(self, group: str, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((group, resource, namespace, name))


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def secret(
    name: str, namespace: str, type_: str, data: dict[str, str], **meta: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, **meta},
        "type": type_,
        "data": {k: b64(v) for k, v in data.items()},
    }


def bootstrap_secret(token_id: str, token_secret: str, /, **data: str) -> dict[str, Any]:
    values = {
        "token-id": token_id,
        "token-secret": token_secret,
        "usage-bootstrap-authentication": "true",
        "usage-bootstrap-signing": "true",
    }
    values.update({k.replace("_", "-"): v for k, v in data.items()})
    return secret(
        f"bootstrap-token-{token_id}", "kube-system", "bootstrap.kubernetes.io/token", values
    )


def request(method: str = "GET", target: str = "/api/v1/namespaces", **headers: str) -> ApiRequest:
    return ApiRequest.from_target(
        method, target, headers={k.replace("_", "-").lower(): v for k, v in headers.items()}
    )


def attrs(method: str, target: str) -> RequestAttributes:
    return parse_request_info(ApiRequest.from_target(method, target))


def cluster_role(name: str, *rules: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": list(rules),
    }


def role(name: str, namespace: str, *rules: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": name, "namespace": namespace},
        "rules": list(rules),
    }


def rule(
    verbs: list[str],
    groups: list[str] | None = None,
    resources: list[str] | None = None,
    names: list[str] | None = None,
    urls: list[str] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"verbs": verbs}
    if groups is not None:
        out["apiGroups"] = groups
    if resources is not None:
        out["resources"] = resources
    if names is not None:
        out["resourceNames"] = names
    if urls is not None:
        out["nonResourceURLs"] = urls
    return out


def subject(kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": kind, "name": name}
    if kind != "ServiceAccount":
        out["apiGroup"] = "rbac.authorization.k8s.io"
    if namespace is not None:
        out["namespace"] = namespace
    return out


def cluster_binding(name: str, role_name: str, *subjects: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": role_name,
        },
        "subjects": list(subjects),
    }


def binding(
    name: str, namespace: str, role_kind: str, role_name: str, *subjects: dict[str, Any]
) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role_name},
        "subjects": list(subjects),
    }
