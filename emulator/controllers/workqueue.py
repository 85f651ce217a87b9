"""Keys for a controller to reconcile: each at most once in the queue, failures retried."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)


class WorkQueue:
    """Runs `reconcile(key)` for each key added, one at a time; a key added while it waits is
    not queued twice, and a failed reconcile is tried again after `retry_delay`."""

    def __init__(
        self, reconcile: Callable[[str], Awaitable[Any]], *, retry_delay: float = 0.5
    ) -> None:
        self._reconcile = reconcile
        self._retry_delay = retry_delay
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._pending: set[str] = set()
        self._timers: set[asyncio.TimerHandle] = set()

    def add(self, key: str) -> None:
        if key not in self._pending:
            self._pending.add(key)
            self._queue.put_nowait(key)

    def add_after(self, key: str, delay: float) -> None:
        loop = asyncio.get_running_loop()

        def fire() -> None:
            self._timers.discard(handle)
            self.add(key)

        handle = loop.call_later(delay, fire)
        self._timers.add(handle)

    async def run(self) -> None:
        try:
            while True:
                key = await self._queue.get()
                self._pending.discard(key)
                try:
                    await self._reconcile(key)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.debug("reconcile %s failed: %r", key, exc)
                    self.add_after(key, self._retry_delay)
        finally:
            for handle in self._timers:
                handle.cancel()
