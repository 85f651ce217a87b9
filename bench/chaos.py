"""Many faults at once, with numbers: the agent keeps every Work right through a chaos scenario.

    python -m bench.chaos [--works 100] [--control-plane-outage 60] [--member-outage 20]
                          [--watch-cut-every 5] [--agent-arg=... ...] [--out FILE]

The emulated control plane and member each run in a process of their own (bench.emulators),
the real agent in a third (`python -m agent`), its link to the control plane through the test
proxy (emulator.netproxy) at 300 ms RTT and 256 kbit/s. The scenario, in order:

1. faults on both sides for the agent's requests only: a share answer 500, as many 429 with
   Retry-After; every watch stream is cut every `--watch-cut-every` seconds;
2. half a burst of `--works` Works (a ConfigMap or a Deployment each) created at once;
3. both sides' history is compacted (resuming watches get 410 Gone); once that half is
   applied, the agent is killed with SIGKILL, and the other half is created while it is down;
4. the control plane goes offline for `--control-plane-outage` seconds; meanwhile the agent is
   restarted (it serves from its durable record) and the member drifts (an object deleted, a
   Deployment scaled);
5. the member goes offline for `--member-outage` seconds;
6. the faults end (rules removed, watch cuts stopped; the slow link stays).

Also reported: what the slow link carried after the member came back, until every Work
converged: bytes each way at the proxy (TLS and all), and the body bytes of the agent's requests
to the control plane by verb and resource (the emulator's accounting), with their count.

Pass criteria (`failures()`), reported by the benchmark and asserted by tests/e2e/test_chaos.py
at a small size: every Work converges (Applied=True, its member object as specified) within
30 s after the faults end; no Work lost; no member object deleted by the agent; the agent never
exits but for the deliberate kill; Event objects per Work bounded; connection attempts towards
the control plane during its outage bounded (counted at the proxy, the emulator being down).
Prints a table and writes JSON (default bench/results/chaos.json).
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
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agent.kube.client import KubeClient
from agent.kube.errors import KubeError
from agent.kube.resources import CONFIGMAPS, DEPLOYMENTS, EVENTS, NAMESPACES
from agent.resources import WORKS
from emulator.netproxy import LinkProxy
from emulator.works import control_plane_work

from .agent_latency import (
    AGENT_USER,
    CLUSTER,
    ES,
    JSON,
    NAMESPACE,
    agent_arguments,
    applied,
    cluster_ready,
    manifest,
)
from .emulators import EmulatorProcess, emulator_process
from .report import report

MEMBER_KINDS = {"ConfigMap": CONFIGMAPS, "Deployment": DEPLOYMENTS}
PREFIX = "chaos-"
# Pass criteria.
CONVERGE_WITHIN_SECONDS = 30.0
EVENTS_PER_WORK_MAX = 10
OUTAGE_ATTEMPTS_PER_SECOND_MAX = 1.0
# The agent restarted during the outage starts its reconnect backoff afresh: its first steps
# (0.2, 0.4, 0.8, 1.6 s) come faster than one a second.
OUTAGE_ATTEMPTS_AT_START = 4
# A request to an emulator that is down fails at once; one that hangs is a bug worth seeing.
CALL_TIMEOUT = 10.0


@dataclass(frozen=True)
class Scale:
    works: int = 100
    control_plane_outage: float = 60.0
    member_outage: float = 20.0
    watch_cut_every: float = 5.0
    error_share: float = 0.10  # half 500, half 429 with Retry-After
    rtt_seconds: float = 0.3
    bandwidth_bits: int = 256 * 1024
    agent_args: tuple[str, ...] = ()

    @classmethod
    def ci(cls) -> Scale:
        return cls(works=20, control_plane_outage=5.0, member_outage=3.0, watch_cut_every=2.0)


@dataclass
class Clock:
    """Moments of the run (seconds since its start) and what the scenario observed."""

    started: float = field(default_factory=time.monotonic)
    marks: dict[str, float] = field(default_factory=dict)

    def mark(self, what: str) -> float:
        now = time.monotonic()
        self.marks[what] = round(now - self.started, 2)
        return now


async def run(scale: Scale, directory: Path | None = None) -> JSON:
    directory = directory or Path(tempfile.mkdtemp(prefix="agent-chaos-"))
    clock = Clock()
    async with (
        emulator_process("karmada", "karmada", directory, client_user=AGENT_USER) as cp,
        emulator_process("member", CLUSTER, directory, client_user=AGENT_USER) as member,
        LinkProxy(*_host_port(cp.url)) as link,
    ):
        link.latency = scale.rtt_seconds / 2
        link.bandwidth = scale.bandwidth_bits // 8
        agent = AgentProcess(
            directory,
            agent_arguments(
                _through(cp.client_kubeconfig, link, directory),
                member.client_kubeconfig,
                scale.agent_args,
            ),
        )
        await agent.start()
        try:
            return await _scenario(scale, clock, cp, member, link, agent)
        finally:
            await agent.stop()


async def _scenario(
    scale: Scale,
    clock: Clock,
    cp: EmulatorProcess,
    member: EmulatorProcess,
    link: LinkProxy,
    agent: AgentProcess,
) -> JSON:
    admin, member_admin = cp.admin, member.admin
    await _until(lambda: cluster_ready(admin), 90, "Cluster Ready", agent)
    clock.mark("ready")
    namespace = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}]
    # The resource templates' namespace exists on the control plane too, as in Karmada: the
    # Events the agent records about the templates have somewhere to go.
    await admin.create(NAMESPACES, namespace[0])
    await admin.create(WORKS, control_plane_work(CLUSTER, PREFIX + "ns", namespace), namespace=ES)
    await _until(lambda: _applied_names(admin, {PREFIX + "ns"}), 60, "namespace applied", agent)

    # The agent's lists of these, counted by the emulators, tell that it relisted after a 410.
    relisted = ((cp, "works"), (member, "configmaps"))
    for emu in (cp, member):
        await _add_error_rules(emu, scale.error_share)
    cutter = asyncio.create_task(_cut_watches((cp, member), scale.watch_cut_every))
    clock.mark("faults_on")
    try:
        names = {f"{PREFIX}{i}": manifest(i) for i in range(scale.works)}
        # Half the burst before the kill, the rest while the agent is down: the kill comes
        # with Works applied and Works to do, however fast the agent applies them.
        before_kill = dict(list(names.items())[: scale.works // 2])
        after_kill = {name: obj for name, obj in names.items() if name not in before_kill}

        async def create(works: dict[str, dict[str, Any]]) -> None:
            for name, obj in works.items():
                body = control_plane_work(CLUSTER, name, [obj])
                await _call(admin.create(WORKS, body, namespace=ES))

        await create(before_kill)
        clock.mark("burst_created")

        lists_before = {emu.name: await _lists(emu, resource) for emu, resource in relisted}
        for emu in (cp, member):
            await _force_gone(emu)
        clock.mark("history_compacted")

        async def relisted_after_gone() -> bool:
            lists = {emu.name: await _lists(emu, resource) for emu, resource in relisted}
            return all(lists[name] > lists_before[name] for name in lists)

        await _until(relisted_after_gone, 60, "relisted after 410 Gone on both sides", agent)
        clock.mark("relisted_after_gone")

        async def first_half_applied() -> bool:
            return len(await _applied_names(admin, set(before_kill))) == len(before_kill)

        await _until(first_half_applied, 300, "half applied", agent)
        applied_at_kill = await _applied_names(admin, set(names))
        agent.kill()
        clock.mark("agent_killed")
        await create(after_kill)
        clock.mark("rest_of_burst_created")

        cp_down = clock.mark("control_plane_offline")
        await _offline(cp, scale.control_plane_outage)
        await agent.start()
        clock.mark("agent_restarted")
        drifted = await _drift(member_admin, names, applied_at_kill)
        await _until(lambda: _online(cp), scale.control_plane_outage + 30, "control plane back")
        cp_up = clock.mark("control_plane_online")
        outage_attempts = link.attempts_since(_loop_time_of(cp_down))
        attempt_times = [
            round(t - _loop_time_of(cp_down), 1)
            for t in link.opened_at
            if t >= _loop_time_of(cp_down)
        ]
        outage_seconds = cp_up - cp_down

        clock.mark("member_offline")
        await _offline(member, scale.member_outage)
        await _until(lambda: _online(member), scale.member_outage + 30, "member back")
        clock.mark("member_online")
        link_at_member_back = (link.bytes_up, link.bytes_down)
        requests_at_member_back = await _call(cp.requests())
        status_writes = StatusWrites(admin, set(names))
        await status_writes.start()
    finally:
        cutter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await cutter
    fired = {emu.name: await _clear_rules(emu) for emu in (cp, member)}
    faults_end = clock.mark("faults_end")

    converged_at: list[float] = []

    async def converged() -> bool:
        agent.check_alive()
        if len(await _applied_names(admin, set(names))) < len(names):
            return False
        if await _member_mismatches(member_admin, names):
            return False
        converged_at.append(time.monotonic())
        return True

    link_seconds: list[list[float]] = []

    async def sample_link() -> None:
        while True:
            link_seconds.append(
                [
                    round(time.monotonic() - faults_end, 1),
                    round((link.bytes_down - link_at_member_back[1]) / 1000, 1),
                    round((link.bytes_up - link_at_member_back[0]) / 1000, 1),
                ]
            )
            await asyncio.sleep(1.0)  # the sampling period of the timeline

    sampler = asyncio.create_task(sample_link())
    try:
        with contextlib.suppress(TimeoutError):
            await _until(converged, CONVERGE_WITHIN_SECONDS * 4, "every Work converged", agent)
    finally:
        sampler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampler
        await status_writes.stop()
    clock.mark("converged" if converged_at else "gave_up")
    slow_link = {
        "bytes_to_control_plane": link.bytes_up - link_at_member_back[0],
        "bytes_from_control_plane": link.bytes_down - link_at_member_back[1],
        "requests": _request_bytes(requests_at_member_back, await _call(cp.requests())),
        # [seconds after the faults end, KB from the control plane, KB to it] since the
        # member came back, once a second.
        "timeline_kb": link_seconds,
        "work_status_writes": status_writes.summary(faults_end),
    }
    await _until(lambda: _quiet(admin), 60, "the agent's Events settled", agent)

    works_left = {
        w["metadata"]["name"]
        for w in (await admin.list(WORKS, namespace=ES))["items"]
        if w["metadata"]["name"] in names and not w["metadata"].get("deletionTimestamp")
    }
    events, events_by_reason = await _events_per_work(admin, set(names))
    member_deletes = await _agent_deletes(member)
    return {
        "works": scale.works,
        "scale": {k: v for k, v in asdict(scale).items() if k != "agent_args"},
        "agent_args": " ".join(scale.agent_args),
        "converged_seconds_after_faults": (
            round(converged_at[0] - faults_end, 1) if converged_at else None
        ),
        "works_not_converged": sorted(await _not_converged(admin, member_admin, names)),
        "works_lost": len(names) - len(works_left),
        "member_objects_deleted_by_agent": member_deletes,
        "agent_unexpected_exits": agent.unexpected_exits,
        "events_per_work_max": max(events.values(), default=0),
        "events_per_work_mean": round(sum(events.values()) / len(names), 2),
        "events_by_reason": events_by_reason,
        "control_plane_outage_seconds": round(outage_seconds, 1),
        "control_plane_connection_attempts_in_outage": outage_attempts,
        "control_plane_attempts_per_second_in_outage": round(outage_attempts / outage_seconds, 2),
        "control_plane_attempt_moments_in_outage": attempt_times,
        "slow_link_after_member_back": slow_link,
        "slow_link_total_bytes": {"to_control_plane": link.bytes_up, "from": link.bytes_down},
        "works_applied_at_kill": len(applied_at_kill),
        "member_drift_during_outage": drifted,
        "faults_fired": fired,
        "timeline_seconds": clock.marks,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
    }


def failures(result: JSON) -> list[str]:
    """The pass criteria the result misses (empty: passed)."""
    out = []
    took = result["converged_seconds_after_faults"]
    if took is None or took > CONVERGE_WITHIN_SECONDS:
        out.append(f"converged after {took} s (limit {CONVERGE_WITHIN_SECONDS})")
    if result["works_not_converged"]:
        out.append(f"not converged: {result['works_not_converged']}")
    for key in ("works_lost", "member_objects_deleted_by_agent", "agent_unexpected_exits"):
        if result[key]:
            out.append(f"{key}: {result[key]}")
    if result["events_per_work_max"] > EVENTS_PER_WORK_MAX:
        out.append(f"{result['events_per_work_max']} Events for one Work")
    attempts, seconds = (
        result["control_plane_connection_attempts_in_outage"],
        result["control_plane_outage_seconds"],
    )
    if attempts > OUTAGE_ATTEMPTS_AT_START + OUTAGE_ATTEMPTS_PER_SECOND_MAX * seconds:
        out.append(f"{attempts} connection attempts in a {seconds} s outage")
    return out


# --- the agent as a process of its own ------------------------------------------------------


class AgentProcess:
    def __init__(self, directory: Path, args: list[str]) -> None:
        self.args = args
        self.log_path = directory / "agent.log"
        self.process: asyncio.subprocess.Process | None = None
        self.unexpected_exits = 0
        self._log = self.log_path.open("ab")

    async def start(self) -> None:
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agent", *self.args, stdout=self._log, stderr=self._log
        )

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def kill(self) -> None:
        self.check_alive()
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process = None  # its exit is the deliberate one

    def check_alive(self) -> None:
        if self.process is not None and self.process.returncode is not None:
            self.unexpected_exits += 1
            code, self.process = self.process.returncode, None
            raise AgentExitedError(f"the agent exited with {code}; see {self.log_path}")

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.terminate()
            await self.process.wait()
        self._log.close()


class AgentExitedError(RuntimeError):
    pass


class StatusWrites:
    """The Works' status changes the control plane stored, watched (as its admin, not over the
    slow link) from the member's return: how many, of which Works, what each one changed."""

    def __init__(self, admin: KubeClient, names: set[str]) -> None:
        self.admin = admin
        self.names = names
        self.writes: list[tuple[float, str, list[str]]] = []
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        listed = await _call(self.admin.list(WORKS, namespace=ES))
        known = {w["metadata"]["name"]: w for w in listed["items"]}
        self._task = asyncio.create_task(self._watch(known, listed["metadata"]["resourceVersion"]))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _watch(self, known: dict[str, JSON], version: str) -> None:
        async with self.admin.watch(WORKS, namespace=ES, resource_version=version) as events:
            async for event in events:
                work = event.get("object") or {}
                name = (work.get("metadata") or {}).get("name")
                if event.get("type") != "MODIFIED" or name not in self.names:
                    continue
                before = known.get(name) or {}
                known[name] = work
                changed = _status_changes(before.get("status") or {}, work.get("status") or {})
                if changed:
                    self.writes.append((time.monotonic(), name, changed))

    def summary(self, since: float) -> JSON:
        by_change: dict[str, int] = {}
        per_work: dict[str, int] = {}
        for _, name, changed in self.writes:
            per_work[name] = per_work.get(name, 0) + 1
            for what in changed:
                by_change[what] = by_change.get(what, 0) + 1
        moments = [round(t - since, 1) for t, _, _ in self.writes]
        return {
            "writes": len(self.writes),
            "works": len(per_work),
            "works_written_more_than_once": sum(1 for n in per_work.values() if n > 1),
            "by_change": dict(sorted(by_change.items(), key=lambda kv: -kv[1])),
            "first_last_seconds_after_faults": [min(moments), max(moments)] if moments else [],
        }


