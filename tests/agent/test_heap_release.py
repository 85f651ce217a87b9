"""Freed memory given back to the system (agent/heap_release.py)."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

from agent.heap_release import Allocator, HeapRelease, releasing_free_heap
from agent.kube.clock import FakeClock
from tests import polling

MIB = 2**20


class FakeAllocator:
    def __init__(self) -> None:
        self.free = 10 * MIB
        self.released = 0

    def allocator(self) -> Allocator:
        return Allocator(free_bytes=lambda: self.free, release=self.release)

    def release(self) -> None:
        self.released += 1


def test_a_release_follows_only_memory_freed_since_the_last() -> None:
    malloc = FakeAllocator()
    heap = HeapRelease(malloc.allocator(), threshold=MIB)
    heap.check()
    assert malloc.released == 0  # what was free at the start is not news
    malloc.free += MIB // 2
    heap.check()
    assert malloc.released == 0  # below the threshold: an idle agent's churn
    malloc.free += MIB // 2
    heap.check()
    assert malloc.released == 1
    heap.check()
    assert malloc.released == 1  # the released pages stay counted as free
    malloc.free -= 4 * MIB  # taken again by a burst ...
    heap.check()
    malloc.free += 1 * MIB  # ... which then frees a part of it
    heap.check()
    assert malloc.released == 2


async def test_the_check_runs_once_an_interval_while_the_block_runs() -> None:
    clock, malloc = FakeClock(), FakeAllocator()
    async with releasing_free_heap(10, allocator=malloc.allocator(), clock=clock) as job:
        assert job is not None
        await polling.eventually(lambda: job.next_run_at == 1010.0, what="first check due")
        malloc.free += 2 * MIB
        clock.advance(10)
        assert await job.wait_runs(1, timeout=5)
        assert malloc.released == 1
        await polling.eventually(lambda: job.next_run_at == 1020.0, what="next check due")
    assert not job.running
    malloc.free += 2 * MIB
    clock.advance(60)
    assert malloc.released == 1


# Run in a process of its own: a test process's heap, shaped by every test before, decides
# where the buffers land and what the C library does with them when they are freed.
_FREED_INSIDE_THE_HEAP = """
import json, os
from agent.heap_release import HeapRelease, glibc_allocator

def rss():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

allocator = glibc_allocator()
assert allocator is not None
heap = HeapRelease(allocator, threshold=32 << 20)
# 64 MiB of 4 KB buffers (malloc's heap, not CPython's small-object arenas, nor an mmap of
# their own); one in sixteen kept, so that the freed ones never reach the top of the heap.
buffers = [bytearray(4000) for _ in range(16 * 1024)]
kept = buffers[::16]
allocated = rss()
del buffers
freed = rss()
heap.check()
print(json.dumps({"allocated": allocated, "freed": freed, "released": rss(),
                  "releases": heap.releases, "kept": len(kept)}))
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc_trim only")
def test_memory_freed_inside_the_heap_stays_resident_until_released() -> None:
    """What the release is for: glibc keeps pages freed in the middle of its heap, and counts
    them as free, which is what tells the agent to release."""
    run = subprocess.run(
        [sys.executable, "-c", _FREED_INSIDE_THE_HEAP],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    rss = json.loads(run.stdout)
    assert rss["allocated"] - rss["freed"] < 8 * MIB, "glibc gave the freed pages back by itself"
    assert rss["releases"] == 1
    assert rss["freed"] - rss["released"] > 32 * MIB
    assert rss["kept"] == 1024
