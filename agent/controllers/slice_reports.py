"""What serviceExport and endpointsliceCollect share: the member's EndpointSlices and the Works
that report them.

`MemberSlices` is one list+watch of the member's Service EndpointSlices, shared by both
controllers (`AgentContext.member_slices()`). It keeps whole objects only for the Services some
controller wants reported; every other slice is held as a stub (name, namespace, labels,
resourceVersion), so memory follows what is exported, not the member's size. When a Service
becomes wanted, `refresh` reads its slices once and fills the stubs in.

`SliceReports` writes and withdraws one controller's Works in the execution namespace, comparing
against the Works cache first so that an unchanged slice costs no request.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agent.karmada import collected
from agent.karmada.collected import Reporter
from agent.kube.client import KubeClient
from agent.kube.controller import Controller, Result, RetryableError
from agent.kube.errors import NotFoundError
from agent.kube.informers import WatchedReflector, typed_transform
from agent.kube.reflector import HandlerFuncs, Reflector
from agent.kube.resources import ENDPOINT_SLICES
from agent.kube.workqueue import WorkQueue
from agent.logs import get_logger
from agent.resources import WORKS

from .work_informer import WorkInformer, controller_rate_limiter

if TYPE_CHECKING:
    from agent.context import AgentContext

log = get_logger(__name__)

JsonDict = dict[str, Any]
# handler(event_type, slice) with event_type "ADDED", "MODIFIED" or "DELETED".
SliceHandler = Callable[[str, JsonDict], None]
Wanted = Callable[[str, str], bool]

_full = typed_transform(collected.ENDPOINT_SLICE_API_VERSION, collected.ENDPOINT_SLICE_KIND)


def is_stub(endpoint_slice: JsonDict) -> bool:
    # addressType is required in every EndpointSlice, so only a stub lacks it.
    return "addressType" not in endpoint_slice


def _service_key(obj: JsonDict) -> list[str]:
    meta = obj.get("metadata") or {}
    service = collected.service_of(obj)
    return [f"{meta.get('namespace', '')}/{service}"] if service else []


class MemberSlices(WatchedReflector):
    name = "member-endpointslices"

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self._interests: list[Wanted] = []
        self._handlers: list[SliceHandler] = []
        super().__init__(
            Reflector(
                client,
                ENDPOINT_SLICES,
                # Only Service slices: selector-less slices of other owners never matter here.
                label_selector=collected.SERVICE_NAME_LABEL,
                transform=self._trim,
                name="member endpointslices",
            )
        )
        self.reflector.store.add_indexer("service", _service_key)
        self.reflector.add_handler(
            HandlerFuncs(
                add=lambda obj: self._fan_out("ADDED", obj),
                update=lambda _old, new: self._fan_out("MODIFIED", new),
                delete=lambda obj: self._fan_out("DELETED", obj),
            )
        )

    # --- lifecycle: started by the first user, stopped with the last ---------------------------

    def start(self) -> None:
        first = not self.started
        super().start()
        if first:
            log.info("watching member EndpointSlices", selector=collected.SERVICE_NAME_LABEL)

    # --- interest: which Services are kept whole ------------------------------------------------

    def want(self, wanted: Wanted) -> Callable[[], None]:
        """Keep whole the slices of every Service for which `wanted(namespace, name)` holds;
        returns the function that withdraws this interest."""
        self._interests.append(wanted)

        def withdraw() -> None:
            with contextlib.suppress(ValueError):
                self._interests.remove(wanted)

        return withdraw

    def wanted(self, namespace: str, service: str) -> bool:
        return any(wanted(namespace, service) for wanted in self._interests)

    def _trim(self, obj: JsonDict) -> JsonDict:
        obj = _full(obj)
        meta = obj.get("metadata") or {}
        if self.wanted(str(meta.get("namespace", "")), collected.service_of(obj)):
            return obj
        kept = ("name", "namespace", "labels", "resourceVersion", "uid")
        return {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "metadata": {k: meta[k] for k in kept if k in meta},
        }

    # --- reads ---------------------------------------------------------------------------------

    def get(self, namespace: str, name: str) -> JsonDict | None:
        return self.reflector.store.get_by(namespace, name)

    def of_service(self, namespace: str, service: str) -> list[JsonDict]:
        return self.reflector.store.by_index("service", f"{namespace}/{service}")

    async def refresh(self, namespace: str, service: str) -> list[JsonDict]:
        """The Service's slices, whole: stubs (kept while nobody wanted them) are read again."""
        slices = self.of_service(namespace, service)
        if any(is_stub(s) for s in slices):
            listed = await self.client.list(
                ENDPOINT_SLICES,
                namespace=namespace,
                label_selector=f"{collected.SERVICE_NAME_LABEL}={service}",
            )
            for item in listed.get("items") or []:
                meta = item.get("metadata") or {}
                current = self.get(namespace, str(meta.get("name")))
                # Only stubs are replaced: a whole object in the store came from the watch
                # after the Service became wanted, and is as new as the list or newer.
                if current is not None and is_stub(current):
                    self.reflector.observe(item)
            slices = self.of_service(namespace, service)
        return [s for s in slices if not is_stub(s)]

    # --- events --------------------------------------------------------------------------------

    def subscribe(self, handler: SliceHandler) -> Callable[[], None]:
        self._handlers.append(handler)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._handlers.remove(handler)

        return unsubscribe

    def _fan_out(self, event_type: str, obj: JsonDict) -> None:
        for handler in list(self._handlers):
            try:
                handler(event_type, obj)
            except Exception:
                log.exception("EndpointSlice handler failed")


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
        if existing is None:
            written = await self.client.create(WORKS, desired, namespace=self.namespace)
        elif collected.same_report(existing, desired):
            return
        else:
            written = await self.client.replace(WORKS, desired)
        self.works.reflector.observe(written)
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
        with contextlib.suppress(NotFoundError):
            self.works.reflector.observe(await self.client.replace(WORKS, remaining))


