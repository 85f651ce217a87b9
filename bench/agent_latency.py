"""The agent's main job under load: Work -> applied latency, throughput and footprint.

    python -m bench.agent_latency [--works 200] [--rate 0] [--lifted] [--idle-seconds 60]
                                  [--agent-arg=--kube-api-qps=100 ...] [--agent-python PY]
                                  [--profile FILE] [--out FILE]

Starts an emulated control plane and member, each in a process of its own
(bench.emulators), and the real agent as a third process (`python -m agent`). Once the
Cluster is Ready and the agent idle, it measures the agent's requests to each side over
`--idle-seconds`; then creates Works the way the control plane does (one Deployment or
ConfigMap each, all at once or at `--rate` per second) and measures for every Work the time
from its creation to Applied=True as seen through a watch. Reported: Works/s, latency
p50/p95/max, the agent's CPU per Work and resident memory (from /proc) idle and after, its
requests per Work and idle requests per minute on each side by verb and resource (from the
emulators' request accounting, the agent having an identity of its own), and its established
TCP connections to each API server. `--lifted` lifts the client-side limits (QPS 1000, burst
2000 on both sides). Prints a table and writes JSON (default bench/results/agent_latency.json).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agent.karmada.names import execution_namespace
from agent.kube.client import KubeClient
from agent.kube.config import load_kubeconfig
from agent.kube.errors import NotFoundError
from agent.kube.resources import EVENTS
from agent.kube.transport import Transport
from agent.resources import CLUSTERS, WORKS
from emulator.works import control_plane_work

from .emulators import EmulatorProcess, emulator_process
from .report import report

CLUSTER = "member1"
ES = execution_namespace(CLUSTER)
NAMESPACE = "bench"
AGENT_USER = "karmada-agent-bench"
JSON = dict[str, Any]
LIFTED_LIMITS = (
    "--kube-api-qps=1000", "--kube-api-burst=2000",
    "--cluster-api-qps=1000", "--cluster-api-burst=2000",
)  # fmt: skip
_PAGE = os.sysconf("SC_PAGE_SIZE")
_TICKS = os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * _PAGE / 2**20


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime + stime


def tcp_connections(pid: int, port: int) -> int:
    """Established TCP connections of process `pid` to `port` (on this host)."""
    inodes = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    count = 0
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(FileNotFoundError), open(f"/proc/{pid}/net/{table}") as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                remote_port = int(fields[2].rsplit(":", 1)[1], 16)
                if fields[3] == "01" and remote_port == port and fields[9] in inodes:
                    count += 1
    return count


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


async def cluster_ready(client: KubeClient) -> bool:
    try:
        cluster = await client.get(CLUSTERS, CLUSTER)
    except NotFoundError:
        return False
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (cluster.get("status") or {}).get("conditions") or ()
    )


async def wait_until(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        await asyncio.sleep(0.05)  # poll interval of a wait-for-condition loop


async def run(
    works: int,
    rate: float,
    agent_args: list[str],
    idle_seconds: float,
    profile: str = "",
    agent_python: str = sys.executable,
) -> JSON:
    directory = Path(tempfile.mkdtemp(prefix="agent-bench-"))
    async with (
        emulator_process("karmada", "karmada", directory, client_user=AGENT_USER) as cp,
        emulator_process("member", CLUSTER, directory, client_user=AGENT_USER) as member,
    ):
        log = (directory / "agent.log").open("wb")
        profiler = ["-m", "cProfile", "-o", profile] if profile else []
        agent = await asyncio.create_subprocess_exec(
            agent_python, *profiler, "-m", "agent",
            f"--karmada-kubeconfig={cp.client_kubeconfig}",
            f"--kubeconfig={member.client_kubeconfig}",
            f"--cluster-name={CLUSTER}", "--leader-elect=false",
            "--metrics-bind-address=0", "--health-probe-bind-address=0",
            *agent_args,
            stdout=log, stderr=log,
        )  # fmt: skip
        config = await load_kubeconfig(str(cp.admin_kubeconfig), user_agent="bench")
        # The benchmark itself must not be the bottleneck: no client-side rate limit.
        client = KubeClient(Transport(config.with_rate_limits(0, 0)))
        sides = {"control_plane": cp, "member": member}
        try:
            started = time.monotonic()
            await wait_until(lambda: cluster_ready(client), 60, "Cluster Ready")
            registered_in = time.monotonic() - started
            await wait_until(_settled_factory(agent.pid), 30, "agent idle")
            idle_rss = rss_mib(agent.pid)
            # Idle: what the agent asks of each side over a quiet window.
            idle_before = {side: await _requests(emu) for side, emu in sides.items()}
            await asyncio.sleep(idle_seconds)  # the measurement window itself
            idle_per_minute = {
                side: _per(_delta(await _requests(emu), idle_before[side]), idle_seconds / 60)
                for side, emu in sides.items()
            }
            idle_connections = {
                side: tcp_connections(agent.pid, emu.port) for side, emu in sides.items()
            }
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
            await wait_until(_contains(done, "bench-ns"), 30, "namespace Work applied")
            before = {side: await _requests(emu) for side, emu in sides.items()}
            idle_cpu = cpu_seconds(agent.pid)
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

            await wait_until(all_applied, 300, "every Work applied")
            load_seconds = time.monotonic() - load_started
            watcher.cancel()
            # Status and Events of the last Works may still be on their way: settle first.
            await wait_until(_settled_factory(agent.pid), 60, "agent idle after the load")
            await wait_until(_requests_settled(sides), 120, "agent's requests settled")
            after_rss = rss_mib(agent.pid)
            load_cpu = cpu_seconds(agent.pid) - idle_cpu
            latencies = sorted(done[n] - created[n] for n in created)
            per_work = {
                side: _per(_delta(await _requests(emu), before[side]), works)
                for side, emu in sides.items()
            }
            connections = {
                side: tcp_connections(agent.pid, emu.port) for side, emu in sides.items()
            }
            events_by_reason = await _events_by_reason(client, works)
        finally:
            agent.terminate()
            await agent.wait()
            await client.close()
            log.close()
    return {
        "works": works,
        "arrival_rate_per_second": rate or "as fast as possible",
        "agent_args": " ".join(agent_args),
        "ready_after_start_seconds": round(registered_in, 2),
        "works_per_second": round(works / load_seconds, 1),
        "latency_p50_ms": round(statistics.median(latencies) * 1000, 1),
        "latency_p95_ms": round(latencies[int(len(latencies) * 0.95) - 1] * 1000, 1),
        "latency_max_ms": round(latencies[-1] * 1000, 1),
        "agent_cpu_ms_per_work": round(load_cpu / works * 1000, 1),
        "agent_rss_idle_mib": round(idle_rss, 1),
        "agent_rss_after_load_mib": round(after_rss, 1),
        "control_plane_requests_per_work": per_work["control_plane"],
        "member_requests_per_work": per_work["member"],
        "event_objects_per_work_by_reason": events_by_reason,
        "idle_seconds_measured": idle_seconds,
        "idle_control_plane_requests_per_minute": idle_per_minute["control_plane"],
        "idle_member_requests_per_minute": idle_per_minute["member"],
        "tcp_connections_idle": idle_connections,
        "tcp_connections_after_load": connections,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
    }


async def _requests(emu: EmulatorProcess) -> dict[str, int]:
    """The agent's requests so far by verb and resource[/subresource] (or path)."""
    totals: dict[str, int] = {}
    for row in await emu.requests():
        what = row.get("path") or row.get("resource", "")
        if row.get("subresource"):
            what += "/" + row["subresource"]
        kind = f"{row['verb']} {what}"
        totals[kind] = totals.get(kind, 0) + int(row["count"])
    return totals


