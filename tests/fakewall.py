"""A FakeClock that moves the process's wall clock with it.

apscheduler decides which jobs are due from `datetime.now`, while its wake-up timer runs on the
agent's `Clock` (agent/periodic.py). `WallFakeClock.advance(s)` moves both by `s`, so a schedule
of minutes runs in a test without waiting and without real-time slack. The wall clock keeps
ticking in between (time-machine's tick=True): only the jumps are fake.
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
    with time_machine.travel(datetime.now(UTC), tick=True) as traveller:
        yield WallFakeClock(traveller)
