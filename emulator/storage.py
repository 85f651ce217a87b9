"""Object storage with one revision counter, like etcd under kube-apiserver.

Stored objects are never mutated: every write stores a new dict, so readers,
watch events and history can share them. Each object keeps its JSON body
serialized once (without kind/apiVersion, which the handlers put in front), so
that GET and watch fan-out cost one concatenation, not a serialization.

Each (group, resource) keeps a bounded window of its recent events. A watch or
an exact read from before the window is answered with 410 Expired, as the watch
cache and etcd compaction do.
"""

from __future__ import annotations

import asyncio
import bisect
import builtins
import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import errors

JSON = dict[str, Any]
GR = tuple[str, str]

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


# etcd's default --max-request-bytes: the largest write it accepts (1.5 MiB).
ETCD_MAX_REQUEST_BYTES = 1536 * 1024


def _within_etcd_limit(body: bytes) -> bytes:
    """The stored encoding, if etcd would take a write of it; kube-apiserver passes etcd's
    refusal on as a 500 with etcd's message. (etcd stores protobuf, a little smaller than this
    JSON: objects just under the limit may be refused here that etcd would take.)"""
    if len(body) > ETCD_MAX_REQUEST_BYTES:
        raise errors.ApiError(500, "", "etcdserver: request is too large")
    return body


def encode_body(obj: JSON) -> bytes:
    """The object's JSON without kind and apiVersion (those are written per request)."""
    body = {k: v for k, v in obj.items() if k != "kind" and k != "apiVersion"}
    return _dumps(body).encode()


@dataclass(slots=True)
class Stored:
    obj: JSON
    body: bytes
    rv: int


@dataclass(slots=True)
class Event:
    type: str  # ADDED, MODIFIED, DELETED
    rv: int
    namespace: str
    name: str
    obj: JSON
    body: bytes
    prev: JSON | None = None
    # Serialized watch lines per apiVersion, filled by the first watcher that needs one.
    lines: dict[str, bytes] = field(default_factory=dict)


def seen_as(ev: Event, match: Callable[[JSON], bool] | None) -> str | None:
    """The type `ev` has for a watcher of the objects `match` selects (None: every object),
    or None when it is none of the watcher's business: an object that comes into the
    selection is ADDED, one that leaves it DELETED, as kube's filtered watches report them."""
    if match is None:
        return ev.type
    if ev.type == "DELETED":
        return ev.type if match(ev.prev if ev.prev is not None else ev.obj) else None
    now = match(ev.obj)
    before = ev.prev is not None and match(ev.prev)
    if ev.type == "ADDED" or not before:
        return "ADDED" if now else None
    return ev.type if now else "DELETED"


class Watcher:
    """One open watch: a queue fed by the storage, drained by the HTTP stream."""

    def __init__(self, store: ResourceStore, namespace: str) -> None:
        self.store = store
        self.namespace = namespace
        self.queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self.closed = False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.store.watchers.discard(self)
            self.queue.put_nowait(None)


class ResourceStore:
    def __init__(self, gr: GR, history_size: int, floor: int) -> None:
        self.gr = gr
        self.objects: dict[str, dict[str, Stored]] = {}
        self.history: deque[Event] = deque()
        self.history_size = history_size
        # Events at or below `floor` are gone from the window.
        self.floor = floor
        self.watchers: set[Watcher] = set()
        self.count = 0
        # Every (namespace, name) held, sorted: lists and pages read it in key order without
        # sorting everything at each request.
        self.keys: builtins.list[tuple[str, str]] = []

    def key_range(self, namespace: str | None) -> builtins.list[tuple[str, str]]:
        if namespace is None:
            return builtins.list(self.keys)
        lo = bisect.bisect_left(self.keys, (namespace, ""))
        hi = bisect.bisect_left(self.keys, (namespace + "\x00", ""))
        return self.keys[lo:hi]

    def stored(self, key: tuple[str, str]) -> Stored:
        return self.objects[key[0]][key[1]]


Listener = Callable[[GR, Event], None]


