"""Give the memory the agent has freed back to the operating system after a burst.

After a burst (Works applied, their Events written, thousands of watch events parsed) the
objects it needed are freed, but the C library's malloc keeps the memory: glibc returns only
the free top of its main heap by itself, so pages freed in the middle of a heap stay in the
process's RSS, which is what a node's memory accounting and a Pod's limit see. Go's runtime
hands freed memory back on its own (its background scavenger), so the upstream agent's RSS
falls after a burst; glibc does it when asked, with malloc_trim(3), which releases every whole
free page of every arena.

Every `interval` the agent reads how much free memory malloc holds (mallinfo2's `fordblks`, a
cheap read); once that grew by `threshold` since the last release, it releases. So an idle
agent asks nothing of the kernel, and a burst's memory is back within an interval of being
freed. (Pages released stay counted as free: the figure rises again only with new frees.)

CPython's own small-object allocator returns an arena of 1 MiB once it is empty, without help;
this cannot free a partly used one. Where the C library has no malloc_trim (musl, macOS) this
does nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from agent.kube.clock import REAL_CLOCK, Clock
from agent.logs import get_logger
from agent.periodic import Periodic

log = get_logger(__name__)

CHECK_INTERVAL = 10.0
RELEASE_THRESHOLD = 1 << 20


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


@dataclass(frozen=True)
class Allocator:
    """The C library's malloc as this module needs it."""

    free_bytes: Callable[[], int]
    release: Callable[[], None]


def glibc_allocator() -> Allocator | None:
    """glibc's mallinfo2 and malloc_trim(0), or None where the C library lacks them."""
    try:
        # The process's own symbols, libc's among them: find_library needs ldconfig or a
        # compiler, which a distroless image has neither of.
        libc = ctypes.CDLL(None)
        trim, mallinfo2 = libc.malloc_trim, libc.mallinfo2  # mallinfo2: glibc 2.33
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    mallinfo2.argtypes, mallinfo2.restype = [], _MallInfo2
    return Allocator(free_bytes=lambda: int(mallinfo2().fordblks), release=lambda: trim(0))


class HeapRelease:
    """Releases once the free memory grew by `threshold` since the last release."""

    def __init__(self, allocator: Allocator, threshold: int = RELEASE_THRESHOLD) -> None:
        self.allocator = allocator
        self.threshold = threshold
        self.releases = 0
        self._free_after_release = allocator.free_bytes()

    def check(self) -> None:
        free = self.allocator.free_bytes()
        if free - self._free_after_release < self.threshold:
            # Free memory taken again (allocated) lowers the mark: what is freed next counts.
            self._free_after_release = min(self._free_after_release, free)
            return
        self.allocator.release()
        self.releases += 1
        self._free_after_release = self.allocator.free_bytes()


@contextlib.asynccontextmanager
async def releasing_free_heap(
    interval: float = CHECK_INTERVAL,
    *,
    allocator: Allocator | None = None,
    clock: Clock = REAL_CLOCK,
) -> AsyncIterator[Periodic | None]:
    """While the block runs, check every `interval` seconds (HeapRelease). Yields the job, or
    None where there is no way to release."""
    allocator = allocator or glibc_allocator()
    if allocator is None:
        log.debug("freed memory not given back: the C library has no malloc_trim/mallinfo2")
        yield None
        return
    heap = HeapRelease(allocator)

    async def check() -> None:
        heap.check()

    job = Periodic("heap-release", check, interval, run_at_start=False, clock=clock)
    await job.start()
    try:
        yield job
    finally:
        await job.stop()
