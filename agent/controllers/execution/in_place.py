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

`touched_since_applied` is a cheaper, partial view of (2) for ordering only: the managedFields
say that someone else wrote the object since our last apply changed it (the API server stamps
an entry's `time` when its manager's write changes the object), or that our apply no longer
owns anything. It misses a change made within the second of our apply; the full comparison
does not.

`Verified` keeps what a comparison found in place ahead of the Work's reconcile (a start
ordering its Works, start_order.py), so that the reconcile does not compare again what did not
change since: the member objects' resourceVersions it saw, for that version of the Work.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from agent.timefmt import parse_time

from .drift import ObjectKey

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


def touched_since_applied(live: JsonDict, field_manager: str) -> bool:
    """The object is going away, `field_manager` has no main-resource `Apply` entry, or another
    entry is newer than it; status writes are not looked at (a scale is: it sets replicas)."""
    if (live.get("metadata") or {}).get("deletionTimestamp"):
        return True
    ours: datetime | None = None
    others: list[datetime | None] = []
    for entry in _writers(live):
        subresource = entry.get("subresource")
        if subresource == "status":
            continue
        stamp = parse_time(entry.get("time"))
        mine = entry.get("manager") == field_manager and entry.get("operation") == "Apply"
        if mine and not subresource:
            ours = stamp
        else:
            others.append(stamp)
    if ours is None:
        return True
    return any(stamp is None or stamp > ours for stamp in others)


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


class Verified:
    def __init__(self) -> None:
        # Work name -> (the Work's uid, resourceVersion, generation; object -> resourceVersion).
        self._found: dict[str, tuple[tuple[Any, ...], dict[ObjectKey, str]]] = {}

    def remember(self, work: JsonDict, versions: dict[ObjectKey, str]) -> None:
        self._found[str((work.get("metadata") or {}).get("name"))] = (_version_of(work), versions)

    def take(self, work: JsonDict) -> dict[ObjectKey, str]:
        """The objects of `work` found in place, with their resourceVersions then; empty when
        `work` has changed since (or was never looked at). Forgotten once taken."""
        found = self._found.pop(str((work.get("metadata") or {}).get("name")), None)
        if found is None or found[0] != _version_of(work):
            return {}
        return found[1]

    def forget(self, name: str) -> None:
        self._found.pop(name, None)

    def clear(self) -> None:
        self._found.clear()

    def __len__(self) -> int:
        return len(self._found)


def still_in_place(found: dict[ObjectKey, str], key: ObjectKey, live: JsonDict | None) -> bool:
    """`live` is the object found in place, unchanged since (same resourceVersion)."""
    if live is None or key not in found:
        return False
    return bool(found[key]) and (live.get("metadata") or {}).get("resourceVersion") == found[key]


def _version_of(work: JsonDict) -> tuple[Any, ...]:
    meta = work.get("metadata") or {}
    return meta.get("uid"), meta.get("resourceVersion"), meta.get("generation")
