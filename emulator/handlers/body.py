"""A write's body: decoded by its media type, checked to be an object of the URL's type."""

from __future__ import annotations

import json
from typing import Any

import yaml

from .. import errors, protobuf
from ..registry import JSON, ResourceType
from ..wire import ApiRequest

JSON_CT = "application/json"
PATCH_JSON = "application/json-patch+json"
PATCH_MERGE = "application/merge-patch+json"
PATCH_STRATEGIC = "application/strategic-merge-patch+json"
PATCH_APPLY = "application/apply-patch+yaml"
# Media types an object body may come in as JSON or YAML.
JSON_YAML_TYPES = (JSON_CT, "application/yaml", "application/x-yaml", "text/yaml")

NAMESPACE_MISMATCH = (
    "the namespace of the provided object does not match the namespace sent on the request"
)


def parse_body(req: ApiRequest, rt: ResourceType | None = None) -> Any:
    """The body as data. With `rt`, an object of that type: built-in types also take
    protobuf (kubectl's typed clients send it), custom resources only JSON and YAML."""
    if not req.body:
        raise errors.bad_request("the body of the request was empty")
    ct = req.content_type
    if rt is not None and ct not in ("", *JSON_YAML_TYPES):
        if ct == protobuf.PROTOBUF and not rt.crd_name:
            return protobuf.decode_object(req.body, rt.kind)
        accepted = protobuf.CUSTOM_MEDIA_TYPES if rt.crd_name else protobuf.BUILTIN_MEDIA_TYPES
        raise protobuf.unsupported_media_type(accepted)
    try:
        if ct in ("application/yaml", "application/x-yaml", "text/yaml", PATCH_APPLY):
            return _yaml(req.body)
        return json.loads(req.body)
    except (ValueError, yaml.YAMLError) as exc:
        raise errors.bad_request(f"json: cannot unmarshal request body: {exc}") from exc


def _yaml(body: bytes) -> Any:
    """YAML, read as JSON when it is JSON (what clients such as the agent send as an apply
    patch): the same data at a fraction of a YAML parser's cost, and numbers such as 1e3 read
    as numbers, as kube's YAML reader does (PyYAML, a YAML 1.1 reader, takes them for
    strings)."""
    if body.lstrip()[:1] in (b"{", b"["):
        try:
            return json.loads(body)
        except ValueError:
            pass  # YAML in flow style, not JSON
    return yaml.safe_load(body)


def check_type(rt: ResourceType, obj: Any) -> JSON:
    """An object whose kind and apiVersion, where given, are the URL's; metadata a map."""
    if not isinstance(obj, dict):
        raise errors.bad_request(
            f"Object '{rt.kind}' is not a valid object: expected a JSON object"
        )
    kind = obj.get("kind")
    api_version = obj.get("apiVersion")
    if kind and kind != rt.kind:
        raise errors.bad_request(
            f'{kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
            f'no kind "{kind}" is registered for version "{rt.api_version}"'
        )
    if api_version and api_version != rt.api_version:
        raise errors.bad_request(
            f"the API version in the data ({api_version}) does not match the expected API "
            f"version ({rt.api_version})"
        )
    meta = obj.get("metadata")
    if meta is None:
        obj["metadata"] = {}
    elif not isinstance(meta, dict):
        raise errors.bad_request("metadata: expected an object")
    return obj


def check_url_identity(
    rt: ResourceType, ns: str, name: str, meta: JSON, *, empty_matches: bool
) -> None:
    """The body's name and namespace must be those of the URL, as kube's request handlers
    check them. On update and apply an empty value matches (it is filled from the URL); a
    patched object must keep exactly the URL's."""
    body_name = meta.get("name") if empty_matches else meta.get("name", name)
    if (body_name or not empty_matches) and body_name != name:
        raise errors.bad_request(
            f"the name of the object ({body_name}) does not match the name on the URL ({name})"
        )
    body_ns = meta.get("namespace") if empty_matches else meta.get("namespace", ns)
    if rt.namespaced and (body_ns or not empty_matches) and body_ns != ns:
        raise errors.bad_request(NAMESPACE_MISMATCH)
