"""Control-plane caches used by the execution and workStatus controllers.

`WorkInformer`: the Works of this cluster's execution namespace (list+watch, one namespace
only, never polled). `ClusterWatch`: this cluster's own Cluster object, selected by name, so
that readiness and termination are known without a GET per reconcile. There is one of each
per agent (`AgentContext.work_informer()` / `cluster_watch()`), shared by the controllers that
read them: each starts and stops it, so either controller can run alone under `--controllers`.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from agent.context import AgentContext
from agent.karmada import collected, conditions, names
from agent.kube.client import GVR, KubeClient
from agent.kube.controller import Controller, Result
from agent.kube.informers import WatchedReflector, typed_transform
from agent.kube.ratelimit import MaxOfRateLimiter, default_controller_rate_limiter
from agent.kube.reflector import EventHandler, HandlerFuncs, Reflector
from agent.kube.workqueue import WorkQueue
from agent.logs import get_logger
from agent.options import Options
from agent.resources import CLUSTERS, WORKS

log = get_logger(__name__)

JsonDict = dict[str, Any]
K = TypeVar("K", bound=Hashable)


# Metadata that changes on every write, status writes included.
_VOLATILE_METADATA = ("resourceVersion", "managedFields")


def without_status(obj: JsonDict) -> JsonDict:
    """The object minus status and write bookkeeping: what a status write leaves unchanged."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _VOLATILE_METADATA}
    return {**{k: v for k, v in obj.items() if k not in ("status", "metadata")}, "metadata": meta}


def controller_rate_limiter(options: Options) -> MaxOfRateLimiter[K]:
    """Upstream's default controller rate limiter with the --rate-limiter-* flags."""
    return default_controller_rate_limiter(
        base_delay=options.rate_limiter_base_delay.total_seconds(),
        max_delay=options.rate_limiter_max_delay.total_seconds(),
        qps=float(options.rate_limiter_qps),
        bucket_size=options.rate_limiter_bucket_size,
    )


def status_of(obj: JsonDict) -> JsonDict:
    status = obj.get("status")
    return status if isinstance(status, dict) else {}


class WorkInformer(WatchedReflector):
    def __init__(self, client: KubeClient, namespace: str, *, name: str = "works") -> None:
        super().__init__(
            Reflector(
                client,
                WORKS,
                namespace=namespace,
                transform=typed_transform(names.WORK_API_VERSION, "Work"),
                name=f"{name} {namespace}",
            )
        )
        self.client = client
        self.namespace = namespace

    def get(self, name: str) -> JsonDict | None:
        return self.reflector.store.get_by(self.namespace, name)

    def names(self) -> list[str]:
        return [str(obj["metadata"]["name"]) for obj in self.reflector.store]

    def add_handler(self, handler: EventHandler) -> Callable[[], None]:
        return self.reflector.add_handler(handler)

    async def patch_status(self, work: JsonDict, status: JsonDict) -> JsonDict:
        """Merge-patch `status` (only the keys given) into the Work's status subresource and
        keep the answer in the cache, so the next reconcile compares against what we wrote
        even before the watch brings it back. The handlers hear of it too: the answer may carry
        a spec change whose own watch event has not arrived yet."""
        meta = work.get("metadata") or {}
        updated = await self.client.patch(
            WORKS,
            str(meta.get("name")),
            {"status": status},
            patch_type="merge",
            namespace=self.namespace,
            subresource="status",
        )
        self.reflector.observe(updated)
        return updated


class ClusterWatch(WatchedReflector):
    """This cluster's Cluster object; `on_ready` callbacks fire when it turns Ready. One per
    agent (`AgentContext.cluster_watch()`), shared by the controllers that read the Cluster, so
    none of them polls it."""

    def __init__(self, client: KubeClient, cluster_name: str) -> None:
        super().__init__(
            Reflector(
                client,
                CLUSTERS,
                field_selector=f"metadata.name={cluster_name}",
                transform=typed_transform(names.CLUSTER_API_VERSION, "Cluster"),
                name=f"cluster {cluster_name}",
            )
        )
        self.cluster_name = cluster_name
        self._on_ready: list[Callable[[], None]] = []
        self.reflector.add_handler(
            HandlerFuncs(add=self._changed, update=lambda old, new: self._changed(new, old))
        )

    @property
    def cluster(self) -> JsonDict | None:
        return self.reflector.store.get_by(None, self.cluster_name)

    @property
    def ready(self) -> bool:
        cluster = self.cluster
        return cluster is not None and _is_ready(cluster)

    @property
    def terminating(self) -> bool:
        """Being deleted, or already gone."""
        cluster = self.cluster
        return cluster is None or bool((cluster.get("metadata") or {}).get("deletionTimestamp"))

    def on_ready(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback` whenever the Cluster turns Ready; returns the unsubscribe."""
        self._on_ready.append(callback)

        def unsubscribe() -> None:
            if callback in self._on_ready:
                self._on_ready.remove(callback)

        return unsubscribe

    def _changed(self, new: JsonDict, old: JsonDict | None = None) -> None:
        if _is_ready(new) and (old is None or not _is_ready(old)):
            log.info("cluster is ready", cluster=self.cluster_name)
            for callback in list(self._on_ready):
                callback()


def _is_ready(cluster: JsonDict) -> bool:
    return conditions.is_true(status_of(cluster).get("conditions"), names.CONDITION_READY)


def copy_conditions(work: JsonDict) -> list[JsonDict]:
    raw = status_of(work).get("conditions")
    return copy.deepcopy(raw) if isinstance(raw, list) else []


class WorkController:
    """What the execution and workStatus controllers share: this cluster's Works from a
    reflector, a rate-limited queue of Work names served by --concurrent-work-syncs workers,
    member-object events, and a lifecycle that starts the workers only once every cache they
    read has synced (an unsynced cache would make a Work look deleted).

    Subclasses implement `reconcile` and `_member_event`, and may watch more (`_watched`),
    enqueue on more Work events (`_work_handler`) or cancel their own tasks (`_stop_tasks`)."""

    name: str

    def __init__(self, ctx: AgentContext, name: str, *, stop_timeout: float = 10.0) -> None:
        self.ctx = ctx
        self.name = name
        self.namespace = ctx.execution_namespace
        self.stop_timeout = stop_timeout
        self.log = get_logger(__name__).bind(controller=name, cluster=ctx.cluster_name)
        # One list+watch of the Works for every controller that reads them.
        self.works: WorkInformer = ctx.work_informer()
        self._remove_work_handler: Callable[[], None] | None = None
        self.queue: WorkQueue[str] = WorkQueue(
            name, rate_limiter=controller_rate_limiter(ctx.options)
        )
        self.controller: Controller[str] = Controller(
            name, self.queue, self.reconcile, workers=max(ctx.options.concurrent_work_syncs, 1)
        )
        self._unsubscribe: Callable[[], None] | None = None
        self._unsubscribe_config: list[Callable[[], None]] = []
        self._starter: asyncio.Task[None] | None = None

    async def reconcile(self, name: str) -> Result | None:
        raise NotImplementedError

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
        self._unsubscribe = self.ctx.member_objects.subscribe(self._member_event)
        # Not waited for (see agent.controllers.interpreter_config): a change of the
        # interpreter configuration sends every Work through reconcile again.
        for watch in self.ctx.interpreter_config_watches():
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
            for watch in self.ctx.interpreter_config_watches():
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
