"""Discovery documents (legacy and aggregated), /version and health endpoints."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Protocol

from .registry import JSON, Registry, ResourceType
from .wire import ApiRequest, ApiResponse

_dumps = json.JSONEncoder(separators=(",", ":")).encode

SUBRESOURCE_VERBS = ("get", "patch", "update")
AGG_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
AGG_V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"

DEFAULT_VERSION: JSON = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0",
    "gitCommit": "70d3cc986aa8221cd1dfb1121852688902d3bf53",
    "gitTreeState": "clean",
    "buildDate": "2024-12-11T17:59:15Z",
    "goVersion": "go1.23.3",
    "compiler": "gc",
    "platform": "linux/amd64",
}

HEALTH_CHECKS = {
    "/healthz": ["ping", "log", "etcd", "poststarthook/start-apiextensions-controllers"],
    "/livez": ["ping", "log", "etcd", "poststarthook/start-apiextensions-controllers"],
    "/readyz": ["ping", "log", "etcd", "etcd-readiness", "informer-sync", "shutdown"],
}


def json_response(body: Any, content_type: str = "application/json") -> ApiResponse:
    return ApiResponse(200, _dumps(body).encode(), {"content-type": content_type})


def with_etag(req: ApiRequest, body: bytes, content_type: str) -> ApiResponse:
    """Aggregated discovery as kube-apiserver serves it: a strong ETag (the quoted hex SHA-512
    of the document), and 304 Not Modified without a body when If-None-Match names it."""
    etag = '"' + hashlib.sha512(body).hexdigest().upper() + '"'
    if req.headers.get("if-none-match") == etag:
        return ApiResponse(304, b"", {"etag": etag})
    return ApiResponse(200, body, {"content-type": content_type, "etag": etag})


# The pod subresources a client connects to (upgraded streams), and their options' kinds.
_CONNECT_KINDS = {
    "exec": "PodExecOptions",
    "attach": "PodAttachOptions",
    "portforward": "PodPortForwardOptions",
}


def _subresource_kind(rt: ResourceType, sub: str) -> tuple[str, str, str, tuple[str, ...]]:
    """(group, version, kind, verbs) of a subresource's response."""
    if sub == "scale":
        return "autoscaling", "v1", "Scale", SUBRESOURCE_VERBS
    if sub == "finalize":
        return rt.group, rt.version, rt.kind, ("update",)
    if sub == "log":  # pods/log is read only
        return rt.group, rt.version, rt.kind, ("get",)
    if sub in _CONNECT_KINDS and rt.group_resource == ("", "pods"):
        return rt.group, rt.version, _CONNECT_KINDS[sub], ("create", "get")
    if sub == "token":  # serviceaccounts/token answers an authentication.k8s.io TokenRequest
        return "authentication.k8s.io", "v1", "TokenRequest", ("create",)
    return rt.group, rt.version, rt.kind, SUBRESOURCE_VERBS


def _aliases(rt: ResourceType) -> JSON:
    """The short names and categories a resource is also known by, when it has them."""
    aliases: JSON = {}
    if rt.short_names:
        aliases["shortNames"] = list(rt.short_names)
    if rt.categories:
        aliases["categories"] = list(rt.categories)
    return aliases


def api_resource_list(registry: Registry, group: str, version: str) -> JSON:
    resources: list[JSON] = []
    for rt in sorted(registry.resources(group, version), key=lambda r: r.resource):
        entry: JSON = {
            "name": rt.resource,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": sorted(rt.verbs),
            **_aliases(rt),
        }
        if rt.storage_version_hash:
            entry["storageVersionHash"] = rt.storage_version_hash
        resources.append(entry)
        for sub in sorted(rt.subresources):
            g, v, kind, verbs = _subresource_kind(rt, sub)
            sub_entry: JSON = {
                "name": f"{rt.resource}/{sub}",
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": kind,
                "verbs": list(verbs),
            }
            if g != rt.group or v != rt.version:
                sub_entry["group"] = g
                sub_entry["version"] = v
            resources.append(sub_entry)
    gv = f"{group}/{version}" if group else version
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": resources,
    }


def api_group(registry: Registry, group: str) -> JSON:
    versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in registry.versions(group)]
    return {"name": group, "versions": versions, "preferredVersion": versions[0]}


