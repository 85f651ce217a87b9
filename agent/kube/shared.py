"""One copy of the short strings the caches hold, shared by every cached object.

A JSON parse makes a new str for every key and value of every object: each Work in the cache
carried its own "metadata", "apiVersion", "Applied", "karmada.io/managed" and so on, about a
third of its size. `shared` rebuilds a parsed object with those strings taken from one table,
so a cache of many objects holds each only once. Only short strings are shared (keys, kinds,
label values, reasons, timestamps, condition messages, uids that labels repeat): long ones are
mostly unique (a message naming its object, a last-applied configuration). The table is
our own, not `sys.intern` (whose strings some Python versions never free), and bounded: once
full it starts again, and objects already cached keep the copies they share.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Longer strings are kept as parsed.
SHARED_MAX_LENGTH = 64
# Distinct strings the table holds before it starts again (a few MiB at most).
TABLE_SIZE = 1 << 16

_table: dict[str, str] = {}
_Share = Callable[[str, str], str]


def shared(obj: dict[str, Any]) -> dict[str, Any]:
    """A copy of `obj` (parsed JSON: dicts, lists, scalars) whose keys and short string values
    are the table's; equal to `obj`."""
    if len(_table) >= TABLE_SIZE:
        _table.clear()
    return _shared_dict(obj, _table.setdefault)


# The dict and list walks below are written out twice on purpose: one walk calling a per-value
# helper for every leaf took 43 us per cached Work against 24 us for these (a cache takes every
# object through here).
def _shared_dict(obj: dict[str, Any], share: _Share) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in obj.items():
        kind = type(value)
        if kind is dict:
            value = _shared_dict(value, share)
        elif kind is list:
            value = _shared_list(value, share)
        elif kind is str and len(value) <= SHARED_MAX_LENGTH:
            value = share(value, value)
        out[share(key, key) if type(key) is str else key] = value
    return out


def _shared_list(items: list[Any], share: _Share) -> list[Any]:
    out: list[Any] = []
    for value in items:
        kind = type(value)
        if kind is dict:
            value = _shared_dict(value, share)
        elif kind is list:
            value = _shared_list(value, share)
        elif kind is str and len(value) <= SHARED_MAX_LENGTH:
            value = share(value, value)
        out.append(value)
    return out
