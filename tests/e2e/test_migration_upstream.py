"""Rolling replacement with the REAL upstream karmada-agent ($KARMADA_UPSTREAM_BIN), both ways,
against the emulated control plane and member (docs/migration.md).

Go agent -> ours: the Go agent leads and applies a Work; ours starts while it runs and does not
lead (nor reconcile) while the Go agent renews the control-plane Lease; the Go agent stops
(leaving its Lease to expire, as controller-runtime does); ours leads, and a field removed from
the Work disappears from the member object the Go agent wrote (ownership taken over from its
Update manager). Ours -> Go agent: a Go agent started while ours leads waits; ours stops and
releases the Lease; the Go agent leads and applies the next change of the Work.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent.app import EXIT_OK, Agent
from agent.kube.client import KubeClient
from agent.kube.errors import ConflictError, NotFoundError
from agent.kube.resources import CONFIGMAPS, LEASES
from agent.resources import WORKS
from emulator.upstream import UpstreamKarmadaAgent, binary, missing_reason
from emulator.works import control_plane_work

from .support import agent_options, client_for, emulated_clusters, eventually, work_applied

pytestmark = [
    pytest.mark.skipif(binary("karmada-agent") is None, reason=missing_reason("karmada-agent")),
    pytest.mark.timeout(240),
]

CLUSTER = "member1"
ES = f"karmada-es-{CLUSTER}"
LEASE_NAME = f"karmada-agent-{CLUSTER}"
# Short leader-election timings for both agents (same flags, same meaning).
LEADER_FLAGS = (
    "--leader-elect-lease-duration=4s",
    "--leader-elect-renew-deadline=3s",
    "--leader-elect-retry-period=500ms",
)


def managers(obj: dict[str, Any]) -> list[tuple[str, str]]:
    return sorted((e["manager"], e["operation"]) for e in obj["metadata"].get("managedFields", []))


class Renewals:
    """Distinct renewTimes of the control-plane leader-election Lease seen so far, by holder."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.seen: set[tuple[str, str]] = set()

    async def by(self, holder_prefix: str, count: int) -> bool:
        try:
            lease = await self.client.get(LEASES, LEASE_NAME, namespace="karmada-system")
        except NotFoundError:
            return False
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        if holder.startswith(holder_prefix):
            self.seen.add((holder, str(spec.get("renewTime"))))
        return sum(1 for h, _ in self.seen if h.startswith(holder_prefix)) >= count


@contextlib.asynccontextmanager
async def our_agent(
    karmada_kc: Path, member_kc: Path
) -> AsyncIterator[tuple[Agent, asyncio.Task[int]]]:
    options = agent_options(karmada_kc, member_kc, CLUSTER, *LEADER_FLAGS)
    agent = Agent(
        options, install_signal_handlers=False, identity="python-agent", shutdown_timeout=10
    )
    task = asyncio.create_task(agent.run())
    try:
        yield agent, task
    finally:
        agent.stop_event.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 30)


