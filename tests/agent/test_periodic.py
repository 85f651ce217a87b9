"""Periodic jobs as requeue-after loops: no overlap, the injected monotonic clock (no wall clock
in the schedule), failures, a bounded stop."""

from __future__ import annotations

import asyncio
import datetime

import pytest
import time_machine

from agent.kube.clock import FakeClock
from agent.periodic import Periodic
from tests import polling


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

    # The first run starts at once and is still going: no second run meanwhile.
    await asyncio.wait_for(began.wait(), 5)
    stopping = asyncio.create_task(periodic.stop(timeout=5))
    await polling.eventually(lambda: not periodic.running, what="stop() under way")
    assert not stopping.done()  # it waits for the run in flight
    release.set()
    await asyncio.wait_for(stopping, 5)
    assert most == 1
    assert finished == 1  # the in-flight run finished instead of being cancelled
    assert periodic.runs == 1


async def test_periodic_schedule_follows_the_injected_clock() -> None:
    clock = FakeClock()
    ran_at: list[float] = []

    async def job() -> None:
        ran_at.append(clock.now())

    periodic = Periodic("clocked", job, 30, clock=clock)
    await periodic.start()
    try:
        assert await periodic.wait_runs(1, timeout=5)
        await polling.eventually(lambda: periodic.next_run_at == 1030.0, what="next run due")
        clock.advance(30)
        assert await periodic.wait_runs(2, timeout=5)
        # A loop late by three intervals runs the job once, not three times, and the next run
        # is due an interval after that one.
        await polling.eventually(lambda: periodic.next_run_at == 1060.0, what="next run due")
        clock.advance(90)
        assert await periodic.wait_runs(3, timeout=5)
        await polling.eventually(lambda: periodic.next_run_at == 1150.0, what="next run due")
    finally:
        await periodic.stop()
    assert ran_at == [1000.0, 1030.0, 1120.0]


async def test_the_next_run_is_an_interval_after_a_long_run_ends() -> None:
    """A run longer than the interval is not followed at once by another (upstream's
    RequeueAfter counts from the end of the reconcile)."""
    clock = FakeClock()
    release = asyncio.Event()

    async def job() -> None:
        await release.wait()

    periodic = Periodic("slow", job, 10, clock=clock)
    await periodic.start()
    try:
        await polling.eventually(lambda: periodic.next_run_at is None, what="first run going")
        clock.advance(25)  # two and a half intervals inside the run
        release.set()
        assert await periodic.wait_runs(1, timeout=5)
        await polling.eventually(lambda: periodic.next_run_at == 1035.0, what="next run due")
        assert periodic.runs == 1
    finally:
        await periodic.stop()


@pytest.mark.parametrize("step", [-600.0, 600.0], ids=["set back", "set forward"])
async def test_a_stepped_wall_clock_does_not_move_the_schedule(step: float) -> None:
    """The node's clock set back ten minutes (or forward): the job still runs every interval of
    the monotonic clock, neither held for ten minutes nor run in a burst. (time-machine steps
    the wall clock here; the schedule never reads it.)"""
    clock = FakeClock()
    ran_at: list[float] = []

    async def job() -> None:
        ran_at.append(clock.now())

    periodic = Periodic("stepped", job, 10, clock=clock)
    with time_machine.travel(datetime.datetime.now(datetime.UTC), tick=False) as wall:
        await periodic.start()
        try:
            assert await periodic.wait_runs(1, timeout=5)
            wall.shift(step)
            for runs in (2, 3):
                await polling.eventually(
                    lambda: periodic.next_run_at is not None, what="next run scheduled"
                )
                clock.advance(10)
                assert await periodic.wait_runs(runs, timeout=5)
        finally:
            await periodic.stop()
    assert ran_at == [1000.0, 1010.0, 1020.0]


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
    assert periodic.failures == 0  # a stop's cancel is not a failure


async def test_a_stuck_job_does_not_hold_another_and_a_waiting_job_stops_at_once() -> None:
    clock = FakeClock()
    release = asyncio.Event()
    quick_runs = 0

    async def slow() -> None:
        await release.wait()

    async def quick() -> None:
        nonlocal quick_runs
        quick_runs += 1

    stuck = Periodic("stuck", slow, 5, clock=clock)
    ticking = Periodic("ticking", quick, 5, clock=clock)
    await stuck.start()
    await ticking.start()
    try:
        for runs in (1, 2, 3):
            await polling.eventually(lambda: ticking.next_run_at is not None, what="scheduled")
            assert await ticking.wait_runs(runs, timeout=5)
            clock.advance(5)
        assert stuck.runs == 0
    finally:
        release.set()
        await stuck.stop()
        await asyncio.wait_for(ticking.stop(timeout=60), 5)  # waiting: no bound to wait out
    assert stuck.runs == 1
    assert not ticking.running
    assert clock.pending_timers == 0


async def test_a_job_may_stop_itself() -> None:
    periodic: Periodic

    async def job() -> None:
        await periodic.stop(timeout=30)

    clock = FakeClock()
    periodic = Periodic("self-stopping", job, 10, clock=clock)
    await periodic.start()
    assert await periodic.wait_runs(1, timeout=5)
    assert not periodic.running
    assert periodic.failures == 0
    assert clock.pending_timers == 0  # its loop ended with the run: no next run waited for
