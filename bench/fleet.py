"""bench.scale's fleet mode: many agents, each with a member emulator of its own, on one
control-plane emulator; idle, then a burst of Works per cluster; optionally with the tunnel.

    python -m bench.scale fleet [--clusters 100] [--burst 10] [--idle-seconds 60]
                                [--agents ours,go] [--tunnel] [--start-parallel 4]

Every process is its own: the control-plane emulator, one member emulator per cluster
(bench.emulators) and one agent per cluster (ours, `python -m agent`; or upstream's Go
karmada-agent). The clusters start `--start-parallel` at a time, each slot held until its
Cluster is Ready, so the per-cluster waits do not grow with `--clusters`; progress is printed.

With `--tunnel`, the stock ANP proxy-server runs beside the control plane (as
deploy/control-plane/tunnel-server does; emulator.konnectivity.stock): ours get the tunnel flags
(their built-in ANP agent), the Go agents `--proxy-server-address` and konnectivity's stock
`proxy-agent` beside each, which is what an upstream user runs. Reported: the proxy-server's
established connections (from the agents) and RSS, the proxy-agents' RSS, and whether a GET of
the `default` namespace answers through every cluster's route (its Cluster's proxyURL and
apiEndpoint, TLS verified against its Secret's caBundle; the route the cluster proxy of
karmada-aggregated-apiserver dials).

Measured: the agents' established connections to the control plane, each counted from the
agent's own sockets; their requests per minute while idle by verb and resource, and which of
them are not Lease renewals; the heartbeat Lease age (how long ago each cluster's Lease was
renewed, every Lease sampled each second) p99 and max, idle and during the burst; the burst's
time until every Work is Applied and each Work's latency to Applied=True; the total RSS of the
agents, of the member emulators and of the control-plane emulator, idle and after the burst.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import datetime
import os
import platform
import signal
import ssl
import tempfile
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx

from agent.kube.client import KubeClient
from agent.kube.errors import KubeError
from agent.kube.resources import LEASES, NAMESPACES, SECRETS
from agent.resources import CLUSTERS, WORKS
from emulator import upstream
from emulator.konnectivity.stock import StockProxyServer
from emulator.pki import CertificateAuthority
from emulator.works import control_plane_work

from .agent_latency import (
    AGENT_USER,
    BENCH_CONCURRENCY,
    NAMESPACE,
    PREFIX,
    AgentUnderTest,
    OurAgent,
    _delta,
    _per,
    _percentile,
    _requests,
    _settled_factory,
    applied,
    cluster_ready,
    manifest,
    rss_mib,
    tcp_connections,
    wait_until,
)
from .emulators import EmulatorProcess, emulator_process
from .side_by_side import UpstreamAgent
from .tunnel_vs_proxy_agent import go_proxy_agent as start_go_proxy_agent

JSON = dict[str, Any]
T = TypeVar("T")
LEASE_NAMESPACE = "karmada-cluster"
NAMESPACE_WORK = "bench-ns"
# Each slot of the start waits this long for its one cluster: independent of --clusters.
CLUSTER_START_TIMEOUT = 300.0
# The waits on the whole fleet grow with it: this much per cluster, on top of a minute.
PER_CLUSTER_TIMEOUT = 30.0
PROGRESS_EVERY = 10.0
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
STOP_GRACE = 30.0


def fleet_timeout(clusters: int) -> float:
    return 60.0 + PER_CLUSTER_TIMEOUT * clusters


# --- pure helpers (tested) -------------------------------------------------------------------


async def bounded(
    items: Sequence[T],
    limit: int,
    start: Callable[[T], Awaitable[None]],
    what: str,
    report: Callable[[str], None] = print,
) -> None:
    """`start` for every item, at most `limit` at once; progress reported as they finish.
    Every started one is let finish; then the first failure is raised."""
    gate = asyncio.Semaphore(limit)
    done = [0]
    began = time.monotonic()
    last = [began]

    async def one(item: T) -> None:
        async with gate:
            await start(item)
        done[0] += 1
        now = time.monotonic()
        if done[0] == len(items) or now - last[0] >= PROGRESS_EVERY:
            last[0] = now
            report(f"  {what}: {done[0]}/{len(items)} ({now - began:.0f} s)")

    results = await asyncio.gather(*(one(item) for item in items), return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result


async def wait_counting(
    count: Callable[[], Awaitable[int]],
    total: int,
    timeout: float,
    what: str,
    report: Callable[[str], None] = print,
    interval: float = 0.5,
) -> None:
    """Until `count()` reaches `total`, reporting the count every PROGRESS_EVERY seconds."""
    began = time.monotonic()
    last = began
    while (n := await count()) < total:
        now = time.monotonic()
        if now - began > timeout:
            raise TimeoutError(f"{what}: {n}/{total} after {timeout:.0f} s")
        if now - last >= PROGRESS_EVERY:
            last = now
            report(f"  {what}: {n}/{total} ({now - began:.0f} s)")
        await asyncio.sleep(interval)  # poll interval of a wait-for-condition loop
    report(f"  {what}: {total}/{total} ({time.monotonic() - began:.0f} s)")


def lease_ages(leases: Iterable[JSON], wanted: set[str], now: datetime.datetime) -> list[float]:
    """Seconds since each wanted Lease's renewTime (a Lease never renewed has no age yet)."""
    ages = []
    for lease in leases:
        if lease["metadata"]["name"] not in wanted:
            continue
        renewed = (lease.get("spec") or {}).get("renewTime")
        if renewed:
            at = datetime.datetime.fromisoformat(renewed.replace("Z", "+00:00"))
            ages.append(max((now - at).total_seconds(), 0.0))
    return ages


