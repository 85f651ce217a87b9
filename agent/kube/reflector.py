"""client-go's Reflector (plus the informer's handler fan-out) on asyncio.

List (paged), then watch from the list's resourceVersion with bookmarks. A stream that ends or
breaks is resumed from the last resourceVersion seen (bookmarks included), without a relist. A 410
(on the watch request or as a watch ERROR event) means that version is gone: relist, replace the
store, and tell the handlers what changed meanwhile (adds, updates, and deletes of objects that
vanished). Other errors back off exponentially with jitter. Optionally the initial state comes
from a watch with sendInitialEvents (watch-list), falling back to list if the server refuses.

The answers to our own writes are cached too (`writing`), so that the next reconcile compares
against what we wrote; the store never goes back from them. An answer the watch has not
delivered yet is newer than every event it delivers before that version: those are left out
until the answer's version comes, matched by equality (resourceVersions are opaque, never
ordered). See `Write` for when an answer is not cached and left to the watch.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from agent.kube.backoff import Backoff
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


class Write:
    """A write of ours in flight (`Reflector.writing`). Its answer is cached only when it is
    news: neither the version the cache held when the write began (a write that changed
    nothing answers with that) nor one the watch delivered meanwhile. The watch delivers a
    key's versions in order, so an answer it has not delivered is newer than all it has.
    resourceVersions are compared only for equality: they are opaque. An answer is left to
    the watch when that cannot be told: when another write of ours to the same object was
    answered meanwhile (which of the two is newer is unknown), or when the reflector listed
    meanwhile (the list may be older or newer than the answer)."""

    def __init__(self, reflector: Reflector, before: dict[str, str], *, refill: bool) -> None:
        self._reflector = reflector
        self.before = before
        self.refill = refill
        self.delivered: dict[str, set[str]] = {key: set() for key in before}
        self.contended: set[str] = set()
        self._lists = reflector.lists_started

    def answered(self, obj: JsonDict) -> None:
        """`obj` is what the write returned (the object as it is now)."""
        self._reflector._answered(self, obj)

    def is_news(self, key: str, rv: str) -> bool:
        """The answer `rv` of `key` is newer than what the cache holds."""
        return rv != self.before[key] and self._unseen(key, rv)

    def refills(self, key: str, rv: str) -> bool:
        """The answer `rv` of `key` is the version the cache holds, which the cache still holds
        (trimmed, for a `refill` read)."""
        return self.refill and rv == self.before[key] and self._unseen(key, rv)

    def _unseen(self, key: str, rv: str) -> bool:
        reflector = self._reflector
        return (
            bool(rv)
            and rv not in self.delivered[key]
            and not (self.refill and self.delivered[key])
            and key not in self.contended
            and self._lists == reflector.lists_started
            and not reflector.listing
            and reflector.has_synced
        )


class Answers(Protocol):
    """Where a write's answer goes: a `Write`, or nowhere (`uncached`)."""

    def answered(self, obj: JsonDict) -> None: ...


class _Uncached:
    def answered(self, obj: JsonDict) -> None:
        pass


