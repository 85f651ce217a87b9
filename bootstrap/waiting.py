"""Say what `register` is waiting for while it waits.

Each wait of `register` (the signed cluster-info, the certificate, the Cluster turning Ready) can
last minutes when something is wrong (an unknown or expired token, no approver, no agent); a
silent wait looks like a hang. `reporting` runs a timer beside the wait that prints, every
PROGRESS_EVERY seconds, what is awaited, for how long so far, and the latest known state; a
problem that may never go away (`Waiting.problem`) is said at once, the first time it is seen,
with how long `register` will keep trying, since waiting can be right (the control plane may
not have caught up yet) but the user should not have to wait ten seconds to learn why.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

PROGRESS_EVERY = 10.0


class Waiting:
    """The state of one wait, as the timer reports it."""

    def __init__(self, progress: Callable[[str], None], what: str, timeout: float) -> None:
        self._progress = progress
        self._what = what
        self._timeout = timeout
        self._started = asyncio.get_running_loop().time()
        self._announced: set[str] = set()
        self.detail = ""

    @property
    def elapsed(self) -> float:
        return asyncio.get_running_loop().time() - self._started

    def problem(self, text: str) -> None:
        """Something that keeps the wait going and may not go away by itself: reported at once
        the first time, then with every periodic line."""
        self.detail = text
        if text in self._announced:
            return
        self._announced.add(text)
        left = max(0.0, self._timeout - self.elapsed)
        self._progress(
            f"waiting for {self._what}: {text}; will keep trying for {left:.0f}s more "
            f"(of {self._timeout:g}s)"
        )

    def report(self) -> None:
        said = f"still waiting for {self._what} ({self.elapsed:.0f}s of {self._timeout:g}s)"
        self._progress(f"{said}: {self.detail}" if self.detail else said)


@contextlib.asynccontextmanager
async def reporting(
    progress: Callable[[str], None], what: str, timeout: float
) -> AsyncIterator[Waiting]:
    """Within the block, every PROGRESS_EVERY seconds: "still waiting for <what> (Ns of Ts):
    <detail>"; problems said at once (`Waiting.problem`)."""
    waiting = Waiting(progress, what, timeout)

    async def report() -> None:
        while True:
            await asyncio.sleep(PROGRESS_EVERY)
            waiting.report()

    reporter = asyncio.create_task(report(), name=f"progress: {what}")
    try:
        yield waiting
    finally:
        reporter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reporter