def age_summary(ages: list[float]) -> JSON:
    if not ages:
        return {"samples": 0}
    ordered = sorted(ages)
    return {
        "samples": len(ordered),
        "p50_seconds": round(_percentile(ordered, 0.5), 2),
        "p99_seconds": round(_percentile(ordered, 0.99), 2),
        "max_seconds": round(ordered[-1], 2),
    }


def is_lease_renewal(kind: str) -> bool:
    """`kind` as bench.agent_latency._requests names them: "<verb> <resource>[/sub]"."""
    verb, _, what = kind.partition(" ")
    return what == "leases" and verb in ("update", "patch")


def idle_requests(counts: dict[str, int], minutes: float, agents: int) -> JSON:
    """Per minute by verb and resource; per agent the Lease renewals; what is not a Lease
    renewal, and of that the writes (a watch an informer starts again after its timeout is a
    request too, but writes nothing)."""
    others = {k: n for k, n in counts.items() if not is_lease_renewal(k)}
    other_writes = {k: n for k, n in others.items() if k.split(" ", 1)[0] in WRITE_VERBS}
    renewals = sum(n for k, n in counts.items() if is_lease_renewal(k))
    return {
        "per_minute": _per(counts, minutes),
        "lease_renewals_per_minute_per_agent": round(renewals / minutes / max(agents, 1), 2),
        "not_lease_renewals_per_minute": _per(others, minutes),
        "writes_not_lease_renewals_per_minute": _per(other_writes, minutes),
        "only_lease_renewals": not others,
    }


def connection_summary(per_agent: dict[str, int]) -> JSON:
    values = list(per_agent.values())
    return {
        "total": sum(values),
        "per_agent_min": min(values, default=0),
        "per_agent_max": max(values, default=0),
        "agents_with_more_than_one": sorted(c for c, n in per_agent.items() if n > 1),
        "agents_with_none": sorted(c for c, n in per_agent.items() if n == 0),
    }


def _rss(pids: Iterable[int]) -> float:
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            total += rss_mib(pid)
    return round(total, 1)


# --- the fleet --------------------------------------------------------------------------------


@dataclass
class Member:
    """One cluster: its member emulator, its agent, (Go, tunnel) its proxy-agent; `stack`
    stops them in the reverse order."""

    cluster: str
    directory: Path
    stack: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)
    emulator: EmulatorProcess | None = None
    agent: AgentUnderTest | None = None
    agent_pid: int = 0
    proxy_agent: upstream.UpstreamProcess | None = None

    @property
    def proxy_agent_pid(self) -> int:
        process = self.proxy_agent.process if self.proxy_agent is not None else None
        return process.pid if process is not None else 0


@dataclass
class Tunnel:
    hub: StockProxyServer
    ca_file: Path

    @property
    def pid(self) -> int:
        process = self.hub.process.process if self.hub.process is not None else None
        assert process is not None
        return process.pid

    def our_flags(self) -> list[str]:
        return [
            f"--tunnel-server-address={self.hub.agent_address}",
            f"--tunnel-server-ca-file={self.ca_file}",
            "--tunnel-server-name=localhost",
            f"--tunnel-proxy-url={self.hub.connect_url}",
        ]


