"""Callbacks a source calls, each added with the function that removes it again."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
Remove = Callable[[], None]


def listen(listeners: list[T], listener: T) -> Remove:
    """Append `listener` to `listeners`; returns the function that removes it (called again,
    it does nothing)."""
    listeners.append(listener)

    def remove() -> None:
        if listener in listeners:
            listeners.remove(listener)

    return remove
