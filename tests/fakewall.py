"""A FakeClock that moves the process's wall clock with it.

apscheduler decides which jobs are due from `datetime.now`, while its wake-up timer runs on the
agent's `Clock` (agent/periodic.py). `WallFakeClock.advance(s)` moves both by `s`, so a schedule
of minutes runs in a test without waiting and without real-time slack. The wall clock stands
still in between (time-machine's tick=False), as the fake monotonic clock does: were it to tick,
the real seconds a loaded machine spends between two looks of the scheduler would read as a
wall-clock step (agent/periodic.py follows those), move the schedule, and make a job due while
its previous run was still going (a skip).
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
        # Wall first: the timers fired below wake the scheduler, which then reads the wall clock.
        self._traveller.shift(seconds)
        super().advance(seconds)

    def shift_wall(self, seconds: float) -> None:
        """Step the wall clock alone (an operator or NTP setting it), the monotonic one not."""
        self._traveller.shift(seconds)


@contextlib.contextmanager
def wall_fake_clock() -> Iterator[WallFakeClock]:
    with time_machine.travel(datetime.now(UTC), tick=False) as traveller:
        yield WallFakeClock(traveller)
