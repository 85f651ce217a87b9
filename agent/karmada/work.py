"""Work objects: their manifests, how each is applied, and how their status is assembled.

Pure functions on dicts; the execution and workStatus controllers do the I/O.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from . import names

Obj = dict[str, Any]

# Metadata the API server owns; never part of what we apply.
_SERVER_METADATA = (
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "managedFields",
    "selfLink",
)
# Ours, not upstream's: on a member object that existed before a Work took it over with
# `work.karmada.io/conflict-resolution: overwrite`. Such an object is released, not deleted, with
# its Work (agent.controllers.execution.deletion).
ADOPTED_ANNOTATION = "karmada-agent.io/adopted"
# Namespaces never deleted with a Work, whoever created them: the cluster's own.
PROTECTED_NAMESPACES = frozenset(("default", "kube-system", "kube-public", "kube-node-lease"))
# Applied first, in this order: things other manifests live in or are typed by.
_FOUNDATION_KINDS = {
    ("", "Namespace"): 0,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): 1,
}


class ManifestError(ValueError):
    """A manifest that cannot be applied as written."""


@dataclass(frozen=True)
class Manifest:
    ordinal: int
    obj: Obj
    group: str
    version: str
    kind: str
    namespace: str
    name: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def description(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"

    @property
    def label(self) -> str:
        """How messages name the manifest: its ordinal, kind and name."""
        return f"manifest {self.ordinal} ({self.description})"

    def identifier(self, resource: str) -> Obj:
        ident: Obj = {"ordinal": self.ordinal}
        if self.group:
            ident["group"] = self.group
        ident["version"] = self.version
        ident["kind"] = self.kind
        # The CRD requires `resource`; upstream leaves it empty, we fill it when known.
        ident["resource"] = resource
        if self.namespace:
            ident["namespace"] = self.namespace
        ident["name"] = self.name
        return ident


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


def _partial_label(ordinal: int, kind: Any, metadata: Any) -> str:
    """`manifest N (Kind ns/name)` from whatever of kind and name the manifest has."""
    parts = [kind] if isinstance(kind, str) and kind else []
    if isinstance(metadata, dict) and isinstance(metadata.get("name"), str):
        namespace = metadata.get("namespace")
        name = metadata["name"]
        parts.append(f"{namespace}/{name}" if isinstance(namespace, str) and namespace else name)
    return f"manifest {ordinal} ({' '.join(parts)})" if parts else f"manifest {ordinal}"


def parse_manifest(ordinal: int, raw: Any) -> Manifest:
    if not isinstance(raw, dict):
        raise ManifestError(f"manifest {ordinal} is not an object but {json_type(raw)}")
    api_version, kind = raw.get("apiVersion"), raw.get("kind")
    metadata = raw.get("metadata")
    label = _partial_label(ordinal, kind, metadata)
    if not isinstance(api_version, str) or not api_version:
        raise ManifestError(f"{label} has no apiVersion")
    if not isinstance(kind, str) or not kind:
        raise ManifestError(f"{label} has no kind")
    if not isinstance(metadata, dict):
        raise ManifestError(f"{label} has no metadata")
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise ManifestError(f"{label} has no metadata.name")
    namespace = metadata.get("namespace") or ""
    if not isinstance(namespace, str):
        raise ManifestError(f"{label} has an invalid metadata.namespace")
    group, _, version = api_version.rpartition("/")
    return Manifest(ordinal, raw, group, version, kind, namespace, name)


def manifests_of(work: Obj) -> list[Manifest | ManifestError]:
    """Every manifest of the Work, in ordinal order; unparsable ones as errors in place."""
    raw = ((work.get("spec") or {}).get("workload") or {}).get("manifests") or []
    out: list[Manifest | ManifestError] = []
    for ordinal, item in enumerate(raw if isinstance(raw, list) else []):
        try:
            out.append(parse_manifest(ordinal, item))
        except ManifestError as err:
            out.append(err)
    return out


def apply_order(manifests: list[Manifest]) -> list[Manifest]:
    """Namespaces, then CRDs, then everything else, each group in ordinal order."""
    return sorted(
        manifests,
        key=lambda m: (_FOUNDATION_KINDS.get((m.group, m.kind), 2), m.ordinal),
    )


@dataclass(frozen=True)
class Deduplicated:
    """A Work's manifests with each member object named once.

    `unique` is what to apply; `copies` maps the ordinal of an identical repetition to the
    ordinal applied for it; `conflicts` holds, per object named by manifests that differ, their
    ordinals and a message: nothing is applied for such an object, since applying each in turn
    would have the agent fight itself.
    """

    unique: list[Manifest]
    copies: dict[int, int]
    conflicts: list[tuple[list[int], str]]


def _ordinals_text(ordinals: list[int]) -> str:
    *head, last = [str(o) for o in ordinals]
    return f"{', '.join(head)} and {last}"


def _without_namespace(obj: Obj) -> Obj:
    metadata = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "namespace"}
    return {**obj, "metadata": metadata}


def deduplicate(
    manifests: list[Manifest], cluster_scoped: frozenset[int] | set[int] = frozenset()
) -> Deduplicated:
    """Group manifests naming the same object (group, kind, namespace, name). The manifests
    whose ordinals are in `cluster_scoped` are of cluster-scoped kinds: their
    metadata.namespace names nothing (the API server ignores it), so it is left out of both the
    key and the comparison of content."""
    groups: dict[tuple[str, str, str, str], list[tuple[Manifest, Obj]]] = {}
    for manifest in manifests:
        scoped = manifest.ordinal not in cluster_scoped
        namespace = manifest.namespace if scoped else ""
        content = manifest.obj if scoped else _without_namespace(manifest.obj)
        key = (manifest.group, manifest.kind, namespace, manifest.name)
        groups.setdefault(key, []).append((manifest, content))
    unique: list[Manifest] = []
    copies: dict[int, int] = {}
    conflicts: list[tuple[list[int], str]] = []
    for group in groups.values():
        first, content = group[0]
        if all(other == content for _, other in group[1:]):
            unique.append(first)
            copies.update({m.ordinal: first.ordinal for m, _ in group[1:]})
            continue
        ordinals = [m.ordinal for m, _ in group]
        described = (
            first.description
            if first.ordinal not in cluster_scoped
            else (f"{first.kind} {first.name}")
        )
        conflicts.append(
            (
                ordinals,
                f"manifests {_ordinals_text(ordinals)} describe the same object "
                f"{described} with different content; none of them is applied",
            )
        )
    return Deduplicated(sorted(unique, key=lambda m: m.ordinal), copies, conflicts)


def is_suspended(work: Obj) -> bool:
    return bool((work.get("spec") or {}).get("suspendDispatching"))


def preserves_resources(work: Obj) -> bool:
    return bool((work.get("spec") or {}).get("preserveResourcesOnDeletion"))


def is_deleting(obj: Obj) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def desired_object(
    manifest: Manifest, work: Obj, *, live: Obj | None, adopting: bool = False
) -> Obj:
    """What we server-side apply for `manifest`: the manifest without server-owned fields,
    marked as Karmada's and pointing back at its Work; marked as adopted when this apply takes
    over an object that existed before (`adopting`) or an earlier one did (the live object says
    so), in the same write."""
    obj = copy.deepcopy(manifest.obj)
    obj.pop("status", None)
    metadata = obj.setdefault("metadata", {})
    for key in _SERVER_METADATA:
        metadata.pop(key, None)
    labels = metadata.setdefault("labels", {})
    labels[names.MANAGED_LABEL] = "true"
    annotations = metadata.setdefault("annotations", {})
    work_meta = work.get("metadata") or {}
    annotations[names.WORK_NAMESPACE_ANNOTATION] = work_meta.get("namespace", "")
    annotations[names.WORK_NAME_ANNOTATION] = work_meta.get("name", "")
    # The conflict-resolution choice is the Work's; it is not part of the member object.
    annotations.pop(names.CONFLICT_RESOLUTION_ANNOTATION, None)
    if adopting or is_adopted(live):
        annotations[ADOPTED_ANNOTATION] = "true"
    else:
        annotations.pop(ADOPTED_ANNOTATION, None)
    if live is not None and retains_live_replicas(obj):
        # The member decides replicas (e.g. an HPA there): apply the value it has now. Leaving
        # the field out is not enough: when our earlier apply (the creation) is its only owner,
        # server-side apply removes a field its owner stops applying, and replicas fall to 1.
        live_replicas = (live.get("spec") or {}).get("replicas")
        if live_replicas is None:
            obj["spec"].pop("replicas", None)
        else:
            obj["spec"]["replicas"] = live_replicas
    return obj


def retains_live_replicas(obj: Obj) -> bool:
    """Whether the member decides this object's replicas (the template's
    `resourcetemplate.karmada.io/retain-replicas=true`): its apply carries the live value."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(names.RETAIN_REPLICAS_LABEL) == "true" and isinstance(obj.get("spec"), dict)


