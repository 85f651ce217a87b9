"""`/openapi/v2` and `/openapi/v3` documents, built from the served types.

What clients read from them:
- kubectl's field-validation check (`kubectl apply`, default `--validate=strict`) fetches
  `/openapi/v3`, then the group-version document, and looks for a PATCH operation whose
  `x-kubernetes-group-version-kind` (a single object) is the kind, with a `fieldValidation`
  query parameter. Found: kubectl sends `fieldValidation=Strict` and skips client-side checks.
- kubectl's client-side apply computes a strategic merge patch from the components schema with
  that GVK (a list) when the PATCH operation accepts `application/strategic-merge-patch+json`.
- `kubectl explain` finds the kind through the GVK extension of any operation on the resource
  path, then walks `components.schemas` through `$ref`, `items` and `additionalProperties`.

`/openapi/v2` is served as JSON, or as gnostic protobuf (openapi_pb) to clients that ask for
it: kubectl up to 1.28 asks only for protobuf, and its client-side apply fails without it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol, cast

from emulator import errors
from emulator.openapi_pb import encode_document
from emulator.registry import Registry
from emulator.schema import (
    REF_PREFIX,
    TypeSchema,
    builtin_definitions,
    builtin_kubernetes_version,
)
from emulator.wire import ApiRequest, ApiResponse

Doc = dict[str, Any]

META = "io.k8s.apimachinery.pkg.apis.meta.v1."
STATUS = META + "Status"
DELETE_OPTIONS = META + "DeleteOptions"
PATCH = META + "Patch"
WATCH_EVENT = META + "WatchEvent"
SCALE = "io.k8s.api.autoscaling.v1.Scale"
PROTOBUF_V2 = "application/com.github.proto-openapi.spec.v2"


class ServedType(Protocol):
    """The part of registry.ResourceType that the documents need."""

    group: str
    version: str
    resource: str
    kind: str
    namespaced: bool
    subresources: tuple[str, ...]
    schema: TypeSchema | None


def served_types(registry: Registry) -> list[ServedType]:
    return list(cast(Iterable[ServedType], registry.all()))


def gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


# ---------------------------------------------------------------------------- parameters


def _query(name: str, kind: str, description: str) -> Doc:
    return {
        "description": description,
        "in": "query",
        "name": name,
        "schema": {"type": kind, "uniqueItems": True},
    }


_PRETTY = _query("pretty", "string", "If 'true', then the output is pretty printed.")
_DRY_RUN = _query(
    "dryRun",
    "string",
    "When present, indicates that modifications should not be persisted. Valid values are: "
    "- All: all dry run stages will be processed",
)
_FIELD_MANAGER = _query(
    "fieldManager",
    "string",
    "fieldManager is a name associated with the actor or entity that is making these changes.",
)
_FIELD_VALIDATION = _query(
    "fieldValidation",
    "string",
    "fieldValidation instructs the server on how to handle objects in the request containing "
    "unknown or duplicate fields. Valid values are: - Ignore - Warn - Strict.",
)
_FORCE = _query(
    "force",
    "boolean",
    'Force is going to "force" Apply requests. It means user will re-acquire conflicting '
    "fields owned by other people. Force flag must be unset for non-apply patch requests.",
)
_LIST_PARAMS = [
    _query("allowWatchBookmarks", "boolean", "allowWatchBookmarks requests BOOKMARK events."),
    _query("continue", "string", "The continue token of a previous list call."),
    _query("fieldSelector", "string", "A selector to restrict the list by fields."),
    _query("labelSelector", "string", "A selector to restrict the list by labels."),
    _query("limit", "integer", "limit is a maximum number of responses to return."),
    _query("resourceVersion", "string", "resourceVersion sets a constraint on the versions."),
    _query("resourceVersionMatch", "string", "How resourceVersion is applied to list calls."),
    _query("sendInitialEvents", "boolean", "Send the current objects as ADDED events first."),
    _query("timeoutSeconds", "integer", "Timeout for the list/watch call."),
    _query("watch", "boolean", "Watch for changes to the described resources."),
]
_DELETE_PARAMS = [
    _DRY_RUN,
    _query("gracePeriodSeconds", "integer", "The duration in seconds before deletion."),
    _query("orphanDependents", "boolean", "Deprecated: please use the PropagationPolicy."),
    _query("propagationPolicy", "string", "Whether and how garbage collection will be performed."),
]
_NAME = {
    "description": "name of the object",
    "in": "path",
    "name": "name",
    "required": True,
    "schema": {"type": "string", "uniqueItems": True},
}
_NAMESPACE = {
    "description": "object name and auth scope, such as for teams and projects",
    "in": "path",
    "name": "namespace",
    "required": True,
    "schema": {"type": "string", "uniqueItems": True},
}

_RESPONSE_TYPES = ("application/json", "application/yaml", "application/vnd.kubernetes.protobuf")


def _content(ref: str, types: Iterable[str] = _RESPONSE_TYPES) -> Doc:
    return {t: {"schema": {"$ref": REF_PREFIX + ref}} for t in types}


def _responses(ref: str, *codes: tuple[str, str]) -> Doc:
    return {code: {"content": _content(ref), "description": text} for code, text in codes}


# ---------------------------------------------------------------------------- per type


@dataclass
class _Names:
    kind_ref: str
    list_ref: str


def _op_id(verb: str, t: ServedType, suffix: str = "") -> str:
    group = "".join(
        p.capitalize() for p in (t.group or "core").split(".") if p not in ("k8s", "io")
    )
    scope = "Namespaced" if t.namespaced and verb not in ("listAll",) else ""
    verb = "list" if verb == "listAll" else verb
    return f"{verb}{group}{t.version.capitalize()}{scope}{t.kind}{suffix}"


def _operation(
    t: ServedType,
    action: str,
    verb: str,
    description: str,
    responses: Doc,
    *,
    gvk: Doc,
    parameters: list[Doc] | None = None,
    body: Doc | None = None,
    suffix: str = "",
) -> Doc:
    op: Doc = {
        "description": description,
        "operationId": _op_id(verb, t, suffix),
        "responses": responses,
        "tags": [f"{(t.group or 'core').replace('.', '_')}_{t.version}"],
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk,
    }
    if parameters:
        op["parameters"] = parameters
    if body is not None:
        op["requestBody"] = body
    return op


def _patch_body(builtin: bool) -> Doc:
    types = ["application/json-patch+json", "application/merge-patch+json"]
    if builtin:
        types.append("application/strategic-merge-patch+json")
    types.append("application/apply-patch+yaml")
    return {
        "content": {t: {"schema": {"$ref": REF_PREFIX + PATCH}} for t in types},
        "required": True,
    }


def _object_paths(
    t: ServedType, base: str, ref: str, gvk: Doc, builtin: bool, suffix: str, what: str
) -> Doc:
    item: Doc = {"parameters": [_NAME, *([_NAMESPACE] if t.namespaced else []), _PRETTY]}
    ok = _responses(ref, ("200", "OK"))
    item["get"] = _operation(
        t, "get", "read", f"read {what} of the specified {t.kind}", ok, gvk=gvk, suffix=suffix
    )
    write = [_DRY_RUN, _FIELD_MANAGER, _FIELD_VALIDATION]
    item["put"] = _operation(
        t,
        "put",
        "replace",
        f"replace {what} of the specified {t.kind}",
        _responses(ref, ("200", "OK"), ("201", "Created")),
        gvk=gvk,
        parameters=write,
        body={"content": _content(ref, ("*/*",)), "required": True},
        suffix=suffix,
    )
    item["patch"] = _operation(
        t,
        "patch",
        "patch",
        f"partially update {what} of the specified {t.kind}",
        _responses(ref, ("200", "OK"), ("201", "Created")),
        gvk=gvk,
        parameters=[*write, _FORCE],
        body=_patch_body(builtin),
        suffix=suffix,
    )
    return {base: item}


def _type_paths(t: ServedType, names: _Names, builtin: bool) -> Doc:
    prefix = "/" + gv_path(t.group, t.version)
    scope = f"{prefix}/namespaces/{{namespace}}" if t.namespaced else prefix
    collection = f"{scope}/{t.resource}"
    gvk = {"group": t.group, "kind": t.kind, "version": t.version}
    verbs = set(getattr(t, "verbs", ()) or ())
    create_only = bool(verbs) and verbs <= {"create"}
    paths: Doc = {}
    col: Doc = {"parameters": [*([_NAMESPACE] if t.namespaced else []), _PRETTY]}
    write = [_DRY_RUN, _FIELD_MANAGER, _FIELD_VALIDATION]
    col["post"] = _operation(
        t,
        "post",
        "create",
        f"create a {t.kind}",
        _responses(names.kind_ref, ("200", "OK"), ("201", "Created"), ("202", "Accepted")),
        gvk=gvk,
        parameters=write,
        body={"content": _content(names.kind_ref, ("*/*",)), "required": True},
    )
    if not create_only:
        col["get"] = _operation(
            t,
            "list",
            "list",
            f"list or watch objects of kind {t.kind}",
            _responses(names.list_ref, ("200", "OK")),
            gvk=gvk,
            parameters=_LIST_PARAMS,
        )
        col["delete"] = _operation(
            t,
            "deletecollection",
            "deleteCollection",
            f"delete collection of {t.kind}",
            _responses(STATUS, ("200", "OK")),
            gvk=gvk,
            parameters=[*_DELETE_PARAMS, *_LIST_PARAMS],
            body={"content": _content(DELETE_OPTIONS, ("*/*",))},
        )
    paths[collection] = col
    if create_only:
        return paths
    if t.namespaced:
        paths[f"{prefix}/{t.resource}"] = {
            "get": _operation(
                t,
                "list",
                "listAll",
                f"list or watch objects of kind {t.kind}",
                _responses(names.list_ref, ("200", "OK")),
                gvk=gvk,
                parameters=_LIST_PARAMS,
                suffix="ForAllNamespaces",
            ),
            "parameters": [_PRETTY],
        }
    item_path = f"{collection}/{{name}}"
    item = _object_paths(t, item_path, names.kind_ref, gvk, builtin, "", "the")[item_path]
    item["delete"] = _operation(
        t,
        "delete",
        "delete",
        f"delete a {t.kind}",
        _responses(STATUS, ("200", "OK"), ("202", "Accepted")),
        gvk=gvk,
        parameters=_DELETE_PARAMS,
        body={"content": _content(DELETE_OPTIONS, ("*/*",))},
    )
    paths[item_path] = item
    if "status" in t.subresources:
        paths.update(
            _object_paths(
                t, f"{item_path}/status", names.kind_ref, gvk, builtin, "Status", "status"
            )
        )
    if "scale" in t.subresources:
        scale_gvk = {"group": "autoscaling", "kind": "Scale", "version": "v1"}
        paths.update(
            _object_paths(t, f"{item_path}/scale", SCALE, scale_gvk, builtin, "Scale", "scale")
        )
    return paths


def _list_schema(kind_ref: str, group: str, version: str, kind: str) -> Doc:
    type_meta = builtin_definitions()["io.k8s.api.core.v1.ConfigMapList"]["properties"]
    return {
        "description": f"{kind}List is a list of {kind}",
        "properties": {
            "apiVersion": type_meta["apiVersion"],
            "items": {
                "description": f"List of {kind.lower()}s.",
                "items": {"$ref": REF_PREFIX + kind_ref},
                "type": "array",
            },
            "kind": type_meta["kind"],
            "metadata": type_meta["metadata"],
        },
        "required": ["items"],
        "type": "object",
        "x-kubernetes-group-version-kind": [
            {"group": group, "kind": kind + "List", "version": version}
        ],
    }


def _names(t: ServedType, components: Doc) -> _Names:
    schema = t.schema
    if schema is not None and schema.name:
        kind_ref = schema.name
        components.update(schema.components())
    else:
        kind_ref = (
            ".".join([*reversed(t.group.split(".")), t.version, t.kind]) if t.group else t.kind
        )
        components[kind_ref] = {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
            "x-kubernetes-group-version-kind": [
                {"group": t.group, "kind": t.kind, "version": t.version}
            ],
        }
    list_ref = kind_ref + "List"
    if list_ref not in components:
        components[list_ref] = builtin_definitions().get(list_ref) or _list_schema(
            kind_ref, t.group, t.version, t.kind
        )
    return _Names(kind_ref, list_ref)


def group_version_document(types: Iterable[ServedType], group: str, version: str) -> Doc:
    """The OpenAPI v3 document of one group-version."""
    components: Doc = {}
    paths: Doc = {}
    for t in types:
        if t.group != group or t.version != version or "/" in t.resource:
            continue
        names = _names(t, components)
        paths.update(_type_paths(t, names, bool(t.schema is not None and t.schema.builtin)))
    if not paths:
        raise KeyError((group, version))
    defs = builtin_definitions()
    for name in (STATUS, DELETE_OPTIONS, PATCH, WATCH_EVENT, META + "APIResourceList"):
        components.setdefault(name, defs[name])
    if any("/scale" in p for p in paths):
        components.setdefault(SCALE, defs[SCALE])
    _close_over_refs(components)
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": builtin_kubernetes_version()},
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": dict(sorted(components.items())),
            "securitySchemes": {
                "BearerToken": {
                    "description": "Bearer Token authentication",
                    "in": "header",
                    "name": "authorization",
                    "type": "apiKey",
                }
            },
        },
    }


def _close_over_refs(components: Doc) -> None:
    defs = builtin_definitions()
    todo = [r for s in list(components.values()) for r in _refs(s)]
    while todo:
        name = todo.pop()
        if name in components or name not in defs:
            continue
        components[name] = defs[name]
        todo.extend(_refs(defs[name]))


def _refs(node: Any) -> list[str]:
    text = json.dumps(node)
    out = []
    marker = '"$ref": "' + REF_PREFIX
    start = text.find(marker)
    while start >= 0:
        end = text.index('"', start + len(marker))
        out.append(text[start + len(marker) : end])
        start = text.find(marker, end)
    return out


# ---------------------------------------------------------------------------- v2


def _to_v2(node: Any) -> Any:
    if isinstance(node, list):
        return [_to_v2(x) for x in node]
    if not isinstance(node, dict):
        return node
    if node.get("format") == "int-or-string" or node.get("x-kubernetes-int-or-string"):
        out = {k: v for k, v in node.items() if k not in ("oneOf", "anyOf", "allOf")}
        out.update({"type": "string", "format": "int-or-string"})
        return out
    if "oneOf" in node and "type" not in node and "properties" not in node:
        out = {k: v for k, v in node.items() if k != "oneOf"}
        out["type"] = "string"
        return out
    result: Doc = {}
    for key, value in node.items():
        if key == "$ref" and isinstance(value, str):
            result[key] = value.replace(REF_PREFIX, "#/definitions/")
        elif key in ("nullable", "anyOf", "oneOf", "not"):
            continue
        elif key == "properties" and isinstance(value, dict):
            result[key] = {k: _to_v2(v) for k, v in value.items()}
        else:
            result[key] = _to_v2(value)
    return result


def _v2_operation(op: Doc) -> Doc:
    out: Doc = {k: v for k, v in op.items() if k not in ("requestBody", "responses", "parameters")}
    params = []
    for p in op.get("parameters", []):
        q = {k: v for k, v in p.items() if k != "schema"}
        q["type"] = p.get("schema", {}).get("type", "string")
        q["uniqueItems"] = True
        params.append(q)
    body = op.get("requestBody")
    if body is not None:
        content = body["content"]
        first = next(iter(content.values()))
        params.append(
            {
                "in": "body",
                "name": "body",
                "required": bool(body.get("required")),
                "schema": _to_v2(first["schema"]),
            }
        )
        out["consumes"] = [c for c in content if c != "*/*"] or ["*/*"]
    if params:
        out["parameters"] = params
    out["produces"] = [
        "application/json",
        "application/yaml",
        "application/vnd.kubernetes.protobuf",
    ]
    out["schemes"] = ["https"]
    out["responses"] = {
        code: {
            "description": r["description"],
            "schema": _to_v2(next(iter(r["content"].values()))["schema"]),
        }
        for code, r in op["responses"].items()
    }
    return out


def swagger_document(types: list[ServedType]) -> Doc:
    """The OpenAPI v2 (Swagger 2.0) document of everything served."""
    definitions: Doc = {}
    paths: Doc = {}
    for group, version in sorted({(t.group, t.version) for t in types}):
        try:
            doc = group_version_document(types, group, version)
        except KeyError:
            continue
        for name, schema in doc["components"]["schemas"].items():
            definitions.setdefault(name, _to_v2(schema))
        for path, item in doc["paths"].items():
            entry: Doc = {}
            for method, op in item.items():
                if method == "parameters":
                    entry[method] = [
                        {
                            **{k: v for k, v in p.items() if k != "schema"},
                            "type": p["schema"]["type"],
                            "uniqueItems": True,
                        }
                        for p in op
                    ]
                else:
                    entry[method] = _v2_operation(op)
            paths[path] = entry
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": builtin_kubernetes_version()},
        "paths": dict(sorted(paths.items())),
        "definitions": dict(sorted(definitions.items())),
        "securityDefinitions": {
            "BearerToken": {
                "description": "Bearer Token authentication",
                "in": "header",
                "name": "authorization",
                "type": "apiKey",
            }
        },
        "security": [{"BearerToken": []}],
    }


# ---------------------------------------------------------------------------- HTTP


class _Cache:
    """Serialized documents by a fingerprint of the served types (CRDs change it)."""

    def __init__(self) -> None:
        self.key: tuple[Any, ...] | None = None
        self.v3: dict[str, tuple[bytes, str]] = {}
        self.v2: bytes | None = None
        self.v2_pb: bytes | None = None


_caches: dict[int, _Cache] = {}


def _fingerprint(types: list[ServedType]) -> tuple[Any, ...]:
    return tuple(
        sorted(
            (
                t.group,
                t.version,
                t.resource,
                t.kind,
                t.namespaced,
                tuple(t.subresources),
                id(t.schema),
            )
            for t in types
        )
    )


def _cache_for(registry: Registry, types: list[ServedType]) -> _Cache:
    cache = _caches.setdefault(id(registry), _Cache())
    key = _fingerprint(types)
    if cache.key != key:
        cache.key = key
        cache.v3 = {}
        cache.v2 = None
        cache.v2_pb = None
        for group, version in sorted({(t.group, t.version) for t in types}):
            try:
                doc = group_version_document(types, group, version)
            except KeyError:
                continue
            body = json.dumps(doc, separators=(",", ":")).encode()
            cache.v3[gv_path(group, version)] = (body, hashlib.sha512(body).hexdigest().upper())
    return cache


def _json(status: int, body: bytes, headers: dict[str, str] | None = None) -> ApiResponse:
    return ApiResponse(status, body, {"content-type": "application/json", **(headers or {})})


def _protobuf_v2_type(accept: str) -> str | None:
    """The media type to answer a client that asks for the v2 document in protobuf."""
    for clause in accept.split(","):
        media = clause.split(";", 1)[0].strip().lower()
        if media.startswith(PROTOBUF_V2) and media.endswith("+protobuf"):
            # Both spellings are accepted; the answer uses the one that is a valid media
            # type ("@" is not a token character, and Go's mime parser rejects it).
            return PROTOBUF_V2 + ".v1.0+protobuf"
    return None


def _accepts_json(accept: str) -> bool:
    if not accept.strip():
        return True
    for clause in accept.split(","):
        media = clause.split(";", 1)[0].strip().lower()
        if media in ("application/json", "application/*", "*/*"):
            return True
    return False


def openapi_response(registry: Registry, req: ApiRequest) -> ApiResponse:
    """Serves /openapi/v2, /openapi/v3 and /openapi/v3/<api|apis/...> for GET requests."""
    if req.method not in ("GET", "HEAD"):
        err = errors.method_not_allowed()
        return _json(err.code, json.dumps(err.status()).encode())
    types = served_types(registry)
    cache = _cache_for(registry, types)
    path = req.path.rstrip("/")
    if path == "/openapi/v2":
        accept = req.headers.get("accept", "")
        proto_type = _protobuf_v2_type(accept)
        if proto_type is None and not _accepts_json(accept):
            return ApiResponse(406, b"", {"content-type": "text/plain; charset=utf-8"})
        if cache.v2 is None:
            cache.v2 = json.dumps(swagger_document(types), separators=(",", ":")).encode()
        etag = '"' + hashlib.sha512(cache.v2).hexdigest().upper() + '"'
        if req.headers.get("if-none-match") == etag:
            return ApiResponse(304, b"", {"etag": etag})
        headers = {"etag": etag, "cache-control": "no-cache, private"}
        if proto_type is not None:
            if cache.v2_pb is None:
                cache.v2_pb = encode_document(json.loads(cache.v2))
            return ApiResponse(200, cache.v2_pb, {"content-type": proto_type, **headers})
        return _json(200, cache.v2, headers)
    if path == "/openapi/v3":
        root = {
            "paths": {
                gv: {"serverRelativeURL": f"/openapi/v3/{gv}?hash={digest}"}
                for gv, (_, digest) in sorted(cache.v3.items())
            }
        }
        return _json(200, json.dumps(root).encode(), {"cache-control": "no-cache, private"})
    if path.startswith("/openapi/v3/"):
        gv = path.removeprefix("/openapi/v3/")
        entry = cache.v3.get(gv)
        if entry is None:
            return ApiResponse(
                404, b"404 page not found\n", {"content-type": "text/plain; charset=utf-8"}
            )
        body, digest = entry
        wanted = req.param("hash")
        if wanted is not None and wanted != digest:
            # A stale hash: send the client to the current document, as kube-apiserver does.
            return ApiResponse(301, b"", {"location": f"/openapi/v3/{gv}?hash={digest}"})
        headers = {"etag": f'"{digest}"'}
        if wanted is not None:
            headers["cache-control"] = "public, immutable"
            headers["expires"] = "Thu, 31 Dec 2099 00:00:00 GMT"
        else:
            headers["cache-control"] = "no-cache, private"
        if req.headers.get("if-none-match") == f'"{digest}"':
            return ApiResponse(304, b"", headers)
        return _json(200, body if req.method == "GET" else b"", headers)
    return ApiResponse(404, b"404 page not found\n", {"content-type": "text/plain; charset=utf-8"})
