"""What an in-process controller sees of one resource: the stored objects it selects, and
every change to them as the storage makes it.

kube-apiserver's own parts (its post-start hooks, its watch cache) do not list and watch the
server over HTTP: the storage feeds them. The emulator's controllers are in-process parts of
the emulated control plane in the same way: they read the storage, hear of each write through
its fan-out (`Storage.listeners`), and write through the loopback client like any client, so
their writes pass validation, admission and the watch fan-out. They never miss an event and
never relist; dropped watches and compaction, which clients suffer, do not touch them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from emulator.loopback import JSON
from emulator.storage import GR, Event, Storage, seen_as

log = logging.getLogger(__name__)

EventHandler = Callable[[str, JSON], None]


def object_key(obj: JSON) -> str:
    """ "namespace/name", or "name" for a cluster-scoped object."""
    meta = obj.get("metadata", {})
    namespace = meta.get("namespace") or ""
    return f"{namespace}/{meta.get('name', '')}" if namespace else str(meta.get("name", ""))


def split_key(key: str) -> tuple[str, str]:
    namespace, _, name = key.rpartition("/")
    return namespace, name


class Subscription:
    """The objects of `gr` (in `namespace`, if given) that `where` selects.

    `run()` subscribes: handlers hear of every stored object as ADDED, then of each change
    as the write happens, with the type a filtered watch would report (an object leaving the
    selection is DELETED). Handlers run inside the write, so they must only take note (queue
    a key); reads go to `get` and `items`, which always show the stored state."""

    def __init__(
        self,
        storage: Storage,
        gr: GR,
        *,
        namespace: str = "",
        where: Callable[[JSON], bool] | None = None,
    ) -> None:
        self.storage = storage
        self.gr = gr
        self.namespace = namespace
        self.where = where
        self._handlers: list[EventHandler] = []
        # owner uid -> keys (namespace, name) of the objects naming it in ownerReferences,
        # kept while subscribed: a controller finds its dependents without a scan.
        self._by_owner: dict[str, set[tuple[str, str]]] = {}

    def add_handler(self, handler: EventHandler) -> None:
        self._handlers.append(handler)

    @property
    def subscribed(self) -> bool:
        """Whether `run()` delivers events now."""
        return self._on_write in self.storage.listeners

    def get(self, key: str) -> JSON | None:
        namespace, name = split_key(key)
        if self.namespace and namespace != self.namespace:
            return None
        obj = self.storage.get(self.gr, namespace, name)
        return obj if obj is not None and self._selects(obj) else None

    def items(self, namespace: str | None = None) -> list[JSON]:
        """The selected objects (in `namespace`, if given), sorted by namespace and name."""
        if self.namespace:
            if namespace not in (None, self.namespace):
                return []
            namespace = self.namespace
        return [o for o in self.storage.list(self.gr, namespace) if self._selects(o)]

    def owned_by(self, namespace: str, uid: str) -> list[JSON]:
        """The selected objects in `namespace` whose ownerReferences name `uid`, sorted by
        name (what a scan of `items(namespace)` would find, from an index while subscribed)."""
        if not self.subscribed:
            return [o for o in self.items(namespace) if uid in _owner_uids(o)]
        found = []
        for ns, name in sorted(self._by_owner.get(uid, ())):
            if ns != namespace:
                continue
            obj = self.storage.get(self.gr, ns, name)
            if obj is not None and self._selects(obj):
                found.append(obj)
        return found

    async def run(self) -> None:
        """Deliver events until cancelled."""
        self.storage.listeners.append(self._on_write)
        self._by_owner.clear()
        for obj in self.items():
            self._index(obj, None)
        try:
            for obj in self.items():
                self._emit("ADDED", obj)
            await asyncio.Event().wait()
        finally:
            self.storage.listeners.remove(self._on_write)
            self._by_owner.clear()

    def _selects(self, obj: JSON) -> bool:
        return self.where is None or self.where(obj)

    def _index(self, obj: JSON | None, prev: JSON | None) -> None:
        """Move the object's key from the owners `prev` named to those `obj` names (None:
        deleted)."""
        source = obj if obj is not None else prev
        assert source is not None
        meta = source.get("metadata") or {}
        key = (meta.get("namespace") or "", str(meta.get("name", "")))
        before = _owner_uids(prev) if prev is not None else set()
        after = _owner_uids(obj) if obj is not None else set()
        for uid in before - after:
            keys = self._by_owner.get(uid)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_owner[uid]
        for uid in after - before:
            self._by_owner.setdefault(uid, set()).add(key)

    def _on_write(self, gr: GR, ev: Event) -> None:
        if gr != self.gr or (self.namespace and ev.namespace != self.namespace):
            return
        if ev.type == "DELETED":
            self._index(None, ev.prev if ev.prev is not None else ev.obj)
        else:
            self._index(ev.obj, ev.prev)
        event_type = seen_as(ev, self.where)
        if event_type is not None:
            self._emit(event_type, ev.obj)

    def _emit(self, event_type: str, obj: JSON) -> None:
        for handler in self._handlers:
            try:
                handler(event_type, obj)
            except Exception:
                # A controller's mistake must not fail the write that told it.
                log.exception("handler of %s failed on %s %s", self.gr, event_type, object_key(obj))


def _owner_uids(obj: JSON) -> set[str]:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return {str(ref.get("uid")) for ref in refs if ref.get("uid")}
