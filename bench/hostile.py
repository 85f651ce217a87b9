"""What a hostile member or user can provoke, in request rates: the cases of issue 25.

    python -m bench.hostile [--case NAME ...] [--window 10] [--out FILE]

The emulated control plane and member each run in a process of their own (bench.emulators),
the real agent in a third (`python -m agent`, default flags). Each case creates its Work, lets
it settle for `--settle` seconds, then counts over `--window` seconds what the agent asks of each
side (the emulators' request accounting, the agent having an identity of its own) and its CPU
time (/proc), and reads what the Work says. The cases:

- duplicate: one ClusterRole twice in a Work, the second copy with a stray metadata.namespace
  and other rules;
- dangling-owner: a ConfigMap whose ownerReferences name a UID that does not exist on the
  member (its garbage collector deletes it after every apply);
- owner-deleted: a ConfigMap owned by a member ConfigMap; the owner deleted once it is applied;
- fighter: another controller puts its own value back on every change of the object;
- human-edits: someone edits the object every 3 s; reported: how long each edit stays;
- status-too-large: a Work so close to etcd's 1.5 MiB limit that its status does not fit.

Reported per case: member writes/s and control-plane writes/s (by verb and resource), the
agent's CPU share, Warning Events, and the Work's conditions. Prints a table and writes JSON
(default bench/results/hostile.json).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.kube.client import GVR, KubeClient
from agent.kube.errors import KubeError, NotFoundError
from agent.kube.resources import CONFIGMAPS, EVENTS
from agent.resources import WORKS
from emulator.storage import ETCD_MAX_REQUEST_BYTES
from emulator.works import control_plane_work, deployment

from .agent_latency import (
    AGENT_USER,
    CLUSTER,
    ES,
    JSON,
    agent_arguments,
    cluster_ready,
    cpu_seconds,
)
from .chaos import AgentProcess
from .emulators import EmulatorProcess, emulator_process
from .report import report

CLUSTERROLES = GVR("rbac.authorization.k8s.io", "v1", "clusterroles")
NAMESPACE = "default"
WRITES = ("create", "update", "patch", "delete", "deletecollection")
HUMAN_EDIT_EVERY = 3.0
CASES = (
    "duplicate",
    "dangling-owner",
    "owner-deleted",
    "fighter",
    "human-edits",
    "status-too-large",
)


@dataclass(frozen=True)
class Setup:
    window: float = 10.0
    settle: float = 3.0


@dataclass
class Sides:
    cp: EmulatorProcess
    member: EmulatorProcess
    agent: AgentProcess

    @property
    def admin(self) -> KubeClient:
        return self.cp.admin

    @property
    def member_admin(self) -> KubeClient:
        return self.member.admin


# --- the cases ----------------------------------------------------------------------------------


def _cm(name: str, data: JSON | None = None, **meta: Any) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NAMESPACE, **meta},
        "data": data or {"k": "v"},
    }


async def case_duplicate(sides: Sides, setup: Setup) -> JSON:
    def role(verbs: list[str], **meta: Any) -> JSON:
        return {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "hostile-dupcr", **meta},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs}],
        }

    manifests = [role(["get"]), role(["get", "list"], namespace="whatever")]
    return await _measure(sides, setup, "hostile-duplicate", manifests)


async def case_dangling_owner(sides: Sides, setup: Setup) -> JSON:
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost", "uid": str(uuid.uuid4())}
    manifests = [_cm("hostile-dangling", ownerReferences=[owner])]
    return await _measure(sides, setup, "hostile-dangling", manifests)


async def case_owner_deleted(sides: Sides, setup: Setup) -> JSON:
    owner = await sides.member_admin.create(CONFIGMAPS, _cm("hostile-owner"), namespace=NAMESPACE)
    ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "hostile-owner",
        "uid": owner["metadata"]["uid"],
    }
    manifests = [_cm("hostile-owned", ownerReferences=[ref])]

    async def delete_owner() -> None:
        await _until(lambda: _exists(sides.member_admin, CONFIGMAPS, "hostile-owned"), 30, "owned")
        await sides.member_admin.delete(CONFIGMAPS, "hostile-owner", namespace=NAMESPACE)

    return await _measure(sides, setup, "hostile-owned", manifests, before=delete_owner)


async def case_fighter(sides: Sides, setup: Setup) -> JSON:
    name = "hostile-fought"
    manifests = [_cm(name, {"k": "ours"})]
    stop = asyncio.Event()

    async def fight() -> None:
        # Another controller: whenever the object is not as it wants it, it writes it back.
        member = sides.member_admin
        while not stop.is_set():
            with contextlib.suppress(KubeError):
                live = await member.get(CONFIGMAPS, name, namespace=NAMESPACE)
                if (live.get("data") or {}).get("k") != "theirs":
                    await member.patch(
                        CONFIGMAPS, name, {"data": {"k": "theirs"}}, patch_type="merge",
                        namespace=NAMESPACE, field_manager="other-controller",
                    )  # fmt: skip
            await asyncio.sleep(0.02)  # the other controller's own resync pace

    async def start() -> None:
        await _until(lambda: _exists(sides.member_admin, CONFIGMAPS, name), 30, "applied")
        tasks.append(asyncio.create_task(fight()))

    tasks: list[asyncio.Task[None]] = []
    try:
        return await _measure(sides, setup, name, manifests, before=start)
    finally:
        stop.set()
        for task in tasks:
            await task


async def case_human_edits(sides: Sides, setup: Setup) -> JSON:
    name = "hostile-edited"
    manifests = [_cm(name, {"k": "ours"})]
    kept: list[float] = []
    stop = asyncio.Event()

    async def edit() -> None:
        member = sides.member_admin
        while not stop.is_set():
            await member.patch(
                CONFIGMAPS, name, {"data": {"k": "edited"}}, patch_type="merge",
                namespace=NAMESPACE, field_manager="kubectl-edit",
            )  # fmt: skip
            edited = time.monotonic()
            while (await member.get(CONFIGMAPS, name, namespace=NAMESPACE))["data"]["k"] != "ours":
                if time.monotonic() - edited > HUMAN_EDIT_EVERY:
                    break
                await asyncio.sleep(0.01)  # poll interval of a wait-for-condition loop
            kept.append(round(time.monotonic() - edited, 3))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), HUMAN_EDIT_EVERY)

    async def start() -> None:
        await _until(lambda: _exists(sides.member_admin, CONFIGMAPS, name), 30, "applied")
        tasks.append(asyncio.create_task(edit()))

    tasks: list[asyncio.Task[None]] = []
    try:
        result = await _measure(sides, setup, name, manifests, before=start)
    finally:
        stop.set()
        for task in tasks:
            await task
    result["edit_put_back_after_seconds"] = kept
    return result


async def case_status_too_large(sides: Sides, setup: Setup) -> JSON:
    """Two ConfigMaps filling the Work (each under the 1 MiB a ConfigMap may hold) so that the
    Work fits in etcd with a little room (its conditions fit), but not with the status of its
    three Deployments as well."""
    name = "hostile-large"
    room = 1300
    blobs = [_cm(f"hostile-large-{i}", {"blob": ""}) for i in range(2)]
    deployments = [deployment(f"hostile-large-{i}", namespace=NAMESPACE) for i in range(3)]
    work = control_plane_work(CLUSTER, name, [*blobs, *deployments])
    size = len(json.dumps(_stored(work), separators=(",", ":")).encode())
    fill = ETCD_MAX_REQUEST_BYTES - room - size
    for i, manifest in enumerate(work["spec"]["workload"]["manifests"][:2]):
        manifest["data"]["blob"] = "x" * (fill // 2 + (fill % 2 if i else 0))
    return await _measure(sides, setup, name, work=work)


def _stored(work: JSON) -> JSON:
    """What the API server stores of a new Work, roughly: with its server-set metadata."""
    meta = {
        **work["metadata"],
        "uid": str(uuid.uuid4()),
        "resourceVersion": "1234567",
        "generation": 1,
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "managedFields": [
            {
                "manager": "bench",
                "operation": "Update",
                "apiVersion": "work.karmada.io/v1alpha1",
                "time": "2026-01-01T00:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {}},
            }
        ],
    }
    return {k: v for k, v in {**work, "metadata": meta}.items() if k not in ("apiVersion", "kind")}


# --- measuring -------------------------------------------------------------------------------


async def _measure(
    sides: Sides,
    setup: Setup,
    name: str,
    manifests: list[JSON] | None = None,
    *,
    work: JSON | None = None,
    before: Callable[[], Awaitable[None]] | None = None,
) -> JSON:
    admin = sides.admin
    work = work or control_plane_work(CLUSTER, name, manifests or [])
    await admin.create(WORKS, work, namespace=ES)
    if before is not None:
        await before()
    await asyncio.sleep(setup.settle)  # the case runs on its own for a while before counting
    pid = sides.agent.pid
    counted = {
        "member": await _writes(sides.member),
        "control_plane": await _writes(sides.cp),
    }
    cpu = cpu_seconds(pid)
    started = time.monotonic()
    await asyncio.sleep(setup.window)  # the measurement window itself
    seconds = time.monotonic() - started
    cpu_share = (cpu_seconds(pid) - cpu) / seconds
    rates = {}
    for side, emu in (("member", sides.member), ("control_plane", sides.cp)):
        after = await _writes(emu)
        delta = {k: v - counted[side].get(k, 0) for k, v in after.items()}
        rates[side] = {k: round(v / seconds, 1) for k, v in sorted(delta.items()) if v}
    current = await admin.get(WORKS, name, namespace=ES)
    result: JSON = {
        "member_writes_per_second": round(sum(rates["member"].values()), 1),
        "control_plane_writes_per_second": round(sum(rates["control_plane"].values()), 1),
        "member_writes": rates["member"],
        "control_plane_writes": rates["control_plane"],
        "agent_cpu_share": round(cpu_share, 3),
        "work_conditions": [
            {k: c.get(k) for k in ("type", "status", "reason", "message")}
            for c in (current.get("status") or {}).get("conditions") or []
        ],
        "manifest_statuses": len((current.get("status") or {}).get("manifestStatuses") or []),
        "reflected_statuses": sum(
            1 for e in (current.get("status") or {}).get("manifestStatuses") or [] if "status" in e
        ),
        "status_bytes": len(json.dumps(current.get("status") or {}, separators=(",", ":"))),
        "warning_events": await _warnings(admin, name),
    }
    await _delete_work(sides, name)
    return result


async def _writes(emu: EmulatorProcess) -> dict[str, int]:
    """The agent's writes so far, by `verb resource[/subresource]`."""
    out: dict[str, int] = {}
    for row in await emu.requests():
        if row["verb"] not in WRITES:
            continue
        resource = row.get("resource", "") + (
            f"/{row['subresource']}" if row.get("subresource") else ""
        )
        key = f"{row['verb']} {resource}"
        out[key] = out.get(key, 0) + int(row["count"])
    return out


