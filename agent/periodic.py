"""Periodic jobs on apscheduler 3.x (cluster status, the heartbeat Lease, certificate and
kubeconfig checks).

The scheduler is hidden here so the rest of the agent never imports apscheduler (4.x will be a
rewrite). All jobs of an event loop share one scheduler (`shared_scheduler`), started with the
first job and shut down with the last. Each job: runs once at start, then every `interval` plus a
random 0..`jitter` seconds; never overlaps itself (max_instances=1) and folds missed runs into one
(coalesce), run however late the loop gets to it. A run skipped because the previous one is still going is counted on the job
(`skips`), not logged as a warning each time as apscheduler would.

apscheduler's shutdown cancels coroutine jobs that are still running, so `stop()` first pauses
the job and awaits its in-flight run (up to a bound) before removing it.

Timing follows the job's `Clock`: the scheduler's wake-up timer is set on it, so a test with a
`FakeClock` moves the schedule by advancing the clock. apscheduler reads "now" from the wall
clock (`datetime.now`), which the test moves with the fake clock (tests/fakewall.py). A step of
the wall clock (set back or forward by NTP or an operator: it moved unlike the monotonic clock)
moves every job's schedule with it; otherwise a clock set back ten minutes would hold the
heartbeat for ten minutes, and the control plane would take the cluster for gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler.events import EVENT_JOB_MAX_INSTANCES, JobSubmissionEvent
from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger

from agent.kube.clock import REAL_CLOCK, Clock, TimerHandle
from agent.kube.controller import ControllerMetrics
from agent.kube.errors import KubeError
from agent.kube.reachability import is_unreachable
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


class _SkippedRunFilter(logging.Filter):
    """apscheduler warns on every run skipped for max_instances; the job counts them instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "maximum number of running instances reached" not in record.getMessage()


logging.getLogger("apscheduler.scheduler").addFilter(_SkippedRunFilter())
logging.getLogger("apscheduler.executors.default").addFilter(_SkippedRunFilter())


# A wall clock that moved this much more (or less) than the monotonic clock was stepped.
WALL_CLOCK_STEP = 1.0


