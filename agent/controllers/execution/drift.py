"""Drift detection: what this process's applies wrote, so that a change of a member object can be
told apart from our own writes.

Member-side watches (agent.sources.member_objects) report changes of Karmada's objects. An
object whose resourceVersion is none our applies returned, or that was deleted, is drift: its
Work goes back through reconcile, which puts it back. Applying identical content does not change
the resourceVersion, so a re-apply does not feed itself, and a write of ours is never taken for
drift, whichever manifest or Work made it. A change of status or write bookkeeping only (every
rollout step) is not drift either.

The watch and the answer to an apply race: the watch may bring our own write, and whatever
undid it, before the apply's answer is recorded. So the events of an object that arrive while
an apply of it is in flight are kept, and judged once the answer is known (`record`): the
deletion of the very object the apply returned (same uid), or a change after our write that is
not ours, means the write was undone at once (`Noted.undone`); anything before it is what our
write replaced.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from agent.karmada.status import without_status
from agent.kube.client import GVR
from agent.kube.shared import shared

JsonDict = dict[str, Any]
# (resource, namespace or "", name) of a member object.
ObjectKey = tuple[GVR, str, str]

# resourceVersions remembered per object as our own writes (a reconcile writes an object once;
# a few more cover takeovers between Works whose watch events arrive late).
OWN_WRITES_KEPT = 8


# A watch event: (type, object).
WatchEvent = tuple[str, JsonDict]


def _rv(obj: JsonDict) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def object_key(gvr: GVR, obj: JsonDict) -> ObjectKey:
    meta = obj.get("metadata") or {}
    return gvr, str(meta.get("namespace") or ""), str(meta.get("name") or "")


def content_digest(obj: JsonDict) -> bytes:
    """A digest of the object without status and write bookkeeping: equal for equal content
    (keys in any order)."""
    encoded = json.dumps(without_status(obj), sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(encoded.encode(), digest_size=16).digest()


def identity(obj: JsonDict) -> JsonDict:
    """apiVersion, kind and metadata (without write bookkeeping) of the object: what a deletion
    reads of it."""
    meta = without_status(obj)["metadata"]
    return shared({k: obj[k] for k in ("apiVersion", "kind") if k in obj} | {"metadata": meta})


@dataclass(slots=True)
class _Written:
    """What our applies returned for one member object: the resourceVersions of our recent
    writes, a digest of the latest content without status (the content itself is in the member
    objects' cache; a copy here doubled what an object costs), its identity and metadata until
    the watch brought our write to that cache, and the Work whose reconcile wrote it last."""

    versions: list[str]
    digest: bytes
    identity: JsonDict | None
    writer: str

    def add_version(self, version: str) -> None:
        """Remember one more version as ours, the last OWN_WRITES_KEPT only. (A list: a deque
        takes a block of 64 slots, 600 bytes, for the few kept here.)"""
        if len(self.versions) >= OWN_WRITES_KEPT:
            del self.versions[0]
        self.versions.append(version)


@dataclass(frozen=True)
class Noted:
    """What recording an apply's answer found: the Work that wrote the object before, when
    another one (the object changed hands); and the watch event that undid the write already
    (the object deleted, or changed by someone else), if any."""

    previous_writer: str | None
    undone: WatchEvent | None = None


class OwnWrites:
    """Our writes per member object, and the objects each Work applied (its current manifests
    only)."""

    def __init__(self) -> None:
        self._written: dict[ObjectKey, _Written] = {}
        self._objects_of: dict[str, set[ObjectKey]] = {}
        # Events of objects with an apply in flight, one list per apply.
        self._flights: dict[ObjectKey, list[list[WatchEvent]]] = {}

    @contextmanager
    def in_flight(self, key: ObjectKey) -> Iterator[None]:
        """Around an apply of `key` and the `record` of its answer: the object's watch events
        meanwhile are kept for `record` to judge."""
        events: list[WatchEvent] = []
        self._flights.setdefault(key, []).append(events)
        try:
            yield
        finally:
            flights = self._flights.get(key, [])
            if events in flights:
                flights.remove(events)
            if not flights:
                self._flights.pop(key, None)

    def note(
        self, key: ObjectKey, work_name: str, applied: JsonDict, *, cached: bool = False
    ) -> Noted:
        """Remember what `work_name`'s apply returned (inside `in_flight(key)`). `cached`: it is
        the object the member objects' cache holds (an apply left out), whose metadata a
        deletion finds there: no copy of it is kept."""
        meta = applied.get("metadata") or {}
        version = str(meta.get("resourceVersion") or "")
        written = self._written.get(key)
        if written is None:
            written = _Written([], b"", {}, work_name)
            self._written[key] = written
        previous = written.writer
        written.add_version(version)
        written.digest = content_digest(applied)
        written.identity = identity(applied)
        written.writer = work_name
        flights = self._flights.get(key) or [[]]
        undone = self._undone(written, version, str(meta.get("uid") or ""), flights[-1])
        if cached or any(_rv(obj) == version for _, obj in flights[-1]):
            written.identity = None  # the watch brought our write already
        return Noted(previous if previous != work_name else None, undone)

    def _undone(
        self, written: _Written, version: str, uid: str, events: list[WatchEvent]
    ) -> WatchEvent | None:
        """The first event, among those seen while the apply was in flight, that undid the
        write. Watch events come in resourceVersion order: those before our own write's event
        (or all of them, when it has not come yet) are older than our write, except a
        deletion of the object the apply returned, which can only follow it."""
        ours_seen = False
        for event_type, obj in events:
            meta = obj.get("metadata") or {}
            if str(meta.get("uid") or "") != uid:
                continue  # another incarnation of the name, before ours
            if event_type == "DELETED":
                return event_type, obj
            resource_version = str(meta.get("resourceVersion") or "")
            if resource_version == version:
                ours_seen = True
            elif ours_seen and resource_version not in written.versions:
                if content_digest(obj) == written.digest:
                    written.add_version(resource_version)
                else:
                    return event_type, obj
        return None

    def writer(self, key: ObjectKey) -> str | None:
        """The Work whose reconcile last applied the object."""
        written = self._written.get(key)
        return None if written is None else written.writer

    def last_written(self, key: ObjectKey) -> tuple[str, JsonDict] | None:
        """(the Work whose reconcile last applied the object, apiVersion, kind and metadata of
        what that apply returned) while the watch has not brought that write yet; None once it
        has (the member objects' cache holds the object then, or knows it is gone)."""
        written = self._written.get(key)
        if written is None or written.identity is None:
            return None
        return written.writer, written.identity

    def objects_of(self, work_name: str) -> set[ObjectKey]:
        return set(self._objects_of.get(work_name, ()))

    def remember(self, work_name: str, keys: set[ObjectKey]) -> None:
        """Keep what we applied for the Work's current manifests only."""
        for stale in self._objects_of.get(work_name, set()) - keys:
            self._drop(stale, work_name)
        self._objects_of[work_name] = set(keys)

    def forget(self, work_name: str) -> set[ObjectKey]:
        """Forget the Work's objects; returns them."""
        keys = self._objects_of.pop(work_name, set())
        for key in keys:
            self._drop(key, work_name)
        return keys

    def _drop(self, key: ObjectKey, work_name: str) -> None:
        """Forget an object the Work no longer applies, unless another Work wrote it since."""
        written = self._written.get(key)
        if written is not None and written.writer == work_name:
            del self._written[key]

    def deleting(self, key: ObjectKey) -> None:
        """We delete the object (its Work is being deleted): its deletion is no drift. (It
        stays among its Work's objects until the Work is forgotten.)"""
        self._written.pop(key, None)

    def is_drift(self, event_type: str, key: ObjectKey, obj: JsonDict) -> bool:
        """Whether a watch event of a member object is a change to put back: the object was
        deleted, or changed to something none of our writes returned. Objects this process has
        not applied are left to their Work's own reconcile; and while an apply of the object is
        in flight, its answer decides (`record`)."""
        flights = self._flights.get(key)
        if flights:
            for events in flights:
                events.append((event_type, obj))
            return False
        written = self._written.get(key)
        if written is None:
            return False
        if event_type == "DELETED":
            return True
        resource_version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if resource_version in written.versions:
            written.identity = None  # the cache has our write now
            return False  # one of our own writes
        if content_digest(obj) == written.digest:
            # Only status or write bookkeeping moved: nothing of ours to put back.
            written.add_version(resource_version)
            written.identity = None
            return False
        return True