@dataclass
class WorkWatch:
    """When each Work (namespace, name) was created and first seen Applied=True: one watch over
    every namespace."""

    created: dict[tuple[str, str], float] = field(default_factory=dict)
    applied: dict[tuple[str, str], float] = field(default_factory=dict)

    async def run(self, client: KubeClient) -> None:
        resource_version = "0"
        while True:
            with contextlib.suppress(KubeError):
                async with client.watch(WORKS, resource_version=resource_version) as events:
                    async for event in events:
                        work = event.get("object") or {}
                        meta = work.get("metadata") or {}
                        resource_version = str(meta.get("resourceVersion") or resource_version)
                        key = (str(meta.get("namespace")), str(meta.get("name")))
                        if key not in self.applied and applied(work):
                            self.applied[key] = time.monotonic()

    def count_applied(self, keys: list[tuple[str, str]]) -> Callable[[], Awaitable[int]]:
        async def count() -> int:
            return sum(1 for key in keys if key in self.applied)

        return count


class LeaseSampler:
    """Every second, the age of every cluster's Lease, filed under the current phase."""

    def __init__(self, client: KubeClient, clusters: list[str]) -> None:
        self.client = client
        self.wanted = set(clusters)
        self.phase = ""
        self.ages: dict[str, list[float]] = {}

    async def run(self) -> None:
        while True:
            with contextlib.suppress(KubeError):
                listed = await self.client.list(LEASES, namespace=LEASE_NAMESPACE)
                now = datetime.datetime.now(datetime.UTC)
                if self.phase:
                    ages = lease_ages(listed["items"], self.wanted, now)
                    self.ages.setdefault(self.phase, []).extend(ages)
            await asyncio.sleep(1.0)  # the sampling period


def cluster_name(i: int) -> str:
    return f"member{i + 1}"


def execution_namespace(cluster: str) -> str:
    return f"karmada-es-{cluster}"


async def run_fleet(name: str, args: argparse.Namespace) -> JSON:
    directory = Path(tempfile.mkdtemp(prefix="scale-fleet-"))
    print(f"fleet: {name}, {args.clusters} clusters, logs in {directory}", flush=True)
    async with contextlib.AsyncExitStack() as stack:
        cp = await stack.enter_async_context(
            emulator_process("karmada", "karmada", directory, client_user=AGENT_USER)
        )
        client = cp.admin
        await client.create(NAMESPACES, _namespace(NAMESPACE))
        tunnel = await _start_tunnel(stack, cp, directory) if args.tunnel else None
        members = [
            Member(cluster_name(i), directory / cluster_name(i)) for i in range(args.clusters)
        ]
        stack.push_async_callback(_stop_all, members)
        await _start_members(members, cp, name, args, tunnel)
        return await _measure(name, args, cp, members, tunnel, directory)
    raise AssertionError("unreachable")


async def _start_tunnel(
    stack: contextlib.AsyncExitStack, cp: EmulatorProcess, directory: Path
) -> Tunnel:
    karmada_ca = cp.admin.transport.config.ca_pem
    assert karmada_ca is not None
    server_ca = CertificateAuthority.generate("konnectivity-ca")
    ca_file = directory / "server-ca.crt"
    ca_file.write_bytes(server_ca.cert_pem)
    (directory / "proxy-server").mkdir()
    hub = StockProxyServer(server_ca, cluster_ca_pem=karmada_ca, workdir=directory / "proxy-server")
    await stack.enter_async_context(hub)
    print(f"  proxy-server: agents at {hub.agent_address}, CONNECT at {hub.connect_url}")
    return Tunnel(hub, ca_file)


async def _start_members(
    members: list[Member],
    cp: EmulatorProcess,
    name: str,
    args: argparse.Namespace,
    tunnel: Tunnel | None,
) -> None:
    async def start(member: Member) -> None:
        member.directory.mkdir()
        member.emulator = await member.stack.enter_async_context(
            emulator_process("member", member.cluster, member.directory, client_user=AGENT_USER)
        )
        if tunnel is not None and name == "go":
            member.proxy_agent = await member.stack.enter_async_context(
                go_proxy_agent(tunnel, cp, member)
            )
        member.agent = make_agent(name, member.cluster, args.agent_python, tunnel)
        member.stack.push_async_callback(_stop_agent, member.agent)
        member.agent_pid = await member.agent.start(cp, member.emulator, member.directory)

        async def ready_while_running() -> bool:
            if _agent_process(member.agent) is None:
                raise RuntimeError(f"{member.cluster}: its agent exited; see {member.directory}")
            return await cluster_ready(cp.admin, member.cluster)

        # A slower poll than one agent's benchmarks: a hundred clusters wait at once.
        await wait_until(
            ready_while_running,
            CLUSTER_START_TIMEOUT,
            f"Cluster {member.cluster} Ready",
            interval=0.2,
        )

    await bounded(members, args.start_parallel, start, "clusters started and Ready")


