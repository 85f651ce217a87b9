"""The emulators holding many Works and member objects, without an agent: what each request
costs the API server process at 2,000 and at 20,000 objects held.

    python -m bench.emulator_scale [--sizes 2000,20000] [--sample 400] [--concurrency 16]
                                   [--lists 3] [--no-delete-all] [--out FILE]

Starts a control-plane emulator and a member emulator, each in a process of its own as the
agent benchmarks do (bench.emulators), and plays the agent's part against them: for every Work a
create (as the control plane writes it, with its finalizer), a status patch (Applied) and an
Event in karmada-es-<cluster>; for every member object (ConfigMaps and Deployments, half each,
the Deployments run by the member's workload simulator) a server-side apply. One watch on each
resource stays open throughout, as an agent's informers would, so every write has a watcher.

At each size it measures, per kind of request, the CPU the emulator process spent on it (from
/proc, the emulator being alone in its process) and the requests per second: creates, status
patches, Event creates, GETs, full LISTs (all pages), a watch from resourceVersion 0 (its
initial list), server-side applies that create and that change nothing, and deletes (a Work's
being its DELETE and the finalizer's removal); and each process's RSS. With the largest size
held, it deletes everything at once (`--no-delete-all` to skip) and reports the rate.

Prints a table and writes JSON (default bench/results/emulator_scale.json). Progress goes to
stdout while loading.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import platform
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

from agent.kube.client import GVR, KubeClient
from agent.kube.errors import NotFoundError
from agent.kube.resources import CONFIGMAPS, DEPLOYMENTS, EVENTS, NAMESPACES
from agent.resources import WORKS
from emulator.works import control_plane_work

from .agent_latency import (
    AGENT_USER,
    CLUSTER,
    ES,
    NAMESPACE,
    PREFIX,
    cpu_seconds,
    manifest,
    member_object,
    rss_mib,
)
from .emulators import EmulatorProcess, emulator_process
from .scale import admin_client

JSON = dict[str, Any]
FIELD_MANAGER = "karmada-agent"
PROGRESS_EVERY = 2000


def _namespace(name: str) -> JSON:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def _status(i: int) -> JSON:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "status": {
            "conditions": [
                {
                    "type": "Applied",
                    "status": "True",
                    "reason": "AppliedSuccessful",
                    "message": "Manifest has been successfully applied",
                    "lastTransitionTime": now,
                }
            ],
            "manifestStatuses": [{"identifier": _identifier(i), "health": "Healthy"}],
        }
    }


def _identifier(i: int) -> JSON:
    gvr, name = member_object(i)
    kind = "ConfigMap" if gvr == CONFIGMAPS else "Deployment"
    return {
        "ordinal": 0,
        "group": gvr.group,
        "version": gvr.version,
        "kind": kind,
        "resource": gvr.resource,
        "namespace": NAMESPACE,
        "name": name,
    }


def _event(work: str, n: int) -> JSON:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{work}.{n:x}", "namespace": ES},
        "involvedObject": {
            "apiVersion": "work.karmada.io/v1alpha1",
            "kind": "Work",
            "namespace": ES,
            "name": work,
        },
        "reason": "WorkApplied",
        "message": "Manifest has been successfully applied",
        "type": "Normal",
        "source": {"component": "karmada-agent"},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


class Bed:
    """The two emulators and the client calls that play the agent's part."""

    def __init__(self, cp: EmulatorProcess, member: EmulatorProcess) -> None:
        self.cp = cp
        self.member = member
        self.cp_client: KubeClient
        self.member_client: KubeClient
        self.seen: dict[str, int] = {}

    async def open(self) -> None:
        self.cp_client = await admin_client(self.cp)
        self.member_client = await admin_client(self.member)

    async def close(self) -> None:
        await self.cp_client.close()
        await self.member_client.close()

    async def create_work(self, i: int) -> None:
        name = f"{PREFIX}{i}"
        await self.cp_client.create(
            WORKS, control_plane_work(CLUSTER, name, [manifest(i)]), namespace=ES
        )

    async def patch_status(self, i: int) -> None:
        name = f"{PREFIX}{i}"
        await self.cp_client.patch(
            WORKS, name, _status(i), namespace=ES, subresource="status", patch_type="merge"
        )

    async def create_event(self, i: int) -> None:
        await self.cp_client.create(EVENTS, _event(f"{PREFIX}{i}", i), namespace=ES)

    async def get_work(self, i: int) -> None:
        await self.cp_client.get(WORKS, f"{PREFIX}{i}", namespace=ES)

    async def delete_work(self, i: int) -> None:
        """As the control plane and the agent do it: DELETE (the finalizer keeps it), then the
        finalizer removed."""
        name = f"{PREFIX}{i}"
        with contextlib.suppress(NotFoundError):
            await self.cp_client.delete(WORKS, name, namespace=ES)
            await self.cp_client.patch(
                WORKS, name, {"metadata": {"finalizers": None}}, namespace=ES, patch_type="merge"
            )

    async def apply(self, i: int) -> None:
        gvr, _ = member_object(i)
        await self.member_client.apply(
            gvr, manifest(i), field_manager=FIELD_MANAGER, force=True, namespace=NAMESPACE
        )

    async def get_object(self, i: int) -> None:
        gvr, name = member_object(i)
        await self.member_client.get(gvr, name, namespace=NAMESPACE)

    async def delete_object(self, i: int) -> None:
        gvr, name = member_object(i)
        with contextlib.suppress(NotFoundError):
            await self.member_client.delete(
                gvr, name, namespace=NAMESPACE, propagation_policy="Background"
            )

    async def load(self, i: int) -> None:
        """One Work held, as an agent leaves it: created, its object applied, its status
        patched, an Event."""
        await self.create_work(i)
        await self.apply(i)
        await self.patch_status(i)
        await self.create_event(i)

    async def watch(self, client: KubeClient, gvr: GVR, namespace: str) -> None:
        """A watch kept open (an informer's), from now; its events counted."""
        key = f"{gvr.resource}"
        rv = str((await client.list(gvr, namespace=namespace, limit=1))["metadata"]
                 ["resourceVersion"])  # fmt: skip
        while True:
            async with client.watch(gvr, namespace=namespace, resource_version=rv) as events:
                async for event in events:
                    meta = (event.get("object") or {}).get("metadata") or {}
                    rv = str(meta.get("resourceVersion") or rv)
                    self.seen[key] = self.seen.get(key, 0) + 1