def _status_changes(before: JSON, after: JSON) -> list[str]:
    """What a status write changed: each condition type by what changed in it, manifestStatuses
    (added, or changed), any other key."""
    out = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        if key == "conditions":
            old_by = {c.get("type"): c for c in old or []}
            for condition in new or []:
                was = old_by.get(condition.get("type")) or {}
                fields = [
                    f for f in ("status", "reason", "message") if was.get(f) != condition.get(f)
                ]
                if fields:
                    out.append(f"{condition.get('type')} {'/'.join(fields)}")
        elif key == "manifestStatuses" and old and new and len(old) == len(new):
            fields = sorted(
                {
                    f
                    for o, n in zip(old, new, strict=True)
                    for f in set(o) | set(n)
                    if o.get(f) != n.get(f)
                }
            )
            out.append(f"manifestStatuses {'/'.join(fields)}")
        else:
            out.append(f"{key} {'added' if old is None else 'changed'}")
    return out


# --- faults over HTTP -------------------------------------------------------------------------


async def _control(emu: EmulatorProcess, method: str, what: str, body: JSON | None = None) -> Any:
    """A request to /_emulator/faults[/what] (the emulator's fault control)."""
    response = await emu.admin.transport.request(
        method,
        "/_emulator/faults" + (f"/{what}" if what else ""),
        body=json.dumps(body).encode() if body is not None else None,
        content_type="application/json" if body is not None else None,
    )
    return response.json()


