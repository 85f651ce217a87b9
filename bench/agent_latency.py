"""The agent's main job under load: Work -> applied latency, throughput, deletion and footprint.

    python -m bench.agent_latency [--works 200] [--rate 0] [--lifted] [--idle-seconds 60]
                                  [--agent-arg=--kube-api-qps=100 ...] [--agent-python PY]
                                  [--profile FILE] [--no-delete] [--out FILE]

Starts an emulated control plane and member, each in a process of its own
(bench.emulators), and an agent as a third process: ours (`python -m agent`, `OurAgent`) or,
from bench.side_by_side, upstream's Go karmada-agent (`UpstreamAgent`). Once the Cluster is
Ready and the agent idle, it measures the agent's requests to each side over `--idle-seconds`;
then creates Works the way the control plane does (one Deployment or ConfigMap each, all at
once or at `--rate` per second) and measures for every Work the time from its creation to
Applied=True as seen through a watch; then deletes them all at once and measures the time until
every Work is gone (its finalizer removed) and every member object deleted. Reported: Works/s,
latency p50/p90/p95/max, the agent's CPU per Work and resident memory (from /proc) idle and
after, its requests per Work and idle requests per minute on each side by verb and resource
(from the emulators' request accounting, the agent having an identity of its own), Event
objects per Work by reason, the deletion's time and requests, and its established TCP
connections to each API server. `--lifted` lifts the client-side limits (QPS 1000, burst 2000 on
both sides). Prints a table and writes JSON (default bench/results/agent_latency.json).
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
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from agent.karmada.names import execution_namespace
from agent.kube.client import GVR, KubeClient
from agent.kube.config import load_kubeconfig
from agent.kube.errors import KubeError, NotFoundError
from agent.kube.resources import CONFIGMAPS, DEPLOYMENTS, EVENTS, NAMESPACES
from agent.kube.transport import Transport
from agent.resources import CLUSTERS, WORKS
from emulator.works import configmap, control_plane_work, deployment

from .emulators import EmulatorProcess, emulator_process
from .report import report

CLUSTER = "member1"
ES = execution_namespace(CLUSTER)
NAMESPACE = "bench"
PREFIX = "bench-"
AGENT_USER = "karmada-agent-bench"
JSON = dict[str, Any]
LIFTED_LIMITS = (
    "--kube-api-qps=1000", "--kube-api-burst=2000",
    "--cluster-api-qps=1000", "--cluster-api-burst=2000",
)  # fmt: skip
# The agent's requests are done once their counts stayed the same over this many seconds.
SETTLE_WINDOW = 2.0
# A progress line every this many Works created.
CREATE_PROGRESS = 2000
# Requests of the benchmark itself at once (deleting Works).
BENCH_CONCURRENCY = 32
_PAGE = os.sysconf("SC_PAGE_SIZE")
_TICKS = os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * _PAGE / 2**20


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime + stime


def tcp_connections(pid: int, port: int, *, end: str = "remote") -> int:
    """Established TCP connections of process `pid` whose `end` ("remote": a server's port it
    dialled; "local": a port it serves, its accepted connections) is `port`, on this host."""
    column = {"local": 1, "remote": 2}[end]
    inodes = socket_inodes(pid)
    count = 0
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(FileNotFoundError), open(f"/proc/{pid}/net/{table}") as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                end_port = int(fields[column].rsplit(":", 1)[1], 16)
                if fields[3] == "01" and end_port == port and fields[9] in inodes:
                    count += 1
    return count


def socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    return inodes


def manifest(i: int) -> JSON:
    if i % 2:
        return configmap(f"cm-{i}", {"index": str(i)}, namespace=NAMESPACE)
    return deployment(f"web-{i}", namespace=NAMESPACE)


def member_object(i: int) -> tuple[GVR, str]:
    """The member resource and name of Work `bench-<i>`'s object."""
    return (CONFIGMAPS, f"cm-{i}") if i % 2 else (DEPLOYMENTS, f"web-{i}")


def applied(work: JSON) -> bool:
    return any(
        c.get("type") == "Applied" and c.get("status") == "True"
        for c in (work.get("status") or {}).get("conditions") or ()
    )