async def _run(
    indexes: Iterable[int], concurrency: int, call: Callable[[int], Awaitable[None]]
) -> None:
    queue = iter(indexes)

    async def worker() -> None:
        for i in queue:
            await call(i)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def measured(
    emu: EmulatorProcess,
    label: str,
    indexes: list[int],
    concurrency: int,
    call: Callable[[int], Awaitable[None]],
    requests_each: int = 1,
) -> JSON:
    cpu = cpu_seconds(emu.pid)
    started = time.perf_counter()
    await _run(indexes, concurrency, call)
    seconds = time.perf_counter() - started
    spent = cpu_seconds(emu.pid) - cpu
    n = len(indexes) * requests_each
    return {
        "operation": label,
        "server": emu.name,
        "requests": n,
        "seconds": round(seconds, 3),
        "per_second": round(n / seconds, 1) if seconds else None,
        "server_cpu_ms_per_request": round(spent / n * 1000, 3) if n else None,
    }


async def _list_all(client: KubeClient, gvr: GVR, namespace: str) -> None:
    await client.list(gvr, namespace=namespace)


async def _watch_initial(client: KubeClient, gvr: GVR, namespace: str, count: int) -> None:
    """A watch from resourceVersion 0: every object held as ADDED, read until all arrived."""
    seen = 0
    async with client.watch(
        gvr, namespace=namespace, resource_version="0", allow_watch_bookmarks=False
    ) as events:
        async for _ in events:
            seen += 1
            if seen >= count:
                return


