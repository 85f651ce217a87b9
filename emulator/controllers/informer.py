"""What a controller sees of a resource the server does not keep itself: list and watch through
the API, as a client-side informer does.

A resource served by an aggregated API server (Karmada's clusters, once cluster.karmada.io is
aggregated) is not in the emulator's storage, so a controller standing in for a controller
manager reads it as that controller manager does: a list, then a watch from its
resourceVersion, a relist after the watch ends or fails. The interface is `Subscription`'s, so
a controller runs on either.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from emulator.errors import ApiError
from emulator.loopback import JSON, Loopback

from .subscription import EventHandler, object_key, split_key

log = logging.getLogger(__name__)

RELIST_DELAY = 0.5


class Informer:
    def __init__(
        self, api: Loopback, path: str, *, where: Callable[[JSON], bool] | None = None
    ) -> None:
        self.api = api
        self.path = path
        self.where = where
        self._items: dict[str, JSON] = {}
        self._handlers: list[EventHandler] = []

    def add_handler(self, handler: EventHandler) -> None:
        self._handlers.append(handler)

    def get(self, key: str) -> JSON | None:
        return self._items.get(key)

    def items(self, namespace: str | None = None) -> list[JSON]:
        out = [
            obj
            for key, obj in sorted(self._items.items())
            if namespace is None or split_key(key)[0] == namespace
        ]
        return out

    async def run(self) -> None:
        """List, watch, relist, until cancelled."""
        while True:
            try:
                version = await self._relist()
                async for event in self.api.watch(
                    self.path, resourceVersion=version, allowWatchBookmarks="true"
                ):
                    if not self._apply(event):
                        break
            except (ApiError, ValueError) as exc:  # refused, or an answer that is not JSON
                log.debug("informer of %s: %s", self.path, exc)
            await asyncio.sleep(RELIST_DELAY)  # between a failed or ended watch and the relist

    async def _relist(self) -> str:
        listed = await self.api.list(self.path)
        fresh = {object_key(o): o for o in listed.get("items") or [] if self._selects(o)}
        for key, obj in list(self._items.items()):
            if key not in fresh:
                del self._items[key]
                self._emit("DELETED", obj)
        for key, obj in fresh.items():
            known = self._items.get(key)
            self._items[key] = obj
            if known is None:
                self._emit("ADDED", obj)
            elif known != obj:
                self._emit("MODIFIED", obj)
        return str((listed.get("metadata") or {}).get("resourceVersion") or "")

    def _apply(self, event: JSON) -> bool:
        """Take in one watch event; False when the watch must start over (an ERROR event)."""
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "BOOKMARK":
            return True
        if kind == "ERROR" or not isinstance(obj, dict):
            return False
        key = object_key(obj)
        if kind == "DELETED" or not self._selects(obj):
            gone = self._items.pop(key, None)
            if gone is not None:
                self._emit("DELETED", obj)
            return True
        known = key in self._items
        self._items[key] = obj
        self._emit("MODIFIED" if known else "ADDED", obj)
        return True

    def _selects(self, obj: JSON) -> bool:
        return self.where is None or self.where(obj)

    def _emit(self, event_type: str, obj: JSON) -> None:
        for handler in self._handlers:
            try:
                handler(event_type, obj)
            except Exception:
                log.exception("handler of %s failed on %s", self.path, event_type)
