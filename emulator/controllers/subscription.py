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

    async def run(self) -> None:
        """Deliver events until cancelled."""
        self.storage.listeners.append(self._on_write)
        try:
            for obj in self.items():
                self._emit("ADDED", obj)
            await asyncio.Event().wait()
        finally:
            self.storage.listeners.remove(self._on_write)

    def _selects(self, obj: JSON) -> bool:
        return self.where is None or self.where(obj)

    def _on_write(self, gr: GR, ev: Event) -> None:
        if gr != self.gr or (self.namespace and ev.namespace != self.namespace):
            return
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