async def cluster_ready(client: KubeClient, name: str = CLUSTER) -> bool:
    try:
        cluster = await client.get(CLUSTERS, name)
    except NotFoundError:
        return False
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (cluster.get("status") or {}).get("conditions") or ()
    )


# Seconds between progress lines of a long wait.
PROGRESS_PERIOD = 15.0


def patience(works: int, floor: float = 300.0, per_work: float = 0.2) -> float:
    """A wait's timeout that grows with the Works in play (a 20,000-Work run at an agent's
    default QPS takes many minutes where 200 Works take seconds)."""
    return max(floor, works * per_work)


async def wait_until(
    check: Callable[[], Awaitable[bool]],
    timeout: float,
    what: str,
    progress: Callable[[], str] | None = None,
    interval: float = 0.05,
) -> None:
    """Poll `check` every `interval` seconds until true; with `progress`, a line of it every
    PROGRESS_PERIOD seconds."""
    started = time.monotonic()
    deadline = started + timeout
    next_report = started + PROGRESS_PERIOD
    while not await check():
        now = time.monotonic()
        if now > deadline:
            raise TimeoutError(what)
        if progress is not None and now >= next_report:
            print(f"  {what}: {progress()} ({now - started:.0f} s)", flush=True)
            next_report = now + PROGRESS_PERIOD
        await asyncio.sleep(interval)  # poll interval of a wait-for-condition loop


# --- the agent under test -----------------------------------------------------------------------


class AgentUnderTest(Protocol):
    """An agent process started against the two emulators; its pid for /proc."""

    name: str

    async def start(self, cp: EmulatorProcess, member: EmulatorProcess, directory: Path) -> int: ...

    async def stop(self) -> None: ...


def agent_arguments(
    karmada_kubeconfig: Path | str, member_kubeconfig: Path | str, extra: Sequence[str] = ()
) -> list[str]:
    """The command line every benchmark gives this agent: both kubeconfigs, the benchmarks'
    cluster, no leader election, no listening ports, then `extra`."""
    return [
        f"--karmada-kubeconfig={karmada_kubeconfig}",
        f"--kubeconfig={member_kubeconfig}",
        f"--cluster-name={CLUSTER}",
        "--leader-elect=false",
        "--metrics-bind-address=0",
        "--health-probe-bind-address=0",
        *extra,
    ]


class OurAgent:
    """This agent: `python -m agent`, as in the image."""

    name = "ours"

    def __init__(self, args: list[str], *, python: str = sys.executable, profile: str = "") -> None:
        self.args = args
        self.python = python
        self.profile = profile
        self.process: asyncio.subprocess.Process | None = None

    async def start(self, cp: EmulatorProcess, member: EmulatorProcess, directory: Path) -> int:
        profiler = ["-m", "cProfile", "-o", self.profile] if self.profile else []
        with (directory / "agent.log").open("wb") as log:
            self.process = await asyncio.create_subprocess_exec(
                self.python,
                *profiler,
                "-m",
                "agent",
                *agent_arguments(cp.client_kubeconfig, member.client_kubeconfig, self.args),
                stdout=log,
                stderr=log,
            )
        return self.process.pid

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.terminate()
            await self.process.wait()


# --- the measurement ----------------------------------------------------------------------------


async def measure(
    agent: AgentUnderTest,
    works: int,
    *,
    rate: float = 0.0,
    idle_seconds: float = 60.0,
    delete: bool = True,
    steady_seconds: float = 0.0,
) -> JSON:
    """One run on fresh emulators: idle, the burst of Works, (with `steady_seconds`) the agent
    holding them over that window, then deleting them all. The result keeps every Work's
    latency (`latencies_ms`, in the order the Works were created)."""
    directory = Path(tempfile.mkdtemp(prefix="agent-bench-"))
    async with (
        emulator_process("karmada", "karmada", directory, client_user=AGENT_USER) as cp,
        emulator_process("member", CLUSTER, directory, client_user=AGENT_USER) as member,
    ):
        # The resource templates' namespace exists on the control plane, as in Karmada: Events
        # an agent records about a template (upstream's do) have somewhere to go.
        await cp.admin.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
        pid = await agent.start(cp, member, directory)
        config = await load_kubeconfig(str(cp.admin_kubeconfig), user_agent="bench")
        # The benchmark itself must not be the bottleneck: no client-side rate limit.
        client = KubeClient(Transport(config.with_rate_limits(0, 0)))
        sides = {"control_plane": cp, "member": member}
        try:
            result = await _phases(
                agent, pid, client, sides, works, rate, idle_seconds, delete, steady_seconds
            )
        finally:
            await agent.stop()
            await client.close()
    result["logs"] = str(directory)
    return result