async def sample(bed: Bed, held: int, args: argparse.Namespace) -> list[JSON]:
    """Every kind of request, `--sample` of each (fewer for LISTs), with `held` Works held."""
    c = args.concurrency
    base = 10_000_000 + held  # fresh Works and objects, beyond the held ones
    fresh = [base + i for i in range(args.sample)]
    existing = [(i * 7919) % held for i in range(args.sample)]
    cp, member = bed.cp, bed.member
    rows = [
        await measured(cp, "Work create", fresh, c, bed.create_work),
        await measured(cp, "Work status patch", fresh, c, bed.patch_status),
        await measured(cp, "Event create", fresh, c, bed.create_event),
        await measured(cp, "Work get", existing, c, bed.get_work),
        await measured(member, "apply, creating", fresh, c, bed.apply),
        await measured(member, "apply, unchanged", existing, c, bed.apply),
        await measured(member, "object get", existing, c, bed.get_object),
    ]
    lists = list(range(args.lists))
    rows += [
        await measured(cp, f"Work LIST ({held})", lists, 1,
                       lambda _: _list_all(bed.cp_client, WORKS, ES)),
        await measured(cp, f"Work watch from rv 0 ({held})", lists, 1,
                       lambda _: _watch_initial(bed.cp_client, WORKS, ES, held)),
        await measured(member, f"ConfigMap LIST ({held // 2})", lists, 1,
                       lambda _: _list_all(bed.member_client, CONFIGMAPS, NAMESPACE)),
    ]  # fmt: skip
    rows += [
        await measured(cp, "Work delete (+ finalizer removal)", fresh, c, bed.delete_work, 2),
        await measured(member, "object delete", fresh, c, bed.delete_object),
    ]
    for row in rows:
        row["held"] = held
    return rows


def footprint(bed: Bed, held: int) -> JSON:
    return {
        "held": held,
        "control_plane_rss_mib": round(rss_mib(bed.cp.pid), 1),
        "member_rss_mib": round(rss_mib(bed.member.pid), 1),
        "control_plane_cpu_seconds": round(cpu_seconds(bed.cp.pid), 2),
        "member_cpu_seconds": round(cpu_seconds(bed.member.pid), 2),
    }


async def grow(bed: Bed, start: int, stop: int, concurrency: int) -> JSON:
    """Load Works start..stop-1 (4 requests each); progress printed."""
    cpu = (cpu_seconds(bed.cp.pid), cpu_seconds(bed.member.pid))
    began = time.perf_counter()
    done = [start]

    async def one(i: int) -> None:
        await bed.load(i)
        done[0] += 1
        if done[0] % PROGRESS_EVERY == 0:
            rate = (done[0] - start) / (time.perf_counter() - began)
            print(f"  loaded {done[0]} Works ({rate:.0f}/s)", flush=True)

    await _run(range(start, stop), concurrency, one)
    seconds = time.perf_counter() - began
    n = max(stop - start, 1)
    return {
        "from": start,
        "to": stop,
        "seconds": round(seconds, 1),
        "works_per_second": round(n / seconds, 1) if seconds else None,
        "control_plane_cpu_ms_per_work": round((cpu_seconds(bed.cp.pid) - cpu[0]) / n * 1000, 2),
        "member_cpu_ms_per_object": round((cpu_seconds(bed.member.pid) - cpu[1]) / n * 1000, 2),
    }


