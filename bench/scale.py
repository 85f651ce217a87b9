"""Scale: many Works on one member, a restart over them, many agents on one control plane; this
agent and (with KARMADA_UPSTREAM_BIN) upstream's Go karmada-agent, each on fresh emulators in
processes of their own.

    python -m bench.scale burst   [--works 20000] [--lifted] [--steady-seconds 60] [--rate 0]
                                  [--agents ours,go] [--plot docs/scale-latency.png]
    python -m bench.scale restart [--works 20000] [--signals TERM,KILL,offline]
                                  [--changes 80[,80,...]] [--offline-seconds 30] [--lifted]
                                  [--agents ours,go]
    python -m bench.scale fleet   [--clusters 100] [--burst 10] [--idle-seconds 60]
                                  [--agents ours,go] [--tunnel] [--start-parallel 4]
    (every mode: [--agent-python PY] [--out FILE])

burst: bench.agent_latency's `measure` (half Deployments, half ConfigMaps, created one after
the other; Works/s, latency to Applied=True, CPU, RSS, requests and Events per Work, then all
deleted), with `--rate`, Works created at that rate (an arrival rate the same for every agent:
created as fast as the control plane takes them, they come faster when an agent asks less of
it), with the agent holding the Works for `--steady-seconds` first (idle CPU, requests per
minute), and the share of Works reported before one created earlier. `--plot` draws the
latency distributions of the agents side by side (matplotlib, the `bench` extra).

restart: N Works applied and the agent idle, then each restart of `--signals` in turn over that
one applied set (the agent idle again before the next): the agent stopped (TERM: SIGTERM,
KILL: SIGKILL); while it is down, a quarter of `--changes` (one number, or one per restart)
each: member objects deleted, member objects edited, Works changed, Works created, on Works no
other restart touches; then started again (with "+offline", e.g. TERM+offline or KILL+offline,
"offline" alone being TERM+offline: while the control plane is unreachable for
`--offline-seconds`). Reported for each restart separately: seconds until the changes are
corrected, until every Work is Applied again, until the agent is quiet (its CPU and requests
settled: every Work verified), and its writes to each side meanwhile (member writes beyond the
changes are applies of unchanged objects; status writes and Events of unchanged Works).
Upstream's agent exits when the control plane is unreachable at its start: it is started again
once it answers, as its Pod would be restarted (without the kubelet's backoff).

Waits scale with the Works (bench.agent_latency.patience) and long ones print progress, so
that a 20,000-Work run neither times out nor runs silent.

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
import importlib.util
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
from agent.kube.resources import CONFIGMAPS, NAMESPACES
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
    SETTLE_WINDOW,
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
    patience,
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
# The replicas a changed Work's Deployment gets while the agent is down.
CHANGED_REPLICAS = 3


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
            agent,
            args.works,
            rate=args.rate,
            idle_seconds=args.idle_seconds,
            steady_seconds=args.steady_seconds,
        )
        result["lifted"] = args.lifted
        runs.append(result)
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


RESTART_KINDS = ("TERM", "KILL", "TERM+offline", "KILL+offline")


def restart_kinds(text: str) -> list[str]:
    """`--signals`: how each restart stops and starts the agent, in order: TERM or KILL, and
    with "+offline" the control plane unreachable at the start ("offline" alone: TERM+offline)."""
    kinds = ["TERM+offline" if k == "offline" else k for k in text.split(",") if k]
    wrong = [k for k in kinds if k not in RESTART_KINDS]
    if wrong or not kinds:
        raise argparse.ArgumentTypeError(
            f"{','.join(wrong) or 'nothing'}: each is one of {', '.join(RESTART_KINDS)}, offline"
        )
    return kinds


def changes_per_restart(text: str) -> list[int]:
    return [int(n) for n in text.split(",")]


async def restart(args: argparse.Namespace) -> list[JSON]:
    if len(args.changes) not in (1, len(args.signals)):
        raise SystemExit("--changes: one number, or one per restart in --signals")
    runs = []
    for name in available(args.agents):
        print(f"restart: {name}, {args.works} Works, {','.join(args.signals)}", flush=True)
        runs += await restart_one(name, args)
    return runs


async def restart_one(name: str, args: argparse.Namespace) -> list[JSON]:
    """One applied set of Works, then each restart of `--signals` over it in turn (the agent
    idle again before the next)."""
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
        agent = make_agent(name, flags, args.agent_python)
        started_agents = [agent]
        try:
            await client.create(NAMESPACES, _namespace(NAMESPACE))
            (directory / "first").mkdir()
            pid = await agent.start(cp, member, directory / "first")
            await wait_until(lambda: cluster_ready(client), 120, "Cluster Ready")
            await _member_namespace(client, tracker)
            names = [f"{PREFIX}{i}" for i in range(args.works)]
            started = time.monotonic()
            await _create_works(client, tracker, names, 0.0, started)
            wait = patience(args.works, 600)
            count = tracker.count(tracker.applied, names)
            await wait_until(tracker.all_applied(names), wait, "every Work applied", count)
            applied_in = time.monotonic() - started
            await wait_until(_settled_factory(pid), wait, "agent idle")
            await wait_until(_requests_settled(sides), wait, "agent's requests settled")
            runs = []
            per_restart = [
                args.changes[number if len(args.changes) > 1 else 0]
                for number in range(len(args.signals))
            ]
            plan = _ChangePlan(args.works, per_restart)
            for number, kind in enumerate(args.signals):
                changes = per_restart[number]
                print(f"restart {number + 1}/{len(args.signals)}: {kind}", flush=True)
                setting = _Restart(number, len(args.signals), kind, changes, args, tracker, plan)
                run, agent, pid = await setting.run(
                    agent, names, client, member_admin, sides, directory, started_agents
                )
                names = names + run.pop("new_work_names")
                run["first_applied_in_seconds"] = round(applied_in, 1)
                run["logs"] = str(directory)
                runs.append(run)
            return runs
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            for started_agent in started_agents:
                await started_agent.stop()
            await client.close()
            await member_admin.close()


class _Restart:
    """One restart: the agent stopped by `kind`'s signal, `changes` made while it is down
    (Works and objects no earlier restart touched), started again (with "+offline", while the
    control plane is unreachable for --offline-seconds), measured until quiet."""

    def __init__(
        self,
        number: int,
        total: int,
        kind: str,
        changes: int,
        args: argparse.Namespace,
        tracker: _WorkTracker,
        plan: _ChangePlan,
    ) -> None:
        self.tracker = tracker
        self.plan = plan
        self.number = number
        self.total = total
        self.signal, _, offline = kind.partition("+")
        self.offline = bool(offline)
        self.changes = changes
        self.args = args

    async def run(
        self,
        agent: AgentUnderTest,
        names: list[str],
        client: KubeClient,
        member_admin: KubeClient,
        sides: dict[str, EmulatorProcess],
        directory: Path,
        started: list[AgentUnderTest],
    ) -> tuple[JSON, AgentUnderTest, int]:
        """`started`: every agent started is added to it at once, for the caller to stop
        whatever happens."""
        args = self.args
        if self.signal == "KILL":
            await kill(agent)
        await agent.stop()
        changed = await _change_while_down(
            client, member_admin, args.works, self.changes, self.plan
        )
        before = {side: await _requests(emu) for side, emu in sides.items()}
        if self.offline:
            await _offline(sides["control_plane"], args.offline_seconds)
        cp, member = sides["control_plane"], sides["member"]
        agent = make_agent(agent.name, lifted_flags(args.lifted), args.agent_python)
        started.append(agent)
        restarted = time.monotonic()
        try:
            pid = await agent.start(cp, member, _fresh(directory, f"restart-{self.number + 1}"))
        except RuntimeError:
            if not self.offline:
                raise
            # Upstream's agent exits when the control plane is unreachable at its start:
            # started again once it answers, as its Pod would be (without the backoff).
            await wait_until(_reachable(client), args.offline_seconds + 60, "back online")
            await agent.stop()
            agent = make_agent(agent.name, lifted_flags(args.lifted), args.agent_python)
            started.append(agent)
            again = _fresh(directory, f"restart-{self.number + 1}-again")
            pid = await agent.start(cp, member, again)
        cpu_before = cpu_seconds(pid)
        wait = patience(len(names), 600)
        by_kind = _CorrectedByKind(
            member_admin, changed, self.tracker, restarted, offline=self.offline
        )
        await wait_until(by_kind.check, wait, "member changes corrected")
        # (Without the new Works, as this figure was first reported.)
        corrected_in = max(v for k, v in by_kind.after.items() if k != "new_works")
        back_in = None
        if self.offline:
            await wait_until(_reachable(client), args.offline_seconds + 60, "back online")
            back_in = time.monotonic() - restarted
        everything = names + changed["new_works"]
        # Applied=True as of each Work's latest version (from the watch, not a LIST of every
        # Work at each poll); a changed Work's object tells whether its change is applied.
        await wait_until(
            self.tracker.all_applied_now(everything),
            wait,
            "every Work applied",
            self.tracker.count(self.tracker.applied_now, everything),
        )
        applied_again_in = time.monotonic() - restarted
        await wait_until(_corrected(member_admin, changed, offline=False), wait, "corrected")
        await wait_until(_settled_factory(pid), wait, "agent idle after the restart")
        await wait_until(_requests_settled(sides), wait, "requests settled after the restart")
        quiet_in = time.monotonic() - restarted - SETTLE_WINDOW
        during = {side: _delta(await _requests(emu), before[side]) for side, emu in sides.items()}
        run = {
            "agent": agent.name,
            "works": args.works,
            "flags": " ".join(lifted_flags(args.lifted)),
            "restart": f"{self.number + 1} of {self.total}",
            "signal": f"SIG{self.signal}",
            "offline_start": self.offline,
            "changes": {k: len(v) for k, v in changed.items() if isinstance(v, list)},
            "changes_corrected_after_seconds": round(corrected_in, 2),
            "corrected_after_seconds_by_kind": by_kind.after,
            "control_plane_back_after_seconds": back_in and round(back_in, 2),
            "every_work_applied_after_seconds": round(applied_again_in, 2),
            "quiet_after_seconds": round(quiet_in, 1),
            "agent_cpu_seconds": round(cpu_seconds(pid) - cpu_before, 2),
            "agent_rss_mib": round(rss_mib(pid), 1),
            "member_writes": writes(during["member"]),
            "member_writes_total": sum(writes(during["member"]).values()),
            "control_plane_writes": writes(during["control_plane"]),
            "control_plane_writes_total": sum(writes(during["control_plane"]).values()),
            "new_work_names": changed["new_works"],
        }
        return run, agent, pid


def _fresh(directory: Path, name: str) -> Path:
    path = directory / name
    path.mkdir()
    return path


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


def _quarter(changes: int) -> int:
    return max(changes // 4, 1)


async def _change_while_down(
    client: KubeClient, member: KubeClient, works: int, changes: int, plan: _ChangePlan
) -> dict[str, Any]:
    """A quarter of `changes` each: member objects deleted, member objects edited (the
    ConfigMap's data value, the Deployment's replicas), Works changed the same way, Works created.
    Spread over the Works, so that they are not the first in any order; each restart takes
    Works and new names no other restart does (`plan`)."""
    quarter = _quarter(changes)
    picked = plan.pick(3 * quarter)
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
            target["spec"]["replicas"] = CHANGED_REPLICAS
        await client.replace(WORKS, work, namespace=ES)
    new = []
    for _ in range(quarter):
        index = plan.new_index()
        new.append(f"{PREFIX}new-{index}")
        await client.create(
            WORKS, control_plane_work(CLUSTER, new[-1], [manifest(index)]), namespace=ES
        )
    return {"deleted": deleted, "edited": edited, "changed": changed, "new_works": new}


class _ChangePlan:
    """Which Works the restarts of one run change: every pick a Work no earlier pick took,
    spread evenly from the last Work backwards; new Works numbered after the applied ones."""

    def __init__(self, works: int, changes: list[int]) -> None:
        self.picks = sum(3 * _quarter(n) for n in changes)
        if self.picks > works:
            raise SystemExit(f"{works} Works are too few for the changes {changes}")
        self.works = works
        self.step = works // self.picks
        self.picked = 0
        self.created = 0

    def pick(self, count: int) -> list[int]:
        first, self.picked = self.picked, self.picked + count
        return [self.works - 1 - i * self.step for i in range(first, self.picked)]

    def new_index(self) -> int:
        self.created += 1
        return self.works + self.created - 1


def _edit(gvr: Any) -> JSON:
    """A change of a field the Work sets (one it does not set is no drift for an apply)."""
    return {"data": {"index": "edited"}} if gvr == CONFIGMAPS else {"spec": {"replicas": 5}}


def _corrected(
    member: KubeClient, changed: dict[str, Any], *, offline: bool
) -> Callable[[], Awaitable[bool]]:
    """Every object deleted is back and every edit undone; unless `offline` (the control plane
    away: only the record is known), also every changed Work's change applied."""
    kinds = ("deleted", "edited") if offline else ("deleted", "edited", "changed")

    async def check() -> bool:
        for kind in kinds:
            if not await _kind_corrected(member, kind, changed[kind]):
                return False
        return True

    return check