async def _phases(
    agent: AgentUnderTest,
    pid: int,
    client: KubeClient,
    sides: dict[str, EmulatorProcess],
    works: int,
    rate: float,
    idle_seconds: float,
    delete: bool,
    steady_seconds: float = 0.0,
) -> JSON:
    started = time.monotonic()
    await wait_until(lambda: cluster_ready(client), 120, "Cluster Ready")
    registered_in = time.monotonic() - started
    await wait_until(_settled_factory(pid), 60, "agent idle")
    idle_rss = rss_mib(pid)
    # Idle: what the agent asks of each side over a quiet window.
    idle_before = {side: await _requests(emu) for side, emu in sides.items()}
    await asyncio.sleep(idle_seconds)  # the measurement window itself
    idle_per_minute = {
        side: _per(_delta(await _requests(emu), idle_before[side]), idle_seconds / 60)
        for side, emu in sides.items()
    }
    idle_connections = {side: tcp_connections(pid, emu.port) for side, emu in sides.items()}
    await client.create(
        WORKS,
        control_plane_work(
            CLUSTER, "bench-ns",
            [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}],
        ),
        namespace=ES,
    )  # fmt: skip
    tracker = _WorkTracker()
    watcher = asyncio.create_task(tracker.watch(client))
    try:
        await wait_until(tracker.has_applied("bench-ns"), 60, "namespace Work applied")
        before = {side: await _requests(emu) for side, emu in sides.items()}
        idle_cpu = cpu_seconds(pid)
        names = [f"{PREFIX}{i}" for i in range(works)]
        load_started = time.monotonic()
        await _create_works(client, tracker, names, rate, load_started)
        await wait_until(
            tracker.all_applied(names),
            patience(works, 600),
            "every Work applied",
            tracker.count(tracker.applied, names),
        )
        load_seconds = time.monotonic() - load_started
        # Status and Events of the last Works may still be on their way: settle first.
        await wait_until(_settled_factory(pid), patience(works, 120), "agent idle after the load")
        await wait_until(_requests_settled(sides), patience(works), "agent's requests settled")
        # Less the sampling window that found them quiet.
        settled_seconds = time.monotonic() - load_started - SETTLE_WINDOW
        after_rss = rss_mib(pid)
        load_cpu = cpu_seconds(pid) - idle_cpu
        latencies = sorted(tracker.applied[n] - tracker.created[n] for n in names)
        after_load = {side: await _requests(emu) for side, emu in sides.items()}
        per_work = {
            side: _per(_delta(after_load[side], before[side]), works) for side, emu in sides.items()
        }
        # What the Works cost: the requests of the window less what the agent asks when idle
        # (status probes, the Lease) over as long a time.
        window = time.monotonic() - load_started
        for side, figures in per_work.items():
            idle = idle_per_minute[side]["total"] * window / 60
            figures["beyond_idle"] = round(max(figures["total"] - idle / works, 0.0), 2)
        connections = {side: tcp_connections(pid, emu.port) for side, emu in sides.items()}
        events_by_reason = await _events_by_reason(client, works)
        steady = await _steady(pid, sides, steady_seconds) if steady_seconds > 0 else {}
        deletion = await _delete_all(client, sides, tracker, names, pid) if delete else {}
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    return {
        "agent": agent.name,
        "works": works,
        "arrival_rate_per_second": rate or "as fast as possible",
        "ready_after_start_seconds": round(registered_in, 2),
        "works_per_second": round(works / load_seconds, 1),
        "latency_p50_ms": round(_percentile(latencies, 0.5) * 1000, 1),
        "latency_p90_ms": round(_percentile(latencies, 0.9) * 1000, 1),
        "latency_p95_ms": round(_percentile(latencies, 0.95) * 1000, 1),
        "latency_max_ms": round(latencies[-1] * 1000, 1),
        "applied_out_of_order_share": _out_of_order(tracker, names),
        "requests_done_after_seconds": round(settled_seconds, 1),
        "agent_cpu_ms_per_work": round(load_cpu / works * 1000, 2),
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
        **steady,
        **deletion,
        "latencies_ms": [round((tracker.applied[n] - tracker.created[n]) * 1000, 1) for n in names],
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
    }


