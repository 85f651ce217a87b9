"""Taking over the fields another manager wrote with updates, as kubectl's client-side to
server-side apply upgrade does (k8s.io/client-go/util/csaupgrade).

An object written with GET+PUT (or created) is owned, field by field, by an `Update` entry of
its writer in `metadata.managedFields`. A server-side apply under another field manager then
shares those fields with it: a field later left out of the applied configuration stays, because
the `Update` entry still owns it. Merging the writer's `Update` entries into the applier's
`Apply` entry (one set of fields, the writer's entries gone) makes the applier the only owner,
so its next apply removes what it no longer sets.
"""

from __future__ import annotations

import copy
from collections.abc import Collection
from typing import Any

JsonDict = dict[str, Any]


def _union(into: JsonDict, other: Any) -> None:
    """FieldsV1 sets are trees of dicts (leaves are {}): union `other` into `into`."""
    if not isinstance(other, dict):
        return
    for key, value in other.items():
        mine = into.get(key)
        if isinstance(mine, dict):
            _union(mine, value)
        else:
            into[key] = copy.deepcopy(value) if isinstance(value, dict) else {}


def _is_update_by(entry: Any, managers: Collection[str]) -> bool:
    return (
        isinstance(entry, dict)
        and entry.get("manager") in managers
        and entry.get("operation") == "Update"
        and not entry.get("subresource")
        and entry.get("fieldsType", "FieldsV1") == "FieldsV1"
    )


def taken_over(
    obj: JsonDict, *, from_managers: Collection[str], to_manager: str
) -> list[JsonDict] | None:
    """The managedFields of `obj` with the main-resource `Update` entries of `from_managers`
    merged into `to_manager`'s `Apply` entry (made from them when there is none); None when
    there is nothing to take over."""
    entries = (obj.get("metadata") or {}).get("managedFields")
    if not isinstance(entries, list):
        return None
    writers = [e for e in entries if _is_update_by(e, from_managers)]
    if not writers:
        return None
    kept = [copy.deepcopy(e) for e in entries if not _is_update_by(e, from_managers)]
    applier = next(
        (
            e
            for e in kept
            if e.get("manager") == to_manager
            and e.get("operation") == "Apply"
            and not e.get("subresource")
        ),
        None,
    )
    if applier is None:
        latest = writers[-1]
        applier = {
            "manager": to_manager,
            "operation": "Apply",
            "apiVersion": latest.get("apiVersion"),
            "time": latest.get("time"),
            "fieldsType": "FieldsV1",
            "fieldsV1": {},
        }
        kept.append({k: v for k, v in applier.items() if v is not None})
        applier = kept[-1]
    fields = applier.setdefault("fieldsV1", {})
    for writer in writers:
        _union(fields, writer.get("fieldsV1"))
    return kept


def take_over_patch(
    obj: JsonDict, *, from_managers: Collection[str], to_manager: str
) -> list[JsonDict] | None:
    """A JSON patch that takes the fields over (`taken_over`) if the object is still at the
    resourceVersion read; None when there is nothing to take over."""
    entries = taken_over(obj, from_managers=from_managers, to_manager=to_manager)
    if entries is None:
        return None
    version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
    return [
        {"op": "test", "path": "/metadata/resourceVersion", "value": version},
        {"op": "replace", "path": "/metadata/managedFields", "value": entries},
    ]
