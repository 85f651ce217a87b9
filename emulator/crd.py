"""CustomResourceDefinitions: serve, establish and remove custom resource types.

Like apiextensions-apiserver, a CRD's served versions appear as soon as it is
created (status conditions NamesAccepted and Established are set), and deleting
it removes all its objects (finalizer customresourcecleanup) before the type goes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .deferred import DeferredQueue
from .errors import ApiError, field_cause
from .registry import JSON, Cause, Registry, ResourceType, ScaleSpec
from .storage import GR, Event, Storage

if TYPE_CHECKING:
    from .handlers import Handlers

CRD_GR: GR = ("apiextensions.k8s.io", "customresourcedefinitions")
CLEANUP = "customresourcecleanup.apiextensions.k8s.io"
CrdSchema = Callable[[JSON, str], Any]

_VERSION_RE = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Sort key in kube's version priority (v2 > v1 > v1beta2 > v1beta1 > v1alpha1 > other)."""
    m = _VERSION_RE.match(version)
    if not m:
        return (3, 0, 0, version)
    major = int(m.group(1))
    stage = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    minor = int(m.group(3) or 0)
    return (stage, -major, -minor, version)


def validate_crd(crd: JSON, old: JSON | None) -> list[Cause]:
    causes: list[Cause] = []
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = spec.get("group", "")
    name = crd["metadata"].get("name", "")
    if not group:
        causes.append(field_cause("FieldValueRequired", "spec.group", "Required value"))
    if not names.get("plural"):
        causes.append(field_cause("FieldValueRequired", "spec.names.plural", "Required value"))
    if not names.get("kind"):
        causes.append(field_cause("FieldValueRequired", "spec.names.kind", "Required value"))
    if names.get("plural") and group and name != f"{names['plural']}.{group}":
        causes.append(
            field_cause(
                "FieldValueInvalid",
                "metadata.name",
                f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group',
            )
        )
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        causes.append(
            field_cause(
                "FieldValueNotSupported",
                "spec.scope",
                f'Unsupported value: "{spec.get("scope", "")}": supported values: "Cluster", '
                '"Namespaced"',
            )
        )
    versions = spec.get("versions") or []
    if not versions:
        causes.append(
            field_cause(
                "FieldValueInvalid",
                "spec.versions",
                'Invalid value: "null": must have exactly one version marked as storage version',
            )
        )
    elif sum(1 for v in versions if v.get("storage")) != 1:
        causes.append(
            field_cause(
                "FieldValueInvalid",
                "spec.versions",
                "Invalid value: []apiextensions.CustomResourceDefinitionVersion{...}: must have "
                "exactly one version marked as storage version",
            )
        )
    if old is not None and (old.get("spec") or {}).get("scope") != spec.get("scope"):
        causes.append(
            field_cause(
                "FieldValueInvalid",
                "spec.scope",
                f'Invalid value: "{spec.get("scope")}": field is immutable',
            )
        )
    return causes