def _out_of_order(tracker: _WorkTracker, names: list[str]) -> float:
    """The share of Works seen Applied before a Work created earlier was (first come, first
    reported would make it 0)."""
    overtaking, latest = 0, float("-inf")
    for name in names:
        if tracker.applied[name] < latest:
            overtaking += 1
        latest = max(latest, tracker.applied[name])
    return round(overtaking / max(len(names), 1), 3)


async def _steady(pid: int, sides: dict[str, EmulatorProcess], seconds: float) -> JSON:
    """The agent holding the Works, nothing changing: CPU and requests over `seconds`."""
    before = {side: await _requests(emu) for side, emu in sides.items()}
    cpu_before = cpu_seconds(pid)
    await asyncio.sleep(seconds)  # the measurement window itself
    return {
        "steady_seconds_measured": seconds,
        "steady_agent_cpu_percent": round((cpu_seconds(pid) - cpu_before) / seconds * 100, 2),
        "steady_rss_mib": round(rss_mib(pid), 1),
        **{
            f"steady_{side}_requests_per_minute": _per(
                _delta(await _requests(emu), before[side]), seconds / 60
            )
            for side, emu in sides.items()
        },
    }


def _percentile(ordered: list[float], share: float) -> float:
    if share == 0.5:
        return statistics.median(ordered)
    return ordered[max(int(len(ordered) * share + 0.5) - 1, 0)]


async def _create_works(
    client: KubeClient, tracker: _WorkTracker, names: list[str], rate: float, started: float
) -> None:
    """Create the Works one after the other (as fast as the control plane takes them), or at
    `rate` per second."""
    for i, name in enumerate(names):
        if rate > 0:
            # Pacing the load generator (an open-loop arrival rate), not synchronisation.
            await asyncio.sleep(max(0.0, started + i / rate - time.monotonic()))
        tracker.created[name] = time.monotonic()
        await client.create(WORKS, control_plane_work(CLUSTER, name, [manifest(i)]), namespace=ES)
        if (i + 1) % CREATE_PROGRESS == 0 and i + 1 < len(names):
            print(f"  created {i + 1}/{len(names)} Works", flush=True)