async def _add_error_rules(emu: EmulatorProcess, share: float) -> None:
    for rule in (
        {"code": 500, "probability": share / 2},
        {"code": 429, "retryAfterSeconds": 1, "probability": share / 2},
    ):
        await _control(emu, "POST", "rules", {**rule, "user": AGENT_USER})


async def _clear_rules(emu: EmulatorProcess) -> int:
    rules = (await _control(emu, "GET", "rules"))["rules"]
    await _control(emu, "DELETE", "rules")
    return sum(int(r["fired"]) for r in rules)


async def _cut_watches(emus: tuple[EmulatorProcess, ...], every: float) -> None:
    while True:
        await asyncio.sleep(every)  # the fault's own period
        for emu in emus:
            # An emulator that is offline has no watches to cut.
            with contextlib.suppress(Exception):
                await _call(_control(emu, "POST", "drop-watches", {}))


async def _force_gone(emu: EmulatorProcess) -> None:
    """Compact the history past every watcher's position, then cut the watches: those that
    resume from where they were get 410 Gone. The write first moves the revision on (on an
    object no watch of the agent selects)."""
    marker = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "chaos-marker"}}
    with contextlib.suppress(Exception):
        await emu.admin.create(CONFIGMAPS, marker, namespace="default")
    await emu.admin.patch(
        CONFIGMAPS, "chaos-marker", {"data": {"t": str(time.time())}}, patch_type="merge",
        namespace="default",
    )  # fmt: skip
    await _control(emu, "POST", "compact", {})
    await _control(emu, "POST", "drop-watches", {})


