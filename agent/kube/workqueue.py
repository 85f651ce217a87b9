"""client-go's work queue on asyncio: de-duplicating, delaying and rate-limited.

A key waiting in the queue is there once however often it is added (dirty set). A key being
processed (between `get` and `done`) is never handed to a second worker; adds meanwhile are
remembered and the key is queued again once, when `done` is called (processing set).

Keys are taken in the order they were added. Ours beyond client-go: waiting keys known to need
nothing urgent (an agent's start walking Works it applied before) may be `defer`red: they are
taken only when no other key waits, so a key added later goes first; adding a deferred key
again makes it an ordinary one, in its place by that add. Deferred keys may also be `held`: not
taken at all, while something sorts out which of them need doing after all (and `add`s those),
until `release_deferred`.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Collection, Hashable
from typing import Generic, Protocol, TypeVar

from agent.kube.clock import REAL_CLOCK, Clock, TimerHandle
from agent.kube.ratelimit import RateLimiter, default_controller_rate_limiter

T = TypeVar("T", bound=Hashable)


class QueueShutDownError(Exception):
    """`get` on a queue that is shut down (and, with drain, empty)."""


class QueueMetrics(Protocol):
    """client-go's workqueue_* metrics: adds, depth, queue latency, work duration, retries, and
    (from `track`'s view of the keys in progress) unfinished work and the longest processor."""

    def track(
        self, name: str, in_flight: Callable[[], tuple[float, Collection[float]]]
    ) -> None: ...

    def add(self, name: str) -> None: ...

    def depth(self, name: str, depth: int) -> None: ...

    def queue_latency(self, name: str, seconds: float) -> None: ...

    def work_duration(self, name: str, seconds: float) -> None: ...

    def retry(self, name: str) -> None: ...


class WorkQueue(Generic[T]):
    def __init__(
        self,
        name: str = "",
        *,
        rate_limiter: RateLimiter[T] | None = None,
        clock: Clock = REAL_CLOCK,
        metrics: QueueMetrics | None = None,
    ) -> None:
        self.name = name
        self.rate_limiter: RateLimiter[T] = rate_limiter or default_controller_rate_limiter(
            clock=clock
        )
        self._clock = clock
        self._metrics = metrics
        self._queue: deque[T] = deque()
        # Deferred keys, in order; a key promoted by an add stays in the deque but leaves the set.
        self._later: deque[T] = deque()
        self._deferred: set[T] = set()
        self._held = False
        self._dirty: set[T] = set()
        self._processing: set[T] = set()
        self._added_at: dict[T, float] = {}
        self._started_at: dict[T, float] = {}
        self._waiting: dict[T, tuple[float, TimerHandle]] = {}
        self._getters: deque[asyncio.Future[None]] = deque()
        self._idle_waiters: list[asyncio.Future[None]] = []
        self._shutting_down = False
        self._drain = False
        if metrics is not None:
            metrics.track(name, self._in_flight)

    def _in_flight(self) -> tuple[float, Collection[float]]:
        return self._clock.now(), list(self._started_at.values())

    # --- adding --------------------------------------------------------------------------------

    def add(self, item: T, *, promote: bool = True) -> None:
        """Queue `item` (once). A deferred `item` becomes an ordinary key in its place by this
        add, unless not `promote`: then it stays deferred (an add for every key, e.g. after an
        outage, must not undo the order of those known to need nothing urgent)."""
        if self._shutting_down:
            return
        if item in self._deferred:
            if not promote:
                return
            self._deferred.discard(item)
            self._queue.append(item)
            self._wake_one()  # workers may wait while the deferred keys are held
            return
        if item in self._dirty:
            return
        if self._metrics is not None:
            self._metrics.add(self.name)
        self._dirty.add(item)
        self._added_at.setdefault(item, self._clock.now())
        if item in self._processing:
            return
        self._queue.append(item)
        self._report_depth()
        self._wake_one()

    def add_after(self, item: T, delay: float) -> None:
        """Add once `delay` seconds have passed; an earlier pending time for the item wins."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(item)
            return
        if self._metrics is not None:
            self._metrics.retry(self.name)  # client-go counts every add with a delay
        ready_at = self._clock.now() + delay
        pending = self._waiting.get(item)
        if pending is not None:
            if pending[0] <= ready_at:
                return
            pending[1].cancel()

        def fire() -> None:
            current = self._waiting.get(item)
            if current is not None and current[0] == ready_at:
                del self._waiting[item]
                self.add(item)

        self._waiting[item] = (ready_at, self._clock.call_later(delay, fire))

    def add_rate_limited(self, item: T) -> None:
        self.add_after(item, self.rate_limiter.when(item))

    def defer(self, items: Collection[T], *, held: bool = False) -> int:
        """Move those of `items` that wait in the queue behind every other key (and behind any
        key added later), keeping their order; returns how many were moved. `held`: no deferred
        key is taken until `release_deferred` (an `add` still promotes one)."""
        self._held = self._held or held
        wanted = set(items) - self._deferred
        if not wanted:
            return 0
        kept: deque[T] = deque()
        moved = 0
        for item in self._queue:
            if item in wanted:
                self._later.append(item)
                self._deferred.add(item)
                moved += 1
            else:
                kept.append(item)
        self._queue = kept
        return moved

    def is_deferred(self, item: T) -> bool:
        return item in self._deferred

    def release_deferred(self) -> None:
        """Deferred keys may be taken again (when no other key waits)."""
        if not self._held:
            return
        self._held = False
        for _ in range(min(len(self._deferred), len(self._getters))):
            self._wake_one()

    def forget(self, item: T) -> None:
        self.rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return self.rate_limiter.num_requeues(item)

    # --- taking --------------------------------------------------------------------------------

    async def get(self) -> T:
        """The next key; waits while the queue is empty. Raises QueueShutDownError once shut
        down (with drain: once also empty)."""
        while not self._queue and not self._deferred_takeable():
            if self._shutting_down:
                raise QueueShutDownError(self.name)
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter in self._getters:
                    self._getters.remove(waiter)
                elif self._queue or self._deferred_takeable():
                    self._wake_one()  # pass the wake-up we consumed to someone else
                raise
        if self._shutting_down and not self._drain:
            raise QueueShutDownError(self.name)
        item = self._queue.popleft() if self._queue else self._take_deferred()
        self._processing.add(item)
        self._dirty.discard(item)
        now = self._clock.now()
        added = self._added_at.pop(item, now)
        self._started_at[item] = now
        if self._metrics is not None:
            self._metrics.queue_latency(self.name, now - added)
        self._report_depth()
        return item

    def _deferred_takeable(self) -> bool:
        return bool(self._deferred) and not self._held

    def _take_deferred(self) -> T:
        while True:
            item = self._later.popleft()
            if item in self._deferred:  # else promoted by an add since: taken from the queue
                self._deferred.discard(item)
                return item

    def done(self, item: T) -> None:
        self._processing.discard(item)
        started = self._started_at.pop(item, None)
        if self._metrics is not None and started is not None:
            self._metrics.work_duration(self.name, self._clock.now() - started)
        if item in self._dirty:
            self._queue.append(item)
            self._report_depth()
            self._wake_one()
        elif not self._processing:
            self._notify_idle()

    # --- state ---------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._queue) + len(self._deferred)

    @property
    def deferred(self) -> int:
        """Keys waiting behind every other (`defer`)."""
        return len(self._deferred)

    @property
    def processing(self) -> int:
        return len(self._processing)

    @property
    def waiting(self) -> int:
        """Keys scheduled by add_after / add_rate_limited that are not due yet."""
        return len(self._waiting)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def shutdown(self) -> None:
        """Stop accepting keys; workers' `get` raises QueueShutDownError at once."""
        self._begin_shutdown(drain=False)

    async def shutdown_with_drain(self, timeout: float | None = None) -> bool:
        """Stop accepting keys, let workers take what is queued, and wait until every key in
        processing is done. Returns False if `timeout` passed first."""
        self._begin_shutdown(drain=True)
        if not len(self) and not self._processing:
            return True
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._idle_waiters.append(fut)
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            return False
        return True

    def _begin_shutdown(self, *, drain: bool) -> None:
        self._shutting_down = True
        self._drain = drain
        self._held = False  # a drain takes them too
        for _, handle in self._waiting.values():
            handle.cancel()
        self._waiting.clear()
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    def _notify_idle(self) -> None:
        if len(self) or self._processing:
            return
        for fut in self._idle_waiters:
            if not fut.done():
                fut.set_result(None)
        self._idle_waiters.clear()

    def _wake_one(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _report_depth(self) -> None:
        if self._metrics is not None:
            self._metrics.depth(self.name, len(self))
