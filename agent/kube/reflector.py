"""client-go's Reflector (plus the informer's handler fan-out) on asyncio.

List (paged), then watch from the list's resourceVersion with bookmarks. A stream that ends or
breaks is resumed from the last resourceVersion seen (bookmarks included), without a relist. A 410
(on the watch request or as a watch ERROR event) means that version is gone: relist, replace the
store, and tell the handlers what changed meanwhile (adds, updates, and deletes of objects that
vanished). Other errors back off exponentially with jitter. Optionally the initial state comes
from a watch with sendInitialEvents (watch-list), falling back to list if the server refuses.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from agent.kube.client import GVR, KubeClient
from agent.kube.clock import REAL_CLOCK, Clock
from agent.kube.errors import (
    ApiError,
    BadRequestError,
    ForbiddenError,
    GoneError,
    InvalidError,
    KubeError,
    from_status,
)
from agent.kube.reachability import is_unreachable, sleep_unless_answered
from agent.kube.store import Store, Transform, object_key
from agent.logs import get_logger

log = get_logger(__name__)

JsonDict = dict[str, Any]
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


class EventHandler(Protocol):
    def on_add(self, obj: JsonDict) -> None: ...

    def on_update(self, old: JsonDict, new: JsonDict) -> None: ...

    def on_delete(self, obj: JsonDict) -> None: ...


@dataclass
class HandlerFuncs:
    """An EventHandler from optional callables (client-go's ResourceEventHandlerFuncs)."""

    add: Callable[[JsonDict], None] | None = None
    update: Callable[[JsonDict, JsonDict], None] | None = None
    delete: Callable[[JsonDict], None] | None = None

    def on_add(self, obj: JsonDict) -> None:
        if self.add is not None:
            self.add(obj)

    def on_update(self, old: JsonDict, new: JsonDict) -> None:
        if self.update is not None:
            self.update(old, new)

    def on_delete(self, obj: JsonDict) -> None:
        if self.delete is not None:
            self.delete(obj)


def _rv(obj: JsonDict) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class _RelistNeededError(Exception):
    pass


class Reflector:
    """Keeps `store` in step with the server for one resource (optionally a namespace and
    selectors) and calls the handlers for every change. Run it with `run()` (until cancelled)."""

    def __init__(
        self,
        client: KubeClient,
        gvr: GVR,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        store: Store | None = None,
        transform: Transform | None = None,
        page_size: int = 500,
        min_watch_timeout: float = 300.0,
        use_watch_list: bool = False,
        backoff_initial: float = 0.8,
        backoff_max: float = 30.0,
        name: str = "",
        clock: Clock = REAL_CLOCK,
    ) -> None:
        self.client = client
        self.gvr = gvr
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.store = store if store is not None else Store(transform=transform)
        self.page_size = page_size
        self.min_watch_timeout = min_watch_timeout
        self.use_watch_list = use_watch_list
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.name = name or str(gvr)
        self._clock = clock
        self._handlers: list[EventHandler] = []
        self._synced = asyncio.Event()
        self.last_resource_version = ""
        self.lists = 0
        self.watches = 0
        self._watch_list_refused = False

    # --- public --------------------------------------------------------------------------------

    def add_handler(self, handler: EventHandler) -> Callable[[], None]:
        """Register a handler; objects already cached are replayed to it as adds. Returns the
        function that removes it again."""
        self._handlers.append(handler)
        for obj in self.store:
            self._call(handler.on_add, obj)

        def remove() -> None:
            if handler in self._handlers:
                self._handlers.remove(handler)

        return remove

    @property
    def has_synced(self) -> bool:
        return self._synced.is_set()

    async def wait_synced(self, timeout: float | None = None) -> bool:
        try:
            await asyncio.wait_for(self._synced.wait(), timeout)
        except TimeoutError:
            return False
        return True

    def seed(self, objects: list[JsonDict]) -> None:
        """Fill the store from elsewhere than a list (a reflector that will not run), and count
        it as synced."""
        self._replace([self.store.prepare(obj) for obj in objects])
        self._synced.set()

    def observe(self, obj: JsonDict) -> None:
        """Take in an object that a write of ours returned, as if the watch had delivered it:
        store it and tell the handlers. The answer to a write can arrive before the watch events
        of earlier changes by others; a change it carries that only the store learnt of would
        look already seen when those events come."""
        prepared = self.store.prepare(obj)
        _, old = self.store.put(prepared)
        if old is None:
            self._emit_add(prepared)
        else:
            self._emit_update(old, prepared)

    async def run(self) -> None:
        need_list = True
        delay = self.backoff_initial
        unanswered = False  # the last failure got no answer (the server was down)
        while True:
            watches_before = self.watches
            try:
                if need_list:
                    await self._initial_state()
                    need_list = False
                    delay = self.backoff_initial
                await self._watch()
                delay = self.backoff_initial
            except (GoneError, _RelistNeededError) as exc:
                log.info("%s: relisting (%s)", self.name, exc)
                need_list = True
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self.watches > watches_before and isinstance(exc, KubeError):
                    # An established stream was cut (server restart, proxy timeout, a
                    # credential reload draining old connections): not a failing server, so
                    # resume at once from the last resourceVersion with the initial delay.
                    delay = self.backoff_initial
                    log.info("%s: watch stream ended (%s); resuming", self.name, exc)
                elif not isinstance(exc, KubeError):
                    log.exception("%s: unexpected error", self.name)
                elif is_unreachable(exc):
                    # The server's Reachability warned once for the whole outage.
                    log.info("%s: %s; retrying in about %.1fs", self.name, exc, delay)
                else:
                    log.warning("%s: %s; retrying in about %.1fs", self.name, exc, delay)
                if isinstance(exc, KubeError) and not is_unreachable(exc) and unanswered:
                    # The first answer after an outage: the outage's waits ended when the
                    # server answered, and they must not leave this error a long backoff.
                    delay = self.backoff_initial
                unanswered = is_unreachable(exc)
                await self._back_off(delay * (1.0 + random.random()), exc)
                delay = min(delay * 2, self.backoff_max)

    # --- internals -----------------------------------------------------------------------------

    async def _back_off(self, seconds: float, exc: Exception) -> None:
        """Wait `seconds`; after a failure that got no answer, no longer than until the server
        answers again (the watch resumes as soon as the link is back, not a long backoff
        later)."""
        reachability = getattr(getattr(self.client, "transport", None), "reachability", None)
        if not is_unreachable(exc) or reachability is None:
            await self._clock.sleep(seconds)
            return
        await sleep_unless_answered(seconds, [reachability], self._clock.sleep)

    def _call(self, fn: Callable[..., None], *args: JsonDict) -> None:
        try:
            fn(*args)
        except Exception:
            log.exception("%s: event handler failed", self.name)

    async def _initial_state(self) -> None:
        if self.use_watch_list and not self._watch_list_refused:
            try:
                await self._watch_list()
                return
            except (InvalidError, BadRequestError, ForbiddenError) as exc:
                log.info("%s: watch-list refused (%s); using list", self.name, exc.reason)
                self._watch_list_refused = True
        await self._list()

    async def _list(self) -> None:
        # Each page is trimmed (store.prepare) as it arrives, so a large list never holds all
        # the full objects at once: memory follows the trimmed cache, not the member's size.
        objects: list[JsonDict] = []
        resource_version = ""
        async for page in self.client.list_pages(
            self.gvr,
            namespace=self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            limit=self.page_size,
        ):
            if page.restarted:
                objects.clear()
            objects.extend(self.store.prepare(obj) for obj in page.body.get("items") or ())
            resource_version = str((page.body.get("metadata") or {}).get("resourceVersion"))
        self.lists += 1
        self._replace(objects)
        self.last_resource_version = resource_version
        self._synced.set()

    def _replace(self, objects: list[JsonDict]) -> None:
        """Swap the store's content and emit the differences as events."""
        old_items = {object_key(obj): obj for obj in self.store}
        self.store.replace(objects)
        new_keys = set()
        for obj in objects:
            key = object_key(obj)
            new_keys.add(key)
            old = old_items.get(key)
            if old is None:
                self._emit_add(obj)
            elif _rv(old) != _rv(obj):
                self._emit_update(old, obj)
        for key, old in old_items.items():
            if key not in new_keys:
                self._emit_delete(old)

    def _emit_add(self, obj: JsonDict) -> None:
        for handler in list(self._handlers):
            self._call(handler.on_add, obj)

    def _emit_update(self, old: JsonDict, new: JsonDict) -> None:
        for handler in list(self._handlers):
            self._call(handler.on_update, old, new)

    def _emit_delete(self, obj: JsonDict) -> None:
        for handler in list(self._handlers):
            self._call(handler.on_delete, obj)

    def _timeout_seconds(self) -> int:
        return int(self.min_watch_timeout * (1.0 + random.random()))

    async def _watch(self) -> None:
        async with self.client.watch(
            self.gvr,
            namespace=self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            resource_version=self.last_resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=self._timeout_seconds(),
        ) as events:
            self.watches += 1
            async for event in events:
                self._handle_event(event)

    def _handle_event(self, event: JsonDict) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            error = from_status(obj)
            if isinstance(error, GoneError) or error.code == 410:
                raise _RelistNeededError(f"watch error {error.code} {error.reason}")
            raise error
        rv = _rv(obj)
        if kind == "BOOKMARK":
            if rv:
                self.last_resource_version = rv
            return
        prepared = self.store.prepare(obj)
        if kind in ("ADDED", "MODIFIED"):
            _, old = self.store.put(prepared)
            if old is None:
                self._emit_add(prepared)
            else:
                self._emit_update(old, prepared)
        elif kind == "DELETED":
            old = self.store.delete(object_key(prepared))
            self._emit_delete(prepared if prepared else (old or {}))
        else:
            log.warning("%s: unknown watch event type %r", self.name, kind)
            return
        if rv:
            self.last_resource_version = rv

    async def _watch_list(self) -> None:
        """Initial state from a watch with sendInitialEvents, then keep watching it."""
        collected: list[JsonDict] = []
        done = False
        async with self.client.watch(
            self.gvr,
            namespace=self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            resource_version="",
            resource_version_match="NotOlderThan",
            send_initial_events=True,
            allow_watch_bookmarks=True,
            timeout_seconds=self._timeout_seconds(),
        ) as events:
            self.watches += 1
            async for event in events:
                if done:
                    self._handle_event(event)
                    continue
                kind = event.get("type")
                obj = event.get("object") or {}
                if kind == "ERROR":
                    error: ApiError = from_status(obj)
                    raise error
                if kind == "ADDED":
                    collected.append(self.store.prepare(obj))
                elif kind == "BOOKMARK":
                    annotations = (obj.get("metadata") or {}).get("annotations") or {}
                    if annotations.get(INITIAL_EVENTS_END) == "true":
                        self._replace(collected)
                        self.last_resource_version = _rv(obj)
                        self.lists += 1
                        self._synced.set()
                        done = True
        if not done:
            raise KubeError("watch-list stream ended before the initial events were complete")
