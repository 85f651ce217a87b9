"""What the execution and workStatus controllers share: this cluster's Works from the shared
Works source, a rate-limited queue of Work names served by --concurrent-work-syncs workers, the
handlers of Work and member-object events, and a lifecycle that starts the workers only once
every cache they wait for has synced (an unsynced cache would make a Work look deleted). What
each watches is declared in its `watches` (agent.controllers.watches), which the controller
manager starts."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from agent.context import AgentContext
from agent.karmada import collected, names
from agent.karmada.status import without_status
from agent.kube.client import GVR
from agent.kube.controller import Controller, Result
from agent.kube.discovery import RESTMapper
from agent.kube.reflector import HandlerFuncs
from agent.kube.workqueue import WorkQueue
from agent.logs import get_logger
from agent.sources.member_objects import MemberObjects
from agent.sources.works import WorkInformer

from .rate_limiter import controller_rate_limiter
from .watches import Watches

JsonDict = dict[str, Any]


class WorkController:
    """Subclasses declare what they watch (`watches`, in their constructor), implement
    `reconcile` and `_member_event`, and may prepare before the workers run
    (`_before_workers`) or cancel their own tasks (`_stop_tasks`)."""

    watches: Watches

    name: str

    def __init__(self, ctx: AgentContext, name: str, *, stop_timeout: float = 10.0) -> None:
        self.ctx = ctx
        self.name = name
        self.namespace = ctx.execution_namespace
        self.stop_timeout = stop_timeout
        self.log = get_logger(__name__).bind(controller=name, cluster=ctx.cluster_name)
        self.works: WorkInformer = ctx.sources.works
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
        self._starter: asyncio.Task[None] | None = None

    async def reconcile(self, name: str) -> Result | None:
        raise NotImplementedError

    def _log_context(self, name: str) -> dict[str, str]:
        return {"cluster": self.ctx.cluster_name, "work": f"{self.namespace}/{name}"}

    def _member_event(self, event_type: str, gvr: GVR, obj: JsonDict) -> None:
        raise NotImplementedError

    def _work_handler(self) -> HandlerFuncs:
        return HandlerFuncs(add=self._work_added, update=self._work_updated)

    def _member_objects(self) -> tuple[MemberObjects, WorkInformer, RESTMapper]:
        """The member objects of the kinds the Works name (Watches.member_objects_of_works)."""
        return self.ctx.sources.member_objects, self.works, self.ctx.member_mapper

    def _stop_tasks(self) -> list[asyncio.Task[Any]]:
        return []

    def _enqueue_every_work(self) -> None:
        # Deferred Works are queued already, behind the others: they keep their place.
        for name in self.works.names():
            self.queue.add(name, promote=False)

    def _work_added(self, work: JsonDict) -> None:
        if collected.is_suppressed(work):
            return  # collected objects on their way to the control plane, never applied here
        self.queue.add(str((work.get("metadata") or {}).get("name")))

    def _work_updated(self, old: JsonDict, new: JsonDict) -> None:
        # Status writes (ours included) come back as updates; only other changes matter.
        if without_status(old) != without_status(new):
            self._work_added(new)

    async def start(self) -> None:
        """The sources are started and the handlers subscribed by the controller manager."""
        self._starter = asyncio.get_running_loop().create_task(
            self._start_workers(), name=f"{self.name} start"
        )

    async def _start_workers(self) -> None:
        await self.watches.wait_synced()
        await self._before_workers()
        self.log.info("caches synced; starting workers", workers=self.controller.workers)
        self.controller.start()

    async def _before_workers(self) -> None:
        pass

    async def stop(self) -> None:
        tasks = [t for t in (self._starter, *self._stop_tasks()) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.controller.stop(self.stop_timeout)
