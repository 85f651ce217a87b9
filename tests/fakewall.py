"""A FakeClock that moves the process's wall clock with it.

Schedules run on the agent's monotonic `Clock` alone (agent/periodic.py), so a FakeClock is
enough to drive them. What a job writes may still be wall-clock time (the heartbeat's Lease
renewTime): `WallFakeClock.advance(s)` moves the wall clock by `s` too, so a test can check
that those times follow the schedule. The wall clock stands still in between (time-machine's
tick=False), as the fake monotonic clock does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime

import time_machine

from agent.kube.clock import FakeClock


class WallFakeClock(FakeClock):
    def __init__(self, traveller: time_machine.Coordinates) -> None:
        super().__init__()
        self._traveller = traveller

    def advance(self, seconds: float) -> None:
        # Wall first: the jobs woken by the timers fired below read the wall clock.
        self._traveller.shift(seconds)
        super().advance(seconds)


@contextlib.contextmanager
def wall_fake_clock() -> Iterator[WallFakeClock]:
    with time_machine.travel(datetime.now(UTC), tick=False) as traveller:
        yield WallFakeClock(traveller)
