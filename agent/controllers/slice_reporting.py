"""What serviceExport and endpointsliceCollect share: the Works that report the member's
EndpointSlices, and the frame of both controllers.

`SliceReports` writes and withdraws one controller's Works in the execution namespace, comparing
against the Works cache first so that an unchanged slice costs no request.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from agent.context import AgentContext
from agent.karmada import collected, names
from agent.karmada.collected import Reporter
from agent.kube.client import KubeClient
from agent.kube.controller import Controller, Result, RetryableError
from agent.kube.errors import NotFoundError
from agent.kube.reflector import HandlerFuncs
from agent.kube.workqueue import WorkQueue
from agent.logs import get_logger
from agent.resources import WORKS
from agent.sources.works import WorkInformer

from .rate_limiter import controller_rate_limiter
from .watches import OnDemand, Startable, Watches

log = get_logger(__name__)

JsonDict = dict[str, Any]


class SliceReports:
    """One reporter's Works in the execution namespace."""

    def __init__(self, client: KubeClient, works: WorkInformer, reporter: Reporter) -> None:
        self.client = client
        self.works = works
        self.reporter = reporter
        self.namespace = works.namespace
        self._index = f"reported-by-{reporter.token}"
        works.reflector.store.add_indexer(self._index, self._reported_service)

    def _reported_service(self, work: JsonDict) -> list[str]:
        if not collected.is_reported_by(work, self.reporter):
            return []
        service = self.reporter.service_labels(work)
        return [f"{service[0]}/{service[1]}"] if service is not None else []

    def reported_for(self, namespace: str, service: str) -> list[JsonDict]:
        """The Works this reporter wrote for the Service's slices."""
        return self.works.reflector.store.by_index(self._index, f"{namespace}/{service}")

    def work_for(self, namespace: str, slice_name: str) -> JsonDict | None:
        return self.works.get(collected.slice_work_name(namespace, slice_name))

    async def report(self, endpoint_slice: JsonDict) -> None:
        meta = endpoint_slice.get("metadata") or {}
        existing = self.work_for(str(meta.get("namespace", "")), str(meta.get("name")))
        if existing is not None and (existing.get("metadata") or {}).get("deletionTimestamp"):
            raise RetryableError(
                f"work {self.namespace}/{existing['metadata']['name']} is being deleted"
            )
        desired = collected.desired_work(endpoint_slice, self.reporter, self.namespace, existing)
        if existing is not None and collected.same_report(existing, desired):
            return
        with self.works.reflector.writing(f"{self.namespace}/{desired['metadata']['name']}") as w:
            if existing is None:
                w.answered(await self.client.create(WORKS, desired, namespace=self.namespace))
            else:
                w.answered(await self.client.replace(WORKS, desired))
        log.debug(
            "reported EndpointSlice",
            work=desired["metadata"]["name"],
            slice=f"{meta.get('namespace')}/{meta.get('name')}",
            reporter=self.reporter.token,
        )

    async def withdraw(self, work: JsonDict) -> None:
        """Remove this reporter from the Work; delete the Work when no reporter is left."""
        name = str(work["metadata"]["name"])
        remaining = collected.withdrawn(work, self.reporter)
        if remaining is None:
            with contextlib.suppress(NotFoundError):
                await self.client.delete(WORKS, name, namespace=self.namespace)
            log.info("withdrew reported EndpointSlice", work=name, reporter=self.reporter.token)
            return
        with (
            contextlib.suppress(NotFoundError),
            self.works.reflector.writing(f"{self.namespace}/{name}") as write,
        ):
            write.answered(await self.client.replace(WORKS, remaining))


# (kind, namespace, name): "ServiceExport", "EndpointSlice" or "Service" keys of one queue.
Key = tuple[str, str, str]


class SliceReportingController:
    """The frame both reporting controllers share: this cluster's Works (control plane), the
    shared member EndpointSlice watch (started once there is something to report), a
    rate-limited queue of `Key`s and its workers. Subclasses implement `reconcile`,
    `_wanted`, `_slice_event` and `_work_event`, and may watch more member objects
    (`member_sources`, started with the EndpointSlices)."""

    name: str
    workers = 3  # upstream runs three asynchronous workers for each

    def __init__(
        self, ctx: AgentContext, reporter: Reporter, member_sources: tuple[Startable, ...] = ()
    ) -> None:
        self.ctx = ctx
        self.log = get_logger(__name__).bind(controller=self.name, cluster=ctx.cluster_name)
        self.works = ctx.sources.works
        self.slices = ctx.sources.member_slices
        self.reports = SliceReports(ctx.karmada, self.works, reporter)
        component, metrics = names.controller_component(self.name), ctx.metrics.client
        self.queue: WorkQueue[Key] = WorkQueue(
            component, rate_limiter=controller_rate_limiter(ctx.options), metrics=metrics
        )
        self.controller: Controller[Key] = Controller(
            component, self.queue, self.reconcile, workers=self.workers, metrics=metrics
        )
        self._starter: asyncio.Task[None] | None = None
        # The member is watched once a Work gives something to report (`ensure_member_watches`).
        self.member_watches = OnDemand(
            self.slices,
            *member_sources,
            subscribe=(
                lambda: self.slices.want(self._wanted),
                lambda: self.slices.subscribe(self._slice_event),
            ),
        )
        self.watches = (
            Watches()
            .for_works(
                self.works,
                HandlerFuncs(add=self._work_event, update=lambda _old, new: self._work_event(new)),
            )
            .on_demand(self.member_watches)
        )

    # --- for subclasses ------------------------------------------------------------------------

    async def reconcile(self, key: Key) -> Result | None:
        raise NotImplementedError

    def _wanted(self, namespace: str, service: str) -> bool:
        raise NotImplementedError

    def _slice_event(self, event_type: str, endpoint_slice: JsonDict) -> None:
        raise NotImplementedError

    def _work_event(self, work: JsonDict) -> None:
        raise NotImplementedError

    def _member_synced(self) -> bool:
        return self.slices.synced

    # --- lifecycle -----------------------------------------------------------------------------

    @property
    def has_synced(self) -> bool:
        return self.works.synced

    def ensure_member_watches(self) -> None:
        """Watch the member once a Work gives something to report (as upstream builds its
        member informers on the first such Work): a member without the MCS API is never asked."""
        if self.member_watches.ensure():
            self.log.info("watching the member for reported EndpointSlices")

    def require_member_synced(self) -> None:
        self.ensure_member_watches()
        if not self._member_synced():
            raise RetryableError("member caches have not synced yet")

    async def start(self) -> None:
        """The sources are started and the handlers subscribed by the controller manager."""
        self._starter = asyncio.get_running_loop().create_task(
            self._start_workers(), name=f"{self.name} start"
        )

    async def _start_workers(self) -> None:
        await self.watches.wait_synced()
        self.log.info("caches synced; starting workers", workers=self.controller.workers)
        self.controller.start()

    async def stop(self) -> None:
        if self._starter is not None:
            self._starter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._starter
        await self.controller.stop(10.0)
