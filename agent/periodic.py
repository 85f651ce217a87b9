"""Periodic jobs (cluster status, the heartbeat Lease, certificate rotation, the control-plane
kubeconfig check) as upstream runs them: a reconcile that asks to be run again after an
interval (controller-runtime's `RequeueAfter`, the Lease controller's `wait.JitterUntil`).

Each job is one task: it runs (at once at start, unless told not to), then waits `interval`
plus a random 0..`jitter` seconds after the run ended, and again. So a run never overlaps the
previous one, and a loop that was busy or paused runs the job once, late, not in a burst.
Waits are on the job's `Clock`, monotonic: a wall clock set back or forward (NTP, an operator)
neither holds the heartbeat nor fires it early, and a test with a `FakeClock` moves the
schedule by advancing it. Why not a scheduler library: docs/architecture.md, "Periodic jobs".

`stop()` lets a run in flight finish (up to a bound, then cancels it) before the job ends.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agent.kube.clock import REAL_CLOCK, Clock
from agent.kube.controller import ControllerMetrics
from agent.kube.errors import KubeError
from agent.kube.reachability import is_unreachable
from agent.kube.tasks import cancel_and_wait
from agent.logs import get_logger

log = get_logger(__name__)

JobFunction = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class AsController:
    """Report each run as a reconcile of the controller upstream runs for this job
    (controller_runtime_* with `controller`; a successful run is `requeue_after`, as upstream's
    periodic reconcilers return it)."""

    metrics: ControllerMetrics
    controller: str
    workers: int = 1


class Periodic:
    """One named periodic coroutine job. Exceptions inside a run are logged and counted, never
    propagated: the next run comes on schedule."""

    def __init__(
        self,
        name: str,
        func: JobFunction,
        interval: float,
        *,
        jitter: float | None = None,
        run_at_start: bool = True,
        clock: Clock = REAL_CLOCK,
        as_controller: AsController | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        self.name = name
        self._func = func
        self.interval = interval
        self.jitter = jitter or 0.0
        self.run_at_start = run_at_start
        self.clock = clock
        self.as_controller = as_controller
        self._task: asyncio.Task[None] | None = None
        self._in_run = False
        self._stopping = False
        # When the next run is due on `clock` (None while a run goes on, or before the start).
        self.next_run_at: float | None = None
        self.runs = 0
        self.failures = 0
        self._run_finished = asyncio.Condition()

    @property
    def running(self) -> bool:
        return self._task is not None

    async def start(self) -> None:
        """Start the job's task (call from inside the running loop)."""
        if self._task is not None:
            return
        if self.as_controller is not None:
            self.as_controller.metrics.controller_started(
                self.as_controller.controller, self.as_controller.workers
            )
        self._stopping = False
        self._task = asyncio.get_running_loop().create_task(self._loop(), name=self.name)

    async def _loop(self) -> None:
        delay = 0.0 if self.run_at_start else self._next_delay()
        while not self._stopping:
            self.next_run_at = self.clock.now() + delay
            await self.clock.sleep(delay)
            self.next_run_at = None
            self._in_run = True
            try:
                await self._run()
            finally:
                self._in_run = False
            delay = self._next_delay()

    def _next_delay(self) -> float:
        return self.interval + (random.uniform(0.0, self.jitter) if self.jitter else 0.0)

    async def run_once(self) -> None:
        """Run the job now, outside the schedule (tests, or an explicit trigger)."""
        await self._run()

    async def _run(self) -> None:
        started = time.monotonic()
        outcome = "requeue_after"
        reporting = self.as_controller
        if reporting is not None:
            reporting.metrics.worker_active(reporting.controller, 1)
        try:
            await self._func()
        except asyncio.CancelledError:
            outcome = ""
            if not self._stopping:
                raise
            # Cancelled by stop() after its bound: expected, not a failure to report.
            log.debug("periodic job %s cancelled while stopping", self.name)
        except KubeError as exc:
            self.failures += 1
            outcome = "error"
            if is_unreachable(exc):
                # Reported once for the whole outage by the server's Reachability.
                log.debug("periodic job %s failed: %s", self.name, exc)
            else:
                log.warning("periodic job %s failed: %s", self.name, exc)
        except Exception:
            self.failures += 1
            outcome = "panic"
            log.exception("periodic job %s failed", self.name)
        finally:
            if reporting is not None:
                reporting.metrics.worker_active(reporting.controller, -1)
                if outcome:
                    reporting.metrics.reconcile(
                        reporting.controller, outcome, time.monotonic() - started
                    )
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
        """End the job: at once while it waits; after its run in flight otherwise (cancelled
        after `timeout`)."""
        task, self._task = self._task, None
        if task is None:
            return
        self._stopping = True
        self.next_run_at = None
        if task is asyncio.current_task():
            return  # stopped by its own run: the loop ends when the run does
        if self._in_run:
            _, still = await asyncio.wait({task}, timeout=timeout)
            if still:
                log.warning(
                    "periodic job %s did not finish within %.1fs; cancelling", self.name, timeout
                )
        pending: list[asyncio.Task[Any]] = [task] if not task.done() else []
        await cancel_and_wait(pending)