def make_agent(name: str, cluster: str, python: str, tunnel: Tunnel | None) -> AgentUnderTest:
    if name == "go":
        return _FleetUpstreamAgent(cluster, tunnel)
    flags = tunnel.our_flags() if tunnel else []
    # The benchmarks' agent arguments name bench.agent_latency's cluster; a later flag wins.
    return OurAgent([*flags, f"--cluster-name={cluster}"], python=python)


class _FleetUpstreamAgent(UpstreamAgent):
    """The Go agent under a cluster name of its own."""

    def __init__(self, cluster: str, tunnel: Tunnel | None) -> None:
        super().__init__([])
        self.cluster = cluster
        self.tunnel = tunnel

    async def start(self, cp: EmulatorProcess, member: EmulatorProcess, directory: Path) -> int:
        if self.tunnel is not None:
            # The route its Cluster gets: the member's address through the proxy-server.
            self.args = [
                f"--cluster-api-endpoint={member.url}",
                f"--proxy-server-address={self.tunnel.hub.connect_url}",
            ]
        self.process = upstream.UpstreamKarmadaAgent(
            karmada_kubeconfig=cp.client_kubeconfig,
            member_kubeconfig=member.client_kubeconfig,
            cluster_name=self.cluster,
            extra_args=["--leader-elect=false", *self.args],
            workdir=directory,
        )
        await self.process.start(timeout=CLUSTER_START_TIMEOUT)
        assert self.process.process is not None
        return self.process.process.pid


@contextlib.asynccontextmanager
async def go_proxy_agent(
    tunnel: Tunnel, cp: EmulatorProcess, member: Member
) -> AsyncIterator[upstream.UpstreamProcess]:
    async with start_go_proxy_agent(
        tunnel.hub, cp, member.directory, agent_id=f"go-{member.cluster}", ca_file=tunnel.ca_file
    ) as process:
        yield process


async def _stop_all(members: list[Member]) -> None:
    """Every cluster's processes stopped (agent, proxy-agent, emulator), 16 clusters at once."""
    gate = asyncio.Semaphore(16)

    async def stop(member: Member) -> None:
        async with gate:
            try:
                await member.stack.aclose()
            except Exception as error:
                print(f"  {member.cluster}: stopping failed: {error!r}", flush=True)

    await asyncio.gather(*(stop(m) for m in members))
    print(f"  stopped {len(members)} clusters", flush=True)


def _agent_process(agent: AgentUnderTest | None) -> asyncio.subprocess.Process | None:
    """The agent's process while it runs, else None."""
    process: Any = getattr(agent, "process", None)
    if isinstance(agent, UpstreamAgent) and process is not None:
        process = process.process
    if process is None or process.returncode is not None:
        return None
    assert isinstance(process, asyncio.subprocess.Process)
    return process


async def _stop_agent(agent: AgentUnderTest) -> None:
    """SIGTERM; SIGKILL if the agent is still there after STOP_GRACE."""
    try:
        await asyncio.wait_for(agent.stop(), STOP_GRACE)
    except TimeoutError:
        process = _agent_process(agent)
        if process is not None:
            process.kill()
            await process.wait()


def _namespace(name: str) -> JSON:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


async def _each_quiet_once(pids: list[int], timeout: float, what: str) -> None:
    """Every agent seen without CPU use over one sampling window (not all in the same one: at
    100 agents some Lease is always being renewed)."""
    checks = {pid: _settled_factory(pid) for pid in pids}
    quiet: set[int] = set()

    async def count() -> int:
        waiting = [pid for pid in pids if pid not in quiet]
        results = await asyncio.gather(*(checks[pid]() for pid in waiting))
        quiet.update(pid for pid, ok in zip(waiting, results, strict=True) if ok)
        return len(quiet)

    await wait_counting(count, len(pids), timeout, what, interval=0.0)


