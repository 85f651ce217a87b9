"""Serving the member from the durable Work record while the control plane is unreachable.

An agent that (re)starts during an outage cannot register, list its Works or write status. It
still knows what it last applied (agent.controllers.work_record), so until registration
succeeds it runs the execution and workStatus controllers on those Works: member watches run,
drift is put back, health is observed. Their status writes are queued per Work (the last one
wins, merged by key) and, when the link returns, sent as one merge patch per Work before the
normal controllers start, which then find nothing left to write.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from agent.context import AgentContext, Runnable
from agent.kube.client import KubeClient
from agent.kube.errors import KubeError, NotFoundError
from agent.logs import get_logger
from agent.resources import WORKS

from .work_informer import ClusterWatch, WorkInformer, status_of
from .work_record import WorkRecords

log = get_logger(__name__)

JsonDict = dict[str, Any]
REPORT_CONCURRENCY = 8


class _NotWatched:
    """A source that needs no watch: always synced, nothing to start or stop."""

    @property
    def synced(self) -> bool:
        return True

    def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def wait_synced(self, timeout: float | None = None) -> bool:
        return True


class RecordedWorks(_NotWatched, WorkInformer):
    """The recorded Works in place of the control plane's list+watch; status writes queued."""

    def __init__(self, client: KubeClient, namespace: str, works: list[JsonDict]) -> None:
        super().__init__(client, namespace, name="recorded works")
        self.reflector.seed(works)
        self.queued: dict[str, JsonDict] = {}

    async def patch_status(self, work: JsonDict, status: JsonDict) -> JsonDict:
        name = str((work.get("metadata") or {}).get("name"))
        self.queued.setdefault(name, {}).update(copy.deepcopy(status))
        updated = {**work, "status": {**status_of(work), **copy.deepcopy(status)}}
        self.reflector.observe(updated)
        return updated


class MemberOnlyCluster(_NotWatched, ClusterWatch):
    """The Cluster as the offline controllers see it: Ready (they only reach the member, and a
    member that does not answer fails their requests anyway), never terminating."""

    @property
    def ready(self) -> bool:
        return True

    @property
    def terminating(self) -> bool:
        return False


class OfflineServing:
    """The execution and workStatus controllers on the recorded Works."""

    name = "offline"

    def __init__(self, ctx: AgentContext, shared: list[Runnable]) -> None:
        self.ctx = ctx
        self.shared = shared
        self.works: RecordedWorks | None = None
        self.running: list[Runnable] = []

    async def start(self, records: WorkRecords) -> bool:
        """Serve the recorded Works; False (nothing started) when there are none."""
        try:
            recorded = await records.load()
        except KubeError as exc:
            log.warning("cannot read the Work records on the member", error=str(exc))
            return False
        if not recorded:
            return False
        from .execution import ExecutionController
        from .work_status import WorkStatusController

        ctx = self.ctx
        self.works = RecordedWorks(ctx.karmada, ctx.execution_namespace, recorded)
        ctx.use_sources(self.works, MemberOnlyCluster(ctx.karmada, ctx.cluster_name))
        wanted: list[Runnable] = [*self.shared]
        if ctx.options.controller_enabled("execution"):
            wanted.append(ExecutionController(ctx))
        if ctx.options.controller_enabled("workStatus"):
            wanted.append(WorkStatusController(ctx))
        for runnable in wanted:
            await runnable.start()
            self.running.append(runnable)
        log.warning(
            "the control plane is unreachable: serving the recorded Works until it answers",
            works=len(recorded),
        )
        return True

    async def stop(self) -> None:
        running, self.running = self.running, []
        for runnable in reversed(running):
            await runnable.stop()

    async def report(self, karmada: KubeClient) -> int:
        """Send the queued status, one merge patch per Work, a few at a time (over a slow link
        one after the other costs a round trip per Work); returns the writes made."""
        if self.works is None:
            return 0
        works = self.works
        limit = asyncio.Semaphore(REPORT_CONCURRENCY)

        async def write(name: str, status: JsonDict) -> int:
            async with limit:
                try:
                    await karmada.patch(
                        WORKS,
                        name,
                        {"status": status},
                        patch_type="merge",
                        namespace=works.namespace,
                        subresource="status",
                    )
                except NotFoundError:
                    log.info("Work gone while offline; its queued status is dropped", work=name)
                except KubeError as exc:
                    log.warning("queued Work status not reported", work=name, error=str(exc))
                else:
                    return 1
                return 0

        queued = sorted(works.queued.items())
        works.queued.clear()
        return sum(await asyncio.gather(*(write(name, status) for name, status in queued)))
