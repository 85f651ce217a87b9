"""Stopping background tasks without swallowing the caller's own cancellation.

The usual `task.cancel(); with suppress(CancelledError): await task` takes a cancellation of
the caller, arriving while it waits, for the child's, and carries on: a shutdown that cancels
a coroutine in the middle of such a stop is then ignored until it is cancelled a second time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any]]) -> None:
    """Cancel `tasks` and wait until each has ended, ignoring how they ended; a cancellation of
    the caller meanwhile is raised, not absorbed."""
    pending = list(tasks)
    for task in pending:
        task.cancel()
    for task in pending:
        try:
            await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise
        except Exception:
            pass
