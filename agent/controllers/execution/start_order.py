"""The order of a start over Works applied before (an agent started again, or the control plane
back after the record was served): what differs from the Works first, the rest after.

Works whose content is the one their record says was applied in full wait in the queue,
deferred and held (agent.kube.workqueue), while the workers start on the others at once (new
and changed Works). A pass then looks at the deferred Works with ever costlier signals, each
over the Works still deferred, and adds those that need an apply, which the workers take next:

1. an object missing from the member objects' cache (deleted while no agent ran);
2. an object someone else wrote since our apply, as its managedFields tell
   (in_place.touched_since_applied);
3. the full comparison of every object with what an apply would make it
   (Applier.found_in_place), the backstop that misses nothing the apply itself would see.

Then the deferred Works are released, to be verified in place by their reconcile, which finds
the comparison made already when neither the Work nor its objects changed since (`Verified`).
A Work a worker took meanwhile (added by an event) is left to that reconcile.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from agent.context import AgentContext
from agent.karmada.work import ManifestError, is_deleting, manifests_of
from agent.kube.errors import KubeError
from agent.kube.workqueue import WorkQueue
from agent.logs import get_logger

from .apply import FIELD_MANAGER, Applier
from .drift import ObjectKey
from .in_place import touched_since_applied

log = get_logger(__name__)

JsonDict = dict[str, Any]
# How long the pass waits for the member caches of the deferred Works' kinds.
SYNC_WAIT = 10.0
# The longest the pass runs between two yields to the event loop (the workers, the watches,
# the heartbeat): long enough that the workStatus controller's reconciles of every Work, which
# start at the same time, do not leave it a small share of the loop.
SLICE_SECONDS = 0.05

Signal = Callable[[JsonDict, list[ObjectKey]], Awaitable[bool]]


class StartOrder:
    def __init__(self, ctx: AgentContext, queue: WorkQueue[str], applier: Applier) -> None:
        self.ctx = ctx
        self.queue = queue
        self.applier = applier
        self.objects = ctx.sources.member_objects

    async def load_record(self) -> list[JsonDict] | None:
        """The recorded Works (None when the record cannot be read), their kinds' member caches
        started: listed while the Works are, not after them, so that the pass finds them
        synced sooner."""
        try:
            recorded = await self.ctx.sources.records.load()
        except KubeError:
            return None  # said when the record is read again (Deletion.settle_records)
        kinds = {
            (item.api_version, item.kind)
            for work in recorded
            for item in manifests_of(work)
            if not isinstance(item, ManifestError)
        }
        for api_version, kind in sorted(kinds):
            with contextlib.suppress(KubeError):
                info = await self.ctx.member_mapper.resource_for(api_version, kind)
                self.objects.ensure(info.gvr, info.kind)
        return recorded

    def defer_applied(self, names: Iterable[str]) -> list[str]:
        """Defer (held) the Works applied as recorded; their names, in queue order."""
        works, records = self.ctx.sources.works, self.ctx.sources.records
        candidates = [
            name
            for name in names
            if (work := works.get(name)) is not None
            and not is_deleting(work)
            and records.applied_as_recorded(work)
        ]
        self.queue.defer(candidates, held=True)
        deferred = [name for name in candidates if self.queue.is_deferred(name)]
        if not deferred:
            self.queue.release_deferred()
        return deferred

    async def run(self, names: list[str]) -> None:
        """Add the deferred Works of `names` that need an apply, cheapest signals first; then
        release the rest."""
        try:
            await self._sort(names)
        except Exception:
            # Their reconciles still verify them, in the order they came.
            log.exception("Works applied before not sorted by need")
        finally:
            self.queue.release_deferred()

    async def _sort(self, names: list[str]) -> None:
        keys: dict[str, list[ObjectKey]] = {}
        slices = _Slices()
        for name in names:
            work = self.ctx.sources.works.get(name)
            objects = await self._objects_of(work) if work is not None else None
            if objects is None:
                self.queue.add(name)  # not to be judged here: its reconcile decides
            else:
                keys[name] = objects
            await slices.next()
        kinds = {key[0] for objects in keys.values() for key in objects}
        await asyncio.gather(*(self.objects.wait_known(gvr, SYNC_WAIT) for gvr in kinds))
        signals: list[tuple[str, Signal]] = [
            ("missing", self._missing),
            ("written by someone else", self._touched),
            ("not as applied", self._not_in_place),
        ]
        for reason, signal in signals:
            found = 0
            for name, objects in keys.items():
                work = self.ctx.sources.works.get(name)
                if work is None or not self.queue.is_deferred(name):
                    continue  # gone, or taken by an event: its reconcile sees to it
                if await signal(work, objects):
                    self.queue.add(name)
                    found += 1
                await slices.next()
            if found:
                log.info("Works applied before need an apply", reason=reason, works=found)
        log.info("Works found in place are verified after the others", works=self.queue.deferred)

    async def _objects_of(self, work: JsonDict) -> list[ObjectKey] | None:
        """The member objects of `work`, None if one cannot be told without a request (a
        malformed manifest, a kind the member does not serve)."""
        resolved = await self.applier.resources_of(work)
        if resolved is None:
            return None
        out: list[ObjectKey] = []
        for item, info in resolved:
            with contextlib.suppress(KubeError):
                self.objects.ensure(info.gvr, info.kind)
            out.append((info.gvr, item.namespace if info.namespaced else "", item.name))
        return out

    def _live(self, key: ObjectKey) -> tuple[bool, JsonDict | None]:
        gvr, namespace, name = key
        if not self.objects.known(gvr):
            return False, None
        return True, self.objects.get(gvr, namespace, name)[0]

    async def _missing(self, work: JsonDict, objects: list[ObjectKey]) -> bool:
        for key in objects:
            known, live = self._live(key)
            if not known or live is None:
                return True
        return False

    async def _touched(self, work: JsonDict, objects: list[ObjectKey]) -> bool:
        for key in objects:
            _, live = self._live(key)
            if live is None or touched_since_applied(live, FIELD_MANAGER):
                return True
        return False

    async def _not_in_place(self, work: JsonDict, objects: list[ObjectKey]) -> bool:
        versions = await self.applier.found_in_place(work)
        if versions is None:
            return True
        self.applier.verified.remember(work, versions)
        return False


class _Slices:
    """Yields to the event loop once SLICE_SECONDS have passed since the last yield."""

    def __init__(self) -> None:
        self._since = time.monotonic()

    async def next(self) -> None:
        if time.monotonic() - self._since >= SLICE_SECONDS:
            await asyncio.sleep(0)
            self._since = time.monotonic()