def may_overwrite(manifest: Manifest, work: Obj) -> bool:
    """Whether a pre-existing member object not managed by Karmada may be taken over."""
    for source in (manifest.obj, work):
        value = ((source.get("metadata") or {}).get("annotations") or {}).get(
            names.CONFLICT_RESOLUTION_ANNOTATION
        )
        if value is not None:
            return bool(value == names.CONFLICT_OVERWRITE)
    return False


def is_managed(live: Obj) -> bool:
    labels = (live.get("metadata") or {}).get("labels") or {}
    return bool(labels.get(names.MANAGED_LABEL) == "true")


def is_adopted(live: Obj | None) -> bool:
    """The member object existed before a Work took it over (ADOPTED_ANNOTATION)."""
    annotations = ((live or {}).get("metadata") or {}).get("annotations") or {}
    return bool(annotations.get(ADOPTED_ANNOTATION) == "true")


def belongs_to(live: Obj, work_namespace: str, work_name: str) -> bool:
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    return bool(
        annotations.get(names.WORK_NAMESPACE_ANNOTATION) == work_namespace
        and annotations.get(names.WORK_NAME_ANNOTATION) == work_name
    )


def work_of(obj: Obj) -> tuple[str, str] | None:
    """The Work a member object was applied from, from its back-reference annotations."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    namespace = annotations.get(names.WORK_NAMESPACE_ANNOTATION)
    name = annotations.get(names.WORK_NAME_ANNOTATION)
    if namespace and name:
        return str(namespace), str(name)
    return None


def release_patch(live: Obj) -> Obj | None:
    """A JSON merge patch stripping Karmada's metadata from a member object we stop managing
    (preserveResourcesOnDeletion, an adopted object, a protected namespace), or None when there
    is nothing to strip."""
    metadata = live.get("metadata") or {}
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    patch_labels = {k: None for k in names.MANAGED_RESOURCE_LABELS if k in labels}
    patch_annotations = {
        k: None
        for k in (*names.MANAGED_RESOURCE_ANNOTATIONS, ADOPTED_ANNOTATION)
        if k in annotations
    }
    patch: Obj = {}
    if patch_labels:
        patch["labels"] = patch_labels
    if patch_annotations:
        patch["annotations"] = patch_annotations
    return {"metadata": patch} if patch else None


def applied_message(succeeded: int, total: int, errors: list[str]) -> str:
    if not errors:
        return "Manifest has been successfully applied"
    detail = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    return f"Failed to apply all manifests ({succeeded}/{total}): {detail}"


def dispatching_condition(work: Obj) -> Obj:
    if is_suspended(work):
        return {
            "type": names.WORK_DISPATCHING,
            "status": "False",
            "reason": names.REASON_SUSPEND_DISPATCHING,
            "message": "Work dispatching is in a suspended state.",
        }
    return {
        "type": names.WORK_DISPATCHING,
        "status": "True",
        "reason": names.REASON_DISPATCHING,
        "message": "Work is being dispatched to member clusters.",
    }