async def _warnings(admin: KubeClient, name: str) -> list[JSON]:
    listed = await admin.list(EVENTS, namespace=ES)
    return [
        {"reason": e.get("reason"), "count": e.get("count"), "message": e.get("message")}
        for e in listed["items"]
        if (e.get("involvedObject") or {}).get("name") == name and e.get("type") == "Warning"
    ]


async def _delete_work(sides: Sides, name: str) -> None:
    with contextlib.suppress(NotFoundError):
        await sides.admin.delete(WORKS, name, namespace=ES)

    async def gone() -> bool:
        return not await _exists(sides.admin, WORKS, name, ES)

    with contextlib.suppress(TimeoutError):
        await _until(gone, 60, f"Work {name} deleted")


async def _exists(client: KubeClient, gvr: GVR, name: str, namespace: str = NAMESPACE) -> bool:
    try:
        await client.get(gvr, name, namespace=namespace if gvr != CLUSTERROLES else None)
    except NotFoundError:
        return False
    return True


async def _until(check: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        await asyncio.sleep(0.05)  # poll interval of a wait-for-condition loop


CASE_FUNCTIONS: dict[str, Callable[[Sides, Setup], Awaitable[JSON]]] = {
    "duplicate": case_duplicate,
    "dangling-owner": case_dangling_owner,
    "owner-deleted": case_owner_deleted,
    "fighter": case_fighter,
    "human-edits": case_human_edits,
    "status-too-large": case_status_too_large,
}


async def run(cases: list[str], setup: Setup, agent_args: list[str]) -> JSON:
    directory = Path(tempfile.mkdtemp(prefix="agent-hostile-"))
    async with (
        emulator_process("karmada", "karmada", directory, client_user=AGENT_USER) as cp,
        emulator_process("member", CLUSTER, directory, client_user=AGENT_USER) as member,
    ):
        agent = AgentProcess(
            directory,
            agent_arguments(cp.client_kubeconfig, member.client_kubeconfig, agent_args),
        )
        await agent.start()
        try:
            sides = Sides(cp, member, agent)
            await _until(lambda: cluster_ready(cp.admin), 60, "Cluster Ready")
            results: JSON = {}
            for case in cases:
                results[case] = await CASE_FUNCTIONS[case](sides, setup)
                agent.check_alive()
        finally:
            await agent.stop()
    results["machine"] = (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    results["window_seconds"] = setup.window
    results["agent_log"] = str(agent.log_path)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", choices=CASES, help="default: all")
    parser.add_argument("--window", type=float, default=Setup.window)
    parser.add_argument("--settle", type=float, default=Setup.settle)
    parser.add_argument("--agent-arg", action="append", default=[], help="extra agent flag")
    parser.add_argument("--out", default="bench/results/hostile.json")
    args = parser.parse_args(argv)
    result = asyncio.run(
        run(args.case or list(CASES), Setup(args.window, args.settle), args.agent_arg)
    )
    report(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
