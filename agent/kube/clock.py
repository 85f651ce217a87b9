"""Time sources: the agent's monotonic clock for queues, limiters and leader election (tests
drive it by hand), and an API server's clock as the Date headers of its answers tell."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from typing import Protocol


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """Monotonic seconds plus timers; `RealClock` is the event loop, `FakeClock` is for tests."""

    def now(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle: ...

    async def sleep(self, delay: float) -> None: ...


class RealClock:
    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        return asyncio.get_running_loop().call_later(max(delay, 0.0), callback)

    async def sleep(self, delay: float) -> None:
        await asyncio.sleep(max(delay, 0.0))


REAL_CLOCK = RealClock()


class _FakeTimer:
    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """A clock that moves only when `advance` is called; due timers fire in time order."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._timers: list[tuple[float, int, _FakeTimer]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        timer = _FakeTimer(self._now + max(delay, 0.0), callback)
        heapq.heappush(self._timers, (timer.when, next(self._seq), timer))
        return timer

    async def sleep(self, delay: float) -> None:
        if delay <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not fut.done():
                fut.set_result(None)

        handle = self.call_later(delay, wake)
        try:
            await fut
        finally:
            handle.cancel()

    def advance(self, seconds: float) -> None:
        target = self._now + seconds
        while self._timers and self._timers[0][0] <= target:
            when, _, timer = heapq.heappop(self._timers)
            self._now = max(self._now, when)
            if not timer.cancelled:
                timer.callback()
        self._now = target

    @property
    def pending_timers(self) -> int:
        return sum(1 for _, _, t in self._timers if not t.cancelled)


# How far the agent's monotonic clock and a server's clock may drift apart, per second (NTP keeps
# clocks within tens of parts per million; ten times that, to be safe).
DRIFT_PER_SECOND = 5e-4


class ServerClock:
    """An API server's clock, as the Date headers of its answers tell.

    An answer dated D (whole seconds) was dated between sending the request and receiving the
    answer, so the server's time minus our monotonic time lies in [D - received, D + 1 - sent].
    Each answer narrows the interval (answers come at different moments of the second), which
    is widened by the possible drift as time passes; an answer outside it (a clock stepped)
    starts it over. The agent's own wall clock plays no part: `now()` is the server's time
    whatever the agent's says, and `skew()` how far the agent's wall clock is off it. Cheap: a
    header is parsed only when it differs from the last one.
    """

    def __init__(
        self,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._monotonic = monotonic
        self._wall = wall
        self._low = -math.inf
        self._high = math.inf
        self._at = 0.0
        self._header = ""
        self._date = 0.0
        self.answers = 0

    def observe(self, date_header: str | None, sent: float, received: float) -> None:
        """An answer carrying `date_header`, to a request sent at `sent` and answered at
        `received` (monotonic seconds)."""
        if not date_header:
            return
        if date_header != self._header:
            try:
                date = parsedate_to_datetime(date_header).timestamp()
            except (TypeError, ValueError):
                return
            self._header, self._date = date_header, date
        low, high = self._date - received, self._date + 1.0 - sent
        slack = DRIFT_PER_SECOND * max(received - self._at, 0.0)
        current_low, current_high = self._low - slack, self._high + slack
        if low > current_high or high < current_low:
            current_low, current_high = low, high
        self._low, self._high = max(current_low, low), min(current_high, high)
        self._at = received
        self.answers += 1

    @property
    def known(self) -> bool:
        return self.answers > 0

    @property
    def uncertainty(self) -> float:
        """Half the width of what the answers allow (seconds)."""
        return (self._high - self._low) / 2 if self.known else math.inf

    def now(self) -> float | None:
        """The server's time now (seconds since the epoch), None before any dated answer."""
        if not self.known:
            return None
        return self._monotonic() + (self._low + self._high) / 2

    def skew(self) -> float | None:
        """How far the agent's wall clock is ahead of the server's (negative: behind)."""
        server = self.now()
        return None if server is None else self._wall() - server