# (kind, namespace, name): "ServiceExport", "EndpointSlice" or "Service" keys of one queue.
Key = tuple[str, str, str]


class SliceReportingController:
    """The frame both reporting controllers share: this cluster's Works (control plane), the
    shared member EndpointSlice watch (started once there is something to report), a
    rate-limited queue of `Key`s and its workers. Subclasses implement `reconcile`,
    `_wanted`, `_slice_event` and `_work_event`, and may watch more member objects."""

    name: str
    workers = 3  # upstream runs three asynchronous workers for each

    def __init__(self, ctx: AgentContext, reporter: Reporter) -> None:
        self.ctx = ctx
        self.log = get_logger(__name__).bind(controller=self.name, cluster=ctx.cluster_name)
        self.works = ctx.work_informer()
        self.slices = ctx.member_slices()
        self.reports = SliceReports(ctx.karmada, self.works, reporter)
        self.queue: WorkQueue[Key] = WorkQueue(
            self.name, rate_limiter=controller_rate_limiter(ctx.options)
        )
        self.controller: Controller[Key] = Controller(
            self.name, self.queue, self.reconcile, workers=self.workers
        )
        self._unsubscribe: list[Callable[[], None]] = []
        self._starter: asyncio.Task[None] | None = None
        self._member_started = False

    # --- for subclasses ------------------------------------------------------------------------

    async def reconcile(self, key: Key) -> Result | None:
        raise NotImplementedError

    def _wanted(self, namespace: str, service: str) -> bool:
        raise NotImplementedError

    def _slice_event(self, event_type: str, endpoint_slice: JsonDict) -> None:
        raise NotImplementedError

    def _work_event(self, work: JsonDict) -> None:
        raise NotImplementedError

    def _start_member_watches(self) -> None:
        """Start the member watches this controller needs beyond EndpointSlices."""

    async def _stop_member_watches(self) -> None:
        """Stop what `_start_member_watches` started."""

    def _member_synced(self) -> bool:
        return self.slices.synced

    # --- lifecycle -----------------------------------------------------------------------------

    @property
    def has_synced(self) -> bool:
        return self.works.synced

    def ensure_member_watches(self) -> None:
        """Watch the member once a Work gives something to report (as upstream builds its
        member informers on the first such Work): a member without the MCS API is never asked."""
        if self._member_started:
            return
        self._member_started = True
        self._unsubscribe.append(self.slices.want(self._wanted))
        self._unsubscribe.append(self.slices.subscribe(self._slice_event))
        self.slices.start()
        self._start_member_watches()
        self.log.info("watching the member for reported EndpointSlices")

    def require_member_synced(self) -> None:
        if not self._member_started:
            self.ensure_member_watches()
        if not self._member_synced():
            raise RetryableError("member caches have not synced yet")

    async def start(self) -> None:
        self._unsubscribe.append(
            self.works.add_handler(
                HandlerFuncs(add=self._work_event, update=lambda _old, new: self._work_event(new))
            )
        )
        self.works.start()
        self._starter = asyncio.get_running_loop().create_task(
            self._start_workers(), name=f"{self.name} start"
        )

    async def _start_workers(self) -> None:
        await self.works.wait_synced()
        self.log.info("caches synced; starting workers", workers=self.controller.workers)
        self.controller.start()

    async def stop(self) -> None:
        if self._starter is not None:
            self._starter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._starter
        await self.controller.stop(10.0)
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe.clear()
        if self._member_started:
            self._member_started = False
            await self._stop_member_watches()
            await self.slices.stop()
        await self.works.stop()