@contextmanager
def uncached() -> Iterator[Answers]:
    """For a write whose object no cache of ours holds."""
    yield _Uncached()


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
        # client-go's reflector: doubling, each wait spread up to twice its length.
        self.backoff = Backoff(initial=backoff_initial, cap=backoff_max, jitter=1.0, spread="above")
        self.name = name or str(gvr)
        self._clock = clock
        self._handlers: list[EventHandler] = []
        self._synced = asyncio.Event()
        self.last_resource_version = ""
        self.lists = 0
        self.watches = 0
        self._watch_list_refused = False
        # Our writes: those in flight, the version of each key a write of ours cached that the
        # watch has not delivered yet (its events until then are older: left out), and the last
        # version a write of ours returned per key.
        self._writes: list[Write] = []
        self._ahead: dict[str, str] = {}
        self._own: dict[str, str] = {}
        self.lists_started = 0
        self.listing = False

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

    @contextmanager
    def writing(self, *keys: str, refill: bool = False) -> Iterator[Write]:
        """Around a write of ours (or a read that returns the objects as they are now) of the
        objects `keys`: hand its answer to the `Write` (`answered`) to have it cached before
        the watch brings it. Opened before the request is sent: what the watch delivers
        meanwhile tells whether the answer is news (see `Write`). With `refill`, a read of
        objects the cache holds trimmed: the version it holds is taken whole too."""
        write = Write(self, {key: _rv(self.store.get(key) or {}) for key in keys}, refill=refill)
        self._writes.append(write)
        try:
            yield write
        finally:
            self._writes.remove(write)

    def is_own_write(self, obj: JsonDict) -> bool:
        """`obj` is a version one of our writes answered with (its resourceVersion is the last
        a write of ours returned for it)."""
        key = object_key(obj)
        return key in self._own and self._own[key] == _rv(obj)

    def update_seeded(self, obj: JsonDict) -> None:
        """Change an object of a seeded reflector (one that never lists or watches: its store
        is the only copy, nothing can take it back) and tell the handlers."""
        if self.lists or self.watches:
            raise RuntimeError(f"{self.name}: update_seeded on a reflector that watches")
        prepared = self.store.prepare(obj)
        _, old = self.store.put(prepared)
        if old is None:
            self._emit_add(prepared)
        else:
            self._emit_update(old, prepared)

    def _answered(self, write: Write, obj: JsonDict) -> None:
        """Cache `obj`, a write's answer, if it is newer than what the cache holds (see
        `Write`); the handlers hear of it as of a watch event."""
        key, rv = object_key(obj), _rv(obj)
        if key not in write.before:
            raise ValueError(f"{self.name}: {key} answered by a write opened for others")
        self._own[key] = rv
        refills = write.refills(key, rv)
        if not (refills or write.is_news(key, rv)):
            return
        for other in self._writes:
            if other is not write and key in other.before:
                other.contended.add(key)
        prepared = self.store.prepare(obj)
        _, old = self.store.put(prepared)
        if not refills:
            self._ahead[key] = rv
        if old is None:
            self._emit_add(prepared)
        else:
            self._emit_update(old, prepared)

    async def run(self) -> None:
        need_list = True
        unanswered = False  # the last failure got no answer (the server was down)
        while True:
            watches_before = self.watches
            try:
                if need_list:
                    await self._initial_state()
                    need_list = False
                    self.backoff.reset()
                await self._watch()
                self.backoff.reset()
            except (GoneError, _RelistNeededError) as exc:
                log.info("%s: relisting (%s)", self.name, exc)
                need_list = True
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                stream_cut = self.watches > watches_before and isinstance(exc, KubeError)
                if stream_cut or (
                    isinstance(exc, KubeError) and not is_unreachable(exc) and unanswered
                ):
                    # An established stream was cut (server restart, proxy timeout, a
                    # credential reload draining old connections): not a failing server, so
                    # resume at once from the last resourceVersion with the initial delay.
                    # Or the first answer after an outage: the outage's waits ended when the
                    # server answered, and they must not leave this error a long backoff.
                    self.backoff.reset()
                unanswered = is_unreachable(exc)
                wait = self.backoff.next()
                if stream_cut:
                    log.info("%s: watch stream ended (%s); resuming", self.name, exc)
                elif not isinstance(exc, KubeError):
                    log.exception("%s: unexpected error", self.name)
                elif is_unreachable(exc):
                    # The server's Reachability warned once for the whole outage.
                    log.info("%s: %s; retrying in %.1fs", self.name, exc, wait)
                else:
                    log.warning("%s: %s; retrying in %.1fs", self.name, exc, wait)
                await self._back_off(wait, exc)

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
        # Until the list replaces the store, a write's answer may be older or newer than it.
        self.lists_started += 1
        self.listing = True
        try:
            if self.use_watch_list and not self._watch_list_refused:
                try:
                    await self._watch_list()
                    return
                except (InvalidError, BadRequestError, ForbiddenError) as exc:
                    log.info("%s: watch-list refused (%s); using list", self.name, exc.reason)
                    self._watch_list_refused = True
            await self._list()
        finally:
            self.listing = False

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
        # The list is as new as every answer cached before it began (none was during it).
        self._ahead.clear()
        self.listing = False
        old_items = {object_key(obj): obj for obj in self.store}
        listed = {object_key(obj) for obj in objects}
        self._own = {key: rv for key, rv in self._own.items() if key in listed}
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
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            log.warning("%s: unknown watch event type %r", self.name, kind)
            return
        if rv:
            self.last_resource_version = rv
        prepared = self.store.prepare(obj)
        key = object_key(prepared)
        for write in self._writes:
            if key in write.delivered:
                write.delivered[key].add(rv)
        ahead = self._ahead.get(key)
        if ahead is not None:
            if rv != ahead:
                return  # older than the answer of ours the cache holds
            del self._ahead[key]
            if kind != "DELETED" and prepared == self.store.get(key):
                return  # the answer we cached, now delivered
        if kind == "DELETED":
            self._own.pop(key, None)
            old = self.store.delete(key)
            self._emit_delete(prepared if prepared else (old or {}))
            return
        _, old = self.store.put(prepared)
        if old is None:
            self._emit_add(prepared)
        else:
            self._emit_update(old, prepared)

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
