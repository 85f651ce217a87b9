"""What the patch engines need to know about a field, answered from a type's schema.

Strategic merge patch uses `patch_merge_key`/`patch_strategy`; server-side apply uses
`list_type`/`list_map_keys`/`map_type`. A path is the tuple of field names from the
object root, with list items not counted: the container ports of a Deployment are
("spec", "template", "spec", "containers", "ports").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

ListType = Literal["atomic", "set", "map"]


@dataclass(frozen=True)
class FieldInfo:
    list_type: ListType | None = None
    list_map_keys: tuple[str, ...] = ()
    # "atomic" maps and structs are replaced whole by server-side apply.
    map_type: Literal["granular", "atomic"] = "granular"
    patch_merge_key: str | None = None
    # "", "merge", "replace", "retainKeys" or "merge,retainKeys".
    patch_strategy: str = ""


UNKNOWN = FieldInfo()


class FieldMeta(Protocol):
    def field(self, path: tuple[str, ...]) -> FieldInfo:
        """Metadata of the field at `path`; `UNKNOWN` when the schema says nothing."""
        ...


class NoFieldMeta:
    """For schemaless types: lists are atomic and replaced, maps merge."""

    def field(self, path: tuple[str, ...]) -> FieldInfo:
        return UNKNOWN