async def test_go_agent_to_ours_and_back(tmp_path: Path) -> None:
    async with emulated_clusters(tmp_path) as (_, _, karmada_kc, member_kc):
        admin = await client_for(karmada_kc)
        member_admin = await client_for(member_kc)
        renewals = Renewals(admin)
        launched: list[UpstreamKarmadaAgent] = []

        def go_agent(name: str) -> UpstreamKarmadaAgent:
            workdir = tmp_path / name
            workdir.mkdir()
            launched.append(
                UpstreamKarmadaAgent(
                    karmada_kubeconfig=karmada_kc,
                    member_kubeconfig=member_kc,
                    cluster_name=CLUSTER,
                    workdir=workdir,
                    extra_args=LEADER_FLAGS,
                )
            )
            return launched[-1]

        async def member_data() -> dict[str, str]:
            return dict(
                (await member_admin.get(CONFIGMAPS, "app", namespace="default")).get("data") or {}
            )

        async def set_work_data(data: dict[str, str]) -> None:
            async def attempt() -> bool:
                work = await admin.get(WORKS, "app", namespace=ES)
                work["spec"]["workload"]["manifests"][0]["data"] = data
                try:
                    await admin.replace(WORKS, work, namespace=ES)
                except ConflictError:
                    return False  # a status write came first: read it again
                return True

            await eventually(attempt, what="the Work updated")

        try:
            # 1. The Go agent leads and applies a Work.
            first = await go_agent("go-1").start(timeout=30)
            await eventually(lambda: renewals.by("", 1), timeout=30, what="the Go agent leading")
            go_identity = next(iter(renewals.seen))[0]
            configmap = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "app", "namespace": "default"},
                "data": {"keep": "1", "drop": "2"},
            }
            await admin.create(WORKS, control_plane_work(CLUSTER, "app", [configmap]), namespace=ES)
            await eventually(
                lambda: work_applied(admin, CLUSTER, "app"), timeout=30, what="Go agent applied"
            )
            written = await member_admin.get(CONFIGMAPS, "app", namespace="default")
            assert managers(written) == [("karmada-agent", "Update")], first.log()

            # 2. Ours starts while the Go agent runs: it registers, but neither leads nor writes.
            async with our_agent(karmada_kc, member_kc) as (ours, ours_task):
                await eventually(
                    lambda: _true(ours.registration is not None), timeout=30, what="ours registered"
                )
                await eventually(
                    lambda: renewals.by(go_identity, 5), timeout=30, what="Go agent renewals"
                )
                assert not ours.leading.is_set()
                assert ours.manager is None
                assert managers(await member_admin.get(CONFIGMAPS, "app", namespace="default")) == [
                    ("karmada-agent", "Update")
                ]

                # 3. The Go agent stops (its Lease left to expire); ours leads.
                await first.stop(grace=15)
                assert first.returncode == 0, first.log()
                stopped = asyncio.get_running_loop().time()
                await eventually(
                    lambda: _true(ours.leading.is_set()), timeout=30, what="ours leading"
                )
                assert asyncio.get_running_loop().time() - stopped >= 2.0  # waited for expiry
                lease = await admin.get(LEASES, LEASE_NAME, namespace="karmada-system")
                assert lease["spec"]["holderIdentity"] == "python-agent"

                # 4. A field removed from the Work disappears on the member.
                await set_work_data({"keep": "1"})
                await eventually(
                    lambda: _equal(member_data(), {"keep": "1"}), timeout=30, what="drop removed"
                )
                live = await member_admin.get(CONFIGMAPS, "app", namespace="default")
                assert managers(live) == [("karmada-agent", "Apply")]

                # 5. And back: a Go agent started now waits while ours leads ...
                second = await go_agent("go-2").start(timeout=30)
                await eventually(
                    lambda: renewals.by("python-agent", 5), timeout=30, what="our renewals"
                )
                assert "Successfully acquired lease" not in second.log(tail=100_000)
                assert ours.leading.is_set()

                # ... and leads once ours stops (ours releases the Lease on the way out).
                ours.stop_event.set()
                assert await asyncio.wait_for(ours_task, 30) == EXIT_OK
            await eventually(lambda: _acquired(second), timeout=30, what="Go agent leading again")
            lease = await admin.get(LEASES, LEASE_NAME, namespace="karmada-system")
            assert lease["spec"]["holderIdentity"] not in ("", None, "python-agent")
            await set_work_data({"keep": "1", "again": "3"})
            await eventually(
                lambda: _equal(member_data(), {"keep": "1", "again": "3"}),
                timeout=30,
                what="Go agent applied the change",
            )
            await second.stop(grace=15)
            assert second.returncode == 0, second.log()
        finally:
            for process in launched:
                await process.stop(grace=15)
            await admin.close()
            await member_admin.close()


async def _true(value: bool) -> bool:
    return value


async def _equal(value: Any, expected: Any) -> bool:
    return await value == expected


async def _acquired(agent: UpstreamKarmadaAgent) -> bool:
    return "Successfully acquired lease" in agent.log(tail=100_000)
