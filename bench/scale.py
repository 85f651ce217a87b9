"""Scale: many Works on one member, a restart over them, many agents on one control plane; this
agent and (with KARMADA_UPSTREAM_BIN) upstream's Go karmada-agent, each on fresh emulators in
processes of their own.

    python -m bench.scale burst   [--works 20000] [--lifted] [--steady-seconds 60]
                                  [--agents ours,go] [--plot docs/scale-latency.png]
    python -m bench.scale restart [--works 20000] [--changes 80] [--signal TERM|KILL]
                                  [--offline-start [--offline-seconds 30]] [--lifted]
                                  [--agents ours,go]
    python -m bench.scale fleet   [--clusters 100] [--burst 10] [--idle-seconds 60]
                                  [--agents ours,go] [--tunnel] [--start-parallel 4]
    (every mode: [--agent-python PY] [--out FILE])

burst: bench.agent_latency's `measure` (half Deployments, half ConfigMaps, created one after
the other; Works/s, latency to Applied=True, CPU, RSS, requests and Events per Work, then all
deleted), with the agent holding the Works for `--steady-seconds` first (idle CPU, requests per
minute), and the share of Works reported before one created earlier. `--plot` draws the
latency distributions of the agents side by side (matplotlib, the `bench` extra).

restart: N Works applied and the agent idle; the agent stopped (SIGTERM, or SIGKILL); while it
is down, a quarter of `--changes` each: member objects deleted, member objects edited, Works
changed, Works created; then started again (with `--offline-start`, while the control plane is
unreachable for `--offline-seconds`). Reported: seconds until the changes are corrected, until every Work is
Applied again, until the agent is quiet (its CPU and requests settled: every Work verified),
and its writes to each side meanwhile (member writes beyond the changes are applies of
unchanged objects; status writes and Events of unchanged Works). Upstream's agent exits when the
control plane is unreachable at its start: it is started again once it answers, as its Pod
would be restarted (without the kubelet's backoff).

fleet (bench.fleet): one control-plane emulator, `--clusters` member emulators (a process each)
and as many agents, started `--start-parallel` at a time; idle, then a burst of `--burst` Works
per cluster: the agents' connections to the control plane (each agent's own), their requests per
minute while idle by verb and resource (which are not Lease renewals), the Lease age p99 idle and
during the burst, the time until every Work is Applied, and the total RSS of the agents and of
the emulators; with `--tunnel`, the stock proxy-server too (ours with their tunnel, the Go agents
with konnectivity's proxy-agent beside each): its connections and RSS, and a GET through every
cluster's proxy route.

The machine this runs on is shared, and every process (emulators, agents, the benchmark) competes
for its cores: the figures are only comparable within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agent.kube.client import KubeClient
from agent.kube.config import load_kubeconfig
from agent.kube.errors import KubeError, NotFoundError
from agent.kube.resources import CONFIGMAPS, DEPLOYMENTS, NAMESPACES
from agent.kube.transport import Transport
from agent.resources import WORKS
from emulator import upstream
from emulator.works import control_plane_work

from .agent_latency import (
    AGENT_USER,
    CLUSTER,
    ES,
    LIFTED_LIMITS,
    NAMESPACE,
    PREFIX,
    AgentUnderTest,
    OurAgent,
    _create_works,
    _delta,
    _requests,
    _requests_settled,
    _settled_factory,
    _WorkTracker,
    cluster_ready,
    cpu_seconds,
    manifest,
    measure,
    member_object,
    rss_mib,
    wait_until,
)
from .chaos import _offline
from .emulators import EmulatorProcess, emulator_process
from .fleet import add_arguments as fleet_arguments
from .fleet import fleet as fleets
from .report import report
from .side_by_side import CONTROL_PLANE_LIFTED, UpstreamAgent

JSON = dict[str, Any]
WRITE_VERBS = ("create", "update", "patch", "delete")
LEASE_NAMESPACE = "karmada-cluster"


def lifted_flags(lifted: bool) -> list[str]:
    return [*CONTROL_PLANE_LIFTED, *LIFTED_LIMITS] if lifted else []


def make_agent(name: str, flags: list[str], python: str) -> AgentUnderTest:
    if name == "go":
        return UpstreamAgent(list(flags))
    return OurAgent(list(flags), python=python)


def available(names: list[str]) -> list[str]:
    if "go" in names and upstream.binary("karmada-agent") is None:
        print(f"go: skipped ({upstream.missing_reason('karmada-agent')})", flush=True)
        return [n for n in names if n != "go"]
    return names


async def kill(agent: AgentUnderTest) -> None:
    """SIGKILL: nothing the agent queued is written."""
    process: Any = getattr(agent, "process", None)
    if isinstance(agent, UpstreamAgent) and process is not None:
        process = process.process
    if process is not None and process.returncode is None:
        process.send_signal(signal.SIGKILL)
        await process.wait()


async def admin_client(emu: EmulatorProcess) -> KubeClient:
    config = await load_kubeconfig(str(emu.admin_kubeconfig), user_agent="bench")
    return KubeClient(Transport(config.with_rate_limits(0, 0)))


def writes(counts: dict[str, int]) -> dict[str, int]:
    return {k: n for k, n in counts.items() if k.split(" ", 1)[0] in WRITE_VERBS}


# --- burst ------------------------------------------------------------------------------------


async def burst(args: argparse.Namespace) -> list[JSON]:
    runs = []
    for name in available(args.agents):
        print(f"burst: {name}, {args.works} Works", flush=True)
        agent = make_agent(name, lifted_flags(args.lifted), args.agent_python)
        result = await measure(
            agent, args.works, idle_seconds=args.idle_seconds, steady_seconds=args.steady_seconds
        )
        result["lifted"] = args.lifted
        runs.append(result)
    if args.plot:
        plot(runs, Path(args.plot))
    return runs


def plot(runs: list[JSON], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_share, by_order) = plt.subplots(1, 2, figsize=(11, 4))
    for run in runs:
        latencies = [ms / 1000 for ms in run["latencies_ms"]]
        ordered = sorted(latencies)
        shares = [(i + 1) / len(ordered) for i in range(len(ordered))]
        label = f"{run['agent']} (p50 {run['latency_p50_ms'] / 1000:.2f} s)"
        by_share.plot(ordered, shares, label=label)
        by_order.plot(range(len(latencies)), latencies, ".", markersize=2, label=run["agent"])
    by_share.set_xlabel("seconds from creation to Applied=True")
    by_share.set_ylabel("share of Works")
    by_share.legend()
    by_order.set_xlabel("Work, in the order created")
    by_order.set_ylabel("seconds to Applied=True")
    by_order.legend()
    works, lifted = runs[0]["works"], " (all limits lifted)" if runs[0].get("lifted") else ""
    fig.suptitle(f"{works} Works{lifted}")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    print(f"plot: {path}", flush=True)


# --- restart ----------------------------------------------------------------------------------


async def restart(args: argparse.Namespace) -> list[JSON]:
    runs = []
    for name in available(args.agents):
        print(f"restart: {name}, {args.works} Works, SIG{args.signal}", flush=True)
        runs.append(await restart_one(name, args))
    return runs


async def restart_one(name: str, args: argparse.Namespace) -> JSON:
    directory = Path(tempfile.mkdtemp(prefix="scale-restart-"))
    flags = lifted_flags(args.lifted)
    async with (
        emulator_process("karmada", "karmada", directory, client_user=AGENT_USER) as cp,
        emulator_process("member", CLUSTER, directory, client_user=AGENT_USER) as member,
    ):
        client, member_admin = await admin_client(cp), await admin_client(member)
        sides = {"control_plane": cp, "member": member}
        tracker = _WorkTracker()
        watcher = asyncio.create_task(tracker.watch(client))
        first = make_agent(name, flags, args.agent_python)
        second: AgentUnderTest | None = None
        try:
            await client.create(NAMESPACES, _namespace(NAMESPACE))
            (directory / "first").mkdir()
            pid = await first.start(cp, member, directory / "first")
            await wait_until(lambda: cluster_ready(client), 120, "Cluster Ready")
            await _member_namespace(client, tracker)
            names = [f"{PREFIX}{i}" for i in range(args.works)]
            started = time.monotonic()
            await _create_works(client, tracker, names, 0.0, started)
            await wait_until(tracker.all_applied(names), 3600, "every Work applied")
            applied_in = time.monotonic() - started
            await wait_until(_settled_factory(pid), 300, "agent idle")
            await wait_until(_requests_settled(sides), 300, "agent's requests settled")
            if args.signal == "KILL":
                await kill(first)
            await first.stop()

            changed = await _change_while_down(client, member_admin, args.works, args.changes)
            before = {side: await _requests(emu) for side, emu in sides.items()}
            if args.offline_start:
                await _offline(cp, args.offline_seconds)
            second = make_agent(name, flags, args.agent_python)
            (directory / "second").mkdir()
            restarted = time.monotonic()
            try:
                pid = await second.start(cp, member, directory / "second")
            except RuntimeError:
                if not args.offline_start:
                    raise
                # Upstream's agent exits when the control plane is unreachable at its start:
                # started again once it answers, as its Pod would be (without the backoff).
                await wait_until(_reachable(client), args.offline_seconds + 60, "back online")
                await second.stop()
                second = make_agent(name, flags, args.agent_python)
                (directory / "second-again").mkdir()
                pid = await second.start(cp, member, directory / "second-again")
            cpu_before = cpu_seconds(pid)
            corrected = _corrected(member_admin, changed, offline=args.offline_start)
            await wait_until(corrected, 3600, "member changes corrected")
            corrected_in = time.monotonic() - restarted
            back_in = None
            if args.offline_start:
                await wait_until(_reachable(client), args.offline_seconds + 60, "back online")
                back_in = time.monotonic() - restarted
            everything = names + changed["new_works"]
            await wait_until(_all_applied_again(client, everything, changed), 3600, "applied")
            applied_again_in = time.monotonic() - restarted
            await wait_until(_corrected(member_admin, changed, offline=False), 600, "corrected")
            await wait_until(_settled_factory(pid), 600, "agent idle after the restart")
            await wait_until(_requests_settled(sides), 600, "requests settled after the restart")
            quiet_in = time.monotonic() - restarted - 2.0
            during = {
                side: _delta(await _requests(emu), before[side]) for side, emu in sides.items()
            }
            return {
                "agent": name,
                "works": args.works,
                "flags": " ".join(flags),
                "signal": f"SIG{args.signal}",
                "offline_start": args.offline_start,
                "changes": {k: len(v) for k, v in changed.items()},
                "first_applied_in_seconds": round(applied_in, 1),
                "changes_corrected_after_seconds": round(corrected_in, 2),
                "control_plane_back_after_seconds": back_in and round(back_in, 2),
                "every_work_applied_after_seconds": round(applied_again_in, 2),
                "quiet_after_seconds": round(quiet_in, 1),
                "agent_cpu_seconds": round(cpu_seconds(pid) - cpu_before, 2),
                "agent_rss_mib": round(rss_mib(pid), 1),
                "member_writes": writes(during["member"]),
                "member_writes_total": sum(writes(during["member"]).values()),
                "control_plane_writes": writes(during["control_plane"]),
                "control_plane_writes_total": sum(writes(during["control_plane"]).values()),
                "logs": str(directory),
            }
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            for agent in (first, second):
                if agent is not None:
                    await agent.stop()
            await client.close()
            await member_admin.close()


async def _member_namespace(
    client: KubeClient, tracker: _WorkTracker | None, cluster: str = CLUSTER
) -> None:
    """The Works' namespace on the member, from a Work of its own (as bench.agent_latency);
    waited for with `tracker` (the Works created after it are retried until it is there)."""
    body = control_plane_work(cluster, "bench-ns", [_namespace(NAMESPACE)])
    await client.create(WORKS, body, namespace=f"karmada-es-{cluster}")
    if tracker is not None:
        await wait_until(tracker.has_applied("bench-ns"), 120, "namespace Work applied")


def _namespace(name: str) -> JSON:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


async def _change_while_down(
    client: KubeClient, member: KubeClient, works: int, changes: int
) -> dict[str, list[Any]]:
    """A quarter of `changes` each: member objects deleted, member objects edited (the
    ConfigMap's data value, the Deployment's replicas), Works changed the same way, Works created.
    Spread over the Works, so that they are not the first in any order."""
    quarter = max(changes // 4, 1)
    step = max(works // (3 * quarter), 1)
    picked = [works - 1 - i * step for i in range(3 * quarter)]
    deleted, edited, changed = (
        picked[:quarter],
        picked[quarter : 2 * quarter],
        picked[2 * quarter :],
    )
    for i in deleted:
        gvr, name = member_object(i)
        await member.delete(gvr, name, namespace=NAMESPACE)
    for i in edited:
        gvr, name = member_object(i)
        await member.patch(gvr, name, _edit(gvr), patch_type="merge", namespace=NAMESPACE)
    for i in changed:
        work = await client.get(WORKS, f"{PREFIX}{i}", namespace=ES)
        target = work["spec"]["workload"]["manifests"][0]
        if target["kind"] == "ConfigMap":
            target["data"] = {"changed": "yes"}
        else:
            target["spec"]["replicas"] = 3
        await client.replace(WORKS, work, namespace=ES)
    new = [f"{PREFIX}new-{i}" for i in range(quarter)]
    for j, name in enumerate(new):
        body = control_plane_work(CLUSTER, name, [manifest(works + j)])
        await client.create(WORKS, body, namespace=ES)
    return {"deleted": deleted, "edited": edited, "changed": changed, "new_works": new}


def _edit(gvr: Any) -> JSON:
    """A change of a field the Work sets (one it does not set is no drift for an apply)."""
    return {"data": {"index": "edited"}} if gvr == CONFIGMAPS else {"spec": {"replicas": 5}}


def _corrected(
    member: KubeClient, changed: dict[str, list[Any]], *, offline: bool
) -> Callable[[], Awaitable[bool]]:
    """Every object deleted is back and every edit undone; unless `offline` (the control plane
    away: only the record is known), also every changed Work's change applied."""

    async def check() -> bool:
        try:
            for i in changed["deleted"] + changed["edited"]:
                gvr, name = member_object(i)
                obj = await member.get(gvr, name, namespace=NAMESPACE)
                if _looks_edited(gvr, obj):
                    return False
            if offline:
                return True
            for i in changed["changed"]:
                gvr, name = member_object(i)
                obj = await member.get(gvr, name, namespace=NAMESPACE)
                if gvr == CONFIGMAPS and (obj.get("data") or {}).get("changed") != "yes":
                    return False
                if gvr == DEPLOYMENTS and (obj.get("spec") or {}).get("replicas") != 3:
                    return False
        except NotFoundError:
            return False
        return True

    return check


