"""What the agent holds per Work, by part: `python -m bench.agent_memory [--works 2000]`.

    python -m bench.agent_memory [--works 2000] [--lifted] [--tracemalloc] [--top 12]
                                 [--out FILE]

Starts the agent under bench.heap_probe on fresh emulators (each in a process of its own), waits
until it is idle, takes a heap probe, creates `--works` Works (half Deployments, half
ConfigMaps, as bench.agent_latency), waits until every one is Applied and the agent is quiet,
and takes a second probe. Reported, per Work held (the second probe less the first, divided by
the Works): RSS as it was, after a garbage collection, and after malloc_trim; and the bytes
each part of the agent holds (bench.heap_probe: every Reflector's cache by name, every other
agent object by class, the asyncio tasks), largest first. With `--tracemalloc` (slower), also
the Python allocations in total and the top allocation sites by bytes per Work.

The probes themselves cost memory (the walk's bookkeeping is freed before the next one): RSS is
read before each probe's walk. The machine may be shared: the figures are only comparable within
one run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import signal
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from agent.kube.client import KubeClient
from agent.kube.config import load_kubeconfig
from agent.kube.resources import NAMESPACES
from agent.kube.transport import Transport
from agent.resources import WORKS
from emulator.works import control_plane_work

from .agent_latency import (
    AGENT_USER,
    CLUSTER,
    ES,
    LIFTED_LIMITS,
    NAMESPACE,
    PREFIX,
    _create_works,
    _requests_settled,
    _settled_factory,
    _WorkTracker,
    agent_arguments,
    cluster_ready,
    wait_until,
)
from .emulators import emulator_process
from .report import report
from .side_by_side import CONTROL_PLANE_LIFTED

JSON = dict[str, Any]
MIB = 2**20


async def probe(process: asyncio.subprocess.Process, directory: Path, number: int) -> JSON:
    """Signal the probe and wait for its answer (a walk of a large heap takes seconds)."""
    path = directory / f"heap-{number}.json"
    process.send_signal(signal.SIGUSR1)

    async def written() -> bool:
        if process.returncode is not None:
            raise RuntimeError(f"the agent exited ({process.returncode}); see {directory}")
        return path.exists()

    await wait_until(written, 3600, f"heap probe {number}")
    answer = dict(json.loads(path.read_text()))
    if "error" in answer:
        raise RuntimeError(f"heap probe {number} failed: {answer['error']}")
    return answer


def per_work(after: JSON, before: JSON, works: int) -> JSON:
    def bytes_per_work(key: str) -> float:
        return round((after[key] - before[key]) / works)

    held = {
        name: round((size - before["holders_bytes"].get(name, 0)) / works)
        for name, size in after["holders_bytes"].items()
    }
    result: JSON = {
        "rss_bytes_per_work": bytes_per_work("rss_bytes"),
        "rss_after_gc_bytes_per_work": bytes_per_work("rss_after_gc_bytes"),
        "rss_after_gc_and_trim_bytes_per_work": bytes_per_work("rss_after_gc_and_trim_bytes"),
        "held_bytes_per_work_total": sum(held.values()),
        "held_bytes_per_work": {k: v for k, v in held.items() if abs(v) >= 16},
        "instances_after": {
            k: n
            for k, n in after["holders_instances"].items()
            if abs(held.get(k, 0)) >= 16 and n > 1
        },
    }
    if "traced_bytes" in after:
        result["traced_bytes_per_work"] = bytes_per_work("traced_bytes")
    return result


def top_sites(directory: Path, works: int, top: int) -> dict[str, float]:
    before = tracemalloc.Snapshot.load(str(directory / "heap-1.tracemalloc"))
    after = tracemalloc.Snapshot.load(str(directory / "heap-2.tracemalloc"))
    sites: dict[str, float] = {}
    for stat in after.compare_to(before, "traceback")[:top]:
        frames = [f"{f.filename.rsplit('/', 2)[-1]}:{f.lineno}" for f in stat.traceback]
        agent_frames = [f for f in frames if not f.startswith(("json", "asyncio"))][:4]
        sites[" < ".join(agent_frames or frames[:3])] = round(stat.size_diff / works)
    return sites


async def run(args: argparse.Namespace) -> JSON:
    directory = Path(tempfile.mkdtemp(prefix="agent-memory-"))
    flags = [*CONTROL_PLANE_LIFTED, *LIFTED_LIMITS] if args.lifted else []
    python_flags = ["-X", "tracemalloc=8"] if args.tracemalloc else []
    async with (
        emulator_process("karmada", "karmada", directory, client_user=AGENT_USER) as cp,
        emulator_process("member", CLUSTER, directory, client_user=AGENT_USER) as member,
    ):
        await cp.admin.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": NAMESPACE}})  # fmt: skip
        probes = directory / "probes"
        with (directory / "agent.log").open("wb") as log:
            process = await asyncio.create_subprocess_exec(
                args.agent_python, *python_flags, "-m", "bench.heap_probe", str(probes),
                *agent_arguments(cp.client_kubeconfig, member.client_kubeconfig, flags),
                stdout=log, stderr=log,
            )  # fmt: skip
        config = await load_kubeconfig(str(cp.admin_kubeconfig), user_agent="bench")
        client = KubeClient(Transport(config.with_rate_limits(0, 0)))
        sides = {"control_plane": cp, "member": member}
        tracker = _WorkTracker()
        watcher = asyncio.create_task(tracker.watch(client))
        try:
            await wait_until(lambda: cluster_ready(client), 120, "Cluster Ready")
            namespace_work = control_plane_work(
                CLUSTER, "bench-ns",
                [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}],
            )  # fmt: skip
            await client.create(WORKS, namespace_work, namespace=ES)
            await wait_until(tracker.has_applied("bench-ns"), 120, "namespace Work applied")
            await wait_until(_settled_factory(process.pid), 120, "agent idle")
            idle = await probe(process, probes, 1)
            print(f"idle: RSS {idle['rss_bytes'] / MIB:.1f} MiB; creating {args.works} Works",
                  flush=True)  # fmt: skip
            names = [f"{PREFIX}{i}" for i in range(args.works)]
            started = time.monotonic()
            creating = asyncio.create_task(_create_works(client, tracker, names, 0.0, started))
            while not await _all_applied(tracker, names):
                print(f"  {len(tracker.applied) - 1} of {args.works} applied", flush=True)
                await asyncio.sleep(10)  # progress printing interval, not synchronisation
            await creating
            await wait_until(_settled_factory(process.pid), 600, "agent idle after the Works")
            await wait_until(_requests_settled(sides), 600, "agent's requests settled")
            held = await probe(process, probes, 2)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            if process.returncode is None:
                process.terminate()
                await process.wait()
            await client.close()
    result: JSON = {
        "works": args.works,
        "flags": " ".join(flags),
        "rss_idle_mib": round(idle["rss_bytes"] / MIB, 1),
        "rss_held_mib": round(held["rss_bytes"] / MIB, 1),
        "rss_held_after_gc_and_trim_mib": round(held["rss_after_gc_and_trim_bytes"] / MIB, 1),
        **per_work(held, idle, args.works),
    }
    if args.tracemalloc:
        result["top_allocation_sites_bytes_per_work"] = top_sites(probes, args.works, args.top)
    result["machine"] = (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    result["logs"] = str(directory)
    return result


async def _all_applied(tracker: _WorkTracker, names: list[str]) -> bool:
    return await tracker.all_applied(names)()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--works", type=int, default=2000)
    parser.add_argument("--lifted", action="store_true", help="every client-side limit lifted")
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--agent-python", default=sys.executable)
    parser.add_argument("--out", default="bench/results/agent_memory.json")
    args = parser.parse_args(argv)
    report(asyncio.run(run(args)), args.out)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
