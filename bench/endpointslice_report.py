"""serviceExport at scale: exported Services' EndpointSlices reported as Works, under churn.

    python -m bench.endpointslice_report [--services 500] [--slices 3] [--endpoints 10]
                                         [--unexported 500] [--churn-rate 50] [--churn-seconds 30]
                                         [--agent-arg=--cluster-api-qps=1000 ...] [--out FILE]

Starts an emulated control plane and member, each in a process of its own (bench.emulators),
and the real agent as a third process with its default controllers. On the member: `--services`
selector-less Services with `--slices` EndpointSlices of `--endpoints` endpoints each (kept by the
benchmark, as a custom endpoints controller would), all exported through ServiceExports that
Works carry, plus `--unexported` Services with as many slices that nobody exports. Measured:
the time until every slice is reported as a Work; then `--churn-rate` endpoint changes per
second for `--churn-seconds` (each change rewrites one slice), and for each change the delay
until the reported Work carries it (seen through a watch on the Works); control-plane writes per
change; the agent's member requests per change (zero: it only watches); its CPU per change and
its resident memory before the export, after it, and after the churn.
Prints a table and writes JSON (default bench/results/endpointslice_report.json).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from agent.karmada import collected
from agent.kube.client import GVR, KubeClient
from agent.kube.config import load_kubeconfig
from agent.kube.resources import ENDPOINT_SLICES, NAMESPACES, SERVICES
from agent.kube.transport import Transport
from agent.resources import WORKS
from emulator.works import control_plane_work

from .agent_latency import (
    AGENT_USER,
    CLUSTER,
    ES,
    OurAgent,
    _delta,
    _per,
    _requests,
    _settled_factory,
    cpu_seconds,
    rss_mib,
    wait_until,
)
from .emulators import emulator_process
from .report import report

JSON = dict[str, Any]
NAMESPACE = "bench-mcs"
EXPORTS_PER_WORK = 50
SLICE_MANAGER = "bench-endpoints-controller.example.com"


def service(name: str) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"ports": [{"name": "http", "port": 80}]},
    }


def endpoint_slice(service_name: str, index: int, endpoints: int, version: int = 0) -> JSON:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{service_name}-{index}",
            "namespace": NAMESPACE,
            "labels": {
                collected.SERVICE_NAME_LABEL: service_name,
                collected.SLICE_MANAGED_BY_LABEL: SLICE_MANAGER,
            },
        },
        "addressType": "IPv4",
        "endpoints": [
            {
                "addresses": [f"10.{index}.{e // 250}.{e % 250 + 1}"],
                "conditions": {"ready": True},
                # The change marker: which version of the slice a report carries.
                "hostname": f"v{version}-{e}",
            }
            for e in range(endpoints)
        ],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
    }


def export(name: str) -> JSON:
    return {
        "apiVersion": collected.SERVICE_EXPORT_API_VERSION,
        "kind": "ServiceExport",
        "metadata": {"name": name, "namespace": NAMESPACE},
    }


def _version(work: JSON) -> tuple[str, int] | None:
    """(slice name, version) that a reported Work carries."""
    manifests = ((work.get("spec") or {}).get("workload") or {}).get("manifests") or []
    if not manifests or manifests[0].get("kind") != "EndpointSlice":
        return None
    endpoints = manifests[0].get("endpoints") or []
    if not endpoints:
        return None
    marker = str(endpoints[0].get("hostname", "v0-0"))
    return str(manifests[0]["metadata"]["name"]), int(marker[1:].split("-", 1)[0])


async def _watch_reports(client: KubeClient, seen: dict[str, tuple[int, float]]) -> None:
    """slice name -> (newest version reported, when first seen)."""
    while True:
        async with client.watch(WORKS, namespace=ES, resource_version="0") as events:
            async for event in events:
                if event.get("type") not in ("ADDED", "MODIFIED"):
                    continue
                found = _version(event.get("object") or {})
                if found is None:
                    continue
                name, version = found
                if name not in seen or seen[name][0] < version:
                    seen[name] = (version, time.monotonic())


async def _create_all(
    client: KubeClient, gvr: GVR, objects: list[JSON], parallel: int = 32
) -> None:
    queue = list(objects)

    async def worker() -> None:
        while queue:
            await client.create(gvr, queue.pop(), namespace=NAMESPACE)

    await asyncio.gather(*(worker() for _ in range(parallel)))


async def run(args: argparse.Namespace) -> JSON:
    directory = Path(tempfile.mkdtemp(prefix="slice-bench-"))
    async with (
        emulator_process("karmada", "karmada", directory, client_user=AGENT_USER) as cp,
        emulator_process("member", CLUSTER, directory, client_user=AGENT_USER) as member,
    ):
        agent = OurAgent(args.agent_arg)
        pid = await agent.start(cp, member, directory)
        cp_admin = KubeClient(
            Transport((await load_kubeconfig(str(cp.admin_kubeconfig))).with_rate_limits(0, 0))
        )
        member_admin = KubeClient(
            Transport((await load_kubeconfig(str(member.admin_kubeconfig))).with_rate_limits(0, 0))
        )
        sides = {"control_plane": cp, "member": member}
        seen: dict[str, tuple[int, float]] = {}
        watcher: asyncio.Task[None] | None = None
        try:
            exported = [f"svc-{i}" for i in range(args.services)]
            others = [f"other-{i}" for i in range(args.unexported)]
            await member_admin.create(
                NAMESPACES,
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            )
            await _create_all(member_admin, SERVICES, [service(n) for n in exported + others])
            await _create_all(
                member_admin,
                ENDPOINT_SLICES,
                [
                    endpoint_slice(n, i, args.endpoints)
                    for n in exported + others
                    for i in range(args.slices)
                ],
            )
            await wait_until(_settled_factory(pid), 120, "agent idle")
            rss_before = rss_mib(pid)

            watcher = asyncio.create_task(_watch_reports(cp_admin, seen))
            before = {side: await _requests(emu) for side, emu in sides.items()}
            cpu_before = cpu_seconds(pid)
            started = time.monotonic()
            for start in range(0, len(exported), EXPORTS_PER_WORK):
                batch = exported[start : start + EXPORTS_PER_WORK]
                await cp_admin.create(
                    WORKS,
                    control_plane_work(CLUSTER, f"exports-{start}", [export(n) for n in batch]),
                    namespace=ES,
                )
            total_slices = args.services * args.slices

            async def all_reported() -> bool:
                return len(seen) >= total_slices

            await wait_until(all_reported, 600, "every exported slice reported")
            initial_seconds = time.monotonic() - started
            await wait_until(_settled_factory(pid), 120, "agent idle after the export")
            initial_cpu = cpu_seconds(pid) - cpu_before
            initial_requests = {
                side: _per(_delta(await _requests(emu), before[side]), total_slices)
                for side, emu in sides.items()
            }
            rss_exported = rss_mib(pid)

            # Churn: each change rewrites one slice with the next version marker.
            rng = random.Random(7)
            versions: dict[str, int] = {}
            changed_at: dict[tuple[str, int], float] = {}
            before = {side: await _requests(emu) for side, emu in sides.items()}
            cpu_before = cpu_seconds(pid)
            changes = int(args.churn_rate * args.churn_seconds)
            churn_started = time.monotonic()
            for n in range(changes):
                # Pacing the load generator (an open-loop arrival rate), not synchronisation.
                await asyncio.sleep(
                    max(0.0, churn_started + n / args.churn_rate - time.monotonic())
                )
                svc = rng.choice(exported)
                index = rng.randrange(args.slices)
                name = f"{svc}-{index}"
                versions[name] = versions.get(name, 0) + 1
                live = await member_admin.get(ENDPOINT_SLICES, name, namespace=NAMESPACE)
                updated = endpoint_slice(svc, index, args.endpoints, versions[name])
                updated["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"]
                changed_at[(name, versions[name])] = time.monotonic()
                await member_admin.replace(ENDPOINT_SLICES, updated)

            async def churn_reported() -> bool:
                return all(seen.get(name, (0, 0.0))[0] >= v for name, v in versions.items())

            await wait_until(churn_reported, 300, "every change reported")
            churn_cpu = cpu_seconds(pid) - cpu_before
            await wait_until(_settled_factory(pid), 120, "agent idle after the churn")
            churn_requests = {
                side: _per(_delta(await _requests(emu), before[side]), changes)
                for side, emu in sides.items()
            }
            # Delay of the newest version of each slice (earlier versions may be coalesced into
            # one write, as the work queue de-duplicates keys).
            delays = sorted(
                seen[name][1] - changed_at[(name, version)] for name, version in versions.items()
            )
            rss_after = rss_mib(pid)
        finally:
            if watcher is not None:
                watcher.cancel()
            await agent.stop()
            for client in (cp_admin, member_admin):
                await client.close()
    return {
        "agent_args": " ".join(args.agent_arg),
        "exported_services": args.services,
        "slices_per_service": args.slices,
        "endpoints_per_slice": args.endpoints,
        "unexported_services": args.unexported,
        "initial_report_seconds": round(initial_seconds, 2),
        "initial_slices_per_second": round(total_slices / initial_seconds, 1),
        "initial_agent_cpu_ms_per_slice": round(initial_cpu / total_slices * 1000, 2),
        "initial_control_plane_requests_per_slice": initial_requests["control_plane"],
        "churn_changes": changes,
        "churn_rate_per_second": args.churn_rate,
        "churn_delay_p50_ms": round(statistics.median(delays) * 1000, 1),
        "churn_delay_p95_ms": round(delays[int(len(delays) * 0.95) - 1] * 1000, 1),
        "churn_delay_max_ms": round(delays[-1] * 1000, 1),
        "churn_agent_cpu_ms_per_change": round(churn_cpu / changes * 1000, 2),
        "churn_control_plane_requests_per_change": churn_requests["control_plane"],
        "churn_member_requests_per_change": churn_requests["member"],
        "agent_rss_before_export_mib": round(rss_before, 1),
        "agent_rss_exported_mib": round(rss_exported, 1),
        "agent_rss_after_churn_mib": round(rss_after, 1),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--services", type=int, default=500)
    parser.add_argument("--slices", type=int, default=3)
    parser.add_argument("--endpoints", type=int, default=10)
    parser.add_argument("--unexported", type=int, default=500)
    parser.add_argument("--churn-rate", type=float, default=50.0)
    parser.add_argument("--churn-seconds", type=float, default=30.0)
    parser.add_argument("--agent-arg", action="append", default=[], help="extra agent flag")
    parser.add_argument("--out", default="bench/results/endpointslice_report.json")
    args = parser.parse_args(argv)
    report(asyncio.run(run(args)), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
