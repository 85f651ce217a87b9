"""Resource types the emulator serves, and their per-type strategies.

A `ResourceType` is what kube-apiserver spreads over a REST storage and its
strategy: names for discovery, which subresources exist, how generation and
status behave, which field selectors are supported, and small hooks for
type-specific preparation and validation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from .fieldmeta import FieldInfo
from .wire import UserInfo

JSON = dict[str, Any]
Cause = dict[str, Any]

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


class SchemaLike(Protocol):
    """What the core needs from SCHEMA's TypeSchema."""

    def field(self, path: tuple[str, ...]) -> FieldInfo: ...

    def validate(self, obj: JSON) -> list[Cause]: ...

    def prune(self, obj: JSON) -> list[str]: ...

    def default(self, obj: JSON) -> None: ...


@dataclass(frozen=True)
class ScaleSpec:
    """Where a type keeps what the autoscaling/v1 Scale subresource shows (CRD scale form)."""

    spec_replicas_path: str = ".spec.replicas"
    status_replicas_path: str = ".status.replicas"
    # CRD form: a path to a string selector; None with `selector_from_spec` for built-ins,
    # whose Scale.status.selector is rendered from spec.selector.
    label_selector_path: str | None = None
    selector_from_spec: bool = False


FieldExtractor = Callable[[JSON], str]
PrepareCreate = Callable[[JSON, UserInfo | None], None]
PrepareUpdate = Callable[[JSON, JSON], None]
Canonicalize = Callable[[JSON], None]
Validator = Callable[[JSON, JSON | None], list[Cause]]
RowCells = Callable[[JSON, float], list[Any]]


@dataclass
class ResourceType:
    group: str
    version: str
    resource: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    subresources: tuple[str, ...] = ()
    schema: SchemaLike | None = None
    # CRD additionalPrinterColumns form: {name, type, jsonPath, priority?, description?, format?}.
    printer_columns: list[JSON] = field(default_factory=list)
    scale: ScaleSpec | None = None

    # --- strategy ---
    tracks_generation: bool = False
    # Deployments also bump generation when annotations change (they are copied to ReplicaSets).
    generation_on_annotations: bool = False
    allow_create_on_update: bool = False
    allow_unconditional_update: bool = True
    # On create, drop the client's status (types with a status subresource, as their strategies do).
    reset_status_on_create: bool = False
    # The status a new object then shows: the Go zero status as kube-apiserver serialises it
    # (a struct is never left out; its fields without `omitempty` appear at their zero value).
    empty_status: JSON | None = None
    # "subdomain" (DNS-1123 subdomain), "label" (DNS-1123 label), "label1035", "path", "none".
    name_validation: str = "subdomain"
    # Supported field selector labels beyond metadata.name and metadata.namespace.
    field_labels: dict[str, FieldExtractor] = field(default_factory=dict)
    prepare_create: PrepareCreate | None = None
    prepare_update: PrepareUpdate | None = None
    validate: Validator | None = None
    # Normalizes a valid object once its name is final (kube's strategy Canonicalize; on
    # create, after a generated name is chosen).
    canonicalize: Canonicalize | None = None
    # DELETE answers with the object (pods, custom resources) or with a Success Status.
    return_deleted_object: bool = False
    # Finalizers that DELETE adds before the object goes (CRDs: customresourcecleanup).
    delete_finalizers: tuple[str, ...] = ()
    # Columns for Table output of built-ins: (definitions, cells(obj, now)).
    table_columns: list[JSON] = field(default_factory=list)
    table_cells: RowCells | None = None
    # Set for types served from a CustomResourceDefinition.
    crd_name: str = ""
    # Several versions of one type share storage (served CRD versions); the storage one.
    storage_version: str = ""
    # Strategic merge patch is refused for custom resources.
    strategic_merge: bool = True
    storage_version_hash: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def group_resource(self) -> tuple[str, str]:
        return (self.group, self.resource)

    @property
    def qualified(self) -> str:
        return f"{self.resource}.{self.group}" if self.group else self.resource

    def has(self, subresource: str) -> bool:
        return subresource in self.subresources


class Registry:
    """Served types by (group, version, resource), in discovery order."""

    def __init__(self) -> None:
        self._types: dict[tuple[str, str, str], ResourceType] = {}
        self._group_order: list[str] = []
        self._version_order: dict[str, list[str]] = {}
        self._preferred: dict[str, str] = {}
        self.changes = 0

    def register(self, rt: ResourceType, *, preferred: bool = False) -> None:
        key = (rt.group, rt.version, rt.resource)
        if not rt.singular:
            rt.singular = rt.kind.lower()
        if not rt.storage_version:
            rt.storage_version = rt.version
        self._types[key] = rt
        if rt.group not in self._version_order:
            self._group_order.append(rt.group)
            self._version_order[rt.group] = []
        versions = self._version_order[rt.group]
        if rt.version not in versions:
            versions.append(rt.version)
        if preferred or rt.group not in self._preferred:
            self._preferred[rt.group] = rt.version
        self.changes += 1

    def unregister(self, group: str, version: str, resource: str) -> None:
        if self._types.pop((group, version, resource), None) is None:
            return
        self.changes += 1
        if not any(k[0] == group and k[1] == version for k in self._types):
            self._version_order[group].remove(version)
            if self._preferred.get(group) == version:
                if self._version_order[group]:
                    self._preferred[group] = self._version_order[group][0]
                else:
                    del self._preferred[group]
        if not self._version_order.get(group):
            self._version_order.pop(group, None)
            if group in self._group_order:
                self._group_order.remove(group)

    def set_preferred(self, group: str, version: str) -> None:
        self._preferred[group] = version
        self.changes += 1

    def lookup(self, group: str, version: str, resource: str) -> ResourceType | None:
        return self._types.get((group, version, resource))

    def by_kind(self, group: str, kind: str, version: str = "") -> ResourceType | None:
        found: ResourceType | None = None
        for (g, v, _), rt in self._types.items():
            if g == group and rt.kind == kind:
                if version and v == version:
                    return rt
                if found is None or v == self._preferred.get(g):
                    found = rt
        return None if version else found

    def by_api_version_kind(self, api_version: str, kind: str) -> ResourceType | None:
        group, _, version = api_version.rpartition("/")
        return self.by_kind(group, kind, version)

    def groups(self) -> list[str]:
        """Group names in discovery order ("" is the legacy core group)."""
        return list(self._group_order)

    def versions(self, group: str) -> list[str]:
        """Served versions of a group, preferred first."""
        versions = list(self._version_order.get(group, []))
        preferred = self._preferred.get(group)
        if preferred in versions:
            versions.remove(preferred)
            versions.insert(0, preferred)
        return versions

    def preferred_version(self, group: str) -> str | None:
        return self._preferred.get(group)

    def resources(self, group: str, version: str) -> list[ResourceType]:
        return [rt for (g, v, _), rt in self._types.items() if g == group and v == version]

    def all(self) -> Iterator[ResourceType]:
        return iter(list(self._types.values()))

    def namespaced_group_resources(self) -> list[ResourceType]:
        """One served type per namespaced (group, resource) (for namespace cleanup)."""
        seen: dict[tuple[str, str], ResourceType] = {}
        for rt in self._types.values():
            if rt.namespaced and rt.group_resource not in seen and "delete" in rt.verbs:
                seen[rt.group_resource] = rt
        return list(seen.values())
