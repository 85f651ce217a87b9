"""The agent with a heap probe: `python -m bench.heap_probe DIR [agent flags...]`.

Runs `python -m agent` with the flags given; on SIGUSR1 it collects garbage and writes
DIR/heap-<n>.json (n counting from 1): the bytes each part of the agent holds, found by walking
the objects reachable from it, and (when tracemalloc runs: `python -X tracemalloc=16 -m ...`)
the bytes Python allocated in total and by allocation site. For bench.agent_memory; nothing of
it is in the agent itself.

Who holds what: every object is counted once, for the first holder that reaches it, holders
taken in this order: each Reflector's cache (by the reflector's name, its namespace left out),
then every other instance of an agent class (by class), then every asyncio Task (with the
frames it holds). A walk does not enter modules, classes, functions, the event loop, or another
holder (each is counted as its own), so a holder's figure is what it holds of its own.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import json
import os
import re
import signal
import sys
import tracemalloc
import types
from collections.abc import Iterable
from pathlib import Path
from typing import Any

JSON = dict[str, Any]
_STOP_TYPES: tuple[type, ...] = (
    types.ModuleType,
    type,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.CodeType,
    types.MethodType,
    asyncio.AbstractEventLoop,
)
# A reflector's name without what differs from one cluster or namespace to another.
_NAMESPACED = re.compile(r" (karmada-es-\S+|karmada-cluster|\S+-system)$")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE


def _is_holder(obj: object) -> bool:
    module = getattr(type(obj), "__module__", "")
    return (
        isinstance(module, str) and module.startswith("agent.") and not isinstance(obj, _STOP_TYPES)
    )


def _walk(root: object, seen: set[int]) -> int:
    """Bytes of the objects reachable from `root` not seen before (marking them seen)."""
    total, stack = 0, [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj, 0)
        refs = gc.get_referents(obj)
        if isinstance(obj, dict):
            refs.extend(obj)  # (a dict of str keys tells the collector of its values only)
        for ref in refs:
            if id(ref) in seen or isinstance(ref, _STOP_TYPES):
                continue
            if _is_holder(ref) and ref is not root:
                continue
            stack.append(ref)
    return total


def _roots(objects: Iterable[object]) -> list[tuple[str, object]]:
    from agent.kube.reflector import Reflector

    reflectors, holders, tasks = [], [], []
    for obj in objects:
        if isinstance(obj, Reflector):
            name = _NAMESPACED.sub("", str(getattr(obj, "name", "") or "reflector"))
            reflectors.append((f"cache: {name}", obj.store))
            holders.append((f"reflector: {name}", obj))
        elif isinstance(obj, asyncio.Task):
            tasks.append(("asyncio tasks", obj))
        elif _is_holder(obj):
            holders.append((f"{type(obj).__module__}.{type(obj).__qualname__}", obj))
    return reflectors + holders + tasks


def components() -> tuple[dict[str, int], dict[str, int]]:
    """(bytes by holder, instances by holder), largest first."""
    seen: set[int] = set()
    sizes: dict[str, int] = {}
    counts: dict[str, int] = {}
    objects = gc.get_objects()
    seen.add(id(objects))
    for name, root in _roots(objects):
        sizes[name] = sizes.get(name, 0) + _walk(root, seen)
        counts[name] = counts.get(name, 0) + 1
    del objects
    ordered = dict(sorted(sizes.items(), key=lambda kv: -kv[1]))
    return ordered, {name: counts[name] for name in ordered}


def _malloc_trim() -> None:
    """Give freed heap pages back to the system, so RSS after it is what is held."""
    libc = ctypes.util.find_library("c")
    if libc:
        ctypes.CDLL(libc).malloc_trim(0)


def snapshot(directory: Path, number: int) -> None:
    rss_before = rss_bytes()
    gc.collect()
    rss_after_gc = rss_bytes()
    _malloc_trim()
    rss_after_trim = rss_bytes()
    sizes, counts = components()
    result: JSON = {
        "rss_bytes": rss_before,
        "rss_after_gc_bytes": rss_after_gc,
        "rss_after_gc_and_trim_bytes": rss_after_trim,
        "python_blocks": sys.getallocatedblocks(),
        "holders_bytes": sizes,
        "holders_instances": counts,
    }
    if tracemalloc.is_tracing():
        traced = tracemalloc.take_snapshot()
        result["traced_bytes"] = sum(stat.size for stat in traced.statistics("filename"))
        traced.dump(str(directory / f"heap-{number}.tracemalloc"))
    path = directory / f"heap-{number}.json"
    path.with_suffix(".tmp").write_text(json.dumps(result))
    path.with_suffix(".tmp").rename(path)


def main() -> int:
    directory = Path(sys.argv[1])
    directory.mkdir(parents=True, exist_ok=True)
    taken = [0]

    def on_signal(_signum: int, _frame: object) -> None:
        taken[0] += 1
        try:
            snapshot(directory, taken[0])
        except Exception as failed:  # the agent goes on; the runner reads why
            (directory / f"heap-{taken[0]}.json").write_text(json.dumps({"error": repr(failed)}))

    signal.signal(signal.SIGUSR1, on_signal)
    from agent.cli import main as agent_main

    return agent_main(sys.argv[2:])


if __name__ == "__main__":
    raise SystemExit(main())
