"""metav1.Condition bookkeeping, with apimachinery's SetStatusCondition semantics."""

from __future__ import annotations

from typing import Any

from agent.timefmt import rfc3339

Condition = dict[str, Any]


def new_condition(type_: str, status: str, reason: str, message: str) -> Condition:
    return {"type": type_, "status": status, "reason": reason, "message": message}


def find(conditions: list[Condition] | None, type_: str) -> Condition | None:
    for condition in conditions or ():
        if condition.get("type") == type_:
            return condition
    return None


def set_condition(conditions: list[Condition], new: Condition, *, now: str | None = None) -> bool:
    """Insert or update `new` in place. lastTransitionTime moves only when status changes.

    Returns True when anything observable changed.
    """
    existing = find(conditions, new["type"])
    if existing is None:
        added = dict(new)
        added.setdefault("lastTransitionTime", now or rfc3339())
        conditions.append(added)
        return True
    changed = False
    if existing.get("status") != new["status"]:
        existing["status"] = new["status"]
        existing["lastTransitionTime"] = new.get("lastTransitionTime") or now or rfc3339()
        changed = True
    for key in ("reason", "message", "observedGeneration"):
        if key in new and existing.get(key) != new[key]:
            existing[key] = new[key]
            changed = True
    return changed


def is_true(conditions: list[Condition] | None, type_: str) -> bool:
    condition = find(conditions, type_)
    return condition is not None and condition.get("status") == "True"