async def _create_all(client: KubeClient, bodies: list[tuple[str, JSON]], watch: WorkWatch) -> None:
    gate = asyncio.Semaphore(BENCH_CONCURRENCY)

    async def create(namespace: str, body: JSON) -> None:
        async with gate:
            watch.created[(namespace, body["metadata"]["name"])] = time.monotonic()
            await client.create(WORKS, body, namespace=namespace)

    await asyncio.gather(*(create(ns, body) for ns, body in bodies))


def _footprint(cp: EmulatorProcess, members: list[Member], tunnel: Tunnel | None) -> JSON:
    out: JSON = {
        "agents_total_mib": _rss(m.agent_pid for m in members),
        "member_emulators_total_mib": _rss(m.emulator.pid for m in members if m.emulator),
        "control_plane_emulator_mib": _rss([cp.pid]),
    }
    if tunnel is not None:
        out["proxy_server_mib"] = _rss([tunnel.pid])
        proxy_agents = [m.proxy_agent_pid for m in members if m.proxy_agent_pid]
        if proxy_agents:
            out["proxy_agents_total_mib"] = _rss(proxy_agents)
            out["agents_and_proxy_agents_total_mib"] = round(
                out["agents_total_mib"] + out["proxy_agents_total_mib"], 1
            )
    return out


def _tunnel_connections(members: list[Member], tunnel: Tunnel) -> JSON:
    port = tunnel.hub.agent_port
    per_agent = {
        m.cluster: tcp_connections(m.proxy_agent_pid or m.agent_pid, port) for m in members
    }
    return {
        "proxy_server_established_on_agent_port": tcp_connections(tunnel.pid, port, end="local"),
        "from_agents": connection_summary(per_agent),
    }


async def _measure(
    name: str,
    args: argparse.Namespace,
    cp: EmulatorProcess,
    members: list[Member],
    tunnel: Tunnel | None,
    directory: Path,
) -> JSON:
    client = cp.admin
    clusters = [m.cluster for m in members]
    pids = [m.agent_pid for m in members]
    timeout = fleet_timeout(len(members))
    watch, sampler = WorkWatch(), LeaseSampler(client, clusters)
    tasks = [asyncio.create_task(watch.run(client)), asyncio.create_task(sampler.run())]
    try:
        namespace_works = [
            (execution_namespace(c), control_plane_work(c, NAMESPACE_WORK, [_namespace(NAMESPACE)]))
            for c in clusters
        ]
        await _create_all(client, namespace_works, watch)
        keys = [(ns, NAMESPACE_WORK) for ns, _ in namespace_works]
        await wait_counting(watch.count_applied(keys), len(keys), timeout, "namespace Works")
        await _each_quiet_once(pids, timeout, "agents idle")

        print(f"  idle: {args.idle_seconds:.0f} s", flush=True)
        sampler.phase = "idle"
        before = await _requests(cp)
        await asyncio.sleep(args.idle_seconds)  # the measurement window itself
        idle = idle_requests(_delta(await _requests(cp), before), args.idle_seconds / 60, len(pids))
        sampler.phase = ""
        connections = connection_summary(
            {m.cluster: tcp_connections(m.agent_pid, cp.port) for m in members}
        )
        idle_rss = _footprint(cp, members, tunnel)
        idle_tunnel = _tunnel_connections(members, tunnel) if tunnel else None

        print(f"  burst: {args.burst} Works per cluster", flush=True)
        bodies = [
            (execution_namespace(c), control_plane_work(c, f"{PREFIX}{i}", [manifest(i)]))
            for i in range(args.burst)
            for c in clusters
        ]
        burst_keys = [(ns, body["metadata"]["name"]) for ns, body in bodies]
        sampler.phase = "burst"
        started = time.monotonic()
        await _create_all(client, bodies, watch)
        created_in = time.monotonic() - started
        await wait_counting(watch.count_applied(burst_keys), len(burst_keys), timeout, "applied")
        burst_seconds = time.monotonic() - started
        await _each_quiet_once(pids, timeout, "agents idle after the burst")
        sampler.phase = ""
        latencies = sorted(watch.applied[k] - watch.created[k] for k in burst_keys)
        after = {
            "control_plane_connections": connection_summary(
                {m.cluster: tcp_connections(m.agent_pid, cp.port) for m in members}
            ),
            "rss_mib": _footprint(cp, members, tunnel),
        }
        routes = await _routes_answer(cp, members) if tunnel else None
        if tunnel:
            after["tunnel_connections"] = _tunnel_connections(members, tunnel)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
    result: JSON = {
        "agent": name,
        "clusters": len(members),
        "tunnel": bool(tunnel),
        "idle_seconds_measured": args.idle_seconds,
        "idle_control_plane_connections": connections,
        "idle_control_plane_requests": idle,
        "lease_age_idle": age_summary(sampler.ages.get("idle", [])),
        "lease_age_burst": age_summary(sampler.ages.get("burst", [])),
        "burst_works": len(burst_keys),
        "burst_created_in_seconds": round(created_in, 2),
        "burst_applied_after_seconds": round(burst_seconds, 2),
        "burst_latency_p50_ms": round(_percentile(latencies, 0.5) * 1000, 1),
        "burst_latency_p95_ms": round(_percentile(latencies, 0.95) * 1000, 1),
        "burst_latency_max_ms": round(latencies[-1] * 1000, 1),
        "rss_idle_mib": idle_rss,
        "after_burst": after,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f}",
        "logs": str(directory),
    }
    if tunnel:
        result["idle_tunnel_connections"] = idle_tunnel
        result["routes_answering"] = routes
    return result