async def _delete_all(
    client: KubeClient,
    sides: dict[str, EmulatorProcess],
    tracker: _WorkTracker,
    names: list[str],
    pid: int,
) -> JSON:
    """Delete every Work at once; the time until all are gone (the agent removed its finalizer)
    and their member objects deleted, and what the agent asked of each side meanwhile."""
    member = sides["member"].admin
    objects = {member_object(int(name.removeprefix(PREFIX))) for name in names}
    before = {side: await _requests(emu) for side, emu in sides.items()}
    cpu_before = cpu_seconds(pid)
    limit = asyncio.Semaphore(BENCH_CONCURRENCY)

    async def delete(name: str) -> None:
        async with limit:
            with contextlib.suppress(NotFoundError):
                await client.delete(WORKS, name, namespace=ES)

    started = time.monotonic()
    await asyncio.gather(*(delete(name) for name in names))
    await wait_until(
        tracker.all_gone(names),
        patience(len(names), 600),
        "every Work gone",
        tracker.count(tracker.gone, names),
    )
    works_gone = time.monotonic() - started

    async def member_objects_gone() -> bool:
        left = 0
        for gvr in (CONFIGMAPS, DEPLOYMENTS):
            listed = await member.list(gvr, namespace=NAMESPACE)
            left += sum(1 for o in listed["items"] if (gvr, o["metadata"]["name"]) in objects)
        return left == 0

    # Upstream removes the finalizer after its delete requests were answered, ours too: the
    # objects are normally gone already; this only confirms it.
    await wait_until(member_objects_gone, patience(len(names), 120), "every member object deleted")
    seconds = time.monotonic() - started
    await wait_until(
        _requests_settled(sides),
        patience(len(names), 120),
        "agent's requests settled after deleting",
    )
    count = len(names)
    return {
        "delete_all_seconds": round(seconds, 2),
        "delete_all_works_gone_seconds": round(works_gone, 2),
        "delete_agent_cpu_ms_per_work": round((cpu_seconds(pid) - cpu_before) / count * 1000, 2),
        "delete_control_plane_requests_per_work": _per(
            _delta(await _requests(sides["control_plane"]), before["control_plane"]), count
        ),
        "delete_member_requests_per_work": _per(
            _delta(await _requests(sides["member"]), before["member"]), count
        ),
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
    """Event objects about the benchmark's Works and their templates, by reason, per Work (each
    object is one POST; its count says how many occurrences it stands for)."""
    counts: dict[str, int] = {}
    for event in (await client.list(EVENTS))["items"]:
        key = event_key(event.get("involvedObject") or {}, str(event.get("reason") or ""))
        if key is not None:
            counts[key] = counts.get(key, 0) + 1
    return _per(counts, works)


def event_key(involved: JSON, reason: str) -> str | None:
    """How an Event about `involved` is counted: by reason, " (template)" added for the resource
    templates; None for an Event about neither a benchmark Work nor a template."""
    name = str(involved.get("name") or "")
    if involved.get("namespace") == NAMESPACE:
        return reason + " (template)"
    if involved.get("kind") == "Work" and name.startswith(PREFIX) and name != "bench-ns":
        return reason
    return None


def _requests_settled(sides: dict[str, EmulatorProcess]) -> Callable[[], Awaitable[bool]]:
    """True once the agent's request counts on every side stayed the same over two seconds (the
    Events of the last Works go out after Applied)."""
    last: list[list[dict[str, int]]] = [[]]

    async def settled() -> bool:
        # The sampling window for the request counts, not synchronisation.
        await asyncio.sleep(SETTLE_WINDOW)
        now = [await _requests(emu) for emu in sides.values()]
        quiet = now == last[0]
        last[0] = now
        return quiet

    return settled


def _settled_factory(pid: int) -> Callable[[], Awaitable[bool]]:
    last = [cpu_seconds(pid)]

    async def settled() -> bool:
        await asyncio.sleep(0.5)  # sampling window for CPU use, not synchronisation
        now = cpu_seconds(pid)
        quiet = now - last[0] < 0.05
        last[0] = now
        return quiet

    return settled


class _WorkTracker:
    """When each Work was created, seen Applied=True and seen deleted, from one watch."""

    def __init__(self) -> None:
        self.created: dict[str, float] = {}
        self.applied: dict[str, float] = {}
        self.gone: dict[str, float] = {}
        # The Works whose latest version seen is Applied=True.
        self.applied_now: set[str] = set()

    def has_applied(self, name: str) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            return name in self.applied

        return check

    def all_applied(self, names: list[str]) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            return all(name in self.applied for name in names)

        return check

    def all_gone(self, names: list[str]) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            return all(name in self.gone for name in names)

        return check

    def all_applied_now(self, names: list[str]) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            return all(name in self.applied_now for name in names)

        return check

    def count(self, seen: dict[str, float] | set[str], names: list[str]) -> Callable[[], str]:
        """A progress line: how many of `names` are in `seen`."""
        return lambda: f"{sum(1 for n in names if n in seen)}/{len(names)}"

    async def watch(self, client: KubeClient) -> None:
        resource_version = "0"
        while True:
            with contextlib.suppress(KubeError):
                async with client.watch(
                    WORKS, namespace=ES, resource_version=resource_version
                ) as events:
                    async for event in events:
                        work = event.get("object") or {}
                        meta = work.get("metadata") or {}
                        name = str(meta.get("name", ""))
                        resource_version = str(meta.get("resourceVersion") or resource_version)
                        if event.get("type") == "DELETED":
                            self.gone.setdefault(name, time.monotonic())
                            self.applied_now.discard(name)
                            continue
                        if not applied(work):
                            self.applied_now.discard(name)
                            continue
                        self.applied_now.add(name)
                        if name not in self.applied:
                            self.applied[name] = time.monotonic()


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
        "--no-delete", action="store_true", help="skip deleting the Works at the end"
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
    agent = OurAgent(agent_args, python=args.agent_python, profile=args.profile)
    result = asyncio.run(
        measure(
            agent,
            args.works,
            rate=args.rate,
            idle_seconds=args.idle_seconds,
            delete=not args.no_delete,
        )
    )
    report({"agent_args": " ".join(agent_args), **result}, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
