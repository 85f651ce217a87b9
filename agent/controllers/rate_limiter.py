"""The rate limiter of the controllers' work queues."""

from __future__ import annotations

from collections.abc import Hashable
from typing import TypeVar

from agent.kube.ratelimit import MaxOfRateLimiter, default_controller_rate_limiter
from agent.options import Options

K = TypeVar("K", bound=Hashable)


def controller_rate_limiter(options: Options) -> MaxOfRateLimiter[K]:
    """Upstream's default controller rate limiter with the --rate-limiter-* flags."""
    return default_controller_rate_limiter(
        base_delay=options.rate_limiter_base_delay.total_seconds(),
        max_delay=options.rate_limiter_max_delay.total_seconds(),
        qps=float(options.rate_limiter_qps),
        bucket_size=options.rate_limiter_bucket_size,
    )