def _looks_edited(gvr: Any, obj: JSON) -> bool:
    if gvr == CONFIGMAPS:
        return (obj.get("data") or {}).get("index") == "edited"
    return (obj.get("spec") or {}).get("replicas") == 5


def _all_applied_again(
    client: KubeClient, names: list[str], changed: dict[str, list[Any]]
) -> Callable[[], Awaitable[bool]]:
    """Every Work Applied=True; a changed Work since its change (its Applied condition is not
    rewritten when it stays True, so its object tells: `_corrected`)."""

    async def check() -> bool:
        try:
            listed = await client.list(WORKS, namespace=ES)
        except KubeError:
            return False
        applied = {
            str(w["metadata"]["name"])
            for w in listed["items"]
            if any(
                c.get("type") == "Applied" and c.get("status") == "True"
                for c in (w.get("status") or {}).get("conditions") or ()
            )
        }
        return all(name in applied for name in names)

    return check


def _reachable(client: KubeClient) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        try:
            await client.get(NAMESPACES, NAMESPACE)
        except KubeError:
            return False
        return True

    return check


# --- fleet ------------------------------------------------------------------------------------


async def fleet(args: argparse.Namespace) -> list[JSON]:
    return await fleets(available(args.agents), args)


# --- main -------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("burst", "restart", "fleet"))
    parser.add_argument("--agents", default="ours,go", type=lambda s: s.split(","))
    parser.add_argument("--agent-python", default=sys.executable)
    parser.add_argument("--works", type=int, default=20000)
    parser.add_argument("--lifted", action="store_true", help="every client-side limit lifted")
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--steady-seconds", type=float, default=60.0)
    parser.add_argument("--plot", default="")
    parser.add_argument("--changes", type=int, default=80)
    parser.add_argument("--signal", choices=("TERM", "KILL"), default="TERM")
    parser.add_argument("--offline-start", action="store_true")
    parser.add_argument("--offline-seconds", type=float, default=30.0)
    parser.add_argument("--clusters", type=int, default=100)
    parser.add_argument("--burst", type=int, default=10)
    parser.add_argument("--out", default="")
    fleet_arguments(parser)
    args = parser.parse_args(argv)
    modes = {"burst": burst, "restart": restart, "fleet": fleet}
    runs = asyncio.run(modes[args.mode](args))
    out = args.out or f"bench/results/scale-{args.mode}.json"
    for i, run in enumerate(runs):
        report(run, Path(out).with_suffix(f".{i}.json") if len(runs) > 1 else out)
        print(flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
