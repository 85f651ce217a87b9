"""Exponential backoff with jitter and a cap: the one reconnect schedule of every client."""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Backoff:
    """`next()` gives the next wait: `initial`, doubling up to `cap`, each spread by +-`jitter`
    (a share) so that clients cut off together do not come back together."""

    initial: float = 1.0
    cap: float = 10.0
    factor: float = 2.0
    jitter: float = 0.5
    _current: float = field(default=0.0, init=False)

    def next(self) -> float:
        self._current = (
            self.initial if self._current == 0.0 else min(self._current * self.factor, self.cap)
        )
        spread = self._current * self.jitter
        return max(0.0, self._current + random.uniform(-spread, spread))

    def reset(self) -> None:
        self._current = 0.0