class _ClockScheduler(AsyncIOScheduler):  # type: ignore[misc]
    """apscheduler's asyncio scheduler with its wake-up timer on a `Clock`, its schedule
    following steps of the wall clock."""

    def __init__(self, clock: Clock, **options: Any) -> None:
        super().__init__(**options)
        self._clock = clock
        self._timer: TimerHandle | None = None
        self._seen: tuple[float, float] | None = None  # (wall, monotonic) at the last look

    def _process_jobs(self) -> float | None:
        self._follow_wall_clock_steps()
        wait: float | None = super()._process_jobs()
        return wait

    def _follow_wall_clock_steps(self) -> None:
        wall, monotonic = datetime.now(UTC).timestamp(), self._clock.now()
        seen, self._seen = self._seen, (wall, monotonic)
        if seen is None:
            return
        step = (wall - seen[0]) - (monotonic - seen[1])
        if abs(step) < WALL_CLOCK_STEP:
            return
        log.info("the wall clock was stepped by %.0fs; periodic jobs move with it", step)
        for job in self.get_jobs():
            if job.next_run_time is not None:
                job.modify(next_run_time=job.next_run_time + timedelta(seconds=step))

    def _start_timer(self, wait_seconds: float | None) -> None:
        self._stop_timer()
        if wait_seconds is not None:
            self._timer = self._clock.call_later(wait_seconds, self.wakeup)

    def _stop_timer(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()


class SharedScheduler:
    """One apscheduler scheduler per event loop and clock for every Periodic job on it."""

    def __init__(self, clock: Clock = REAL_CLOCK) -> None:
        self.clock = clock
        self.scheduler = _ClockScheduler(clock, timezone=UTC)
        self.jobs: dict[str, Periodic] = {}
        self.scheduler.add_listener(self._skipped, EVENT_JOB_MAX_INSTANCES)

    def _skipped(self, event: JobSubmissionEvent) -> None:
        job = self.jobs.get(event.job_id)
        if job is not None:
            job.skips += 1

    def add(self, job: Periodic, trigger: IntervalTrigger, **options: Any) -> None:
        # Several agents may share a loop (tests run replicas side by side): ids stay unique.
        self.jobs[job.job_id] = job
        self.scheduler.add_job(
            job._run,
            trigger,
            id=job.job_id,
            name=job.name,
            coalesce=True,
            max_instances=1,
            **options,
        )
        if not self.scheduler.running:
            self.scheduler.start()

    def pause(self, job: Periodic) -> None:
        with contextlib.suppress(JobLookupError):
            self.scheduler.pause_job(job.job_id)

    def remove(self, job: Periodic) -> None:
        if self.jobs.pop(job.job_id, None) is None:
            return
        with contextlib.suppress(JobLookupError):
            self.scheduler.remove_job(job.job_id)
        if not self.jobs and self.scheduler.running:
            self.scheduler.shutdown(wait=False)
            _SCHEDULERS.pop(_key(self.clock), None)


_SCHEDULERS: dict[tuple[int, int], SharedScheduler] = {}


def _key(clock: Clock) -> tuple[int, int]:
    return id(asyncio.get_running_loop()), id(clock)


def shared_scheduler(clock: Clock = REAL_CLOCK) -> SharedScheduler:
    """The scheduler of the running event loop and `clock` (created on first use)."""
    key = _key(clock)
    scheduler = _SCHEDULERS.get(key)
    if scheduler is None:
        scheduler = _SCHEDULERS[key] = SharedScheduler(clock)
    return scheduler


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
        clock: Clock = REAL_CLOCK,
        as_controller: AsController | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        self.name = name
        self.job_id = f"{name}-{id(self):x}"
        self._func = func
        self.interval = interval
        self.jitter = jitter
        self.run_at_start = run_at_start
        # None: a run the loop could not start on time (a busy burst, a pause) still runs, late
        # and coalesced, as Go's wait.Until would; apscheduler's default would drop it.
        self._misfire = misfire_grace_time
        self.clock = clock
        self.as_controller = as_controller
        self._scheduler: SharedScheduler | None = None
        self._inflight: set[asyncio.Task[Any]] = set()
        self.runs = 0
        self.failures = 0
        self.skips = 0
        self._run_finished = asyncio.Condition()

    @property
    def running(self) -> bool:
        return self._scheduler is not None

    async def start(self) -> None:
        """Start scheduling on the loop's shared scheduler (call from inside the running loop)."""
        if self._scheduler is not None:
            return
        if self.as_controller is not None:
            self.as_controller.metrics.controller_started(
                self.as_controller.controller, self.as_controller.workers
            )
        scheduler = shared_scheduler(self.clock)
        trigger = IntervalTrigger(seconds=self.interval, jitter=self.jitter, timezone=UTC)
        grace = None if self._misfire is None else max(1, int(self._misfire))
        extra: dict[str, Any] = {"misfire_grace_time": grace}
        if self.run_at_start:
            extra["next_run_time"] = datetime.now(UTC)
        scheduler.add(self, trigger, **extra)
        self._scheduler = scheduler

    async def run_once(self) -> None:
        """Run the job now, outside the schedule (tests, or an explicit trigger)."""
        await self._run()

    async def _run(self) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._inflight.add(task)
        started = time.monotonic()
        outcome = "requeue_after"
        reporting = self.as_controller
        if reporting is not None:
            reporting.metrics.worker_active(reporting.controller, 1)
        try:
            await self._func()
        except asyncio.CancelledError:
            outcome = ""
            if self._scheduler is not None:
                raise
            # Cancelled by stop() after its bound: expected, and not apscheduler's to report
            # (it would log a traceback at error level).
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
        """Stop scheduling, let an in-flight run finish (cancelled after `timeout`), remove
        the job from the shared scheduler."""
        scheduler, self._scheduler = self._scheduler, None
        if scheduler is None:
            return
        scheduler.pause(self)
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
        scheduler.remove(self)
