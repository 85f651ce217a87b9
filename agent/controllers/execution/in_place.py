"""Whether a member object already is what an apply would make it, so that the apply is left
out (upstream's objectwatcher skips its update the same way: "no need to update resource").

An apply is a no-op when (1) the manifests are those of the last apply that succeeded in full
for this Work, so the fields we own are exactly the fields the desired object sets (server-side
apply would remove no field we stopped setting), and (2) the live object holds every value the
desired object sets, our field manager owns its fields with an `Apply` entry, and no `Update`
entry of upstream's agent waits to be taken over.

(1) is the durable Work record's answer (agent.sources.work_records.WorkRecords.applied_in_full:
the record keeps the content of the Work as last applied, whose metadata.generation only ever
grows, and the Applied condition of that apply). (2) is read from the member object itself, so
a change made while no agent watched (a field edited, a label removed, the object deleted) is
seen: a value that differs, a field that is missing, or another manager's `Update` of a field
(which takes the value away from us) all fail the comparison, and the object is applied.

The comparison only ever errs towards applying: a value the API server normalises (a quantity
written as "0.5" read back as "500m") or a list item the member grew (a sidecar) makes the
object look different, and it is applied as before.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

JsonDict = dict[str, Any]


def holds(desired: Any, live: Any) -> bool:
    """Every value `desired` sets is in `live`: mappings key by key (extra keys in `live` are
    other managers' or defaults), lists item by item and of the same length, scalars equal.
    An explicit null in `desired` holds only where `live` has no value either."""
    if isinstance(desired, dict):
        if not isinstance(live, dict):
            return False
        for key, value in desired.items():
            if key not in live:
                if value is None:
                    continue
                return False
            if not holds(value, live[key]):
                return False
        return True
    if isinstance(desired, list):
        if not isinstance(live, list) or len(desired) != len(live):
            return False
        return all(holds(d, item) for d, item in zip(desired, live, strict=True))
    if isinstance(desired, bool) or isinstance(live, bool):
        return desired is live
    return bool(desired == live)


def _writers(live: JsonDict) -> list[JsonDict]:
    entries = (live.get("metadata") or {}).get("managedFields")
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def applied_by(live: JsonDict, field_manager: str, take_over_from: Collection[str]) -> bool:
    """`field_manager` owns fields of `live` through an `Apply` entry, and none of
    `take_over_from` has a main-resource `Update` entry left to take over."""
    ours = False
    for entry in _writers(live):
        manager, operation = entry.get("manager"), entry.get("operation")
        if manager == field_manager and operation == "Apply" and not entry.get("subresource"):
            ours = True
        elif manager in take_over_from and operation == "Update" and not entry.get("subresource"):
            return False
    return ours


def already_applied(
    desired: JsonDict,
    live: JsonDict | None,
    *,
    field_manager: str,
    take_over_from: Collection[str] = (),
) -> bool:
    """Applying `desired` would change nothing of `live` (given (1) of the module doc)."""
    if live is None:
        return False
    meta = live.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return False  # going away: the apply brings it back once it is gone
    if not applied_by(live, field_manager, take_over_from):
        return False
    return holds(desired, live)
