"""Outage-safe deletion, end to end: Works the control plane deletes while this cluster is cut
off for longer than its lease are held after the link returns, then deleted."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from agent.app import Agent
from agent.controllers.execution.deletion import EVENT_WORK_ORPHANED
from agent.controllers.execution.deletion_guard import CONDITION_DELETION_HELD, EVENT_DELETION_HELD
from agent.kube.client import KubeClient
from agent.kube.errors import NotFoundError
from agent.kube.resources import CONFIGMAPS, EVENTS
from agent.resources import WORKS
from emulator.emulator import Emulator, run_emulator
from emulator.works import configmap, control_plane_work

from .support import (
    CLUSTERS,
    client_for,
    cluster_ready,
    condition,
    eventually,
    running_agent,
    work_applied,
)

CLUSTER = "member1"
ES = f"karmada-es-{CLUSTER}"
NAMES = ("a", "b", "c", "d")


async def on_member(member: KubeClient, name: str) -> bool:
    try:
        await member.get(CONFIGMAPS, name, namespace="default")
    except NotFoundError:
        return False
    return True


async def work_exists(admin: KubeClient, name: str) -> bool:
    try:
        await admin.get(WORKS, name, namespace=ES)
    except NotFoundError:
        return False
    return True


async def reasons_for(admin: KubeClient, name: str) -> set[str]:
    listed = await admin.list(EVENTS, namespace=ES)
    return {
        str(e.get("reason"))
        for e in listed["items"]
        if (e.get("involvedObject") or {}).get("name") == name
    }


def held_gauge(registry: CollectorRegistry) -> float | None:
    return registry.get_sample_value("karmada_agent_work_deletions_held")


async def cut_off_then_delete(cp: Emulator, agent: Agent, deleted: tuple[str, ...]) -> None:
    """Take the control plane away until the lease has expired, delete Works meanwhile (the
    control plane evicting them), and bring it back."""
    await cp.faults.go_offline()
    assert agent.manager is not None
    link = agent.manager.ctx.sources.link
    await eventually(lambda: _true(link.outage() is not None), timeout=15, what="lease expiry")
    admin = cp.api.loopback()  # in-process: reaches the emulator while its front is down
    for name in deleted:
        await admin.delete(f"/apis/work.karmada.io/v1alpha1/namespaces/{ES}/works/{name}")
    await cp.faults.come_back()


async def _true(value: bool) -> bool:
    return value


@dataclass
class Scenario:
    cp: Emulator
    admin: KubeClient
    member: KubeClient
    registry: CollectorRegistry
    agent: Agent
    task: asyncio.Task[int]


@contextlib.asynccontextmanager
async def four_works_applied(tmp_path: Path, grace: str) -> AsyncIterator[Scenario]:
    """The agent running with --work-deletion-grace-period=`grace` (threshold 0.5) and the
    Works a, b, c, d applied."""
    registry = CollectorRegistry()
    async with (
        run_emulator(profile="karmada", name="karmada") as cp,
        run_emulator(profile="member", name=CLUSTER) as member_emu,
    ):
        karmada_kc = cp.write_kubeconfig(tmp_path / "karmada")
        member_kc = member_emu.write_kubeconfig(tmp_path / "member")
        admin = await client_for(karmada_kc)
        member = await client_for(member_kc)
        flags = (f"--work-deletion-grace-period={grace}", "--work-deletion-hold-threshold=0.5")
        try:
            async with running_agent(
                karmada_kc,
                member_kc,
                CLUSTER,
                "--cluster-status-update-frequency=1s",
                "--cluster-lease-duration=2s",
                *flags,
                registry=registry,
            ) as (task, agent):
                await eventually(lambda: cluster_ready(admin, CLUSTER), timeout=30, what="Ready")
                for name in NAMES:
                    work = control_plane_work(CLUSTER, name, [configmap(name)])
                    await admin.create(WORKS, work, namespace=ES)
                for name in NAMES:
                    await eventually(lambda n=name: work_applied(admin, CLUSTER, n), what=name)
                yield Scenario(cp, admin, member, registry, agent, task)
        finally:
            await member.close()
            await admin.close()


@pytest.mark.timeout(90)
async def test_mass_deletion_after_a_long_outage_is_held_then_done(tmp_path: Path) -> None:
    async with four_works_applied(tmp_path, "6s") as s:
        await cut_off_then_delete(s.cp, s.agent, ("a", "b", "c"))

        # Held: Events on each Work, the Cluster condition, the gauge; objects kept.
        for name in ("a", "b", "c"):
            await eventually(
                lambda n=name: _has_reason(s.admin, n), timeout=15, what=f"{name} held"
            )
        cluster = await eventually(
            lambda: _held_condition(s.admin, "True"), what="WorkDeletionHeld=True"
        )
        held = condition(cluster, CONDITION_DELETION_HELD)
        assert held is not None
        assert "3 Work(s) held until " in held["message"]
        assert "a, b, c" in held["message"]
        assert held_gauge(s.registry) == 3
        for name in NAMES:
            assert await on_member(s.member, name), f"{name} deleted while held"
            assert await work_exists(s.admin, name)

        # After the grace period the deletions go ahead; the untouched Work stays.
        for name in ("a", "b", "c"):
            await eventually(
                lambda n=name: _gone(s.admin, s.member, n), timeout=20, what=f"{name} gone"
            )
        await eventually(lambda: _held_condition(s.admin, "False"), what="WorkDeletionHeld=False")
        assert held_gauge(s.registry) == 0
        assert s.registry.get_sample_value("karmada_agent_work_deletion_holds_total") == 3
        assert await on_member(s.member, "d")
        assert await work_applied(s.admin, CLUSTER, "d")
        assert not s.task.done()


@pytest.mark.timeout(90)
async def test_few_deletions_after_a_long_outage_go_ahead(tmp_path: Path) -> None:
    # A grace period far longer than the test: a held deletion would time it out.
    async with four_works_applied(tmp_path, "1h") as s:
        await cut_off_then_delete(s.cp, s.agent, ("a",))

        await eventually(lambda: _gone(s.admin, s.member, "a"), timeout=20, what="a gone")
        assert EVENT_DELETION_HELD not in await reasons_for(s.admin, "a")
        assert held_gauge(s.registry) == 0
        cluster = await s.admin.get(CLUSTERS, CLUSTER)
        assert condition(cluster, CONDITION_DELETION_HELD) is None


@pytest.mark.timeout(90)
async def test_grace_period_zero_deletes_at_once_as_upstream(tmp_path: Path) -> None:
    async with four_works_applied(tmp_path, "0s") as s:
        await cut_off_then_delete(s.cp, s.agent, ("a", "b", "c"))

        for name in ("a", "b", "c"):
            await eventually(
                lambda n=name: _gone(s.admin, s.member, n), timeout=20, what=f"{name} gone"
            )
            assert EVENT_DELETION_HELD not in await reasons_for(s.admin, name)
        assert held_gauge(s.registry) == 0


@pytest.mark.timeout(90)
async def test_held_work_whose_finalizer_someone_removes_is_reported_orphaned(
    tmp_path: Path,
) -> None:
    async with four_works_applied(tmp_path, "1h") as s:
        await cut_off_then_delete(s.cp, s.agent, ("a", "b", "c"))
        await eventually(lambda: _has_reason(s.admin, "a"), timeout=15, what="a held")

        work = await s.admin.get(WORKS, "a", namespace=ES)
        work["metadata"]["finalizers"] = []
        await s.admin.replace(WORKS, work, namespace=ES)

        async def orphaned() -> dict[str, object] | None:
            listed = await s.admin.list(EVENTS, namespace=ES)
            for event in listed["items"]:
                involved = event.get("involvedObject") or {}
                if involved.get("name") == "a" and event.get("reason") == EVENT_WORK_ORPHANED:
                    return dict(event)
            return None

        event = await eventually(orphaned, what="the orphaned Work reported")
        assert event["type"] == "Warning"
        assert "configmaps default/a" in str(event["message"])
        assert s.registry.get_sample_value("karmada_agent_works_orphaned_total") == 1
        # Left in place, not deleted: and the other held Works stay held.
        assert await on_member(s.member, "a")
        assert not await work_exists(s.admin, "a")
        assert held_gauge(s.registry) == 2
        assert await on_member(s.member, "b")


async def _has_reason(admin: KubeClient, name: str) -> bool:
    return EVENT_DELETION_HELD in await reasons_for(admin, name)


async def _held_condition(admin: KubeClient, status: str) -> dict[str, object] | None:
    cluster = await admin.get(CLUSTERS, CLUSTER)
    found = condition(cluster, CONDITION_DELETION_HELD)
    return cluster if found is not None and found["status"] == status else None


async def _gone(admin: KubeClient, member: KubeClient, name: str) -> bool:
    return not await work_exists(admin, name) and not await on_member(member, name)