async def _kind_corrected(member: KubeClient, kind: str, indexes: list[int]) -> bool:
    """The member objects of `indexes` as they are once the changes of `kind` are corrected:
    there and not edited ("deleted", "edited"), or with the change of their Work ("changed")."""
    try:
        for i in indexes:
            gvr, name = member_object(i)
            obj = await member.get(gvr, name, namespace=NAMESPACE)
            if not (_has_change(gvr, obj) if kind == "changed" else not _looks_edited(gvr, obj)):
                return False
    except NotFoundError:
        return False
    return True


class _CorrectedByKind:
    """When each kind of change made while the agent was down was first seen corrected, in
    seconds from `since`: deleted and edited objects, changed Works (their objects), new Works
    (Applied=True); `offline`: the first two only (the control plane is away). Checked by
    `check`, which is true once all are (the order in which they were corrected shows whether
    the agent saw to them before its other Works or along with them)."""

    def __init__(
        self,
        member: KubeClient,
        changed: dict[str, Any],
        tracker: _WorkTracker,
        since: float,
        *,
        offline: bool,
    ) -> None:
        self.member, self.changed, self.tracker, self.since = member, changed, tracker, since
        self.kinds = ["deleted", "edited"] + ([] if offline else ["changed", "new_works"])
        self.after: dict[str, float] = {}

    async def check(self) -> bool:
        for kind in self.kinds:
            if kind in self.after:
                continue
            if kind == "new_works":
                done = all(name in self.tracker.applied_now for name in self.changed[kind])
            else:
                done = await _kind_corrected(self.member, kind, self.changed[kind])
            if done:
                self.after[kind] = round(time.monotonic() - self.since, 2)
        return len(self.after) == len(self.kinds)


