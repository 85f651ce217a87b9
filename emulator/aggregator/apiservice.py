"""apiregistration.k8s.io/v1 APIService: the type, its rules, and what its fields mean.

As kube-aggregator serves it: cluster-scoped, a status subresource (a create starts without
status), `spec.service.port` defaulted to 443, and ValidateAPIService's rules (the name must be
`<version>.<group>`, only v1 may have an empty group, priorities in range, a local APIService
has neither caBundle nor insecureSkipTLSVerify, a remote one names its Service and does not ask
for both). `kubectl get apiservices` shows Name, Service ("Local" or namespace/name),
Available ("True", or "False (Reason)") and Age.

The helpers order APIServices as kube's apiregistration helper does (group priority, then
name; within a group version priority, then the Kubernetes-aware version order), and give the
priorities kube-apiserver registers its own group versions with.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable
from typing import Any

from ..errors import field_cause
from ..registry import JSON, ResourceType
from ..schema import TypeSchema, builtin_definitions
from ..tables import attach_builtin_columns
from ..validation import name_problems

GROUP = "apiregistration.k8s.io"
VERSION = "v1"
RESOURCE = "apiservices"
KIND = "APIService"
PATH = f"/apis/{GROUP}/{VERSION}/{RESOURCE}"
DEFAULT_PORT = 443
AVAILABLE = "Available"

_PREFIX = "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1."
_REF = "#/components/schemas/"
_STRING: JSON = {"type": "string", "default": ""}
_DEFINITIONS: dict[str, JSON] = {
    _PREFIX + "APIService": {
        "description": "APIService represents a server for a particular GroupVersion. Name "
        'must be "version.group".',
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {
                "allOf": [{"$ref": _REF + "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}],
                "default": {},
            },
            "spec": {"allOf": [{"$ref": _REF + _PREFIX + "APIServiceSpec"}], "default": {}},
            "status": {"allOf": [{"$ref": _REF + _PREFIX + "APIServiceStatus"}], "default": {}},
        },
        "x-kubernetes-group-version-kind": [{"group": GROUP, "kind": KIND, "version": VERSION}],
    },
    _PREFIX + "APIServiceSpec": {
        "type": "object",
        "required": ["groupPriorityMinimum", "versionPriority"],
        "properties": {
            "caBundle": {"type": "string", "format": "byte", "x-kubernetes-list-type": "atomic"},
            "group": {"type": "string"},
            "groupPriorityMinimum": {"type": "integer", "format": "int32", "default": 0},
            "insecureSkipTLSVerify": {"type": "boolean"},
            "service": {"allOf": [{"$ref": _REF + _PREFIX + "ServiceReference"}]},
            "version": {"type": "string"},
            "versionPriority": {"type": "integer", "format": "int32", "default": 0},
        },
    },
    _PREFIX + "ServiceReference": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "namespace": {"type": "string"},
            "port": {"type": "integer", "format": "int32"},
        },
    },
    _PREFIX + "APIServiceStatus": {
        "type": "object",
        "properties": {
            "conditions": {
                "type": "array",
                "items": {
                    "allOf": [{"$ref": _REF + _PREFIX + "APIServiceCondition"}],
                    "default": {},
                },
                "x-kubernetes-list-map-keys": ["type"],
                "x-kubernetes-list-type": "map",
                "x-kubernetes-patch-merge-key": "type",
                "x-kubernetes-patch-strategy": "merge",
            }
        },
    },
    _PREFIX + "APIServiceCondition": {
        "type": "object",
        "required": ["type", "status"],
        "properties": {
            "lastTransitionTime": {"$ref": _REF + "io.k8s.apimachinery.pkg.apis.meta.v1.Time"},
            "message": {"type": "string"},
            "reason": {"type": "string"},
            "status": _STRING,
            "type": _STRING,
        },
    },
}

# kube-apiserver's own group versions and the priorities it registers them with
# (DefaultGenericAPIServicePriorities and the kube API additions, kube-aggregator's own group).
# A CustomResourceDefinition's group versions get 1000/100.
BUILTIN_PRIORITIES: dict[tuple[str, str], tuple[int, int]] = {
    ("", "v1"): (18000, 1),
    ("apiregistration.k8s.io", "v1"): (18000, 15),
    ("apps", "v1"): (17800, 15),
    ("events.k8s.io", "v1"): (17750, 15),
    ("authentication.k8s.io", "v1"): (17700, 15),
    ("authorization.k8s.io", "v1"): (17600, 15),
    ("autoscaling", "v2"): (17500, 30),
    ("autoscaling", "v1"): (17500, 15),
    ("batch", "v1"): (17400, 15),
    ("certificates.k8s.io", "v1"): (17300, 15),
    ("networking.k8s.io", "v1"): (17200, 15),
    ("policy", "v1"): (17100, 15),
    ("rbac.authorization.k8s.io", "v1"): (17000, 15),
    ("storage.k8s.io", "v1"): (16800, 15),
    ("admissionregistration.k8s.io", "v1"): (16700, 15),
    ("apiextensions.k8s.io", "v1"): (16700, 15),
    ("scheduling.k8s.io", "v1"): (16600, 15),
    ("coordination.k8s.io", "v1"): (16500, 15),
    ("node.k8s.io", "v1"): (16300, 15),
    ("discovery.k8s.io", "v1"): (16200, 15),
    ("flowcontrol.apiserver.k8s.io", "v1"): (16100, 21),
}
CRD_PRIORITY = (1000, 100)
# Group versions the emulator serves in an aggregated API server's stead are ordered as that
# server's APIService orders them (Karmada's gives cluster.karmada.io 2000/10).
STAND_IN_PRIORITIES: dict[tuple[str, str], tuple[int, int]] = {
    ("cluster.karmada.io", "v1alpha1"): (2000, 10),
}


def name_of(group: str, version: str) -> str:
    return f"{version}.{group}"


def spec_of(obj: JSON) -> JSON:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def group_version(obj: JSON) -> tuple[str, str]:
    spec = spec_of(obj)
    return str(spec.get("group") or ""), str(spec.get("version") or "")


def service_of(obj: JSON) -> JSON | None:
    """spec.service, or None for a local APIService (served by this server itself)."""
    service = spec_of(obj).get("service")
    return service if isinstance(service, dict) else None


def condition(obj: JSON, kind: str = AVAILABLE) -> JSON | None:
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if isinstance(cond, dict) and cond.get("type") == kind:
            return cond
    return None


def is_available(obj: JSON) -> bool:
    cond = condition(obj)
    return cond is not None and cond.get("status") == "True"


def ca_bundle(obj: JSON) -> bytes:
    text = spec_of(obj).get("caBundle") or ""
    try:
        return base64.b64decode(str(text), validate=True)
    except (binascii.Error, ValueError):
        return b""


# ------------------------------------------------------------------ order


_KUBE_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def kube_version_key(version: str) -> tuple[int, int, int, str]:
    """Sort key putting versions in Kubernetes' order: GA before beta before alpha, higher
    numbers first, then versions of other forms by name."""
    found = _KUBE_VERSION.match(version)
    if found is None:
        return (3, 0, 0, version)
    major, stage, minor = found.groups()
    rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (rank, -int(major), -int(minor or 0), "")


def _priority(obj: JSON, key: str) -> int:
    try:
        return int(spec_of(obj).get(key) or 0)
    except (TypeError, ValueError):
        return 0


def sorted_by_group_and_version(apiservices: Iterable[JSON]) -> list[list[JSON]]:
    """Groups in order (highest group priority first, ties by APIService name), each with its
    APIServices in version order (highest version priority first, then Kubernetes-aware)."""
    ordered = sorted(
        apiservices,
        key=lambda s: (-_priority(s, "groupPriorityMinimum"), s["metadata"]["name"]),
    )
    groups: dict[str, list[JSON]] = {}
    for service in ordered:
        groups.setdefault(group_version(service)[0], []).append(service)
    for members in groups.values():
        members.sort(
            key=lambda s: (-_priority(s, "versionPriority"), kube_version_key(group_version(s)[1]))
        )
    return list(groups.values())


def priorities(group: str, version: str) -> tuple[int, int]:
    """The priorities kube-apiserver registers a local group version with."""
    gv = (group, version)
    return BUILTIN_PRIORITIES.get(gv) or STAND_IN_PRIORITIES.get(gv) or CRD_PRIORITY


# ------------------------------------------------------------------ strategy


def _default(obj: JSON, _user: object = None) -> None:
    service = spec_of(obj).get("service")
    if isinstance(service, dict) and service.get("port") is None:
        service["port"] = DEFAULT_PORT


def _default_update(new: JSON, _old: JSON) -> None:
    _default(new)


def _quote(value: Any) -> str:
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def validate(obj: JSON, _old: JSON | None = None) -> list[JSON]:
    """kube-aggregator's ValidateAPIService (the name's path-segment rules are the generic
    metadata validation's)."""
    causes: list[JSON] = []
    name = str((obj.get("metadata") or {}).get("name") or "")
    spec = spec_of(obj)
    group, version = group_version(obj)
    required = name_of(group, version)
    if name and not name_problems(name, "path") and name != required:
        causes.append(
            field_cause(
                "FieldValueInvalid",
                "metadata.name",
                f'Invalid value: {_quote(name)}: must be `spec.version+"."+spec.group`: '
                f"{_quote(required)}",
            )
        )
    if not group and version != "v1":
        causes.append(
            field_cause(
                "FieldValueRequired",
                "spec.group",
                "Required value: only v1 may have an empty group and it better be legacy kube",
            )
        )
    if group:
        for problem in name_problems(group, "subdomain"):
            causes.append(
                field_cause(
                    "FieldValueInvalid", "spec.group", f"Invalid value: {_quote(group)}: {problem}"
                )
            )
    for problem in name_problems(version, "label1035"):
        causes.append(
            field_cause(
                "FieldValueInvalid", "spec.version", f"Invalid value: {_quote(version)}: {problem}"
            )
        )
    for key, limit in (("groupPriorityMinimum", 20000), ("versionPriority", 1000)):
        value = _priority(obj, key)
        if value <= 0 or value > limit:
            causes.append(
                field_cause(
                    "FieldValueInvalid",
                    f"spec.{key}",
                    f"Invalid value: {value}: must be positive and less than {limit}",
                )
            )
    service = service_of(obj)
    bundle = ca_bundle(obj)
    insecure = bool(spec.get("insecureSkipTLSVerify"))
    if service is None:
        if bundle:
            causes.append(
                field_cause(
                    "FieldValueInvalid",
                    "spec.caBundle",
                    f'Invalid value: "{len(bundle)} bytes": local APIServices may not have a '
                    "caBundle",
                )
            )
        if insecure:
            causes.append(
                field_cause(
                    "FieldValueInvalid",
                    "spec.insecureSkipTLSVerify",
                    "Invalid value: true: local APIServices may not have insecureSkipTLSVerify",
                )
            )
        return causes
    for key in ("namespace", "name"):
        if not service.get(key):
            causes.append(
                field_cause("FieldValueRequired", f"spec.service.{key}", "Required value")
            )
    if insecure and bundle:
        causes.append(
            field_cause(
                "FieldValueInvalid",
                "spec.insecureSkipTLSVerify",
                "Invalid value: true: may not be true if caBundle is present",
            )
        )
    return causes


def resource_type() -> ResourceType:
    definitions = {**builtin_definitions(), **_DEFINITIONS}
    schema = TypeSchema(
        _DEFINITIONS[_PREFIX + KIND], definitions=definitions, name=_PREFIX + KIND, builtin=True
    )
    rt = ResourceType(
        group=GROUP,
        version=VERSION,
        resource=RESOURCE,
        kind=KIND,
        namespaced=False,
        singular="apiservice",
        subresources=("status",),
        schema=schema,
        reset_status_on_create=True,
        name_validation="path",
        prepare_create=_default,
        prepare_update=_default_update,
        validate=validate,
    )
    attach_builtin_columns(rt)
    return rt
