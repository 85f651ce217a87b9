"""Work the emulator's built-in controllers do one event-loop turn after the write that
triggered it, as kube-controller-manager acts after the API server answered."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class DeferredQueue(Generic[T]):
    """Items handled in order on the next loop turn (at once when no loop runs).
    With `unique`, an item already waiting is not queued twice."""

    def __init__(self, handle: Callable[[T], None], *, unique: bool = False) -> None:
        self._handle = handle
        self._unique = unique
        self._pending: list[T] = []
        self._scheduled = False

    def add(self, item: T) -> None:
        if self._unique and item in self._pending:
            return
        self._pending.append(item)
        if self._scheduled:
            return
        try:
            asyncio.get_running_loop().call_soon(self._drain)
            self._scheduled = True
        except RuntimeError:
            self._drain()

    def _drain(self) -> None:
        self._scheduled = False
        while self._pending:
            self._handle(self._pending.pop(0))
