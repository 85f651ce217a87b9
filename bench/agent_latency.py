"""The agent's main job under load: Work -> applied latency, throughput and footprint.

    python -m bench.agent_latency [--works 200] [--rate 0] [--agent-arg=--kube-api-qps=100 ...]
                                  [--out FILE]

Starts an emulated control plane and member (in this process) and the real agent as a
separate process (`python -m agent`), creates Works the way the control plane does
(one Deployment or ConfigMap each), and measures for every Work the time from its
creation to Applied=True as seen through a watch, plus the agent process's resident
memory and CPU time (from /proc) at idle and after the load. Prints a table and writes
JSON (default bench/results/agent_latency.json).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agent.kube.client import GVR, KubeClient
from agent.kube.config import load_kubeconfig
from agent.kube.errors import NotFoundError
from agent.kube.transport import Transport
from agent.testing.emulator import run_emulator
from agent.testing.works import control_plane_work

from .report import report

CLUSTER = "member1"
ES = f"karmada-es-{CLUSTER}"
WORKS = GVR("work.karmada.io", "v1alpha1", "works")
CLUSTERS = GVR("cluster.karmada.io", "v1alpha1", "clusters")
NAMESPACE = "bench"
AGENT_USER = "karmada-agent-bench"
JSON = dict[str, Any]
_PAGE = os.sysconf("SC_PAGE_SIZE")
_TICKS = os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * _PAGE / 2**20


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime + stime


def manifest(i: int) -> JSON:
    if i % 2:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"cm-{i}", "namespace": NAMESPACE},
            "data": {"index": str(i)},
        }
    labels = {"app": f"web-{i}"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"web-{i}", "namespace": NAMESPACE},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
            },
        },
    }


def applied(work: JSON) -> bool:
    return any(
        c.get("type") == "Applied" and c.get("status") == "True"
        for c in (work.get("status") or {}).get("conditions") or ()
    )


async def wait_until(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        await asyncio.sleep(0.05)  # poll interval of a wait-for-condition loop


async def run(works: int, rate: float, agent_args: list[str]) -> JSON:
    directory = Path(tempfile.mkdtemp(prefix="agent-bench-"))
    async with (
        run_emulator(profile="karmada", name="karmada") as cp,
        run_emulator(profile="member", name=CLUSTER) as member,
    ):
        karmada_kc = cp.write_kubeconfig(directory / "karmada")
        # The agent gets an identity of its own so its requests can be counted.
        agent_kc = cp.write_kubeconfig(
            directory / "karmada-agent", user=AGENT_USER, groups=["system:masters"]
        )
        member_kc = member.write_kubeconfig(directory / "member")
        log = (directory / "agent.log").open("wb")
        agent = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agent",
            f"--karmada-kubeconfig={agent_kc}", f"--kubeconfig={member_kc}",
            f"--cluster-name={CLUSTER}", "--leader-elect=false",
            "--metrics-bind-address=0", "--health-probe-bind-address=0",
            *agent_args,
            stdout=log, stderr=log,
        )  # fmt: skip
        config = await load_kubeconfig(str(karmada_kc), user_agent="bench")
        # The benchmark itself must not be the bottleneck: no client-side rate limit.
        client = KubeClient(Transport(config.with_rate_limits(0, 0)))
        try:

            async def ready() -> bool:
                try:
                    cluster = await client.get(CLUSTERS, CLUSTER)
                except NotFoundError:
                    return False
                return any(
                    c.get("type") == "Ready" and c.get("status") == "True"
                    for c in (cluster.get("status") or {}).get("conditions") or ()
                )

            started = time.monotonic()
            await wait_until(ready, 60, "Cluster Ready")
            registered_in = time.monotonic() - started
            await wait_until(_settled_factory(agent.pid), 30, "agent idle")
            idle_rss, idle_cpu = rss_mib(agent.pid), cpu_seconds(agent.pid)
            await client.create(
                WORKS,
                control_plane_work(
                    CLUSTER, "bench-ns",
                    [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}],
                ),
                namespace=ES,
            )  # fmt: skip
            created: dict[str, float] = {}
            done: dict[str, float] = {}
            watcher = asyncio.create_task(_watch_applied(client, done))
            before = _requests_by_kind(cp.accounting.rows(user=AGENT_USER))
            load_started = time.monotonic()
            for i in range(works):
                name = f"bench-{i}"
                if rate > 0:
                    # Pacing the load generator (an open-loop arrival rate), not synchronisation.
                    await asyncio.sleep(max(0.0, load_started + i / rate - time.monotonic()))
                created[name] = time.monotonic()
                await client.create(
                    WORKS, control_plane_work(CLUSTER, name, [manifest(i)]), namespace=ES
                )

            async def all_applied() -> bool:
                return all(name in done for name in created)

            await wait_until(all_applied, 120, "every Work applied")
            load_seconds = time.monotonic() - load_started
            watcher.cancel()
            peak_rss = rss_mib(agent.pid)
            load_cpu = cpu_seconds(agent.pid) - idle_cpu
            latencies = sorted(done[n] - created[n] for n in created)
            after = _requests_by_kind(cp.accounting.rows(user=AGENT_USER))
            per_work = {
                kind: round((count - before.get(kind, 0)) / works, 2)
                for kind, count in sorted(after.items())
                if count - before.get(kind, 0) > 0
            }
        finally:
            agent.terminate()
            await agent.wait()
            await client.close()
            log.close()
    return {
        "works": works,
        "arrival_rate_per_second": rate or "as fast as possible",
        "agent_args": " ".join(agent_args),
        "registered_ready_seconds": round(registered_in, 3),
        "latency_p50_ms": round(statistics.median(latencies) * 1000, 1),
        "latency_p95_ms": round(latencies[int(len(latencies) * 0.95) - 1] * 1000, 1),
        "latency_max_ms": round(latencies[-1] * 1000, 1),
        "works_per_second": round(works / load_seconds, 1),
        "agent_rss_idle_mib": round(idle_rss, 1),
        "agent_rss_after_load_mib": round(peak_rss, 1),
        "agent_cpu_seconds_for_load": round(load_cpu, 2),
        "control_plane_requests_per_work": per_work,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
    }


def _requests_by_kind(rows: list[JSON]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for row in rows:
        kind = f"{row['verb']} {row.get('resource') or row.get('path', '')}"
        totals[kind] = totals.get(kind, 0) + int(row["count"])
    return totals


def _settled_factory(pid: int) -> Any:
    last = [cpu_seconds(pid)]

    async def settled() -> bool:
        await asyncio.sleep(0.5)  # sampling window for CPU use, not synchronisation
        now = cpu_seconds(pid)
        quiet = now - last[0] < 0.05
        last[0] = now
        return quiet

    return settled


async def _watch_applied(client: KubeClient, done: dict[str, float]) -> None:
    while True:
        async with client.watch(WORKS, namespace=ES, resource_version="0") as events:
            async for event in events:
                work = event.get("object") or {}
                name = (work.get("metadata") or {}).get("name", "")
                if name not in done and applied(work):
                    done[name] = time.monotonic()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--works", type=int, default=200)
    parser.add_argument(
        "--rate", type=float, default=0.0, help="Works created per second (0: all at once)"
    )
    parser.add_argument("--agent-arg", action="append", default=[], help="extra agent flag")
    parser.add_argument("--out", default="bench/results/agent_latency.json")
    args = parser.parse_args(argv)
    result = asyncio.run(run(args.works, args.rate, args.agent_arg))
    report(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
