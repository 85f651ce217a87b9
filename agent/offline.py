"""Serving the member from the durable Work record while the control plane is unreachable.

An agent that (re)starts during an outage cannot register, list its Works or write status. It
still knows what it last applied (agent.sources.work_records), so until registration succeeds
the app runs the execution and workStatus controllers on sources built from that record
(agent.sources.offline_sources): member watches run, drift is put back, health is observed.
Their status writes are queued per Work and, when the link returns, sent as one merge patch per
Work (`report`) before the normal controllers start, which then find nothing left to write.

Meanwhile the control plane's Works are watched as the registered agent's controllers will read
them (`live_works`), listed as soon as the control plane answers again, even while registration
still waits for the member: those controllers then start on a synced cache, not on a list of
every Work over what may be a slow link once both sides are back.
"""

from __future__ import annotations

from collections.abc import Callable

from agent.context import AgentContext
from agent.controllers import load_builders
from agent.controllers.manager import ControllerManager
from agent.karmada.names import execution_namespace
from agent.kube.client import KubeClient
from agent.logs import get_logger
from agent.options import Options
from agent.sources import Sources, offline_sources, work_records
from agent.sources.recorded import RecordedWorks
from agent.sources.works import WorkInformer

log = get_logger(__name__)

# The controllers that serve recorded Works: the others need the control plane.
OFFLINE_CONTROLLERS = ("execution", "workStatus")


async def serve_recorded(
    karmada: KubeClient,
    member: KubeClient,
    options: Options,
    context: Callable[[Sources], AgentContext],
) -> OfflineServing | None:
    """Start serving the Works recorded on the member, on a context that `context` builds on
    the offline sources; None when there are none. Raises KubeError when the record cannot be
    read (the caller tries again: a member that failed one request must not leave the agent
    idle for the whole outage)."""
    records = work_records(member, options)
    recorded = await records.load()
    if not recorded:
        log.info("no recorded Works to serve while the control plane is unreachable")
        return None
    namespace = execution_namespace(options.cluster_name)
    works = RecordedWorks(karmada, namespace, recorded)
    sources = offline_sources(karmada, member, options, records=records, works=works)
    serving = OfflineServing(context(sources), works, WorkInformer(karmada, namespace))
    await serving.start()
    return serving


class OfflineServing:
    """The execution and workStatus controllers on the recorded Works; the control plane's
    Works watched for the registered agent (`live_works`, kept running by `stop`: the app hands
    it over and stops it)."""

    name = "offline"

    def __init__(self, ctx: AgentContext, works: RecordedWorks, live_works: WorkInformer) -> None:
        self.ctx = ctx
        self.works = works
        self.live_works = live_works
        enabled = [name for name in OFFLINE_CONTROLLERS if ctx.options.controller_enabled(name)]
        self.manager = ControllerManager(ctx, builders=load_builders(enabled).builders)

    async def start(self) -> None:
        await self.manager.start()
        self.live_works.start()
        log.warning(
            "the control plane is unreachable: serving the recorded Works until it answers",
            works=len(self.works.names()),
        )

    async def stop(self) -> None:
        await self.manager.stop()

    async def report(self, karmada: KubeClient) -> int:
        """Send the status queued while offline; returns the writes made."""
        return await self.works.report(karmada, into=self.live_works)