async def _routes_answer(cp: EmulatorProcess, members: list[Member]) -> JSON:
    """A GET of the `default` namespace through every cluster's proxy route: its Cluster's
    proxyURL (the proxy-server's CONNECT frontend) to its apiEndpoint, TLS verified against its
    Secret's caBundle, the member's own credentials."""
    failures: dict[str, str] = {}
    gate = asyncio.Semaphore(8)

    async def check(member: Member) -> None:
        assert member.emulator is not None
        async with gate:
            try:
                status = await route_get(cp.admin, member.emulator, member.cluster)
            except (httpx.HTTPError, KubeError, OSError, ssl.SSLError) as error:
                failures[member.cluster] = f"{type(error).__name__}: {error}"
                return
            if status != 200:
                failures[member.cluster] = f"HTTP {status}"

    await asyncio.gather(*(check(m) for m in members))
    return {
        "answered": len(members) - len(failures),
        "of": len(members),
        "failures": dict(sorted(failures.items())[:10]),
    }


async def route_get(client: KubeClient, member: EmulatorProcess, cluster: str) -> int:
    obj = await client.get(CLUSTERS, cluster)
    spec = obj.get("spec") or {}
    secret = await client.get(SECRETS, cluster, namespace=LEASE_NAMESPACE)
    bundle = (secret.get("data") or {}).get("caBundle")
    ca = base64.b64decode(bundle) if bundle else member.admin.transport.config.ca_pem
    assert ca is not None
    token = await member.admin.transport.config.token_source.authorization()  # type: ignore[union-attr]
    async with httpx.AsyncClient(
        base_url=spec["apiEndpoint"],
        proxy=spec.get("proxyURL"),
        verify=ssl.create_default_context(cadata=ca.decode()),
        headers={"Authorization": str(token)},
        trust_env=False,
        timeout=60,
    ) as http:
        response = await http.get("/api/v1/namespaces/default")
    return response.status_code


async def fleet(agents: list[str], args: argparse.Namespace) -> list[JSON]:
    """Each agent's fleet in turn. A run that fails is recorded with its error and the next one
    goes on; SIGTERM stops the current run through the same clean-up and skips the rest, the
    runs finished before it kept."""
    if args.tunnel:
        for binary in ("proxy-server", *(["proxy-agent"] if "go" in agents else [])):
            if upstream.binary(binary) is None:
                raise SystemExit(f"--tunnel needs {binary}: {upstream.missing_reason(binary)}")
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    current: list[asyncio.Task[JSON]] = []

    def stop() -> None:
        stopping.set()
        for task in current:
            task.cancel()

    loop.add_signal_handler(signal.SIGTERM, stop)
    runs: list[JSON] = []
    try:
        for name in agents:
            if stopping.is_set():
                break
            task = asyncio.create_task(run_fleet(name, args))
            current[:] = [task]
            try:
                runs.append(await task)
            except asyncio.CancelledError:
                if not stopping.is_set():
                    raise
                runs.append({"agent": name, "clusters": args.clusters, "error": "SIGTERM"})
            except Exception as error:  # the other agents' runs still count
                traceback.print_exc()
                runs.append({"agent": name, "clusters": args.clusters, "error": repr(error)})
        return runs
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tunnel", action="store_true", help="fleet: the stock proxy-server too")
    parser.add_argument(
        "--start-parallel", type=int, default=4, help="fleet: clusters started at once"
    )
