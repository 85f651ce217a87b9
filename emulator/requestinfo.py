"""Parse a request path into Kubernetes request attributes, as kube-apiserver's RequestInfoFactory.

Routing and RBAC both read these, so that "what is this request" is decided once.
"""

from __future__ import annotations

from dataclasses import dataclass

from .wire import ApiRequest

_SPECIAL_VERBS = {"proxy", "watch"}
_NAMESPACE_SUBRESOURCES = {"status", "finalize"}


@dataclass(frozen=True)
class RequestAttributes:
    is_resource_request: bool
    path: str
    # get, list, watch, create, update, patch, delete, deletecollection; for
    # non-resource requests the lower-case HTTP method.
    verb: str
    api_prefix: str = ""  # "api" or "apis"
    api_group: str = ""
    api_version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    # Path segments after the subresource (e.g. proxy paths).
    parts: tuple[str, ...] = ()


def _split(path: str) -> list[str]:
    return [p for p in path.strip("/").split("/") if p]


def parse_request_info(req: ApiRequest) -> RequestAttributes:
    method = req.method.upper()
    segments = _split(req.path)
    nonresource = RequestAttributes(False, req.path, method.lower())
    if not segments or segments[0] not in ("api", "apis"):
        return nonresource
    prefix = segments[0]
    rest = segments[1:]
    if prefix == "apis":
        if len(rest) < 2:
            return nonresource  # /apis, /apis/<group>
        group, version, rest = rest[0], rest[1], rest[2:]
    else:
        if len(rest) < 1:
            return nonresource  # /api
        group, version, rest = "", rest[0], rest[1:]
    if not rest:
        return nonresource  # discovery of a group version

    verb = {
        "POST": "create",
        "GET": "get",
        "HEAD": "get",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete",
    }.get(method, method.lower())

    # Legacy /watch/ prefix: /api/v1/watch/namespaces/x/pods
    if rest[0] in _SPECIAL_VERBS and len(rest) > 1:
        if rest[0] == "watch":
            verb = "watch"
        else:
            verb = rest[0]
        rest = rest[1:]

    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        # /namespaces/<ns>/<resource>...; but /namespaces/<ns>[/status|/finalize] is the
        # namespace object itself, whose namespace attribute is its own name (as upstream).
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    parts = tuple(rest[3:])

    if not name and verb == "get":
        verb = "watch" if req.flag("watch") else "list"
    elif verb == "get" and req.flag("watch") and not subresource:
        # A subresource's own query (a proxied watch: clusters/<name>/proxy/...?watch=true)
        # leaves the verb alone, as kube's RequestInfoFactory does.
        verb = "watch"
    if not name and verb == "delete":
        verb = "deletecollection"
    if verb in ("list", "watch") and not name:
        # As upstream: a single-object list/watch is authorized as that object, so that a
        # resourceNames rule can allow an informer on one named object.
        name = _name_from_field_selector(req.param("fieldSelector") or "")
    return RequestAttributes(
        True,
        req.path,
        verb,
        api_prefix=prefix,
        api_group=group,
        api_version=version,
        namespace=namespace,
        resource=resource,
        subresource=subresource,
        name=name,
        parts=parts,
    )


def _name_from_field_selector(selector: str) -> str:
    for term in selector.split(","):
        key, sep, value = term.partition("=")
        if key.strip() == "metadata.name" and sep and not value.startswith("="):
            return value.strip()
        if key.strip() == "metadata.name" and value.startswith("="):
            return value[1:].strip()
    return ""