def aggregated_group(registry: Registry, group: str) -> JSON:
    versions = []
    for v in registry.versions(group):
        resources = []
        for rt in sorted(registry.resources(group, v), key=lambda r: r.resource):
            entry: JSON = {
                "resource": rt.resource,
                "responseKind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
                "scope": "Namespaced" if rt.namespaced else "Cluster",
                "singularResource": rt.singular,
                "verbs": sorted(rt.verbs),
                **_aliases(rt),
            }
            subs = []
            for sub in sorted(rt.subresources):
                g, sv, kind, verbs = _subresource_kind(rt, sub)
                subs.append(
                    {
                        "subresource": sub,
                        "responseKind": {"group": g, "version": sv, "kind": kind},
                        "verbs": list(verbs),
                    }
                )
            if subs:
                entry["subresources"] = subs
            resources.append(entry)
        versions.append({"version": v, "resources": resources, "freshness": "Current"})
    meta: JSON = {"creationTimestamp": None}
    if group:
        meta["name"] = group
    return {"metadata": meta, "versions": versions}


def _aggregated(registry: Registry, legacy: bool, api_version: str) -> JSON:
    groups = [g for g in registry.groups() if (g == "") == legacy]
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": api_version,
        "metadata": {},
        "items": [aggregated_group(registry, g) for g in groups],
    }


def aggregated_choice(accept: str) -> str | None:
    for part in accept.split(","):
        p = part.replace(" ", "")
        if "g=apidiscovery.k8s.io" in p and "as=APIGroupDiscoveryList" in p:
            if "v=v2beta1" in p:
                return "v2beta1"
            if "v=v2" in p:
                return "v2"
        elif p.startswith(("application/json", "*/*")):
            return None
    return None


class Aggregation(Protocol):
    """What the aggregation layer adds to discovery: groups served by other servers, and the
    order of all groups (emulator.aggregator)."""

    def group_order(self) -> list[str]: ...

    def api_group(self, group: str) -> JSON | None: ...

    def api_group_or_local(self, group: str) -> JSON: ...

    def aggregated_group_or_local(self, group: str) -> JSON: ...


def discovery_response(
    registry: Registry, req: ApiRequest, host: str, aggregation: Aggregation | None = None
) -> ApiResponse | None:
    """Answer a discovery path, or None when the path is not one."""
    segs = [s for s in req.path.strip("/").split("/") if s]
    if not segs or segs[0] not in ("api", "apis"):
        return None
    accept = req.headers.get("accept", "")
    if len(segs) == 1:
        legacy = segs[0] == "api"
        choice = aggregated_choice(accept)
        if choice is not None:
            ct = AGG_V2 if choice == "v2" else AGG_V2BETA1
            document = _aggregated(registry, legacy, f"apidiscovery.k8s.io/{choice}")
            if aggregation is not None and not legacy:
                document["items"] = [
                    aggregation.aggregated_group_or_local(g) for g in aggregation.group_order()
                ]
            return with_etag(req, _dumps(document).encode(), ct)
        if legacy:
            return json_response(
                {
                    "kind": "APIVersions",
                    "versions": registry.versions("") or ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": host}
                    ],
                }
            )
        if aggregation is not None:
            groups = [aggregation.api_group_or_local(g) for g in aggregation.group_order()]
        else:
            groups = [api_group(registry, g) for g in registry.groups() if g]
        return json_response({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    if segs[0] == "api":
        if len(segs) == 2 and segs[1] in registry.versions(""):
            return json_response(api_resource_list(registry, "", segs[1]))
        return None
    group = segs[1]
    remote = aggregation.api_group(group) if aggregation is not None and len(segs) == 2 else None
    if remote is not None:
        return json_response({"kind": "APIGroup", "apiVersion": "v1", **remote})
    if group not in registry.groups() or not group:
        return None
    if len(segs) == 2:
        return json_response({"kind": "APIGroup", "apiVersion": "v1", **api_group(registry, group)})
    if len(segs) == 3 and segs[2] in registry.versions(group):
        return json_response(api_resource_list(registry, group, segs[2]))
    return None


def version_response(version: JSON | None = None) -> ApiResponse:
    return json_response(version or DEFAULT_VERSION)


def health_response(req: ApiRequest) -> ApiResponse | None:
    path = req.path.rstrip("/") or "/"
    for base, checks in HEALTH_CHECKS.items():
        if path == base:
            if req.query.get("verbose") is not None:
                lines = "".join(f"[+]{c} ok\n" for c in checks)
                text = f"{lines}{base.strip('/')} check passed\n"
            else:
                text = "ok"
            return ApiResponse(200, text.encode(), {"content-type": "text/plain; charset=utf-8"})
        if path.startswith(base + "/") and path[len(base) + 1 :] in checks:
            return ApiResponse(200, b"ok", {"content-type": "text/plain; charset=utf-8"})
    return None