async def _offline(emu: EmulatorProcess, seconds: float) -> None:
    await _control(emu, "POST", "offline", {"seconds": seconds})
    await _until(lambda: _offline_now(emu), 10, f"{emu.name} offline")


async def _offline_now(emu: EmulatorProcess) -> bool:
    try:
        await _call(_control(emu, "GET", ""))
    except Exception:
        return True
    return False


async def _online(emu: EmulatorProcess) -> bool:
    try:
        state = await _call(_control(emu, "GET", ""))
    except Exception:
        return False
    return not state["offline"]


def _request_bytes(before: list[JSON], after: list[JSON]) -> dict[str, dict[str, int]]:
    """What the agent asked of the control plane between two readings of its accounting, by
    `verb resource[/subresource]`: requests and body bytes each way, the heaviest first."""

    def by_kind(rows: list[JSON]) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for row in rows:
            if "path" in row:
                kind = f"{row['verb']} {row['path']}"
            else:
                sub = f"/{row['subresource']}" if row.get("subresource") else ""
                kind = f"{row['verb']} {row.get('resource', '')}{sub}"
            totals = out.setdefault(kind, [0, 0, 0])
            for i, field_ in enumerate(("count", "requestBytes", "responseBytes")):
                totals[i] += int(row.get(field_, 0))
        return out

    start, end = by_kind(before), by_kind(after)
    delta = {
        kind: [n - m for n, m in zip(totals, start.get(kind, [0, 0, 0]), strict=True)]
        for kind, totals in end.items()
    }
    ranked = sorted(delta.items(), key=lambda kv: -(kv[1][1] + kv[1][2]))
    return {
        kind: {"requests": n, "request_bytes": sent, "response_bytes": answered}
        for kind, (n, sent, answered) in ranked
        if n or sent or answered
    }


