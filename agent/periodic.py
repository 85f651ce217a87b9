"""Periodic jobs on apscheduler 3.x (the cluster status loop, the heartbeat Lease).

The scheduler is hidden here so the rest of the agent never imports apscheduler (4.x will be a
rewrite). Each job: runs once at start, then every `interval` plus a random 0..`jitter` seconds;
never overlaps itself (max_instances=1) and folds missed runs into one (coalesce).

apscheduler's shutdown cancels coroutine jobs that are still running, so `stop()` first pauses
the scheduler and awaits the in-flight run (up to a bound) before shutting it down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger

log = logging.getLogger(__name__)

JobFunction = Callable[[], Awaitable[None]]


class Periodic:
    """One named periodic coroutine job. Exceptions inside a run are logged and counted, never
    propagated: the next run happens on schedule."""

    def __init__(
        self,
        name: str,
        func: JobFunction,
        interval: float,
        *,
        jitter: float | None = None,
        run_at_start: bool = True,
        misfire_grace_time: float | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        self.name = name
        self._func = func
        self.interval = interval
        self.jitter = jitter
        self.run_at_start = run_at_start
        self._misfire = misfire_grace_time if misfire_grace_time is not None else interval
        self._scheduler: AsyncIOScheduler | None = None
        self._inflight: set[asyncio.Task[Any]] = set()
        self.runs = 0
        self.failures = 0
        self._run_finished = asyncio.Condition()

    @property
    def running(self) -> bool:
        return self._scheduler is not None

    async def start(self) -> None:
        """Start scheduling (call from inside the running loop)."""
        if self._scheduler is not None:
            return
        scheduler = AsyncIOScheduler(
            job_defaults={
                "coalesce": True,
                "max_instances": 1,
                "misfire_grace_time": max(1, int(self._misfire)),
            },
            timezone=UTC,
        )
        trigger = IntervalTrigger(seconds=self.interval, jitter=self.jitter, timezone=UTC)
        extra: dict[str, Any] = {}
        if self.run_at_start:
            extra["next_run_time"] = datetime.now(UTC)
        scheduler.add_job(
            self._run, trigger, id=self.name, name=self.name, replace_existing=True, **extra
        )
        scheduler.start()
        self._scheduler = scheduler

    async def run_once(self) -> None:
        """Run the job now, outside the schedule (tests, or an explicit trigger)."""
        await self._run()

    async def _run(self) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._inflight.add(task)
        try:
            await self._func()
        except asyncio.CancelledError:
            raise
        except Exception:
            self.failures += 1
            log.exception("periodic job %s failed", self.name)
        finally:
            if task is not None:
                self._inflight.discard(task)
            self.runs += 1
            async with self._run_finished:
                self._run_finished.notify_all()

    async def wait_runs(self, count: int, timeout: float | None = None) -> bool:
        """Wait until at least `count` runs have finished; False on timeout."""

        async def reached() -> None:
            async with self._run_finished:
                await self._run_finished.wait_for(lambda: self.runs >= count)

        try:
            await asyncio.wait_for(reached(), timeout)
        except TimeoutError:
            return False
        return True

    async def stop(self, timeout: float = 10.0) -> None:
        """Stop scheduling, let an in-flight run finish (cancelled after `timeout`), shut down."""
        scheduler, self._scheduler = self._scheduler, None
        if scheduler is None:
            return
        scheduler.pause()
        pending = {t for t in self._inflight if not t.done()}
        if pending:
            _, still = await asyncio.wait(pending, timeout=timeout)
            for task in still:
                log.warning(
                    "periodic job %s did not finish within %.1fs; cancelling", self.name, timeout
                )
                task.cancel()
            if still:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await asyncio.gather(*still, return_exceptions=True)
        scheduler.shutdown(wait=False)
