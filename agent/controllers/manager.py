"""Starts the enabled controllers (when this replica leads) and stops them within a bound.

The sources the controllers declare (watches.py) are started first, each once however many
controllers declare it, in the order declared; then the controllers in registry order, each with
its handlers subscribed. They stop in reverse: the controllers (Work execution stops taking work
before the workStatus controller), then the sources, so none goes away while a controller reads
it. A controller whose build or start fails is logged and left out; the others run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from agent.context import AgentContext, Runnable
from agent.controllers import Builder, load_builders
from agent.logs import get_logger

from .watches import Source, start_source, watches_of

log = get_logger(__name__)

DEFAULT_STOP_TIMEOUT = 30.0


class ControllerManager:
    def __init__(
        self,
        ctx: AgentContext,
        *,
        builders: dict[str, Builder] | None = None,
        stop_timeout: float = DEFAULT_STOP_TIMEOUT,
    ) -> None:
        self.ctx = ctx
        self._builders = (
            builders
            if builders is not None
            else load_builders(ctx.options.enabled_controllers()).builders
        )
        self.stop_timeout = stop_timeout
        self.running: list[Runnable] = []
        self.sources: list[Source] = []
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
        built: list[tuple[str, Runnable]] = []
        for name, builder in self._builders.items():
            try:
                built.append((name, builder(self.ctx)))
            except Exception as exc:
                self.failed[name] = str(exc)
                log.exception("controller %s failed to start", name)
        for _, runnable in built:
            await self._start_sources(runnable)
        for name, runnable in built:
            await self._start_controller(name, runnable)

    async def add(self, name: str, runnable: Runnable) -> None:
        """Run one more controller: the sources it declares that are not running yet first."""
        await self._start_sources(runnable)
        await self._start_controller(name, runnable)

    async def remove(self, runnable: Runnable) -> None:
        """Stop one controller (its sources keep running until the manager stops)."""
        if runnable in self.running:
            self.running.remove(runnable)
        await self._stop_controller(runnable, asyncio.get_running_loop().time() + self.stop_timeout)

    async def _start_sources(self, runnable: Runnable) -> None:
        watches = watches_of(runnable)
        for source in watches.sources if watches is not None else []:
            if not any(source is running for running in self.sources):
                await start_source(source)
                self.sources.append(source)

    async def _start_controller(self, name: str, runnable: Runnable) -> None:
        watches = watches_of(runnable)
        try:
            if watches is not None:
                watches.subscribe()
            await runnable.start()
        except Exception as exc:
            if watches is not None:
                watches.unsubscribe()
            self.failed[name] = str(exc)
            log.exception("controller %s failed to start", name)
            return
        self.running.append(runnable)
        log.info("controller %s started", name)

    async def stop(self) -> None:
        """Stop everything in reverse order; each stop is bounded, the whole within
        `stop_timeout`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.stop_timeout
        running, self.running = self.running, []
        for runnable in reversed(running):
            await self._stop_controller(runnable, deadline)
        sources, self.sources = self.sources, []
        for source in reversed(sources):
            name = getattr(source, "name", type(source).__name__)
            await self._bounded(source.stop(), deadline, f"source {name}")

    async def _stop_controller(self, runnable: Runnable, deadline: float) -> None:
        name = getattr(runnable, "name", type(runnable).__name__)
        await self._bounded(runnable.stop(), deadline, f"controller {name}")
        watches = watches_of(runnable)
        if watches is not None:
            watches.unsubscribe()

    async def _bounded(
        self, stopping: Coroutine[Any, Any, None], deadline: float, what: str
    ) -> None:
        remaining = max(0.1, deadline - asyncio.get_running_loop().time())
        try:
            await asyncio.wait_for(stopping, remaining)
        except TimeoutError:
            log.warning("%s did not stop within %.1fs", what, remaining)
        except Exception:
            log.exception("%s failed while stopping", what)
        else:
            log.info("%s stopped", what)
