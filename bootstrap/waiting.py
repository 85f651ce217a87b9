"""Say what `register` is waiting for, every PROGRESS_EVERY seconds, while it waits.

Each wait of `register` (the signed cluster-info, the certificate, the Cluster turning Ready) can
last minutes when something is wrong (an unknown or expired token, no approver, no agent); a
silent wait looks like a hang. `reporting` runs a timer beside the wait that prints what is
awaited, for how long so far, and the latest known reason.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

PROGRESS_EVERY = 10.0


@contextlib.asynccontextmanager
async def reporting(
    progress: Callable[[str], None],
    what: str,
    timeout: float,
    detail: Callable[[], str] = lambda: "",
) -> AsyncIterator[None]:
    """Within the block, every PROGRESS_EVERY seconds: "still waiting for <what> (Ns of Ts):
    <detail()>"."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    every = PROGRESS_EVERY

    async def report() -> None:
        while True:
            await asyncio.sleep(every)
            said = f"still waiting for {what} ({loop.time() - started:.0f}s of {timeout:g}s)"
            reason = detail()
            progress(f"{said}: {reason}" if reason else said)

    reporter = asyncio.create_task(report(), name=f"progress: {what}")
    try:
        yield
    finally:
        reporter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reporter
