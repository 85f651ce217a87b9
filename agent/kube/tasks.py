"""Background tasks: started outside the log context of the reconcile that starts them, and
stopped without swallowing the caller's own cancellation.

A task copies the context it is created in: one that a reconcile happens to start but that
outlives it (a connection's keepalive, a writer, a watch) would log every line as that
reconcile's, its work and reconcile id included, for good.

The usual `task.cancel(); with suppress(CancelledError): await task` takes a cancellation of
the caller, arriving while it waits, for the child's, and carries on: a shutdown that cancels
a coroutine in the middle of such a stop is then ignored until it is cancelled a second time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable
from typing import Any, TypeVar

from agent.logs import outside_reconcile

T = TypeVar("T")


def background(coroutine: Coroutine[Any, Any, T], *, name: str | None = None) -> asyncio.Task[T]:
    """A task that outlives whatever starts it, without the starting reconcile's log fields."""
    return asyncio.get_running_loop().create_task(coroutine, name=name, context=outside_reconcile())


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
