"""Karmada API types served by the emulator's karmada profile.

- Cluster (cluster.karmada.io/v1alpha1 clusters): served by karmada-aggregated-apiserver
  upstream, so it is a built-in-like ResourceType here (not a CRD), with the schema of
  karmada's OpenAPI and the server-side behaviour of its registry strategy:
  create clears status, sets generation 1 and fills the 9 default resource models when
  none are given (feature gate CustomizedClusterResourceModeling, on by default) or sorts
  and normalises the given ones; a spec change bumps generation; canonicalisation stamps
  NoExecute taints with timeAdded and moves a lone deprecated `zone` into `zones`.
- Work, the policy, interpreter and networking types: CRDs (emulator.karmada.crds).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from emulator.errors import field_cause
from emulator.timefmt import rfc3339

JSON = dict[str, Any]
GI = 1024**3
MAX_INT64 = 2**63 - 1

CLUSTER_GROUP = "cluster.karmada.io"
CLUSTER_VERSION = "v1alpha1"

_STRING: JSON = {"type": "string"}
_QUANTITY: JSON = {
    "x-kubernetes-int-or-string": True,
    "anyOf": [{"type": "integer"}, {"type": "string"}],
}
_RESOURCE_LIST: JSON = {"type": "object", "additionalProperties": _QUANTITY}
_SECRET_REF: JSON = {
    "type": "object",
    "properties": {"namespace": _STRING, "name": _STRING},
}
_TAINT: JSON = {
    "type": "object",
    "required": ["key", "effect"],
    "properties": {
        "key": _STRING,
        "value": _STRING,
        "effect": {"type": "string", "enum": ["NoExecute", "NoSchedule", "PreferNoSchedule"]},
        "timeAdded": {"type": "string", "format": "date-time"},
    },
}
_CONDITION: JSON = {
    "type": "object",
    "required": ["type", "status", "lastTransitionTime", "reason", "message"],
    "properties": {
        "type": _STRING,
        "status": _STRING,
        "observedGeneration": {"type": "integer", "format": "int64"},
        "lastTransitionTime": {"type": "string", "format": "date-time"},
        "reason": _STRING,
        "message": _STRING,
    },
}

# Structure only: a native type's rules (required syncMode, enums, secretRef fields) are
# checked by validate_cluster, as karmada's ValidateCluster does, not by the schema.
CLUSTER_OPENAPI: JSON = {
    "type": "object",
    "x-kubernetes-group-version-kind": [
        {"group": CLUSTER_GROUP, "version": CLUSTER_VERSION, "kind": "Cluster"}
    ],
    "properties": {
        "apiVersion": _STRING,
        "kind": _STRING,
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "properties": {
                "id": _STRING,
                "syncMode": _STRING,
                "apiEndpoint": _STRING,
                "secretRef": _SECRET_REF,
                "impersonatorSecretRef": _SECRET_REF,
                "insecureSkipTLSVerification": {"type": "boolean"},
                "proxyURL": _STRING,
                "proxyHeader": {"type": "object", "additionalProperties": _STRING},
                "provider": _STRING,
                "region": _STRING,
                "zone": _STRING,
                "zones": {"type": "array", "items": _STRING},
                "taints": {"type": "array", "items": _TAINT},
                "resourceModels": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["grade", "ranges"],
                        "properties": {
                            "grade": {"type": "integer", "format": "int32"},
                            "ranges": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "required": ["name", "min", "max"],
                                    "properties": {
                                        "name": _STRING,
                                        "min": _QUANTITY,
                                        "max": _QUANTITY,
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
        "status": {
            "type": "object",
            "properties": {
                "kubernetesVersion": _STRING,
                "apiEnablements": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["groupVersion"],
                        "properties": {
                            "groupVersion": _STRING,
                            "resources": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "required": ["name", "kind"],
                                    "properties": {"name": _STRING, "kind": _STRING},
                                },
                            },
                        },
                    },
                },
                "conditions": {"type": "array", "items": _CONDITION},
                "nodeSummary": {
                    "type": "object",
                    "properties": {
                        "totalNum": {"type": "integer", "format": "int32"},
                        "readyNum": {"type": "integer", "format": "int32"},
                    },
                },
                "resourceSummary": {
                    "type": "object",
                    "properties": {
                        "allocatable": _RESOURCE_LIST,
                        "allocating": _RESOURCE_LIST,
                        "allocated": _RESOURCE_LIST,
                        "allocatableModelings": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "required": ["grade", "count"],
                                "properties": {
                                    "grade": {"type": "integer", "format": "int32"},
                                    "count": {"type": "integer", "format": "int32"},
                                },
                            },
                        },
                    },
                },
                "remedyActions": {"type": "array", "items": _STRING},
            },
        },
    },
}

# kubectl get clusters (the aggregated server's table convertor shows these).
CLUSTER_PRINTER_COLUMNS: list[JSON] = [
    {"name": "VERSION", "type": "string", "jsonPath": ".status.kubernetesVersion"},
    {"name": "MODE", "type": "string", "jsonPath": ".spec.syncMode"},
    {
        "name": "READY",
        "type": "string",
        "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
    },
    {"name": "AGE", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def _memory(gib: int) -> str:
    return f"{gib}Gi" if gib else "0"


def default_resource_models() -> list[JSON]:
    """The 9 grades karmada fills in: cpu [0,1) [1,2) [2,4) ... [128,inf), memory in Gi."""
    cpu_bounds = [0, 1, 2, 4, 8, 16, 32, 64, 128]
    mem_bounds = [0, 4, 16, 32, 64, 128, 256, 512, 1024]
    models: list[JSON] = []
    for grade in range(9):
        last = grade == 8
        cpu_max = str(MAX_INT64) if last else str(cpu_bounds[grade + 1])
        mem_max = str(MAX_INT64) if last else _memory(mem_bounds[grade + 1])
        models.append(
            {
                "grade": grade,
                "ranges": [
                    {"name": "cpu", "min": str(cpu_bounds[grade]), "max": cpu_max},
                    {"name": "memory", "min": _memory(mem_bounds[grade]), "max": mem_max},
                ],
            }
        )
    return models


def standardize_resource_models(models: list[JSON]) -> None:
    """Sort by grade; first grade's mins become 0 and last grade's maxes MaxInt64."""
    if not models:
        return
    models.sort(key=lambda m: int(m.get("grade", 0)))
    for rng in models[0].get("ranges") or []:
        rng["min"] = "0"
    for rng in models[-1].get("ranges") or []:
        rng["max"] = str(MAX_INT64)


def canonicalize_cluster(cluster: JSON) -> None:
    spec = cluster.setdefault("spec", {})
    for taint in spec.get("taints") or []:
        if taint.get("effect") == "NoExecute" and not taint.get("timeAdded"):
            taint["timeAdded"] = rfc3339(datetime.now(UTC))
    if spec.get("zone") and not spec.get("zones"):
        spec["zones"] = [spec["zone"]]
        spec.pop("zone", None)


def prepare_cluster_for_create(cluster: JSON, _user: object = None) -> None:
    """Create: status cleared, default or standardised resource models, canonical form.

    (generation 1 and the status reset are the core's tracks_generation and
    reset_status_on_create.)
    """
    cluster.pop("status", None)
    spec = cluster.setdefault("spec", {})
    if not spec.get("resourceModels"):
        spec["resourceModels"] = default_resource_models()
    else:
        standardize_resource_models(spec["resourceModels"])
    canonicalize_cluster(cluster)


def prepare_cluster_for_update(new: JSON, _old: JSON) -> None:
    """Update of the main resource: standardised resource models, canonical form."""
    models = new.get("spec", {}).get("resourceModels")
    if models:
        standardize_resource_models(models)
    canonicalize_cluster(new)


_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def validate_cluster(cluster: JSON, _old: JSON | None = None) -> list[JSON]:
    """karmada's ValidateCluster (name and spec rules), as kube-style causes."""
    causes: list[JSON] = []
    name = str(cluster.get("metadata", {}).get("name", ""))
    if name and len(name) > 48:
        causes.append(
            field_cause(
                "FieldValueInvalid",
                "metadata.name",
                f'Invalid value: "{name}": must be no more than 48 characters',
            )
        )
    elif name and not _DNS1123_LABEL.match(name):
        causes.append(
            field_cause(
                "FieldValueInvalid",
                "metadata.name",
                f'Invalid value: "{name}": a lowercase RFC 1123 label must consist of lower case '
                "alphanumeric characters or '-', and must start and end with an alphanumeric "
                "character (e.g. 'my-name',  or '123-abc', regex used for validation is "
                "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
            )
        )
    spec = cluster.get("spec") or {}
    sync_mode = spec.get("syncMode", "")
    if not sync_mode:
        causes.append(field_cause("FieldValueRequired", "spec.syncMode", "Required value"))
    if sync_mode not in ("Pull", "Push"):
        causes.append(
            field_cause(
                "FieldValueNotSupported",
                "spec.syncMode",
                f'Unsupported value: "{sync_mode}": supported values: "Pull", "Push"',
            )
        )
    endpoint = spec.get("apiEndpoint", "")
    if endpoint:
        form = "; desired format: hostname, hostname:port, IP or IP:port"
        parts = urlsplit(endpoint)
        if not parts.netloc:
            causes.append(
                field_cause(
                    "FieldValueInvalid",
                    "spec.apiEndpoint",
                    f'Invalid value: "": host must be provided{form}',
                )
            )
        if "@" in parts.netloc:
            causes.append(
                field_cause(
                    "FieldValueInvalid",
                    "spec.apiEndpoint",
                    f'Invalid value: "{parts.netloc.split("@")[0]}": user information is not permitted in the URL',
                )
            )
        if parts.fragment:
            causes.append(
                field_cause(
                    "FieldValueInvalid",
                    "spec.apiEndpoint",
                    f'Invalid value: "{parts.fragment}": fragments are not permitted in the URL',
                )
            )
        if parts.query:
            causes.append(
                field_cause(
                    "FieldValueInvalid",
                    "spec.apiEndpoint",
                    f'Invalid value: "{parts.query}": query parameters are not permitted in the URL',
                )
            )
    for ref in ("secretRef", "impersonatorSecretRef"):
        value = spec.get(ref)
        if isinstance(value, dict):
            for key in ("namespace", "name"):
                if not value.get(key):
                    causes.append(
                        field_cause("FieldValueRequired", f"spec.{ref}.{key}", "Required value")
                    )
    proxy = spec.get("proxyURL", "")
    if proxy and urlsplit(proxy).scheme not in ("http", "https", "socks5"):
        causes.append(
            field_cause(
                "FieldValueInvalid",
                "spec.proxyURL",
                f'Invalid value: "{proxy}": unsupported scheme "{urlsplit(proxy).scheme}", '
                "must be http, https, or socks5",
            )
        )
    return causes


def cluster_resource_type() -> Any:
    """The registry.ResourceType of Karmada's aggregated Cluster API."""
    import importlib

    from emulator.registry import ResourceType

    schema_module = importlib.import_module("emulator.schema")
    schema = schema_module.TypeSchema.from_openapi(CLUSTER_OPENAPI)
    return ResourceType(
        group=CLUSTER_GROUP,
        version=CLUSTER_VERSION,
        resource="clusters",
        kind="Cluster",
        namespaced=False,
        singular="cluster",
        subresources=("status",),
        schema=schema,
        printer_columns=CLUSTER_PRINTER_COLUMNS,
        tracks_generation=True,
        reset_status_on_create=True,
        allow_create_on_update=False,
        allow_unconditional_update=True,
        name_validation="none",
        prepare_create=prepare_cluster_for_create,
        prepare_update=prepare_cluster_for_update,
        validate=validate_cluster,
    )