class CrdController:
    def __init__(
        self,
        registry: Registry,
        storage: Storage,
        handlers: Handlers,
        crd_schema: CrdSchema | None = None,
    ) -> None:
        self.registry = registry
        self.storage = storage
        self.handlers = handlers
        self.crd_schema = crd_schema
        self._served: dict[str, list[tuple[str, str, str]]] = {}
        self._deferred: DeferredQueue[str] = DeferredQueue(self._sync, unique=True)
        storage.listeners.append(self._on_event)
        crd_rt = registry.lookup(*CRD_GR[:1], "v1", CRD_GR[1])
        if crd_rt is not None:
            crd_rt.validate = validate_crd

    def _on_event(self, gr: GR, ev: Event) -> None:
        if gr == CRD_GR:
            if ev.type == "DELETED":
                self._unserve(ev.name)
            else:
                # Serve at once, so that a client may create objects right after the CRD.
                if not ev.obj["metadata"].get("deletionTimestamp"):
                    self.serve(ev.obj)
                self._schedule(ev.name)
        elif ev.type == "DELETED" and gr[0] and gr[1]:
            for crd_name, keys in self._served.items():
                if any((g, r) == gr for g, _, r in keys):
                    self._schedule(crd_name)

    def _schedule(self, name: str) -> None:
        self._deferred.add(name)

    def _sync(self, name: str) -> None:
        crd = self.storage.get(CRD_GR, "", name)
        if crd is None:
            return
        try:
            if crd["metadata"].get("deletionTimestamp"):
                self._cleanup(crd)
            else:
                self._establish(crd)
        except ApiError:
            return

    def types_for(self, crd: JSON) -> list[ResourceType]:
        spec = crd["spec"]
        names = spec["names"]
        group = spec["group"]
        storage_version = next(
            (v["name"] for v in spec.get("versions") or [] if v.get("storage")), ""
        )
        out = []
        for v in spec.get("versions") or []:
            if not v.get("served", True):
                continue
            sub = v.get("subresources") or {}
            subresources = tuple(s for s in ("scale", "status") if s in sub)
            scale = None
            if "scale" in sub:
                sc = sub["scale"] or {}
                scale = ScaleSpec(
                    spec_replicas_path=sc.get("specReplicasPath", ".spec.replicas"),
                    status_replicas_path=sc.get("statusReplicasPath", ".status.replicas"),
                    label_selector_path=sc.get("labelSelectorPath"),
                )
            schema = None
            if self.crd_schema is not None:
                try:
                    schema = self.crd_schema(crd, v["name"])
                except (KeyError, LookupError, ValueError):
                    schema = None
            out.append(
                ResourceType(
                    group,
                    v["name"],
                    names["plural"],
                    names["kind"],
                    spec.get("scope") == "Namespaced",
                    singular=names.get("singular") or names["kind"].lower(),
                    short_names=tuple(names.get("shortNames") or ()),
                    categories=tuple(names.get("categories") or ()),
                    subresources=subresources,
                    schema=schema,
                    printer_columns=list(v.get("additionalPrinterColumns") or []),
                    scale=scale,
                    tracks_generation=True,
                    allow_unconditional_update=False,
                    reset_status_on_create="status" in sub,
                    return_deleted_object=True,
                    crd_name=crd["metadata"]["name"],
                    storage_version=storage_version,
                    strategic_merge=False,
                )
            )
        return out

    def serve(self, crd: JSON) -> None:
        name = crd["metadata"]["name"]
        types = self.types_for(crd)
        new_keys = [(t.group, t.version, t.resource) for t in types]
        for key in self._served.get(name, []):
            if key not in new_keys:
                self.registry.unregister(*key)
        ordered = sorted(types, key=lambda t: version_priority(t.version))
        for i, rt in enumerate(ordered):
            self.registry.register(rt, preferred=(i == 0))
        self._served[name] = new_keys

    def _unserve(self, name: str) -> None:
        keys = self._served.pop(name, [])
        for key in keys:
            self.registry.unregister(*key)
        for group, resource in {(g, r) for g, _, r in keys}:
            self.storage.drop_resource((group, resource))

    def _establish(self, crd: JSON) -> None:
        spec = crd["spec"]
        names = dict(spec["names"])
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", names["kind"] + "List")
        status = dict(crd.get("status") or {})
        now = self.handlers.backend.now()
        existing = {c.get("type"): c for c in status.get("conditions") or []}
        conditions = [
            existing.get("NamesAccepted")
            or {
                "type": "NamesAccepted", "status": "True", "lastTransitionTime": now,
                "reason": "NoConflicts", "message": "no conflicts found",
            },
            existing.get("Established")
            or {
                "type": "Established", "status": "True", "lastTransitionTime": now,
                "reason": "InitialNamesAccepted", "message": "the initial names have been accepted",
            },
        ]  # fmt: skip
        storage_version = next(v["name"] for v in spec["versions"] if v.get("storage"))
        stored = list(status.get("storedVersions") or [])
        if storage_version not in stored:
            stored.append(storage_version)
        new_status = {"conditions": conditions, "acceptedNames": names, "storedVersions": stored}
        if new_status == crd.get("status"):
            return
        new = dict(crd)
        new["metadata"] = dict(crd["metadata"])
        new["status"] = new_status
        self.storage.update(CRD_GR, new)

    def _cleanup(self, crd: JSON) -> None:
        name = crd["metadata"]["name"]
        keys = self._served.get(name, [])
        remaining = False
        for group, version, resource in keys[:1]:
            rt = self.registry.lookup(group, version, resource)
            if rt is None:
                continue
            for obj in self.storage.list((group, resource)):
                remaining = True
                if obj["metadata"].get("deletionTimestamp"):
                    continue
                self.handlers.deletes.delete_one(
                    rt, obj["metadata"].get("namespace", ""), obj["metadata"]["name"], {}
                )
        if remaining and any(self.storage.count((g, r)) for g, _, r in keys):
            return
        fins = [f for f in crd["metadata"].get("finalizers") or [] if f != CLEANUP]
        new = dict(crd)
        new["metadata"] = {**crd["metadata"], "finalizers": fins}
        if not fins:
            self.storage.delete(CRD_GR, "", name)
        else:
            self.storage.update(CRD_GR, new)
