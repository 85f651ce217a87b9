"""Generate emulator/schemas/kubernetes-v1.33.json, the built-in type schemas of the emulator.

Source: the PyPI package kubernetes-validate 1.37.0 (Apache-2.0), which ships the JSON
schemas that its authors derive from the Kubernetes OpenAPI documents, one folder per
Kubernetes minor version. We read `kubernetes-json-schema/v1.33.0-local/_definitions.json`,
keep only the definitions the emulator serves (and everything they reference), and undo the
JSON-Schema-isms that package added so the result has the shape of kube-apiserver's own
OpenAPI v3 `components.schemas`:

- `"type": ["string", "null"]` back to `"type": "string"`;
- `$ref`s from `#/$defs/...` to `#/components/schemas/...`;
- the single-value `enum` it adds to `apiVersion` and `kind` of top-level kinds removed;
- IntOrString and Quantity restored to kube's forms (`format: int-or-string` with a `oneOf`,
  and a string-or-number `oneOf`).

The x-kubernetes-* extensions (patch strategy and merge key, list type and map keys, map type,
group-version-kind) and the descriptions are kept as they are.

Usage:
    pip download --no-deps kubernetes-validate==1.37.0 -d /tmp/kv
    python tools/gen_k8s_schemas.py /tmp/kv/kubernetes_validate-1.37.0-py3-none-any.whl
"""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path
from typing import Any

K8S_VERSION = "v1.33.0"
SOURCE = "kubernetes-validate==1.37.0"
MEMBER = f"kubernetes_validate/kubernetes-json-schema/{K8S_VERSION}-local/_definitions.json"
OUT = (
    Path(__file__).resolve().parent.parent
    / "agent"
    / "testing"
    / "schemas"
    / "kubernetes-v1.33.json"
)

ROOTS = [
    "io.k8s.api.core.v1." + k
    for k in [
        "Namespace",
        "NamespaceList",
        "Secret",
        "SecretList",
        "ConfigMap",
        "ConfigMapList",
        "Service",
        "ServiceList",
        "ServiceAccount",
        "ServiceAccountList",
        "Pod",
        "PodList",
        "Node",
        "NodeList",
        "Event",
        "EventList",
        "Endpoints",
        "EndpointsList",
        "PersistentVolumeClaim",
        "PersistentVolumeClaimList",
    ]
] + [
    "io.k8s.api.events.v1.Event",
    "io.k8s.api.events.v1.EventList",
    "io.k8s.api.coordination.v1.Lease",
    "io.k8s.api.coordination.v1.LeaseList",
    *(
        "io.k8s.api.apps.v1." + k
        for k in [
            "Deployment",
            "DeploymentList",
            "StatefulSet",
            "StatefulSetList",
            "DaemonSet",
            "DaemonSetList",
            "ReplicaSet",
            "ReplicaSetList",
        ]
    ),
    "io.k8s.api.batch.v1.Job",
    "io.k8s.api.batch.v1.JobList",
    "io.k8s.api.batch.v1.CronJob",
    "io.k8s.api.batch.v1.CronJobList",
    "io.k8s.api.certificates.v1.CertificateSigningRequest",
    "io.k8s.api.certificates.v1.CertificateSigningRequestList",
    *(
        "io.k8s.api.rbac.v1." + k
        for k in [
            "Role",
            "RoleList",
            "ClusterRole",
            "ClusterRoleList",
            "RoleBinding",
            "RoleBindingList",
            "ClusterRoleBinding",
            "ClusterRoleBindingList",
        ]
    ),
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionList",
    "io.k8s.api.discovery.v1.EndpointSlice",
    "io.k8s.api.discovery.v1.EndpointSliceList",
    "io.k8s.api.networking.v1.Ingress",
    "io.k8s.api.networking.v1.IngressList",
    "io.k8s.api.policy.v1.PodDisruptionBudget",
    "io.k8s.api.policy.v1.PodDisruptionBudgetList",
    "io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler",
    "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerList",
    "io.k8s.api.autoscaling.v1.Scale",
    "io.k8s.api.authorization.v1.SelfSubjectAccessReview",
    "io.k8s.api.authorization.v1.SubjectAccessReview",
    "io.k8s.api.authorization.v1.SelfSubjectRulesReview",
    "io.k8s.api.authentication.v1.SelfSubjectReview",
    "io.k8s.api.authentication.v1.TokenReview",
    *(
        "io.k8s.apimachinery.pkg.apis.meta.v1." + k
        for k in ["Status", "DeleteOptions", "WatchEvent", "Patch", "APIResourceList"]
    ),
]

INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"

# Our own wording; the source package replaced these two definitions wholesale.
REPLACEMENTS: dict[str, dict[str, Any]] = {
    INT_OR_STRING: {
        "description": "IntOrString holds either an int32 or a string; in JSON it is whichever "
        "of the two was given, so a field of this type accepts a number or a name.",
        "format": "int-or-string",
        "oneOf": [{"type": "integer"}, {"type": "string"}],
    },
    QUANTITY: {
        "description": 'Quantity is a fixed-point number written as a string such as "100m", '
        '"1.5Gi" or "2" (decimal SI, binary SI or decimal exponent suffixes); plain numbers '
        "are accepted too.",
        "oneOf": [{"type": "string"}, {"type": "number"}],
    },
}


def normalize(node: Any) -> Any:
    if isinstance(node, list):
        return [normalize(x) for x in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "type" and isinstance(value, list):
            kinds = [t for t in value if t != "null"]
            out[key] = kinds[0] if len(kinds) == 1 else kinds
        elif key == "$ref":
            out[key] = value.replace("#/$defs/", "#/components/schemas/")
        elif key in ("properties", "x-kubernetes-group-version-kind", "enum", "required"):
            out[key] = {k: normalize(v) for k, v in value.items()} if key == "properties" else value
        else:
            out[key] = normalize(value)
    return out


def refs(node: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                found.add(value.rsplit("/", 1)[-1])
            else:
                found |= refs(value)
    elif isinstance(node, list):
        for x in node:
            found |= refs(x)
    return found


def main(wheel: str) -> None:
    with zipfile.ZipFile(wheel) as zf:
        defs: dict[str, Any] = json.loads(zf.read(MEMBER))["$defs"]
    keep: dict[str, Any] = {}
    todo = list(ROOTS)
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        schema = REPLACEMENTS.get(name) or normalize(defs[name])
        if "x-kubernetes-group-version-kind" in schema:
            for prop in ("apiVersion", "kind"):
                schema.get("properties", {}).get(prop, {}).pop("enum", None)
        keep[name] = schema
        todo.extend(refs(schema) - keep.keys())
    source = f"{SOURCE} ({MEMBER}), normalized by tools/gen_k8s_schemas.py"
    # One definition per line: compact, yet reviewable in diffs.
    lines = [f"{json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in sorted(keep.items())]
    text = (
        "{\n"
        f'"source": {json.dumps(source)},\n'
        f'"kubernetesVersion": {json.dumps(K8S_VERSION)},\n'
        '"schemas": {\n' + ",\n".join(lines) + "\n}\n}\n"
    )
    OUT.write_text(text)
    print(f"wrote {OUT} ({len(keep)} definitions, {len(text)} bytes)")


if __name__ == "__main__":
    main(sys.argv[1])
