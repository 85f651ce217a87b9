"""Starts the enabled controllers (when this replica leads) and stops them within a bound.

Controllers start in registry order and stop in reverse, so Work execution stops taking work
before the shared member caches it reads go away. A controller whose build or start fails is
logged and left out; the others run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from agent.context import AgentContext, Runnable
from agent.controllers import Builder, load_builders
from agent.logs import get_logger

log = get_logger(__name__)

DEFAULT_STOP_TIMEOUT = 30.0


class ControllerManager:
    def __init__(
        self,
        ctx: AgentContext,
        *,
        builders: dict[str, Builder] | None = None,
        shared: Iterable[Runnable] = (),
        stop_timeout: float = DEFAULT_STOP_TIMEOUT,
    ) -> None:
        self.ctx = ctx
        self._builders = (
            builders
            if builders is not None
            else load_builders(ctx.options.enabled_controllers()).builders
        )
        # Shared machinery (member caches) started before and stopped after the controllers.
        self._shared = list(shared)
        self.stop_timeout = stop_timeout
        self.running: list[Runnable] = []
        self.failed: dict[str, str] = {}
        self._started = False

    @property
    def started(self) -> bool:
        return self._started

    def has_synced(self) -> bool:
        """True when every running controller that reports sync state (a boolean `has_synced`
        attribute or property) has synced."""
        for runnable in self.running:
            synced = getattr(runnable, "has_synced", True)
            if isinstance(synced, bool) and not synced:
                return False
        return True

    async def start(self) -> None:
        self._started = True
        for runnable in self._shared:
            await runnable.start()
            self.running.append(runnable)
        for name, builder in self._builders.items():
            try:
                runnable = builder(self.ctx)
                await runnable.start()
            except Exception as exc:
                self.failed[name] = str(exc)
                log.exception("controller %s failed to start", name)
                continue
            self.running.append(runnable)
            log.info("controller %s started", name)

    async def stop(self) -> None:
        """Stop everything in reverse order; each stop is bounded, the whole within
        `stop_timeout`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.stop_timeout
        running, self.running = self.running, []
        for runnable in reversed(running):
            remaining = max(0.1, deadline - loop.time())
            name = getattr(runnable, "name", type(runnable).__name__)
            try:
                await asyncio.wait_for(runnable.stop(), remaining)
            except TimeoutError:
                log.warning("controller %s did not stop within %.1fs", name, remaining)
            except Exception:
                log.exception("controller %s failed while stopping", name)
            else:
                log.info("controller %s stopped", name)
