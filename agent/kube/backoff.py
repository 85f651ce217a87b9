"""Exponential backoff with a cap and jitter: the one schedule of every wait that grows after each
failure (reconnects, retried writes, polls, contested objects, the workqueue's per-item delay)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Literal

# How `jitter` spreads a wait: "around" by +-jitter (clients cut off together do not come back
# together); "above" by 0..+jitter, never sooner than the schedule (client-go's wait.Jitter).
Spread = Literal["around", "above"]


@dataclass
class Backoff:
    """`next()` gives the next wait: `initial`, times `factor` after each failure up to `cap`,
    spread by the share `jitter` (0: exact). `reset()` after a success starts from `initial`
    again; `step(n)` is the unspread wait after n failures, for callers that count their own."""

    initial: float = 1.0
    cap: float = 10.0
    factor: float = 2.0
    jitter: float = 0.5
    spread: Spread = "around"
    failures: int = field(default=0, init=False)

    def step(self, failures: int) -> float:
        try:
            return min(self.initial * self.factor**failures, self.cap)
        except OverflowError:  # a count far past the cap
            return self.cap

    def next(self) -> float:
        wait = self.step(self.failures)
        self.failures += 1
        if self.jitter == 0.0:
            return wait
        if self.spread == "above":
            return wait * (1.0 + random.uniform(0.0, self.jitter))
        spread = wait * self.jitter
        return max(0.0, wait + random.uniform(-spread, spread))

    def reset(self) -> None:
        self.failures = 0
