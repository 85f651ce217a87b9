"""Rate limiters: a token bucket (client-go flowcontrol / x/time/rate) and the work-queue limiters.

The defaults are client-go's `DefaultTypedControllerRateLimiter`: the slower of a per-item
exponential backoff (5 ms doubling to 1000 s) and a global bucket of 10 qps with burst 100.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from agent.kube.backoff import Backoff
from agent.kube.clock import REAL_CLOCK, Clock

T = TypeVar("T", bound=Hashable)
T_contra = TypeVar("T_contra", bound=Hashable, contravariant=True)


class TokenBucket:
    """`qps` tokens per second, at most `burst` saved up. Reservations may go into debt, so
    callers that each reserve one token are served in order, `1/qps` apart."""

    def __init__(self, qps: float, burst: int, *, clock: Clock = REAL_CLOCK) -> None:
        if qps <= 0:
            raise ValueError("qps must be positive")
        self.qps = qps
        self.burst = max(int(burst), 1)
        self._clock = clock
        self._tokens = float(self.burst)
        self._last: float | None = None

    def _refill(self) -> float:
        now = self._clock.now()
        if self._last is None:
            self._last = now
        elapsed = max(now - self._last, 0.0)
        self._tokens = min(float(self.burst), self._tokens + elapsed * self.qps)
        self._last = now
        return now

    def reserve(self) -> float:
        """Take one token and return how long to wait before using it (0 if available now)."""
        self._refill()
        self._tokens -= 1.0
        if self._tokens >= 0:
            return 0.0
        return -self._tokens / self.qps

    def try_take(self) -> bool:
        self._refill()
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    async def wait(self) -> None:
        delay = self.reserve()
        if delay > 0:
            await self._clock.sleep(delay)

    async def wait_spare(self) -> None:
        """Take a token only when one is spare, none owed to a reservation: for background
        work that yields to every `wait`/`reserve` caller."""
        while not self.try_take():
            await self._clock.sleep((1.0 - self._tokens) / self.qps)


class RateLimiter(Protocol[T_contra]):
    """How long an item should wait before being retried (client-go's TypedRateLimiter)."""

    def when(self, item: T_contra) -> float: ...

    def forget(self, item: T_contra) -> None: ...

    def num_requeues(self, item: T_contra) -> int: ...


class ItemExponentialRateLimiter(Generic[T]):
    """base * 2^failures per item, capped at max_delay; `forget` resets the item."""

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        self._backoff = Backoff(initial=base_delay, cap=max_delay, jitter=0.0)
        self._failures: dict[T, int] = {}

    def when(self, item: T) -> float:
        exp = self._failures.get(item, 0)
        self._failures[item] = exp + 1
        return self._backoff.step(exp)

    def forget(self, item: T) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: T) -> int:
        return self._failures.get(item, 0)


class BucketRateLimiter(Generic[T]):
    """One token bucket shared by all items: overall retry rate, not per-item history."""

    def __init__(self, qps: float = 10.0, burst: int = 100, *, clock: Clock = REAL_CLOCK) -> None:
        self.bucket = TokenBucket(qps, burst, clock=clock)

    def when(self, item: T) -> float:
        return self.bucket.reserve()

    def forget(self, item: T) -> None:
        pass

    def num_requeues(self, item: T) -> int:
        return 0


class MaxOfRateLimiter(Generic[T]):
    """The longest delay of all limiters (each one still records the attempt)."""

    def __init__(self, *limiters: RateLimiter[T]) -> None:
        if not limiters:
            raise ValueError("at least one limiter is needed")
        self.limiters = limiters

    def when(self, item: T) -> float:
        return max(limiter.when(item) for limiter in self.limiters)

    def forget(self, item: T) -> None:
        for limiter in self.limiters:
            limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return max(limiter.num_requeues(item) for limiter in self.limiters)


def default_controller_rate_limiter(
    *,
    base_delay: float = 0.005,
    max_delay: float = 1000.0,
    qps: float = 10.0,
    bucket_size: int = 100,
    clock: Clock = REAL_CLOCK,
) -> MaxOfRateLimiter[T]:
    """Karmada's --rate-limiter-base-delay/-max-delay/-qps/-bucket-size, upstream defaults."""
    return MaxOfRateLimiter(
        ItemExponentialRateLimiter(base_delay, max_delay),
        BucketRateLimiter(qps, bucket_size, clock=clock),
    )