async def delete_all(bed: Bed, held: int, concurrency: int) -> JSON:
    """Everything held deleted at once: Works (DELETE, finalizer removal) and member objects."""
    cpu = (cpu_seconds(bed.cp.pid), cpu_seconds(bed.member.pid))
    began = time.perf_counter()

    done = [0]

    async def one(i: int) -> None:
        await bed.delete_work(i)
        await bed.delete_object(i)
        done[0] += 1
        if done[0] % PROGRESS_EVERY == 0:
            rate = done[0] / (time.perf_counter() - began)
            print(f"  deleted {done[0]} Works and objects ({rate:.0f}/s)", flush=True)

    await _run(range(held), concurrency, one)
    seconds = time.perf_counter() - began
    return {
        "works": held,
        "seconds": round(seconds, 1),
        "works_per_second": round(held / seconds, 1),
        "control_plane_cpu_ms_per_work": round((cpu_seconds(bed.cp.pid) - cpu[0]) / held * 1000, 2),
        "member_cpu_ms_per_object": round((cpu_seconds(bed.member.pid) - cpu[1]) / held * 1000, 2),
    }


async def run(args: argparse.Namespace) -> JSON:
    directory = Path(tempfile.mkdtemp(prefix="emulator-scale-"))
    async with (
        emulator_process("karmada", "karmada", directory, client_user=AGENT_USER) as cp,
        emulator_process("member", CLUSTER, directory, client_user=AGENT_USER) as member,
    ):
        print(f"control plane pid {cp.pid}, member pid {member.pid}, logs in {directory}")
        bed = Bed(cp, member)
        await bed.open()
        watches = []
        try:
            await bed.cp_client.create(NAMESPACES, _namespace(ES))
            await bed.member_client.create(NAMESPACES, _namespace(NAMESPACE))
            watches = [
                asyncio.create_task(bed.watch(bed.cp_client, WORKS, ES)),
                asyncio.create_task(bed.watch(bed.cp_client, EVENTS, ES)),
                asyncio.create_task(bed.watch(bed.member_client, CONFIGMAPS, NAMESPACE)),
                asyncio.create_task(bed.watch(bed.member_client, DEPLOYMENTS, NAMESPACE)),
            ]
            held = 0
            loads, samples, footprints = [], [], [footprint(bed, 0)]
            for size in args.sizes:
                print(f"loading to {size} Works", flush=True)
                loads.append(await grow(bed, held, size, args.concurrency))
                held = size
                footprints.append(footprint(bed, held))
                print(f"sampling at {held}", flush=True)
                samples += await sample(bed, held, args)
                print_rows([r for r in samples if r["held"] == held])
            if args.delete_all:
                print(f"deleting all {held}", flush=True)
            deletion = await delete_all(bed, held, args.concurrency) if args.delete_all else {}
            if deletion:
                footprints.append(footprint(bed, 0))
        finally:
            for task in watches:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            await bed.close()
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "parameters": {k: v for k, v in vars(args).items() if k != "out"},
        "load": loads,
        "requests": samples,
        "footprint": footprints,
        "delete_all": deletion,
        "watch_events_seen": bed.seen,
    }


def print_rows(rows: list[JSON]) -> None:
    header = f"{'operation':<40} {'server':<8} {'held':>6} {'reqs':>5} {'req/s':>8} {'cpu ms':>8}"
    print(header)
    for r in rows:
        print(
            f"{r['operation']:<40} {r['server']:<8} {r['held']:>6} {r['requests']:>5} "
            f"{r['per_second'] or 0:>8.1f} {r['server_cpu_ms_per_request'] or 0:>8.3f}",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.emulator_scale")
    parser.add_argument(
        "--sizes", type=lambda s: sorted(int(x) for x in s.split(",")), default=[2000, 20000]
    )
    parser.add_argument("--sample", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--lists", type=int, default=3)
    parser.add_argument("--no-delete-all", dest="delete_all", action="store_false")
    parser.add_argument("--out", type=Path, default=Path("bench/results/emulator_scale.json"))
    args = parser.parse_args(argv)
    report = asyncio.run(run(args))
    print("\nload:")
    for row in report["load"]:
        print(f"  {row}")
    print("footprint:")
    for row in report["footprint"]:
        print(f"  {row}")
    print(f"delete all: {report['delete_all']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
