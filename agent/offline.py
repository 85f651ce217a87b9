"""Serving the member from the durable Work record while the control plane is unreachable.

An agent that (re)starts during an outage cannot register, list its Works or write status. It
still knows what it last applied (agent.sources.work_records), so until registration succeeds
the app runs the execution and workStatus controllers on sources built from that record
(agent.sources.offline_sources): member watches run, drift is put back, health is observed.
Their status writes are queued per Work and, when the link returns, sent as one merge patch per
Work (`report`) before the normal controllers start, which then find nothing left to write.
"""

from __future__ import annotations

from agent.context import AgentContext
from agent.controllers import load_builders
from agent.controllers.manager import ControllerManager
from agent.kube.client import KubeClient
from agent.logs import get_logger
from agent.sources.recorded import RecordedWorks

log = get_logger(__name__)

# The controllers that serve recorded Works: the others need the control plane.
OFFLINE_CONTROLLERS = ("execution", "workStatus")


class OfflineServing:
    """The execution and workStatus controllers on the recorded Works."""

    name = "offline"

    def __init__(self, ctx: AgentContext, works: RecordedWorks) -> None:
        self.ctx = ctx
        self.works = works
        enabled = [name for name in OFFLINE_CONTROLLERS if ctx.options.controller_enabled(name)]
        self.manager = ControllerManager(
            ctx, builders=load_builders(enabled).builders, shared=ctx.sources.shared
        )

    async def start(self) -> None:
        await self.manager.start()
        log.warning(
            "the control plane is unreachable: serving the recorded Works until it answers",
            works=len(self.works.names()),
        )

    async def stop(self) -> None:
        await self.manager.stop()

    async def report(self, karmada: KubeClient) -> int:
        """Send the status queued while offline; returns the writes made."""
        return await self.works.report(karmada)
