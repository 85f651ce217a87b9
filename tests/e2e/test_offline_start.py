"""Offline durability, end to end: an agent that starts while the control plane is unreachable
serves the Works it recorded on the member (drift put back, health observed), then registers,
reports what it observed in one status write per Work, and carries on by itself."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent.app import Agent
from agent.controllers.execution import ExecutionController
from agent.kube.client import KubeClient
from agent.kube.errors import NotFoundError
from agent.kube.resources import CONFIGMAPS, DEPLOYMENTS, LEASES
from agent.resources import WORKS
from agent.sources.work_records import WorkRecords
from emulator.emulator import run_emulator
from emulator.works import configmap, control_plane_work

from .support import client_for, cluster_ready, eventually, running_agent, work_applied

CLUSTER = "member1"
ES = f"karmada-es-{CLUSTER}"


def deployment(name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
            },
        },
    }


@contextlib.asynccontextmanager
async def agent_running(karmada_kc: Path, member_kc: Path) -> AsyncIterator[Agent]:
    async with running_agent(
        karmada_kc,
        member_kc,
        CLUSTER,
        "--cluster-status-update-frequency=1s",
        "--cluster-lease-duration=4s",
    ) as (task, agent):
        yield agent
        assert not task.done(), f"the agent exited with {task.result()}"


async def _true(value: bool) -> bool:
    return value


async def records(member: KubeClient) -> set[str]:
    """The Works an agent starting now would find recorded."""
    try:
        recorded = await WorkRecords(member, "karmada-system", CLUSTER).load()
    except NotFoundError:
        return set()
    return {w["metadata"]["name"] for w in recorded}


async def healthy(admin: KubeClient, name: str) -> bool:
    work = await admin.get(WORKS, name, namespace=ES)
    statuses = (work.get("status") or {}).get("manifestStatuses") or []
    return bool(statuses) and all(s.get("health") == "Healthy" for s in statuses)


async def configmap_data(member: KubeClient, name: str) -> dict[str, str] | None:
    try:
        return dict((await member.get(CONFIGMAPS, name, namespace="default"))["data"])
    except NotFoundError:
        return None


@pytest.mark.timeout(120)
@pytest.mark.parametrize("first_read_fails", [False, True], ids=["read", "read fails once"])
async def test_agent_started_during_an_outage_serves_its_record(
    tmp_path: Path, first_read_fails: bool
) -> None:
    async with applied_and_recorded(tmp_path) as setup:
        cp, member_emu, karmada_kc, member_kc, admin, member = setup

        # The agent is down; the control plane goes away; the member drifts.
        await cp.faults.go_offline()
        await member.delete(CONFIGMAPS, "web-config", namespace="default")
        await member.patch(
            CONFIGMAPS, "cfg", {"data": {"level": "9"}}, patch_type="merge", namespace="default"
        )
        await member.patch(
            DEPLOYMENTS,
            "web",
            {"spec": {"replicas": 5}},
            patch_type="merge",
            namespace="default",
        )

        if first_read_fails:
            # The member fails the first read of the record: it is read again.
            member_emu.faults.fail_next(1, 500, verb="list", resource="secrets")
        async with agent_running(karmada_kc, member_kc) as agent:
            # Served from the record while the control plane stays unreachable.
            await eventually(
                lambda: _true_when(configmap_data(member, "web-config"), {"mode": "fast"}),
                timeout=30,
                what="web-config put back offline",
            )
            await eventually(
                lambda: _true_when(configmap_data(member, "cfg"), {"level": "1"}),
                what="cfg put back offline",
            )

            async def replicas() -> int:
                obj = await member.get(DEPLOYMENTS, "web", namespace="default")
                return int(obj["spec"]["replicas"])

            await eventually(lambda: _true_when(replicas(), 2), what="web scaled back")
            assert agent.registration is None
            assert agent.offline is not None
            assert agent.offline.works is not None
            # Health was observed: the status queued for the control plane says so.
            queued = agent.offline.works.queued
            await eventually(lambda: _true("web" in queued), what="web status queued")

            writes_before = cp.accounting.counts(verb="patch", resource="works/status")
            await cp.faults.come_back()

            await eventually(
                lambda: _true(agent.manager is not None), timeout=40, what="registered"
            )
            assert agent.registration is not None
            await eventually(lambda: cluster_ready(admin, CLUSTER), what="Ready")
            lease = await admin.get(LEASES, CLUSTER, namespace="karmada-cluster")
            renewed = lease["spec"]["renewTime"]

            async def lease_renewed() -> bool:
                now = await admin.get(LEASES, CLUSTER, namespace="karmada-cluster")
                return bool(now["spec"]["renewTime"] != renewed)

            await eventually(lease_renewed, timeout=15, what="the heartbeat resumed")
            await eventually(lambda: healthy(admin, "web"), what="web reported healthy")
            for name in ("web", "cfg"):
                assert await work_applied(admin, CLUSTER, name)
            writes = cp.accounting.counts(verb="patch", resource="works/status") - writes_before
            assert 1 <= writes <= 2, f"{writes} status writes for 2 Works"


@pytest.mark.timeout(120)
async def test_the_works_are_listed_while_the_member_is_still_away(tmp_path: Path) -> None:
    """The control plane comes back before the member: the Works are listed then, while
    registration still waits for the member; once it is back, the controllers start on that
    list instead of listing every Work again (over a slow link, the largest read of all)."""
    async with applied_and_recorded(tmp_path) as setup:
        cp, member_emu, karmada_kc, member_kc, admin, _ = setup
        await cp.faults.go_offline()
        async with agent_running(karmada_kc, member_kc) as agent:
            await eventually(lambda: _true(agent.offline is not None), what="serving offline")
            assert agent.offline is not None
            early = agent.offline.live_works
            await member_emu.faults.go_offline()
            await cp.faults.come_back()
            await eventually(lambda: _true(early.synced), timeout=30, what="Works listed")
            assert sorted(early.names()) == ["cfg", "web"]
            assert agent.registration is None  # the member is still away
            lists = cp.accounting.counts(verb="list", resource="works")

            await member_emu.faults.come_back()
            await eventually(
                lambda: _true(agent.manager is not None), timeout=40, what="registered"
            )
            await eventually(lambda: cluster_ready(admin, CLUSTER), what="Ready")
            for name in ("web", "cfg"):
                assert await work_applied(admin, CLUSTER, name)
            assert agent.manager is not None
            assert agent.manager.ctx.sources.works is early
            assert cp.accounting.counts(verb="list", resource="works") == lists


def _member_writes(member_emu: Any, resource: str) -> int:
    return sum(
        member_emu.accounting.counts(verb=verb, resource=resource)
        for verb in ("create", "update", "patch", "delete")
    )


def _execution(agent: Agent) -> Any:
    assert agent.manager is not None
    return next(r for r in agent.manager.running if isinstance(r, ExecutionController))


async def _walked(agent: Agent) -> bool:
    """The registered agent's execution controller has started and has nothing left to do."""
    if agent.manager is None:
        return False
    execution = _execution(agent)
    queue = execution.queue
    return execution.controller.running and not (len(queue) or queue.processing or queue.waiting)