def _has_change(gvr: Any, obj: JSON) -> bool:
    """The object carries the change made to its Work while the agent was down."""
    if gvr == CONFIGMAPS:
        return (obj.get("data") or {}).get("changed") == "yes"
    return (obj.get("spec") or {}).get("replicas") == CHANGED_REPLICAS


def _looks_edited(gvr: Any, obj: JSON) -> bool:
    if gvr == CONFIGMAPS:
        return (obj.get("data") or {}).get("index") == "edited"
    return (obj.get("spec") or {}).get("replicas") == 5


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
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="burst: Works created per second (0: one after the other, as fast as the control "
        "plane takes them)",
    )
    parser.add_argument("--plot", default="")
    parser.add_argument(
        "--changes",
        type=changes_per_restart,
        default=[80],
        help="changes while the agent is down: one number, or one per restart (80,80,40)",
    )
    parser.add_argument(
        "--signals",
        type=restart_kinds,
        default=["TERM"],
        help="the restarts over one applied set, in order: TERM, KILL, TERM+offline, "
        "KILL+offline (offline: TERM+offline), e.g. TERM,KILL,offline",
    )
    parser.add_argument("--offline-seconds", type=float, default=30.0)
    parser.add_argument("--clusters", type=int, default=100)
    parser.add_argument("--burst", type=int, default=10)
    parser.add_argument("--out", default="")
    fleet_arguments(parser)
    args = parser.parse_args(argv)
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        parser.error("--plot needs matplotlib: pip install -e '.[bench]'")
    modes = {"burst": burst, "restart": restart, "fleet": fleet}
    runs = asyncio.run(modes[args.mode](args))
    out = args.out or f"bench/results/scale-{args.mode}.json"
    for i, run in enumerate(runs):
        report(run, Path(out).with_suffix(f".{i}.json") if len(runs) > 1 else out)
        print(flush=True)
    if args.plot:
        plot(runs, Path(args.plot))  # after the figures are written: a 20,000-Work run is long
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
