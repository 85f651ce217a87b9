"""The rules of a Work's status.manifestStatuses: one entry per manifest whose member object
exists, keyed by the manifest's ordinal; which controller reports a Work; the Events a change of
the entries is worth. Pure: the interpreter's answers and the Work are given."""

from __future__ import annotations

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
) -> list[StatusEvent]:
    """The Events of writing `entries` over `previous` (by ordinal); `health_problems` says, by
    ordinal, why a customization could not interpret health.

    Upstream records ReflectStatusSucceed and InterpretHealthSucceed at every reflection, which
    floods the control plane with Events for every status heartbeat of a busy workload. These
    are recorded only when a manifest's reflected status or health changes."""
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