@pytest.mark.timeout(120)
async def test_an_offline_start_and_the_return_write_only_what_differs(tmp_path: Path) -> None:
    """Issue 34: an object deleted while the agent was down is put back once, offline; neither
    the offline start nor the return of the control plane applies the unchanged objects (there
    used to be a pass over every Work in each)."""
    async with applied_and_recorded(tmp_path) as setup:
        cp, member_emu, karmada_kc, member_kc, admin, member = setup
        await cp.faults.go_offline()
        await member.delete(CONFIGMAPS, "web-config", namespace="default")
        configmaps, deployments = (
            _member_writes(member_emu, "configmaps"),
            _member_writes(member_emu, "deployments"),
        )
        async with agent_running(karmada_kc, member_kc) as agent:
            await eventually(
                lambda: _true_when(configmap_data(member, "web-config"), {"mode": "fast"}),
                timeout=30,
                what="web-config put back offline",
            )
            await cp.faults.come_back()
            await eventually(lambda: _walked(agent), timeout=40, what="online Works walked")
            await eventually(lambda: healthy(admin, "web"), what="web reported healthy")
            for name in ("web", "cfg"):
                assert await work_applied(admin, CLUSTER, name)
            assert _member_writes(member_emu, "configmaps") - configmaps == 1
            assert _member_writes(member_emu, "deployments") == deployments


@contextlib.asynccontextmanager
async def applied_and_recorded(tmp_path: Path) -> AsyncIterator[Any]:
    """Both emulators, an agent that applied two Works (web: a Deployment and a ConfigMap; cfg:
    a ConfigMap) and recorded them on the member, stopped again: (control plane, member,
    their kubeconfigs, an admin client of each)."""
    async with (
        run_emulator(profile="karmada", name="karmada") as cp,
        run_emulator(profile="member", name=CLUSTER) as member_emu,
    ):
        karmada_kc = cp.write_kubeconfig(tmp_path / "karmada")
        member_kc = member_emu.write_kubeconfig(tmp_path / "member")
        admin = await client_for(karmada_kc)
        member = await client_for(member_kc)
        try:
            async with agent_running(karmada_kc, member_kc):
                await eventually(lambda: cluster_ready(admin, CLUSTER), timeout=30, what="Ready")
                web = [deployment("web"), configmap("web-config", {"mode": "fast"})]
                await admin.create(WORKS, control_plane_work(CLUSTER, "web", web), namespace=ES)
                cfg = [configmap("cfg", {"level": "1"})]
                await admin.create(WORKS, control_plane_work(CLUSTER, "cfg", cfg), namespace=ES)
                for name in ("web", "cfg"):
                    await eventually(lambda n=name: work_applied(admin, CLUSTER, n), what=name)
                await eventually(lambda: healthy(admin, "web"), what="web healthy")
                await eventually(
                    lambda: _true_when(records(member), {"web", "cfg"}), what="records written"
                )
            yield cp, member_emu, karmada_kc, member_kc, admin, member
        finally:
            await member.close()
            await admin.close()


async def _true_when(value: Any, expected: Any) -> bool:
    return bool(await value == expected)
