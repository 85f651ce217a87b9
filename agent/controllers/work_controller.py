"""What the execution and workStatus controllers share: this cluster's Works from the shared
Works source, a rate-limited queue of Work names served by --concurrent-work-syncs workers,
member-object events, interpreter configuration changes, and a lifecycle that starts the
workers only once every cache they read has synced (an unsynced cache would make a Work look
deleted)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from agent.context import AgentContext
from agent.karmada import collected, names
from agent.karmada.status import without_status
from agent.kube.client import GVR
from agent.kube.controller import Controller, Result
from agent.kube.informers import WatchedReflector
from agent.kube.reflector import HandlerFuncs
from agent.kube.workqueue import WorkQueue
from agent.logs import get_logger
from agent.sources.works import WorkInformer

from .rate_limiter import controller_rate_limiter

JsonDict = dict[str, Any]


class WorkController:
    """Subclasses implement `reconcile` and `_member_event`, and may watch more (`_watched`),
    enqueue on more Work events (`_work_handler`) or cancel their own tasks (`_stop_tasks`)."""

    name: str

    def __init__(self, ctx: AgentContext, name: str, *, stop_timeout: float = 10.0) -> None:
        self.ctx = ctx
        self.name = name
        self.namespace = ctx.execution_namespace
        self.stop_timeout = stop_timeout
        self.log = get_logger(__name__).bind(controller=name, cluster=ctx.cluster_name)
        self.works: WorkInformer = ctx.sources.works
        self._remove_work_handler: Callable[[], None] | None = None
        component, metrics = names.controller_component(name), ctx.metrics.client
        self.queue: WorkQueue[str] = WorkQueue(
            component, rate_limiter=controller_rate_limiter(ctx.options), metrics=metrics
        )
        self.controller: Controller[str] = Controller(
            component,
            self.queue,
            self.reconcile,
            workers=max(ctx.options.concurrent_work_syncs, 1),
            metrics=metrics,
            log_context=self._log_context,
        )
        self._unsubscribe: Callable[[], None] | None = None
        self._unsubscribe_config: list[Callable[[], None]] = []
        self._starter: asyncio.Task[None] | None = None

    async def reconcile(self, name: str) -> Result | None:
        raise NotImplementedError

    def _log_context(self, name: str) -> dict[str, str]:
        return {"cluster": self.ctx.cluster_name, "work": f"{self.namespace}/{name}"}

    def _member_event(self, event_type: str, gvr: GVR, obj: JsonDict) -> None:
        raise NotImplementedError

    def _watched(self) -> list[WatchedReflector]:
        return [self.works]

    def _work_handler(self) -> HandlerFuncs:
        return HandlerFuncs(add=self._work_added, update=self._work_updated)

    def _stop_tasks(self) -> list[asyncio.Task[None]]:
        return []

    def _enqueue_every_work(self) -> None:
        for name in self.works.names():
            self.queue.add(name)

    def _work_added(self, work: JsonDict) -> None:
        if collected.is_suppressed(work):
            return  # collected objects on their way to the control plane, never applied here
        self.queue.add(str((work.get("metadata") or {}).get("name")))

    def _work_updated(self, old: JsonDict, new: JsonDict) -> None:
        # Status writes (ours included) come back as updates; only other changes matter.
        if without_status(old) != without_status(new):
            self._work_added(new)

    async def start(self) -> None:
        self._remove_work_handler = self.works.add_handler(self._work_handler())
        for watched in self._watched():
            watched.start()
        self._unsubscribe = self.ctx.sources.member_objects.subscribe(self._member_event)
        # Not waited for (see agent.sources.interpreter_config): a change of the
        # interpreter configuration sends every Work through reconcile again.
        for watch in self.ctx.sources.interpreter_config:
            watch.start()
            self._unsubscribe_config.append(watch.on_change(self._enqueue_every_work))
        self._starter = asyncio.get_running_loop().create_task(
            self._start_workers(), name=f"{self.name} start"
        )

    async def _start_workers(self) -> None:
        for watched in self._watched():
            await watched.wait_synced()
        self.log.info("caches synced; starting workers", workers=self.controller.workers)
        self.controller.start()

    async def stop(self) -> None:
        if self._remove_work_handler is not None:
            self._remove_work_handler()
            self._remove_work_handler = None
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._unsubscribe_config:
            for unsubscribe in self._unsubscribe_config:
                unsubscribe()
            self._unsubscribe_config = []
            for watch in self.ctx.sources.interpreter_config:
                await watch.stop()
        tasks = [t for t in (self._starter, *self._stop_tasks()) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.controller.stop(self.stop_timeout)
        for watched in self._watched():
            await watched.stop()
