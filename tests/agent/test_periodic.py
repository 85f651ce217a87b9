"""The periodic job wrapper: no overlap, the injected clock, failures, bounded stop, one shared
scheduler."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest

from agent.periodic import Periodic, shared_scheduler
from tests import polling
from tests.fakewall import wall_fake_clock


async def test_periodic_runs_without_overlap_and_stop_waits_for_inflight() -> None:
    active = 0
    most = 0
    finished = 0
    release = asyncio.Event()
    began = asyncio.Event()

    async def job() -> None:
        nonlocal active, most, finished
        active += 1
        most = max(most, active)
        began.set()
        try:
            await release.wait()
        finally:
            active -= 1
        finished += 1

    periodic = Periodic("test-job", job, 0.05)
    await periodic.start()

    # The first run starts at once and is still going: later ticks must be skipped.
    await asyncio.wait_for(began.wait(), 5)
    stopping = asyncio.create_task(periodic.stop(timeout=5))
    await asyncio.sleep(0)  # let stop() pause the scheduler and start waiting
    assert not stopping.done()
    release.set()
    await asyncio.wait_for(stopping, 5)
    assert most == 1
    assert finished == 1  # the in-flight run finished instead of being cancelled
    assert not periodic.running


async def test_periodic_schedule_follows_the_injected_clock() -> None:
    with wall_fake_clock() as clock:
        ran_at: list[float] = []

        async def job() -> None:
            ran_at.append(clock.now())

        periodic = Periodic("clocked", job, 30, clock=clock)
        await periodic.start()
        try:
            assert await periodic.wait_runs(1, timeout=5)
            scheduled = shared_scheduler(clock).scheduler.get_job(periodic.job_id)
            first = scheduled.next_run_time - timedelta(seconds=30)
            clock.advance(30)
            assert await periodic.wait_runs(2, timeout=5)
            # Three intervals at once are folded into one run (coalesce), then the schedule
            # goes on from the last interval boundary.
            clock.advance(90)
            assert await periodic.wait_runs(3, timeout=5)
            scheduled = shared_scheduler(clock).scheduler.get_job(periodic.job_id)
            assert scheduled.next_run_time - first == timedelta(seconds=150)
        finally:
            await periodic.stop()
        assert ran_at == [1000.0, 1030.0, 1120.0]
        assert periodic.skips == 0


@pytest.mark.parametrize("step", [-600.0, 600.0], ids=["set back", "set forward"])
async def test_a_stepped_wall_clock_moves_the_schedule_with_it(step: float) -> None:
    """The node's clock set back ten minutes (or forward): the job still runs every interval of
    the monotonic clock, neither held for ten minutes nor run in a burst."""
    with wall_fake_clock() as clock:
        ran_at: list[float] = []

        async def job() -> None:
            ran_at.append(clock.now())

        periodic = Periodic("stepped", job, 10, clock=clock)
        await periodic.start()
        try:
            assert await periodic.wait_runs(1, timeout=5)
            clock.advance(10)
            assert await periodic.wait_runs(2, timeout=5)
            clock.shift_wall(step)
            for runs in (3, 4):
                clock.advance(10)
                assert await periodic.wait_runs(runs, timeout=5)
        finally:
            await periodic.stop()
        assert ran_at == [1000.0, 1010.0, 1020.0, 1030.0]


async def test_periodic_keeps_going_after_failures() -> None:
    calls = 0

    async def job() -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("boom")

    periodic = Periodic("failing", job, 0.05, jitter=0.01)
    await periodic.start()
    try:
        assert await periodic.wait_runs(3, timeout=5)
    finally:
        await periodic.stop()
    assert periodic.failures >= 3


async def test_periodic_cancels_a_run_that_outlives_the_stop_bound() -> None:
    cancelled = asyncio.Event()
    began = asyncio.Event()

    async def job() -> None:
        began.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    periodic = Periodic("stuck", job, 10)
    await periodic.start()

    await asyncio.wait_for(began.wait(), 5)
    await asyncio.wait_for(periodic.stop(timeout=0.1), 5)
    assert cancelled.is_set()


async def test_periodic_jobs_share_one_scheduler_and_skips_are_counted_not_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    release = asyncio.Event()
    quick_runs = 0

    async def slow() -> None:
        await release.wait()

    async def quick() -> None:
        nonlocal quick_runs
        quick_runs += 1

    stuck = Periodic("stuck", slow, 0.02)
    ticking = Periodic("ticking", quick, 0.02)
    await stuck.start()
    await ticking.start()
    try:
        scheduler = shared_scheduler()
        assert {j.name for j in scheduler.jobs.values()} == {"stuck", "ticking"}
        assert len(scheduler.scheduler.get_jobs()) == 2
        # The stuck job's later ticks are skipped while its first run goes on.
        await polling.eventually(lambda: stuck.skips >= 3, what="skipped ticks counted")
        assert ticking.runs >= 1
    finally:
        release.set()
        await stuck.stop()
        await ticking.stop()
    # The last job gone, the scheduler shuts down (apscheduler does it on the loop's next turn).
    await polling.eventually(lambda: not scheduler.scheduler.running, what="scheduler shut down")
    skipped = [r for r in caplog.records if "maximum number of running instances" in r.getMessage()]
    assert skipped == []
