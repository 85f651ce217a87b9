"""EndpointSlices reported to the control plane as Works: names, labels and the Work itself.

The serviceExport and endpointsliceCollect controllers both report a member's EndpointSlices as
Works in the cluster's execution namespace, one Work per slice, named as the control plane names
Works (`generate_work_name`). One Work may be reported by both: its label
`endpointslice.karmada.io/managed-by` holds the reporters' tokens joined with ".", and each
reporter withdraws only its own token, deleting the Work when it was the last one.

Pure functions: no I/O. What each controller writes differs only by its `Reporter`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from agent.karmada import names

Obj = dict[str, Any]

SERVICE_EXPORT_KIND = "ServiceExport"
MULTI_CLUSTER_SERVICE_KIND = "MultiClusterService"
ENDPOINT_SLICE_KIND = "EndpointSlice"
ENDPOINT_SLICE_API_VERSION = "discovery.k8s.io/v1"
SERVICE_EXPORT_API_VERSION = "multicluster.x-k8s.io/v1alpha1"
MULTI_CLUSTER_SERVICE_API_VERSION = "networking.karmada.io/v1alpha1"

# Labels of the member's EndpointSlices (Kubernetes' discovery/v1 well-known labels).
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
SLICE_MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
# Slices Karmada itself wrote into this member (imported from other clusters): never reported
# back, or a slice would travel round the clusters for ever.
KARMADA_SLICE_MANAGERS = frozenset(
    {"endpointslice-controller.karmada.io", "endpointslice-dispatch-controller.karmada.io"}
)
DISPATCHED_SLICE_MANAGER = "endpointslice-dispatch-controller.karmada.io"

# Labels and finalizers of the reported Works.
WORK_MANAGED_BY_LABEL = "endpointslice.karmada.io/managed-by"
SERVICE_NAMESPACE_LABEL = "endpointslice.karmada.io/namespace"
SERVICE_NAME_WORK_LABEL = "endpointslice.karmada.io/name"
MCS_NAMESPACE_LABEL = "multiclusterservice.karmada.io/namespace"
MCS_NAME_LABEL = "multiclusterservice.karmada.io/name"
PROPAGATION_INSTRUCTION_LABEL = "propagation.karmada.io/instruction"
PROPAGATION_SUPPRESSED = "suppressed"
ENDPOINT_SLICE_FINALIZER = "karmada.io/endpointslice-controller"
MCS_ENDPOINT_SLICE_FINALIZER = "karmada.io/mcs-endpointslice-dispatch-controller"

# Set by the member's API server; never part of what a Work carries (the control plane prunes
# the same fields from every workload it writes into a Work).
_SERVER_METADATA = (
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "managedFields",
    "resourceVersion",
    "selfLink",
    "uid",
    "ownerReferences",
    "finalizers",
)


@dataclass(frozen=True)
class Reporter:
    """How one controller marks the Works it reports."""

    token: str  # its entry in endpointslice.karmada.io/managed-by
    namespace_label: str
    name_label: str
    finalizer: str
    # serviceExport Works are dispatch-suspended and carry a Karmada-marked slice;
    # endpointsliceCollect Works are suppressed for propagation and carry the slice as is.
    suppressed: bool

    def service_labels(self, work: Obj) -> tuple[str, str] | None:
        labels = _labels(work)
        namespace, name = labels.get(self.namespace_label), labels.get(self.name_label)
        return (namespace, name) if namespace and name else None


SERVICE_EXPORT = Reporter(
    token=SERVICE_EXPORT_KIND,
    namespace_label=SERVICE_NAMESPACE_LABEL,
    name_label=SERVICE_NAME_WORK_LABEL,
    finalizer=ENDPOINT_SLICE_FINALIZER,
    suppressed=False,
)
MULTI_CLUSTER_SERVICE = Reporter(
    token=MULTI_CLUSTER_SERVICE_KIND,
    namespace_label=MCS_NAMESPACE_LABEL,
    name_label=MCS_NAME_LABEL,
    finalizer=MCS_ENDPOINT_SLICE_FINALIZER,
    suppressed=True,
)


def _labels(obj: Obj) -> dict[str, str]:
    labels = (obj.get("metadata") or {}).get("labels")
    return labels if isinstance(labels, dict) else {}


def is_suppressed(work: Obj) -> bool:
    """Works the member must never apply (collected objects travelling to the control plane)."""
    return _labels(work).get(PROPAGATION_INSTRUCTION_LABEL) == PROPAGATION_SUPPRESSED


def service_of(endpoint_slice: Obj) -> str:
    return _labels(endpoint_slice).get(SERVICE_NAME_LABEL, "")


def is_karmada_slice(endpoint_slice: Obj) -> bool:
    return _labels(endpoint_slice).get(SLICE_MANAGED_BY_LABEL, "") in KARMADA_SLICE_MANAGERS


def slice_work_name(namespace: str, name: str) -> str:
    return names.generate_work_name(ENDPOINT_SLICE_KIND, name, namespace)


def managers(work: Obj) -> set[str]:
    value = _labels(work).get(WORK_MANAGED_BY_LABEL, "")
    return {token for token in value.split(".") if token}


def manifest_kinds(work: Obj) -> set[tuple[str, str]]:
    """(apiVersion, kind) of every manifest of the Work that parses as an object."""
    found: set[tuple[str, str]] = set()
    for manifest in ((work.get("spec") or {}).get("workload") or {}).get("manifests") or []:
        if isinstance(manifest, dict):
            found.add((str(manifest.get("apiVersion", "")), str(manifest.get("kind", ""))))
    return found


def manifests_of_kind(work: Obj, api_version: str, kind: str) -> list[Obj]:
    return [
        m
        for m in ((work.get("spec") or {}).get("workload") or {}).get("manifests") or []
        if isinstance(m, dict) and m.get("apiVersion") == api_version and m.get("kind") == kind
    ]


def is_reported_by(work: Obj, reporter: Reporter) -> bool:
    return reporter.token in managers(work) and (
        ENDPOINT_SLICE_API_VERSION,
        ENDPOINT_SLICE_KIND,
    ) in manifest_kinds(work)


def _mark_managed_keys(obj: Obj) -> None:
    """The control plane's bookkeeping of which labels and annotations a workload carries."""
    meta = obj.setdefault("metadata", {})
    annotations = meta.setdefault("annotations", {})
    keys = sorted({k for k in annotations if k != names.MANAGED_ANNOTATIONS_ANNOTATION})
    annotations[names.MANAGED_ANNOTATIONS_ANNOTATION] = ",".join(
        sorted([*keys, names.MANAGED_ANNOTATIONS_ANNOTATION])
    )
    annotations[names.MANAGED_LABELS_ANNOTATION] = ",".join(sorted(meta.get("labels") or {}))