async def _lists(emu: EmulatorProcess, resource: str) -> int:
    """Lists of `resource`, a watch that starts with the current state (watch-list) included."""
    rows = [r for r in await _call(emu.requests()) if r.get("resource") == resource]
    return sum(int(r["count"]) for r in rows if r["verb"] == "list") + sum(
        int(r.get("initialEvents", 0)) for r in rows
    )


async def _agent_deletes(emu: EmulatorProcess) -> int:
    """Deletions by the agent of the kinds the Works carry (none of those Works was deleted)."""
    resources = {gvr.resource for gvr in MEMBER_KINDS.values()}
    return sum(
        int(row["count"])
        for row in await emu.requests()
        if row["verb"] in ("delete", "deletecollection") and row.get("resource") in resources
    )


# --- what the scenario observes ---------------------------------------------------------------


async def _applied_names(admin: KubeClient, names: set[str]) -> set[str]:
    works = (await _call(admin.list(WORKS, namespace=ES)))["items"]
    return {w["metadata"]["name"] for w in works if w["metadata"]["name"] in names and applied(w)}


async def _member_mismatches(member: KubeClient, names: dict[str, JSON]) -> list[str]:
    """Works whose member object is missing or differs from its manifest."""
    live: dict[tuple[str, str], JSON] = {}
    for kind, gvr in MEMBER_KINDS.items():
        for obj in (await _call(member.list(gvr, namespace=NAMESPACE)))["items"]:
            live[(kind, obj["metadata"]["name"])] = obj
    return [
        name
        for name, obj in names.items()
        if not _as_specified(obj, live.get((obj["kind"], obj["metadata"]["name"])))
    ]


