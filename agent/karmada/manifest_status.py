"""The rules of a Work's status.manifestStatuses: one entry per manifest whose member object
exists, keyed by the manifest's ordinal; which controller reports a Work; the Events a change of
the entries is worth. Pure: the interpreter's answers and the Work are given."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from . import conditions, names
from .status import status_of
from .work import Manifest

JsonDict = dict[str, Any]


def status_entry(
    manifest: Manifest, resource: str, reflected: JsonDict | None, health: str
) -> JsonDict:
    """The entry of `manifest`: its identifier (with `resource`, which the CRD requires), the
    reflected status when there is one, and the health."""
    entry: JsonDict = {"identifier": manifest.identifier(resource)}
    if reflected is not None:
        entry["status"] = reflected
    entry["health"] = health
    return entry


def by_ordinal(entries: Any) -> dict[int, JsonDict]:
    out: dict[int, JsonDict] = {}
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict):
            continue
        ordinal = (entry.get("identifier") or {}).get("ordinal")
        if isinstance(ordinal, int):
            out[ordinal] = entry
    return out


def applied_status(work: JsonDict) -> str | None:
    """The status of the Work's Applied condition; None before the first apply report."""
    applied = conditions.find(status_of(work).get("conditions"), names.WORK_APPLIED)
    return None if applied is None else str(applied.get("status"))


def is_first_report(work: JsonDict) -> bool:
    """No Applied condition yet: nothing has been reported on this Work."""
    return applied_status(work) is None


@dataclass(frozen=True)
class StatusEvent:
    type: Literal["Normal", "Warning"]
    reason: str
    message: str


def status_events(
    previous: dict[int, JsonDict],
    entries: list[JsonDict],
    health_problems: dict[int, str] | None = None,
    interprets_health: Callable[[str, str], bool] | None = None,
) -> list[StatusEvent]:
    """The Events of writing `entries` over `previous` (by ordinal); `health_problems` says, by
    ordinal, why a customization could not interpret health; `interprets_health(apiVersion,
    kind)` whether anything (a built-in rule, a customization, a webhook) judges the kind's
    health (when it is not given: everything does).

    Upstream records ReflectStatusSucceed and InterpretHealthSucceed at every reflection, which
    floods the control plane with Events for every status heartbeat of a busy workload. These
    are recorded only when a manifest's reflected status or health changes. A kind whose health
    nothing interprets is Healthy without an Event, as upstream's (its InterpretHealth hook is
    not enabled for the kind)."""
    events: list[StatusEvent] = []
    for entry in entries:
        ident = entry["identifier"]
        old = previous.get(ident["ordinal"]) or {}
        where = f"{ident.get('namespace')}/{ident['name']}" if ident.get("namespace") else ""
        what = f"{ident['kind']} {where or ident['name']}"
        if "status" in entry and entry.get("status") != old.get("status"):
            events.append(
                StatusEvent(
                    "Normal", names.EVENT_REFLECT_STATUS_SUCCEED, f"Reflected the status of {what}."
                )
            )
        if entry["health"] == old.get("health"):
            continue
        if interprets_health is not None and not interprets_health(
            _api_version(ident), ident["kind"]
        ):
            continue
        if entry["health"] != names.UNKNOWN:
            events.append(
                StatusEvent(
                    "Normal",
                    names.EVENT_INTERPRET_HEALTH_SUCCEED,
                    f"Health of {what} is {entry['health']}.",
                )
            )
            continue
        problem = (health_problems or {}).get(ident["ordinal"])
        events.append(
            StatusEvent(
                "Warning",
                names.EVENT_INTERPRET_HEALTH_FAILED,
                f"Health of {what} could not be interpreted: {problem}."
                if problem
                else f"Health of {what} could not be interpreted from its status.",
            )
        )
    return events


def _api_version(identifier: JsonDict) -> str:
    group, version = identifier.get("group"), str(identifier.get("version") or "")
    return f"{group}/{version}" if group else version


# --- a status too large to store ------------------------------------------------------------

# What the control plane stores per object: etcd's default --max-request-bytes (1.5 MiB); Works
# are custom resources, stored as JSON. Kept below by MARGIN for what the API server adds
# (managedFields, its own metadata).
STORED_OBJECT_LIMIT = 1536 * 1024
STORED_OBJECT_MARGIN = 2 * 1024
# Ours, not upstream's: the Work's status leaves out what would not fit.
CONDITION_STATUS_TRUNCATED = "StatusTruncated"
REASON_STATUS_TOO_LARGE = "StatusTooLarge"

_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _size(value: Any) -> int:
    return len(_encode(value).encode())


@dataclass(frozen=True)
class Fitted:
    """A status to merge into a Work, cut down to fit: `left_out` names the entries whose
    reflected status is left out; `without_entries`, that manifestStatuses are left out too."""

    status: JsonDict
    left_out: list[str]
    without_entries: bool = False

    @property
    def truncated(self) -> bool:
        return bool(self.left_out) or self.without_entries


def _described(entry: JsonDict) -> str:
    ident = entry.get("identifier") or {}
    where = f"{ident.get('namespace')}/{ident.get('name')}" if ident.get("namespace") else ""
    return f"manifest {ident.get('ordinal')} ({ident.get('kind')} {where or ident.get('name')})"


def fit_status(work: JsonDict, status: JsonDict, limit: int, *, floor: bool = False) -> Fitted:
    """`status` (the keys merged into the Work's status) with the reflected statuses of its
    largest manifestStatuses entries left out, one after the other, until the Work with it is
    at most `limit` bytes of JSON; manifestStatuses left out altogether if even that is too
    large. With `floor`, every reflected status is left out whatever the size (what to try
    when the API server refused a status the estimate let through)."""
    entries = status.get("manifestStatuses")
    if not isinstance(entries, list):
        entries = status_of(work).get("manifestStatuses")
    entries = [e for e in entries or [] if isinstance(e, dict)]
    merged = {**status_of(work), **status}
    size = _size({k: v for k, v in work.items() if k != "status"}) + _size(merged)
    if size <= limit and not floor:
        return Fitted(status, [])
    statuses = sorted(
        ((_size(e["status"]), i) for i, e in enumerate(entries) if "status" in e), reverse=True
    )
    dropped: set[int] = set()
    for entry_size, index in statuses:
        if size <= limit and not floor:
            break
        dropped.add(index)
        size -= entry_size + len(',"status":')
    reduced = [
        {k: v for k, v in e.items() if k != "status"} if i in dropped else e
        for i, e in enumerate(entries)
    ]
    left_out = [_described(entries[i]) for i in sorted(dropped)]
    if size <= limit:
        return Fitted({**status, "manifestStatuses": reduced or None}, left_out)
    return Fitted({**status, "manifestStatuses": None}, left_out, without_entries=True)


def truncated_condition(fitted: Fitted) -> JsonDict:
    """StatusTruncated as `fitted` says: True naming what is left out."""
    if fitted.without_entries:
        what = "manifestStatuses are"
    else:
        shown = fitted.left_out[:10]
        more = len(fitted.left_out) - len(shown)
        what = "the reflected status of " + ", ".join(shown) + (f" and {more} more" if more else "")
        what += " is"
    return conditions.new_condition(
        CONDITION_STATUS_TRUNCATED,
        "True",
        REASON_STATUS_TOO_LARGE,
        f"{what} left out of this status: the Work with all of it would be larger than the "
        f"control plane stores per object ({STORED_OBJECT_LIMIT // 1024} KiB)",
    )