def slice_manifest(
    endpoint_slice: Obj,
    reporter: Reporter,
    work_namespace: str,
    work_name: str,
    *,
    work_permanent_id: str = "",
) -> Obj:
    """The EndpointSlice as the Work carries it: server-set metadata and status pruned; for a
    reporter that does not suppress propagation, marked as Karmada's (managed label, the
    slice's uid as resource-template uid, the Work's name and namespace, the Work's permanent id
    when the control plane gave it one) with the managed-keys bookkeeping."""
    manifest = copy.deepcopy(endpoint_slice)
    manifest.setdefault("apiVersion", ENDPOINT_SLICE_API_VERSION)
    manifest.setdefault("kind", ENDPOINT_SLICE_KIND)
    manifest.pop("status", None)
    meta = manifest.setdefault("metadata", {})
    uid = str(meta.get("uid", ""))
    if not reporter.suppressed:
        meta.setdefault("labels", {})[names.MANAGED_LABEL] = "true"
        annotations = meta.setdefault("annotations", {})
        annotations[names.RESOURCE_TEMPLATE_UID_ANNOTATION] = uid
        annotations[names.WORK_NAME_ANNOTATION] = work_name
        annotations[names.WORK_NAMESPACE_ANNOTATION] = work_namespace
    for key in _SERVER_METADATA:
        meta.pop(key, None)
    if not reporter.suppressed:
        if work_permanent_id:
            meta["labels"][names.WORK_PERMANENT_ID_LABEL] = work_permanent_id
        _mark_managed_keys(manifest)
    return manifest


def desired_work(
    endpoint_slice: Obj, reporter: Reporter, work_namespace: str, existing: Obj | None
) -> Obj:
    """The Work reporting `endpoint_slice`, merged onto `existing` (the Work as it is, if any):
    other reporters' labels and tokens are kept, this reporter's are set."""
    slice_meta = endpoint_slice.get("metadata") or {}
    work_name = slice_work_name(str(slice_meta.get("namespace", "")), str(slice_meta["name"]))
    current_meta = (existing or {}).get("metadata") or {}
    labels = dict(current_meta.get("labels") or {})
    labels[reporter.namespace_label] = str(slice_meta.get("namespace", ""))
    labels[reporter.name_label] = service_of(endpoint_slice)
    labels[WORK_MANAGED_BY_LABEL] = ".".join(sorted(managers(existing or {}) | {reporter.token}))
    if reporter.suppressed:
        labels[PROPAGATION_INSTRUCTION_LABEL] = PROPAGATION_SUPPRESSED
    finalizers = list(current_meta.get("finalizers") or [])
    if reporter.finalizer not in finalizers:
        finalizers.append(reporter.finalizer)
    metadata: Obj = {
        **{k: v for k, v in current_meta.items() if k not in ("labels", "finalizers")},
        "name": work_name,
        "namespace": work_namespace,
        "labels": labels,
        "finalizers": finalizers,
    }
    spec: Obj = {
        "workload": {
            "manifests": [
                slice_manifest(
                    endpoint_slice,
                    reporter,
                    work_namespace,
                    work_name,
                    work_permanent_id=labels.get(names.WORK_PERMANENT_ID_LABEL, ""),
                )
            ]
        }
    }
    if not reporter.suppressed:
        spec["suspendDispatching"] = True
    work: Obj = {
        "apiVersion": names.WORK_API_VERSION,
        "kind": "Work",
        "metadata": metadata,
        "spec": spec,
    }
    if existing is not None and "status" in existing:
        work["status"] = existing["status"]
    return work


def same_report(current: Obj, desired: Obj) -> bool:
    """Whether writing `desired` would change nothing that a reporter owns."""
    current_meta = current.get("metadata") or {}
    desired_meta = desired["metadata"]
    return bool(
        (current_meta.get("labels") or {}) == desired_meta["labels"]
        and list(current_meta.get("finalizers") or []) == desired_meta["finalizers"]
        and (current.get("spec") or {}) == desired["spec"]
    )


def withdrawn(work: Obj, reporter: Reporter) -> Obj | None:
    """The Work with this reporter's token and service labels removed, or None when it was
    the only reporter (the Work is to be deleted then)."""
    remaining = managers(work) - {reporter.token}
    if not remaining:
        return None
    updated = copy.deepcopy(work)
    labels = updated["metadata"].setdefault("labels", {})
    labels.pop(reporter.namespace_label, None)
    labels.pop(reporter.name_label, None)
    labels[WORK_MANAGED_BY_LABEL] = ".".join(sorted(remaining))
    return updated
