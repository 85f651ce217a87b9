"""Streaming bodies (`ApiResponse.stream`) that let go of what they hold however they end.

An async generator's `finally` runs only once the generator has started: a body closed
before its first chunk (its client reset the stream or went away while the answer was still
in the request chain) would keep its watcher, or its backend's response, open for good.
A `Body` runs its release when it is closed, started or not.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable


class Body(AsyncIterator[bytes]):
    """The chunks of `chunks`; closing it closes `chunks`, then runs `release` (once)."""

    def __init__(
        self, chunks: AsyncIterator[bytes], release: Callable[[], Awaitable[None] | None]
    ) -> None:
        self._chunks = chunks
        self._release: Callable[[], Awaitable[None] | None] | None = release

    def __aiter__(self) -> Body:
        return self

    async def __anext__(self) -> bytes:
        return await self._chunks.__anext__()

    async def aclose(self) -> None:
        try:
            await close(self._chunks)
        finally:
            release, self._release = self._release, None
            if release is not None:
                released = release()
                if inspect.isawaitable(released):
                    await released


def wrapping(outer: AsyncIterator[bytes], inner: AsyncIterator[bytes]) -> Body:
    """`outer`, a generator that reads `inner`: closing it closes `inner` too."""
    return Body(outer, lambda: close(inner))


async def close(stream: AsyncIterator[bytes]) -> None:
    """Close a streaming body, if it can be closed."""
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()