class Storage:
    def __init__(self, history_size: int = 10000) -> None:
        self._revision = 1
        self._stores: dict[GR, ResourceStore] = {}
        self.history_size = history_size
        self._compacted = 0
        # Called synchronously after every write (garbage collector, CRD and namespace controllers).
        self.listeners: builtins.list[Listener] = []
        self._rv_waiters: builtins.list[tuple[int, asyncio.Future[None]]] = []

    # --- reading ---

    @property
    def revision(self) -> int:
        return self._revision

    def _store(self, gr: GR) -> ResourceStore:
        store = self._stores.get(gr)
        if store is None:
            store = ResourceStore(gr, self.history_size, self._compacted)
            self._stores[gr] = store
        return store

    def get_stored(self, gr: GR, namespace: str, name: str) -> Stored | None:
        store = self._stores.get(gr)
        if store is None:
            return None
        by_name = store.objects.get(namespace)
        return by_name.get(name) if by_name else None

    def get(self, gr: GR, namespace: str, name: str) -> JSON | None:
        stored = self.get_stored(gr, namespace, name)
        return stored.obj if stored else None

    def list_stored(self, gr: GR, namespace: str | None = None) -> builtins.list[Stored]:
        """Current objects sorted by (namespace, name), as etcd keys sort."""
        store = self._stores.get(gr)
        if store is None:
            return []
        return [store.stored(k) for k in store.key_range(namespace)]

    def list(self, gr: GR, namespace: str | None = None) -> builtins.list[JSON]:
        return [s.obj for s in self.list_stored(gr, namespace)]

    def count(self, gr: GR, namespace: str | None = None) -> int:
        store = self._stores.get(gr)
        if store is None:
            return 0
        if namespace is None:
            return store.count
        return len(store.objects.get(namespace, {}))

    def namespaces_with_content(self, namespace: str) -> builtins.list[GR]:
        return [gr for gr, st in self._stores.items() if st.objects.get(namespace)]

    def floor(self, gr: GR) -> int:
        store = self._stores.get(gr)
        return store.floor if store else self._compacted

    def snapshot(
        self, gr: GR, namespace: str | None, rv: int, after: str = ""
    ) -> builtins.list[JSON]:
        """Objects as they were at revision `rv` (rewinding the event window), sorted by key;
        with `after` (a "namespace/name" key), only those whose key sorts after it. Costs the
        objects from `after` on and the events since `rv`, not a sort of everything: a
        paged LIST reads a page at a time."""
        store = self._stores.get(gr)
        if store is None:
            return []
        if rv < store.floor:
            raise errors.gone("The resourceVersion for the provided list is too old.")
        keys = store.key_range(namespace)
        prefix = f"{namespace}/" if namespace is not None else None
        if after and prefix is not None and after.startswith(prefix):
            # One namespace: its keys order as their names do.
            keys = keys[bisect.bisect_right(keys, (namespace, after[len(prefix) :])) :]
        elif after:
            keys = [k for k in keys if f"{k[0]}/{k[1]}" > after]
        # What changed since `rv`: the state at `rv` of each key (None: not there yet).
        then: dict[tuple[str, str], JSON | None] = {}
        for ev in reversed(store.history):
            if ev.rv <= rv:
                break
            if namespace is not None and ev.namespace != namespace:
                continue
            if ev.type == "ADDED":
                then[(ev.namespace, ev.name)] = None
            elif ev.prev is not None:
                then[(ev.namespace, ev.name)] = ev.prev
        if not then:
            return [store.stored(k).obj for k in keys]
        gone_since = [
            k
            for k, obj in then.items()
            if obj is not None
            and k[1] not in store.objects.get(k[0], {})
            and (not after or f"{k[0]}/{k[1]}" > after)
        ]
        if gone_since:
            keys = sorted(keys + gone_since)
        objects = store.objects
        out = [then[k] if k in then else objects[k[0]][k[1]].obj for k in keys]
        return [obj for obj in out if obj is not None]

    # --- writing ---

    def _next(self) -> int:
        self._revision += 1
        return self._revision

    def _record(self, store: ResourceStore, ev: Event) -> None:
        store.history.append(ev)
        while len(store.history) > store.history_size:
            store.floor = store.history.popleft().rv
        ns = ev.namespace
        for w in list(store.watchers):
            if not w.namespace or w.namespace == ns:
                w.queue.put_nowait(ev)
        for listener in list(self.listeners):
            listener(store.gr, ev)
        if self._rv_waiters:
            self._wake()

    def _wake(self) -> None:
        rest = []
        for rv, fut in self._rv_waiters:
            if self._revision >= rv:
                if not fut.done():
                    fut.set_result(None)
            else:
                rest.append((rv, fut))
        self._rv_waiters = rest

    def _stamp(self, obj: JSON, rv: int) -> JSON:
        meta = obj.get("metadata")
        obj["metadata"] = dict(meta) if isinstance(meta, dict) else {}
        obj["metadata"]["resourceVersion"] = str(rv)
        return obj

    def create(self, gr: GR, obj: JSON) -> Stored:
        """Store a new object (the caller checked it does not exist); emits ADDED."""
        store = self._store(gr)
        rv = self._next()
        obj = self._stamp(obj, rv)
        ns = obj["metadata"].get("namespace", "")
        name = obj["metadata"]["name"]
        stored = Stored(obj, _within_etcd_limit(encode_body(obj)), rv)
        store.objects.setdefault(ns, {})[name] = stored
        bisect.insort(store.keys, (ns, name))
        store.count += 1
        self._record(store, Event("ADDED", rv, ns, name, obj, stored.body))
        return stored

    def update(self, gr: GR, obj: JSON) -> Stored:
        store = self._store(gr)
        meta = obj["metadata"]
        ns = meta.get("namespace", "")
        name = meta["name"]
        prev = store.objects[ns][name]
        rv = self._next()
        obj = self._stamp(obj, rv)
        stored = Stored(obj, _within_etcd_limit(encode_body(obj)), rv)
        store.objects[ns][name] = stored
        self._record(store, Event("MODIFIED", rv, ns, name, obj, stored.body, prev.obj))
        return stored

    def delete(self, gr: GR, namespace: str, name: str) -> Stored:
        """Remove an object; the DELETED event carries the deletion revision, as etcd's watch."""
        store = self._store(gr)
        by_name = store.objects[namespace]
        prev = by_name.pop(name)
        if not by_name:
            del store.objects[namespace]
        del store.keys[bisect.bisect_left(store.keys, (namespace, name))]
        store.count -= 1
        rv = self._next()
        final = self._stamp(dict(prev.obj), rv)
        self._record(
            store, Event("DELETED", rv, namespace, name, final, encode_body(final), prev.obj)
        )
        return prev

    def drop_resource(self, gr: GR) -> None:
        """Forget a whole resource (CRD removed): its watchers end."""
        store = self._stores.pop(gr, None)
        if store:
            for w in list(store.watchers):
                w.close()

    # --- watching ---

    def watch(
        self, gr: GR, namespace: str, since: int | None
    ) -> tuple[Watcher, builtins.list[Event]]:
        """Register a watcher; returns it with the events after `since` (None: none).

        Raises 410 Expired when `since` is older than the window, with the watch
        cache's message.
        """
        store = self._store(gr)
        backlog: builtins.list[Event] = []
        if since is not None:
            if since < store.floor:
                raise errors.gone(f"too old resource version: {since} ({store.floor})")
            for ev in store.history:
                if ev.rv > since and (not namespace or ev.namespace == namespace):
                    backlog.append(ev)
        watcher = Watcher(store, namespace)
        store.watchers.add(watcher)
        return watcher, backlog

    def watcher_count(self, gr: GR | None = None) -> int:
        if gr is not None:
            store = self._stores.get(gr)
            return len(store.watchers) if store else 0
        return sum(len(s.watchers) for s in self._stores.values())

    async def wait_for_revision(self, rv: int, timeout: float) -> bool:
        """Wait until the revision reaches `rv`; False after `timeout` seconds."""
        if self._revision >= rv:
            return True
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._rv_waiters.append((rv, fut))
        try:
            await asyncio.wait_for(fut, timeout)
            return True
        except TimeoutError:
            return False
        finally:
            self._rv_waiters = [(r, f) for r, f in self._rv_waiters if f is not fut]

    # --- fault injection ---

    def compact(self) -> int:
        """Drop all event history: watches and exact reads from before now get 410."""
        self._compacted = self._revision
        for store in self._stores.values():
            store.history.clear()
            store.floor = self._revision
        return self._revision

    def close_all_watches(self) -> int:
        n = 0
        for store in self._stores.values():
            for w in list(store.watchers):
                w.close()
                n += 1
        return n
