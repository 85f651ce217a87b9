"""Reading an object's status, and telling a status write from a change of the object."""

from __future__ import annotations

import copy
from typing import Any

JsonDict = dict[str, Any]

# Metadata that changes on every write, status writes included.
_VOLATILE_METADATA = ("resourceVersion", "managedFields")


def status_of(obj: JsonDict) -> JsonDict:
    status = obj.get("status")
    return status if isinstance(status, dict) else {}


def copy_conditions(obj: JsonDict) -> list[JsonDict]:
    """A copy of the object's status.conditions, to change and write back."""
    raw = status_of(obj).get("conditions")
    return copy.deepcopy(raw) if isinstance(raw, list) else []


def without_status(obj: JsonDict) -> JsonDict:
    """The object minus status and write bookkeeping: what a status write leaves unchanged."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _VOLATILE_METADATA}
    return {**{k: v for k, v in obj.items() if k not in ("status", "metadata")}, "metadata": meta}
