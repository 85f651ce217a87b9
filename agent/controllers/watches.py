"""What a controller watches, declared in one place, as controller-runtime's builder does
(For / Owns / Watches): the sources it reads and what each of their events does.

The controller manager (manager.py) starts every source the controllers declare, once however
many declare it, before the controllers, and stops them after; it subscribes each controller's
handlers before starting it and removes them after stopping it. A controller starts its
workers once the sources it waits for have synced (`wait_synced`). No watch is started from
inside a reconcile: the member kinds of Works, which are known only from the Works, are a
source of their own whose watches follow the Works cache (agent.sources.work_kinds). The one
lazy start is declared too (`OnDemand`): watches that upstream starts on the first object that
needs them (the slice reporters' member watches) are started by the controller when it first
needs them, and stopped by the manager.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from agent.kube.client import GVR
from agent.kube.discovery import RESTMapper
from agent.kube.reflector import EventHandler
from agent.sources.cluster import ClusterInformer
from agent.sources.interpreter_config import ConfigInformer
from agent.sources.member_objects import MemberObjects
from agent.sources.works import WorkInformer

JsonDict = dict[str, Any]
# (event_type, resource, object) of a member object.
MemberEventHandler = Callable[[str, GVR, JsonDict], None]
Unsubscribe = Callable[[], None]


class Source(Protocol):
    """Anything a controller reads that runs: a watch, a writer. `start` may be a coroutine."""

    def start(self) -> Awaitable[None] | None: ...

    async def stop(self) -> None: ...


class Startable(Protocol):
    """A source that starts at once (an informer: its watch runs in a task of its own)."""

    def start(self) -> None: ...

    async def stop(self) -> None: ...


class Synced(Protocol):
    async def wait_synced(self, timeout: float | None = None) -> bool: ...


@dataclass(frozen=True)
class Declared:
    source: Source
    # Awaited before the controller's workers start.
    synced: Callable[[], Awaitable[bool]] | None = None
    # Adds the controller's handler to the source; returns what removes it.
    subscribe: Callable[[], Unsubscribe] | None = None


class Watches:
    """A controller's declaration, built by chaining: `Watches().for_works(...).cluster(...)`."""

    def __init__(self) -> None:
        self.declared: list[Declared] = []
        self._unsubscribe: list[Unsubscribe] = []

    # --- the declaration -----------------------------------------------------------------------

    def for_works(self, works: WorkInformer, handler: EventHandler) -> Watches:
        """For: the Works the controller reconciles, by name; synced before any worker runs (an
        unsynced cache would make a Work look deleted)."""
        return self._add(works, synced=works, subscribe=lambda: works.add_handler(handler))

    def cluster(
        self, cluster: ClusterInformer, *, on_ready: Callable[[], None] | None = None
    ) -> Watches:
        """Watches: this cluster's Cluster object (its readiness read from the cache, synced
        first); `on_ready` when it turns Ready."""
        if on_ready is None:
            return self._add(cluster, synced=cluster)
        return self._add(cluster, synced=cluster, subscribe=lambda: cluster.on_ready(on_ready))

    def member_objects_of_works(
        self,
        objects: MemberObjects,
        works: WorkInformer,
        mapper: RESTMapper,
        handler: MemberEventHandler,
    ) -> Watches:
        """Owns: the member objects of every kind the Works name (the kinds followed from the
        Works cache, agent.sources.work_kinds), each change to `handler`. Not waited for: a
        reconcile waits for the kinds it meets."""
        self._add(objects, subscribe=lambda: objects.subscribe(handler))
        return self._add(objects.kinds_named_by(works, mapper))

    def interpreter_config(
        self, watches: Iterable[ConfigInformer], *, on_change: Callable[[], None]
    ) -> Watches:
        """Watches: the interpreter's configuration, not waited for (agent.sources.interpreter_
        config); a change calls `on_change`."""
        for watch in watches:
            self._add(watch, subscribe=_on_change(watch, on_change))
        return self

    def on_demand(self, sources: OnDemand) -> Watches:
        """Watches started only when the controller first needs them (`OnDemand.ensure`),
        stopped by the manager with the others."""
        return self._add(sources)

    def uses(self, *sources: Source) -> Watches:
        """What the controller reads or writes through that runs on its own (the interpreter,
        the Work records): started before it and stopped after it."""
        for source in sources:
            self._add(source)
        return self

    def _add(
        self,
        source: Source,
        *,
        synced: Synced | None = None,
        subscribe: Callable[[], Unsubscribe] | None = None,
    ) -> Watches:
        self.declared.append(
            Declared(source, synced.wait_synced if synced is not None else None, subscribe)
        )
        return self

    # --- what the manager and the controller do with it ------------------------------------------

    @property
    def sources(self) -> list[Source]:
        out: list[Source] = []
        for declared in self.declared:
            if not any(declared.source is known for known in out):
                out.append(declared.source)
        return out

    def subscribe(self) -> None:
        self._unsubscribe = [d.subscribe() for d in self.declared if d.subscribe is not None]

    def unsubscribe(self) -> None:
        unsubscribe, self._unsubscribe = self._unsubscribe, []
        for remove in unsubscribe:
            remove()

    async def wait_synced(self) -> None:
        for declared in self.declared:
            if declared.synced is not None:
                await declared.synced()


class OnDemand:
    """Sources declared with the controller but started only once it needs them (`ensure`), as
    upstream's slice reporters build their member informers on the first Work that gives them
    something to report: a member without the MCS API is never asked. The manager's start
    starts nothing; its stop stops what `ensure` started. The subscriptions are made as they
    start (before them, so no event is missed) and undone as they stop."""

    name = "on-demand watches"

    def __init__(
        self, *sources: Startable, subscribe: Iterable[Callable[[], Unsubscribe]] = ()
    ) -> None:
        self._sources = sources
        self._subscribe = tuple(subscribe)
        self._unsubscribe: list[Unsubscribe] = []
        self.started = False

    def start(self) -> None:
        """Nothing until `ensure`."""

    def ensure(self) -> bool:
        """Start them unless started; True when this call started them."""
        if self.started:
            return False
        self.started = True
        self._unsubscribe = [subscribe() for subscribe in self._subscribe]
        for source in self._sources:
            source.start()
        return True

    async def stop(self) -> None:
        if not self.started:
            return
        self.started = False
        unsubscribe, self._unsubscribe = self._unsubscribe, []
        for remove in unsubscribe:
            remove()
        for source in reversed(self._sources):
            await source.stop()


def _on_change(watch: ConfigInformer, callback: Callable[[], None]) -> Callable[[], Unsubscribe]:
    return lambda: watch.on_change(callback)


async def start_source(source: Source) -> None:
    started = source.start()
    if inspect.isawaitable(started):
        await started


def watches_of(runnable: object) -> Watches | None:
    watches = getattr(runnable, "watches", None)
    return watches if isinstance(watches, Watches) else None