async def _not_converged(admin: KubeClient, member: KubeClient, names: dict[str, JSON]) -> set[str]:
    done = await _applied_names(admin, set(names))
    return (set(names) - done) | set(await _member_mismatches(member, names))


def _as_specified(manifest_: JSON, live: JSON | None) -> bool:
    if live is None or live["metadata"].get("deletionTimestamp"):
        return False
    return all(_subset(manifest_.get(k), live.get(k)) for k in ("spec", "data") if k in manifest_)


def _subset(want: Any, have: Any) -> bool:
    """`have` carries everything of `want` (the server adds defaults)."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(_subset(v, have.get(k)) for k, v in want.items())
    if isinstance(want, list):
        return (
            isinstance(have, list)
            and len(want) == len(have)
            and all(_subset(w, h) for w, h in zip(want, have, strict=True))
        )
    return bool(want == have)


async def _drift(member: KubeClient, names: dict[str, JSON], applied_: set[str]) -> list[str]:
    """While the control plane is down: delete one applied ConfigMap, scale one Deployment."""
    done: list[str] = []
    for name in sorted(applied_):
        obj = names[name]
        kind, obj_name = obj["kind"], obj["metadata"]["name"]
        if kind == "ConfigMap" and not any(d.startswith("deleted") for d in done):
            await member.delete(CONFIGMAPS, obj_name, namespace=NAMESPACE)
            done.append(f"deleted ConfigMap {obj_name}")
        elif kind == "Deployment" and not any(d.startswith("scaled") for d in done):
            await member.patch(
                DEPLOYMENTS, obj_name, {"spec": {"replicas": 3}}, patch_type="merge",
                namespace=NAMESPACE,
            )  # fmt: skip
            done.append(f"scaled Deployment {obj_name} to 3")
    return done


async def _events_per_work(
    admin: KubeClient, names: set[str]
) -> tuple[dict[str, int], dict[str, int]]:
    """Event objects about the Works: per Work, and by reason."""
    per_work: dict[str, int] = {}
    by_reason: dict[str, int] = {}
    for event in (await admin.list(EVENTS, namespace=ES))["items"]:
        name = str((event.get("involvedObject") or {}).get("name") or "")
        if name in names:
            per_work[name] = per_work.get(name, 0) + 1
            reason = str(event.get("reason") or "")
            by_reason[reason] = by_reason.get(reason, 0) + 1
    return per_work, dict(sorted(by_reason.items(), key=lambda kv: -kv[1]))


async def _quiet(admin: KubeClient) -> bool:
    """True once the number of Events stayed the same over a second."""
    before = len((await admin.list(EVENTS, namespace=ES))["items"])
    await asyncio.sleep(1.0)  # sampling window for the Event count, not synchronisation
    return len((await admin.list(EVENTS, namespace=ES))["items"]) == before


# --- plumbing -----------------------------------------------------------------------------------


async def _call(call: Awaitable[Any]) -> Any:
    return await asyncio.wait_for(call, CALL_TIMEOUT)


async def _until(
    check: Callable[[], Awaitable[object]],
    timeout: float,
    what: str,
    agent: AgentProcess | None = None,
) -> None:
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        if agent is not None:
            agent.check_alive()
        try:
            if await check():
                return
        except (OSError, TimeoutError, KubeError) as exc:
            last = exc  # not yet: a side is down or answers with an injected fault
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} (last error: {last!r})")
        await asyncio.sleep(0.2)  # poll interval of a wait-for-condition loop


def _loop_time_of(moment: float) -> float:
    """A time.monotonic() moment on the event loop's clock (the proxy's)."""
    return asyncio.get_running_loop().time() - (time.monotonic() - moment)


def _host_port(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("https://").rsplit(":", 1)
    return host, int(port)


def _through(kubeconfig: Path, link: LinkProxy, directory: Path) -> Path:
    config = yaml.safe_load(kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://{link.address}"
    out = directory / f"{kubeconfig.stem}-via-link.kubeconfig"
    out.write_text(yaml.safe_dump(config))
    out.chmod(0o600)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    defaults = Scale()
    parser.add_argument("--works", type=int, default=defaults.works)
    parser.add_argument("--control-plane-outage", type=float, default=defaults.control_plane_outage)
    parser.add_argument("--member-outage", type=float, default=defaults.member_outage)
    parser.add_argument("--watch-cut-every", type=float, default=defaults.watch_cut_every)
    parser.add_argument("--agent-arg", action="append", default=[], help="extra agent flag")
    parser.add_argument("--out", default="bench/results/chaos.json")
    args = parser.parse_args(argv)
    scale = Scale(
        works=args.works,
        control_plane_outage=args.control_plane_outage,
        member_outage=args.member_outage,
        watch_cut_every=args.watch_cut_every,
        agent_args=tuple(args.agent_arg),
    )
    result = asyncio.run(run(scale))
    missed = failures(result)
    result["pass"] = not missed
    result["missed"] = missed
    report(result, args.out)
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
