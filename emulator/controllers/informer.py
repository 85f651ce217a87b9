"""List-then-watch with a local cache, and a de-duplicating work queue.

A small version of client-go's reflector + informer: list, watch from the list's
resourceVersion, resume after a stream ends, relist on 410 Expired (reporting objects
that vanished meanwhile as DELETED), keep a cache keyed by "namespace/name".
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from emulator.errors import ApiError
from emulator.loopback import JSON, Loopback

log = logging.getLogger(__name__)

EventHandler = Callable[[str, JSON], None]


def object_key(obj: JSON) -> str:
    meta = obj.get("metadata", {})
    namespace = meta.get("namespace") or ""
    return f"{namespace}/{meta.get('name', '')}" if namespace else str(meta.get("name", ""))


def split_key(key: str) -> tuple[str, str]:
    namespace, _, name = key.rpartition("/")
    return namespace, name


class _RelistNeededError(Exception):
    pass


class Informer:
    def __init__(self, api: Loopback, path: str, *, retry_delay: float = 0.5, **query: str) -> None:
        self.api = api
        self.path = path
        self.query = query
        self.retry_delay = retry_delay
        self.cache: dict[str, JSON] = {}
        self.synced = asyncio.Event()
        self._handlers: list[EventHandler] = []

    def add_handler(self, handler: EventHandler) -> None:
        self._handlers.append(handler)

    def get(self, key: str) -> JSON | None:
        return self.cache.get(key)

    def _emit(self, event_type: str, obj: JSON) -> None:
        for handler in self._handlers:
            handler(event_type, obj)

    async def run(self) -> None:
        while True:
            try:
                resource_version = await self._list()
            except ApiError as exc:
                log.debug("list %s failed: %s", self.path, exc.message)
                await asyncio.sleep(self.retry_delay)
                continue
            try:
                while True:
                    resource_version = await self._watch(resource_version)
            except _RelistNeededError:
                continue

    async def _list(self) -> str:
        listed = await self.api.list(self.path, **self.query)
        items: list[JSON] = listed.get("items") or []
        fresh = {object_key(item): item for item in items}
        for key in [k for k in self.cache if k not in fresh]:
            self._emit("DELETED", self.cache.pop(key))
        for key, item in fresh.items():
            event_type = "MODIFIED" if key in self.cache else "ADDED"
            self.cache[key] = item
            self._emit(event_type, item)
        self.synced.set()
        return str(listed.get("metadata", {}).get("resourceVersion", ""))

    async def _watch(self, resource_version: str) -> str:
        try:
            async for event in self.api.watch(
                self.path,
                resourceVersion=resource_version,
                allowWatchBookmarks="true",
                **self.query,
            ):
                event_type = event.get("type", "")
                obj: JSON = event.get("object") or {}
                if event_type == "ERROR":
                    # 410 Expired and anything else unexpected: start over from a list.
                    raise _RelistNeededError
                new_rv = obj.get("metadata", {}).get("resourceVersion")
                if new_rv:
                    resource_version = str(new_rv)
                if event_type == "BOOKMARK":
                    continue
                key = object_key(obj)
                if event_type == "DELETED":
                    self.cache.pop(key, None)
                else:
                    self.cache[key] = obj
                self._emit(event_type, obj)
        except ApiError as exc:
            if exc.code != 410:
                await asyncio.sleep(self.retry_delay)
            raise _RelistNeededError from exc
        return resource_version


class WorkQueue:
    """Keys to reconcile, each at most once in the queue; failures retried after a delay."""

    def __init__(
        self, reconcile: Callable[[str], Awaitable[Any]], *, retry_delay: float = 0.5
    ) -> None:
        self._reconcile = reconcile
        self._retry_delay = retry_delay
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._pending: set[str] = set()
        self._timers: set[asyncio.TimerHandle] = set()

    def add(self, key: str) -> None:
        if key not in self._pending:
            self._pending.add(key)
            self._queue.put_nowait(key)

    def add_after(self, key: str, delay: float) -> None:
        loop = asyncio.get_running_loop()

        def fire() -> None:
            self._timers.discard(handle)
            self.add(key)

        handle = loop.call_later(delay, fire)
        self._timers.add(handle)

    async def run(self) -> None:
        try:
            while True:
                key = await self._queue.get()
                self._pending.discard(key)
                try:
                    await self._reconcile(key)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.debug("reconcile %s failed: %r", key, exc)
                    self.add_after(key, self._retry_delay)
        finally:
            for handle in self._timers:
                handle.cancel()


async def run_all(*jobs: Awaitable[None]) -> None:
    """Run jobs until cancelled; if one fails, the others are cancelled too."""
    async with asyncio.TaskGroup() as group:
        for job in jobs:
            group.create_task(_as_coroutine(job))


async def _as_coroutine(job: Awaitable[None]) -> None:
    await job


async def ensure_created(api: Loopback, path: str, body: JSON) -> JSON | None:
    """POST `body` to the collection at `path`; an existing object is left as it is."""
    try:
        return await api.create(path, body)
    except ApiError as exc:
        if exc.code == 409 and exc.reason == "AlreadyExists":
            return None
        raise
