"""The cap on connections the tunnel carries at once (--tunnel-max-streams), over every
proxy-server instance's call: each relayed connection holds two TLS sessions, a socket to the
member and its buffers, so without a cap one user with proxy rights could open watches until
the agent is OOM-killed, and the cluster's Work delivery with it.

After a burst, once the tunnel carries no connection, the C allocator is asked to give its free
memory back to the system (glibc's malloc_trim): otherwise the heap of a burst stays in RSS.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable

from agent.logs import get_logger

log = get_logger(__name__)

# Answers of the agent's own (agent.tunnel.refusal) at once beyond the cap; past that, dials
# are refused with DIAL_RSP alone (no TLS session of ours to pay for).
MAX_REFUSALS = 16
# A burst is trimmed after when this many connections have closed since the last trim.
TRIM_AFTER = 64


class StreamLimit:
    def __init__(self, limit: int, *, trim: Callable[[], None] | None = None) -> None:
        self.limit = limit
        self.open = 0
        self.refusing = 0
        self._closed_since_trim = 0
        self._full_told = False
        self._trim = trim if trim is not None else trim_heap

    def acquire(self) -> bool:
        if self.open >= self.limit:
            return False
        self.open += 1
        return True

    def first_refusal(self) -> bool:
        """True for the first refusal since the cap was last left: one log line per episode."""
        told, self._full_told = self._full_told, True
        return not told

    def release(self) -> None:
        self.open -= 1
        self._full_told = False
        self._closed_since_trim += 1
        if self.open == 0 and self._closed_since_trim >= TRIM_AFTER:
            self._closed_since_trim = 0
            self._trim()

    def may_answer_refusal(self) -> bool:
        return self.refusing < MAX_REFUSALS


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        function = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    function.argtypes = [ctypes.c_size_t]
    function.restype = ctypes.c_int
    return function


def trim_heap() -> None:
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
        log.debug("returned the tunnel's free heap memory to the system")
