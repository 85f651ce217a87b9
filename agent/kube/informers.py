"""Informers of the objects of many resource types, selected by label, started on demand.

`Informer` runs one Reflector as a task shared by several users (started by the first,
stopped with the last). `SelectedInformers` keeps one Reflector per resource type (all
namespaces) holding the objects that match a label selector, and beside it a second one of
the complement keeping only names, so "does some other object exist under this name?" is answered from memory
(`known_absent`). Until both have synced, callers do a live GET. The watches of a type are
started by `ensure`, from whatever follows the types in use (agent.sources.work_kinds), never
by a read: a reader waits, within a bound, for them to be started and synced. Subscribers hear every change
of every watched type. The answers to our own writes are cached as the Works cache does
(`writing`, on `Reflector.writing`): a read never returns an object older than what our write
returned, and a watch event older than that answer is left out, not told to the subscribers.

A watch with a label selector reports an object that stops matching (its label removed) as
DELETED, which is what a subscriber interested in the selected objects wants to hear.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from agent.kube.client import GVR, KubeClient
from agent.kube.listeners import listen
from agent.kube.reflector import Answers, HandlerFuncs, Reflector, uncached
from agent.kube.store import drop_managed_fields, writers_only
from agent.kube.tasks import background, cancel_and_wait
from agent.logs import get_logger

log = get_logger(__name__)

JsonDict = dict[str, Any]
# handler(event_type, gvr, obj) with event_type "ADDED", "MODIFIED" or "DELETED".
ObjectEventHandler = Callable[[str, GVR, JsonDict], None]


def name_only(obj: JsonDict) -> JsonDict:
    meta = obj.get("metadata") or {}
    keep = ("name", "namespace", "resourceVersion")
    return {"metadata": {k: meta[k] for k in keep if k in meta}}


def typed_transform(
    api_version: str, kind: str, *, keep_writers: bool = False
) -> Callable[[JsonDict], JsonDict]:
    """Drop managedFields (or, with `keep_writers`, keep only who wrote and when), and fill
    apiVersion and kind: the items of a list of built-in types come without them (only watch
    events carry them), and health and status rules need them."""
    managed_fields = writers_only if keep_writers else drop_managed_fields

    def transform(obj: JsonDict) -> JsonDict:
        obj = managed_fields(obj)
        if obj.get("apiVersion") and (obj.get("kind") or not kind):
            return obj
        filled = {**obj, "apiVersion": obj.get("apiVersion") or api_version}
        if kind and not obj.get("kind"):
            filled["kind"] = kind
        return filled

    return transform


class Informer:
    """A Reflector run as a background task. Several users may share it: each `start` is
    matched by a `stop`, and the watch ends with the last user's `stop`."""

    def __init__(self, reflector: Reflector) -> None:
        self.reflector = reflector
        self._task: asyncio.Task[None] | None = None
        self._users = 0

    @property
    def started(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        self._users += 1
        if self._task is None:
            self._task = background(self.reflector.run(), name=self.reflector.name)

    @property
    def synced(self) -> bool:
        return self._task is not None and self.reflector.has_synced

    async def stop(self) -> None:
        self._users = max(self._users - 1, 0)
        if self._users:
            return
        task, self._task = self._task, None
        if task is not None:
            await cancel_and_wait([task])

    async def wait_synced(self, timeout: float | None = None) -> bool:
        return await self.reflector.wait_synced(timeout)


class SelectedInformers:
    """Informers started on demand, one per resource type, over all namespaces: full objects
    matching `label_selector`, and (unless `others_selector` is None) the names of the objects
    matching `others_selector`, the complement, so that absence is known without a GET."""

    name = "selected-objects"

    def __init__(
        self,
        client: KubeClient,
        *,
        label_selector: str,
        others_selector: str | None,
        sync_timeout: float,
        description: str = "objects",
        keep_writers: bool = False,
    ) -> None:
        self.client = client
        self.keep_writers = keep_writers
        self.label_selector = label_selector
        self.others_selector = others_selector
        self.sync_timeout = sync_timeout
        self.description = description
        self._reflectors: dict[GVR, Reflector] = {}
        self._others: dict[GVR, Reflector] = {}
        self._tasks: dict[GVR, list[asyncio.Task[None]]] = {}
        self._subscribers: list[ObjectEventHandler] = []
        self._selects = label_matcher(label_selector)
        # Types a `wait_known` waited for in vain.
        self._not_known_in_time: set[GVR] = set()
        # Types waited for whose watches have not been started yet.
        self._started: dict[GVR, asyncio.Event] = {}

    # --- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Nothing to start: watches begin on demand with `ensure`."""

    async def stop(self) -> None:
        """Stop every watch and forget the caches (a later `ensure` starts afresh)."""
        await cancel_and_wait([task for group in self._tasks.values() for task in group])
        self._tasks.clear()
        self._reflectors.clear()
        self._others.clear()
        self._not_known_in_time.clear()
        for started in self._started.values():
            started.set()  # (a waiter finds the type unwatched)
        self._started.clear()

    # --- watches -------------------------------------------------------------------------------

    def ensure(self, gvr: GVR, kind: str = "") -> None:
        """Start watching `gvr` unless already watching; returns at once. `kind` (when given)
        is filled into cached objects that lack it."""
        if gvr in self._reflectors:
            return
        reflector = Reflector(
            self.client,
            gvr,
            label_selector=self.label_selector,
            transform=typed_transform(gvr.api_version, kind, keep_writers=self.keep_writers),
            name=f"{self.description} {gvr}",
            use_watch_list=True,
        )
        reflector.add_handler(
            HandlerFuncs(
                add=lambda obj: self._fan_out("ADDED", gvr, obj),
                update=lambda _old, new: self._fan_out("MODIFIED", gvr, new),
                delete=lambda obj: self._fan_out("DELETED", gvr, obj),
            )
        )
        self._reflectors[gvr] = reflector
        self._tasks[gvr] = [background(reflector.run(), name=f"watch {self.description} {gvr}")]
        if self.others_selector is not None:
            others = Reflector(
                self.client,
                gvr,
                label_selector=self.others_selector,
                transform=name_only,
                name=f"{self.description} {gvr} names",
                use_watch_list=True,
            )
            self._others[gvr] = others
            self._tasks[gvr].append(
                background(others.run(), name=f"watch {self.description} {gvr} names")
            )
        started = self._started.pop(gvr, None)
        if started is not None:
            started.set()
        log.info(f"watching {self.description}", resource=str(gvr), selector=self.label_selector)

    @property
    def watched(self) -> list[GVR]:
        return list(self._reflectors)

    def has_synced(self, gvr: GVR) -> bool:
        reflector = self._reflectors.get(gvr)
        return reflector is not None and reflector.has_synced

    async def _wait_started(self, gvr: GVR, timeout: float) -> bool:
        """Wait at most `timeout` seconds until the watches of `gvr` are started."""
        if gvr not in self._reflectors:
            started = self._started.setdefault(gvr, asyncio.Event())
            try:
                async with asyncio.timeout(timeout):
                    await started.wait()
            except TimeoutError:
                return False
        return gvr in self._reflectors

    async def wait_synced(self, gvr: GVR, timeout: float | None = None) -> bool:
        """Wait for the first list of `gvr` (its watch started meanwhile if need be), at most
        `timeout` seconds (default: `sync_timeout`)."""
        if timeout is None:
            timeout = self.sync_timeout
        deadline = asyncio.get_running_loop().time() + timeout
        if not await self._wait_started(gvr, timeout):
            return False
        remaining = max(0.0, deadline - asyncio.get_running_loop().time())
        return await self._reflectors[gvr].wait_synced(remaining)

    def known(self, gvr: GVR) -> bool:
        """Both caches of `gvr` have synced: `get` and `known_absent` answer for every name."""
        managed, others = self._reflectors.get(gvr), self._others.get(gvr)
        return (
            managed is not None
            and managed.has_synced
            and (self.others_selector is None or (others is not None and others.has_synced))
        )

    async def wait_known(self, gvr: GVR, timeout: float) -> bool:
        """Wait at most `timeout` seconds until `known(gvr)` (its watches started meanwhile if
        need be). Once a wait for `gvr` has run out, later calls do not wait until it is known (a type
        the watches cannot sync, for RBAC or size, holds up no one again)."""
        if self.known(gvr):
            return True
        if gvr in self._not_known_in_time:
            return False
        deadline = asyncio.get_running_loop().time() + timeout
        known = await self._wait_started(gvr, timeout)
        if known:
            remaining = max(0.0, deadline - asyncio.get_running_loop().time())
            waits = [self._reflectors[gvr].wait_synced(remaining)]
            if gvr in self._others:
                waits.append(self._others[gvr].wait_synced(remaining))
            known = all(await asyncio.gather(*waits))
        if not known:
            self._not_known_in_time.add(gvr)
        return known

    # --- reads ---------------------------------------------------------------------------------

    def get(self, gvr: GVR, namespace: str | None, name: str) -> tuple[JsonDict | None, bool]:
        """(object or None, synced). When `synced` is False the None means "unknown": the type
        is not watched or its first list has not finished."""
        reflector = self._reflectors.get(gvr)
        if reflector is None or not reflector.has_synced:
            return None, False
        return reflector.store.get_by(namespace or None, name), True

    def known_absent(self, gvr: GVR, namespace: str | None, name: str) -> bool:
        """True when both caches of `gvr` have synced and neither holds `namespace/name`: no
        such object exists (as far as the watches have told), so nothing needs a GET."""
        managed = self._reflectors.get(gvr)
        others = self._others.get(gvr)
        if managed is None or others is None or not (managed.has_synced and others.has_synced):
            return False
        key_ns = namespace or None
        return (
            managed.store.get_by(key_ns, name) is None and others.store.get_by(key_ns, name) is None
        )

    def list(self, gvr: GVR, namespace: str | None = None) -> list[JsonDict]:
        reflector = self._reflectors.get(gvr)
        return reflector.store.list(namespace) if reflector is not None else []

    # --- our own writes -------------------------------------------------------------------------

    @contextlib.contextmanager
    def writing(self, gvr: GVR, namespace: str | None, name: str) -> Iterator[Answers]:
        """Around a write of ours of one object, opened before its request is sent: the answer
        handed to it (`answered`) is cached, and told to the subscribers, unless the watch has
        brought it or something newer meanwhile (`Reflector.writing`). Left to the watch: an
        answer that `label_selector` does not select, and any answer while `gvr` is not
        watched."""
        reflector = self._reflectors.get(gvr)
        if reflector is None:
            with uncached() as nowhere:
                yield nowhere
            return
        key = f"{namespace}/{name}" if namespace else name
        with reflector.writing(key) as write:
            yield _Selected(write, self._selects)

    # --- events --------------------------------------------------------------------------------

    def subscribe(self, handler: ObjectEventHandler) -> Callable[[], None]:
        """Call `handler(event_type, gvr, obj)` for every change of every watched type, objects
        already cached included (replayed as ADDED). Returns a function that unsubscribes."""
        unsubscribe = listen(self._subscribers, handler)
        for gvr, reflector in list(self._reflectors.items()):
            for obj in reflector.store:
                self._call(handler, "ADDED", gvr, obj)
        return unsubscribe

    def _fan_out(self, event_type: str, gvr: GVR, obj: JsonDict) -> None:
        for handler in list(self._subscribers):
            self._call(handler, event_type, gvr, obj)

    @staticmethod
    def _call(handler: ObjectEventHandler, event_type: str, gvr: GVR, obj: JsonDict) -> None:
        try:
            handler(event_type, gvr, obj)
        except Exception:
            log.exception("object event handler failed", resource=str(gvr))


class _Selected:
    """The answers a write hands on, those a label selector selects only."""

    def __init__(self, write: Answers, selects: Callable[[dict[str, str]], bool]) -> None:
        self._write = write
        self._selects = selects

    def answered(self, obj: JsonDict) -> None:
        if self._selects((obj.get("metadata") or {}).get("labels") or {}):
            self._write.answered(obj)


def label_matcher(selector: str) -> Callable[[dict[str, str]], bool]:
    """Whether labels match an equality-based label selector (`k=v`, `k==v`, `k!=v`, `k`,
    `!k`, comma-separated, all of them). Set-based terms (`in`, `notin`) are refused."""
    # (key, operator, value), operator one of "=", "!=", "exists", "absent".
    terms: list[tuple[str, str, str]] = []
    for raw in filter(None, (term.strip() for term in selector.split(","))):
        if " in " in raw or " notin " in raw or "(" in raw:
            raise ValueError(f"set-based label selector term not supported: {raw!r}")
        if "!=" in raw:
            key, value = raw.split("!=", 1)
            terms.append((key.strip(), "!=", value.strip()))
        elif "=" in raw:
            key, value = raw.replace("==", "=", 1).split("=", 1)
            terms.append((key.strip(), "=", value.strip()))
        elif raw.startswith("!"):
            terms.append((raw[1:].strip(), "absent", ""))
        else:
            terms.append((raw, "exists", ""))

    def matches(labels: dict[str, str]) -> bool:
        for key, operator, value in terms:
            if operator == "=" and labels.get(key) != value:
                return False
            if operator == "!=" and labels.get(key) == value:
                return False
            if operator == "exists" and key not in labels:
                return False
            if operator == "absent" and key in labels:
                return False
        return True

    return matches