def _delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: n - before.get(k, 0) for k, n in after.items() if n - before.get(k, 0) > 0}


def _per(counts: dict[str, int], divisor: float) -> JSON:
    """{"total": ..., "<verb> <resource>": ...} divided by `divisor`, largest first."""
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return {
        "total": round(sum(counts.values()) / divisor, 2),
        **{kind: round(n / divisor, 2) for kind, n in ordered},
    }


async def _events_by_reason(client: KubeClient, works: int) -> JSON:
    """Event objects about the benchmark's Works, by reason, per Work (each one POST)."""
    counts: dict[str, int] = {}
    for event in (await client.list(EVENTS, namespace=ES))["items"]:
        name = str((event.get("involvedObject") or {}).get("name") or "")
        if name.startswith("bench-") and name != "bench-ns":
            reason = str(event.get("reason") or "")
            counts[reason] = counts.get(reason, 0) + 1
    return _per(counts, works)


def _requests_settled(sides: dict[str, EmulatorProcess]) -> Any:
    """True once the agent's request counts on every side stayed the same over a second (the
    Events of the last Works go out on their own budget, after Applied)."""
    last: list[list[dict[str, int]]] = [[]]

    async def settled() -> bool:
        await asyncio.sleep(1.0)  # sampling window for the request counts, not synchronisation
        now = [await _requests(emu) for emu in sides.values()]
        quiet = now == last[0]
        last[0] = now
        return quiet

    return settled


def _contains(done: dict[str, float], name: str) -> Any:
    async def check() -> bool:
        return name in done

    return check


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
    parser.add_argument(
        "--lifted",
        action="store_true",
        help="lift the agent's client-side limits: " + " ".join(LIFTED_LIMITS),
    )
    parser.add_argument(
        "--idle-seconds", type=float, default=60.0, help="window for the idle request rates"
    )
    parser.add_argument(
        "--profile", default="", help="run the agent under cProfile, writing stats to this file"
    )
    parser.add_argument(
        "--agent-python",
        default=sys.executable,
        help="interpreter that runs the agent, e.g. a venv with only the wheel installed, as in "
        "the image (the development venv has dev tools that libraries import when present)",
    )
    parser.add_argument("--out", default="bench/results/agent_latency.json")
    args = parser.parse_args(argv)
    agent_args = [*(LIFTED_LIMITS if args.lifted else ()), *args.agent_arg]
    result = asyncio.run(
        run(
            args.works,
            args.rate,
            agent_args,
            args.idle_seconds,
            args.profile,
            args.agent_python,
        )
    )
    report(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
