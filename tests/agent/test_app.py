"""The agent process in-process: registration, serving, controllers, leader election, shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent import app as app_module
from agent.app import EXIT_FAILURE, EXIT_OK, Agent
from agent.kube.client import KubeClient
from agent.kube.leaderelection import LeaderElectionConfig, LeaderElector
from agent.options import Options
from tests.agent.controllers.clusterenv import Pair, emulator_pair, kube_client, wait_for
from tests.agent.controllers.harness import EXEC_NS, configmap, karmada_work

LE_LEASE = "/apis/coordination.k8s.io/v1/namespaces/karmada-system/leases/karmada-agent-member1"


def electing(pair: Pair, lease: float, renew: float, **more: Any) -> Options:
    """Options with leader election at short timings (retry every 200 ms)."""
    return pair.options(
        leader_elect=True,
        leader_elect_lease_duration=timedelta(seconds=lease),
        leader_elect_renew_deadline=timedelta(seconds=renew),
        leader_elect_retry_period=timedelta(milliseconds=200),
        **more,
    )


def start(options: Options, identity: str | None = None) -> tuple[Agent, asyncio.Task[int]]:
    agent = Agent(options, install_signal_handlers=False, identity=identity, shutdown_timeout=5)
    return agent, asyncio.create_task(agent.run())


async def ready_cluster(pair: Pair) -> dict[str, Any] | None:
    obj = await pair.cluster()
    for item in (obj or {}).get("status", {}).get("conditions", []):
        if item["type"] == "Ready" and item["status"] == "True":
            return obj
    return None


async def test_agent_registers_reports_serves_and_stops(tmp_path: Path) -> None:
    async with emulator_pair(tmp_path) as pair:
        agent, task = start(pair.options())
        obj = await wait_for(lambda: ready_cluster(pair), timeout=20)
        assert obj["spec"]["syncMode"] == "Pull"
        assert agent.serving is not None
        assert agent.serving.health is not None
        assert agent.serving.metrics is not None
        health = f"http://127.0.0.1:{agent.serving.health.port}"
        metrics = f"http://127.0.0.1:{agent.serving.metrics.port}"
        async with httpx.AsyncClient() as http:
            assert (await http.get(f"{health}/healthz")).text == "ok"
            await wait_for(lambda: _ok(http, f"{health}/readyz"), timeout=10)
            body = (await http.get(f"{metrics}/metrics")).text
        assert 'cluster_ready_state{member_cluster="member1"} 1.0' in body
        assert "rest_client_requests_total" in body
        assert "karmada_build_info{" in body
        # Declared, but shown only once it has samples (no Work yet), as Go's client does.
        assert "work_sync_workload_duration_seconds" in {f.name for f in agent.registry.collect()}
        assert "work_sync_workload_duration_seconds" not in body
        lease = await wait_for(
            lambda: pair.karmada_get(
                "/apis/coordination.k8s.io/v1/namespaces/karmada-cluster/leases/member1"
            )
        )
        assert lease["spec"]["holderIdentity"] == "member1"

        loop = asyncio.get_running_loop()
        began = loop.time()
        agent.stop_event.set()  # what SIGTERM does
        assert await asyncio.wait_for(task, 10) == EXIT_OK
        assert loop.time() - began < 10
        async with httpx.AsyncClient() as http:
            try:
                await http.get(f"{health}/healthz")
            except httpx.ConnectError:
                pass
            else:
                raise AssertionError("health endpoint still served after shutdown")


async def test_registration_goes_on_as_soon_as_the_member_is_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The member is down at start until registration's backoff has grown to several seconds:
    once it is back, registration does not wait that out (up to 30 s) to find out."""
    caplog.set_level(logging.INFO)
    # Retries that start long (6 s at the least, with the jitter): the first one already waits
    # as long as a backoff grown over several failures would.
    monkeypatch.setattr(app_module, "REGISTRATION_RETRY_INITIAL", 12.0)
    async with emulator_pair(tmp_path) as pair:
        await pair.member.faults.go_offline()
        agent, task = start(pair.options())

        async def long_backoff() -> bool:
            delays = [getattr(r, "agent_log_fields", {}).get("delay") for r in caplog.records]
            return any(isinstance(d, float | int) and d >= 6 for d in delays)

        await wait_for(long_backoff, timeout=40)
        await pair.member.faults.come_back()
        loop = asyncio.get_running_loop()
        back = loop.time()
        await wait_for(lambda: _true(agent.registration is not None), timeout=20)
        assert loop.time() - back < 3.0
        agent.stop_event.set()
        assert await asyncio.wait_for(task, 10) == EXIT_OK


async def _true(value: bool) -> bool:
    return value


async def _ok(http: httpx.AsyncClient, url: str) -> bool:
    return (await http.get(url)).status_code == 200


async def test_registration_conflict_exits_non_zero(tmp_path: Path) -> None:
    async with emulator_pair(tmp_path) as pair:
        async with pair.karmada.client() as client:
            await client.post(
                "/apis/cluster.karmada.io/v1alpha1/clusters",
                json={
                    "apiVersion": "cluster.karmada.io/v1alpha1",
                    "kind": "Cluster",
                    "metadata": {"name": "member1"},
                    "spec": {"syncMode": "Pull", "id": "another-member"},
                },
            )
        agent, task = start(pair.options())
        assert await asyncio.wait_for(task, 20) == EXIT_FAILURE
        assert agent.registration is None


async def test_missing_kubeconfig_exits_non_zero(tmp_path: Path) -> None:
    options = Options(
        cluster_name="member1",
        karmada_kubeconfig=str(tmp_path / "missing"),
        kubeconfig=str(tmp_path / "missing-too"),
        metrics_bind_address="0",
        health_probe_bind_address="0",
    )
    _, task = start(options)
    assert await asyncio.wait_for(task, 10) == EXIT_FAILURE


async def test_two_replicas_one_leader_and_takeover(tmp_path: Path) -> None:
    async with emulator_pair(tmp_path) as pair:
        options = electing(pair, 2, 1.5)
        first, first_task = start(options, identity="replica-a")
        await wait_for(lambda: _flag(first.leading), timeout=15)
        second, second_task = start(options, identity="replica-b")
        # Both register; only the first leads, on upstream's Lease on the control plane.
        await wait_for(lambda: _registered(second), timeout=15)
        lease = await pair.karmada_get(LE_LEASE)
        assert lease is not None
        assert lease["spec"]["holderIdentity"] == "replica-a"
        assert not second.leading.is_set()
        assert second.manager is None
        await wait_for(lambda: ready_cluster(pair), timeout=20)

        first.stop_event.set()
        assert await asyncio.wait_for(first_task, 15) == EXIT_OK
        # The lease was released, so the second takes over without waiting for expiry.
        await wait_for(lambda: _flag(second.leading), timeout=10)
        lease = await pair.karmada_get(LE_LEASE)
        assert lease is not None
        assert lease["spec"]["holderIdentity"] == "replica-b"
        assert second.manager is not None
        second.stop_event.set()
        assert await asyncio.wait_for(second_task, 15) == EXIT_OK


async def test_lost_control_plane_lease_stops_controllers_and_campaigns_again(
    tmp_path: Path,
) -> None:
    """With the Lease on the control plane (the default, upstream's place), a replica that
    cannot renew it stops its controllers, but never exits: it campaigns again and leads once it
    can."""
    async with emulator_pair(tmp_path) as pair:
        options = electing(pair, 2, 1)
        agent, task = start(options, identity="replica-a")
        await wait_for(lambda: _flag(agent.leading), timeout=15)
        manager = agent.manager
        assert manager is not None
        assert manager.running
        assert await pair.karmada_get(LE_LEASE) is not None
        # The control plane refuses every lease renewal from now on.
        rule = pair.karmada.faults.add_error(
            500, verb="update", resource="leases.coordination.k8s.io"
        )
        await wait_for(lambda: controllers_stopped(manager), timeout=15)
        await wait_for(lambda: lost_leadership(agent), timeout=5)
        assert not agent.leading.is_set()
        assert not task.done()
        pair.karmada.faults.remove(rule.id)
        await wait_for(lambda: _flag(agent.leading), timeout=15)
        assert agent.manager is not None
        assert agent.manager is not manager
        assert not task.done()
        agent.stop_event.set()
        assert await asyncio.wait_for(task, 15) == EXIT_OK


async def test_leadership_on_the_member_survives_a_control_plane_outage(tmp_path: Path) -> None:
    """--leader-elect-lease-cluster=member: the Lease lives on the member, which both replicas
    share and which stays reachable. A control-plane outage of 120 s at the default timings (12 renew deadlines of
    10 s), scaled here to timings of a tenth of a second, costs no leadership, no restart and no
    controller restart; the agent converges after it."""
    renew_deadline = timedelta(seconds=0.4)
    outage = renew_deadline * 12
    async with emulator_pair(tmp_path) as pair:
        options = pair.options(
            leader_elect=True,
            leader_elect_lease_cluster="member",
            leader_elect_lease_duration=timedelta(seconds=0.6),
            leader_elect_renew_deadline=renew_deadline,
            leader_elect_retry_period=timedelta(seconds=0.1),
        )
        first, first_task = start(options, identity="replica-a")
        await wait_for(lambda: _flag(first.leading), timeout=15)
        second, second_task = start(options, identity="replica-b")
        await wait_for(lambda: _registered(second), timeout=15)
        await wait_for(lambda: ready_cluster(pair), timeout=20)
        lease = await pair.member_get(LE_LEASE)
        assert lease is not None
        assert lease["spec"]["holderIdentity"] == "replica-a"
        assert await pair.karmada_get(LE_LEASE) is None
        manager = first.manager
        await pair.karmada.faults.go_offline(outage.total_seconds())
        await wait_for(lambda: _offline(pair), timeout=outage.total_seconds() + 10, interval=0.1)
        assert first.leading.is_set()
        assert first.manager is manager
        assert not second.leading.is_set()
        assert not first_task.done()
        assert not second_task.done()
        assert not first.lost_leadership
        assert not second.lost_leadership
        # Converged: the heartbeat and status reach the control plane again.
        await wait_for(lambda: ready_cluster(pair), timeout=20)
        lease = await pair.member_get(LE_LEASE)
        assert lease is not None
        # Never held by anyone else, not even for a moment: every change of holder counts.
        assert lease["spec"]["holderIdentity"] == "replica-a"
        assert lease["spec"]["leaseTransitions"] == 0
        for agent, task in ((second, second_task), (first, first_task)):
            agent.stop_event.set()
            assert await asyncio.wait_for(task, 15) == EXIT_OK


async def controllers_stopped(manager: Any) -> bool:
    return not manager.running


async def lost_leadership(agent: Agent) -> bool:
    return agent.lost_leadership


async def _offline(pair: Pair) -> bool:
    """True once the control plane went offline and came back."""
    return not pair.karmada.faults.offline


async def _flag(event: asyncio.Event) -> bool:
    return event.is_set()


async def _registered(agent: Agent) -> bool:
    return agent.registration is not None


async def test_shutdown_that_cannot_finish_exits_non_zero_within_its_bound(tmp_path: Path) -> None:
    async with emulator_pair(tmp_path) as pair:
        options = pair.options(leader_elect=True, leader_elect_lease_cluster="member")
        agent = Agent(
            options, install_signal_handlers=False, identity="stuck", shutdown_timeout=0.5
        )
        task = asyncio.create_task(agent.run())
        await wait_for(lambda: _flag(agent.leading), timeout=15)
        # Releasing the leader-election Lease on the way out hangs (a member API server that
        # accepts connections but never answers lease updates).
        pair.member.faults.add_latency(60, verb="update", resource="leases.coordination.k8s.io")
        agent.stop_event.set()
        # Bounded: shutdown_timeout plus the 5 s margin, not the 60 s the server would take.
        assert await asyncio.wait_for(task, 15) == EXIT_FAILURE


async def test_lost_leadership_abandons_in_flight_applies_at_once(tmp_path: Path) -> None:
    """A replica that can no longer renew its Lease must stop writing at once: a successor may
    take over as soon as the Lease expires. An apply stuck on a slow member is abandoned, not
    waited for until the shutdown bound."""
    async with emulator_pair(tmp_path) as env:
        options = env.options(
            leader_elect=True,
            leader_elect_lease_cluster="karmada",
            leader_elect_lease_duration=timedelta(seconds=2),
            leader_elect_renew_deadline=timedelta(seconds=1),
            leader_elect_retry_period=timedelta(milliseconds=200),
            controllers=("clusterStatus", "execution"),
        )
        agent = Agent(options, install_signal_handlers=False, shutdown_timeout=30)
        task = asyncio.create_task(agent.run())
        await wait_for(lambda: ready_cluster(env), timeout=20)
        slow = env.member.faults.add_latency(30, verb="patch", resource="configmaps")
        async with env.karmada.client() as client:
            response = await client.post(
                f"/apis/work.karmada.io/v1alpha1/namespaces/{EXEC_NS}/works",
                json=karmada_work("w", [configmap("cm")]),
            )
            assert response.status_code == 201, response.text
        await wait_for(lambda: _fired(slow), timeout=10)
        manager = agent.manager
        assert manager is not None
        env.karmada.faults.add_error(500, verb="update", resource="leases.coordination.k8s.io")
        # Well within the 30 s shutdown bound and the 30 s stuck apply.
        await wait_for(lambda: controllers_stopped(manager), timeout=8)
        await wait_for(lambda: lost_leadership(agent), timeout=2)
        # The stuck apply itself was cancelled, not left running behind the manager's back.
        await wait_for(_no_execution_workers, timeout=2)
        # The replica campaigns again rather than exiting.
        assert not task.done()
        agent.stop_event.set()
        assert await asyncio.wait_for(task, 10) == EXIT_OK


async def _fired(rule: Any) -> bool:
    return bool(rule.fired)


async def _no_execution_workers() -> bool:
    return not [
        t
        for t in asyncio.all_tasks()
        if t.get_name().startswith("execution-worker") and not t.done()
    ]


class ForeignLeader:
    """Another program's candidate on the control-plane Lease karmada-agent-member1, shaped as
    upstream's Go agent: it renews every retry period and, when stopped, leaves the Lease as it
    is (controller-runtime does not release it), so a successor waits for it to expire."""

    def __init__(self, client: KubeClient, lease_duration: float) -> None:
        config = LeaderElectionConfig(
            namespace="karmada-system",
            name="karmada-agent-member1",
            identity="upstream-go-agent",
            lease_duration=lease_duration,
            renew_deadline=lease_duration * 0.6,
            retry_period=lease_duration * 0.1,
            release_on_cancel=False,
        )
        self.leading = asyncio.Event()
        self.elector = LeaderElector(client, config, on_started_leading=self._lead)
        self.task = asyncio.create_task(self.elector.run())

    async def _lead(self) -> None:
        self.leading.set()
        await asyncio.Event().wait()

    async def stop(self) -> float:
        """Stop renewing; returns the loop time of the stop."""
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        return asyncio.get_running_loop().time()


@pytest.mark.parametrize("lease_cluster", ["karmada", "member"])
async def test_a_live_upstream_lease_is_honoured_until_it_expires(
    tmp_path: Path, lease_cluster: str
) -> None:
    """Go agent -> this one: while upstream's agent holds the control-plane Lease, ours
    registers but does not lead (wherever its own Lease lives); once upstream's agent stops (its
    Lease left unreleased), ours leads after the Lease's duration, not before."""
    # Long enough that upstream's stand-in, renewing on the loop it shares with both emulators
    # and our agent, keeps its renew deadline (60 %) on a loaded machine.
    lease_duration = 4.0
    async with emulator_pair(tmp_path) as pair, kube_client(pair.karmada_kubeconfig) as karmada:
        upstream = ForeignLeader(karmada, lease_duration)
        await wait_for(lambda: _flag(upstream.leading), timeout=10)
        options = electing(pair, lease_duration, 1.2, leader_elect_lease_cluster=lease_cluster)
        ours, task = start(options, identity="python-agent")
        await wait_for(lambda: _registered(ours), timeout=15)
        # Several of upstream's renewals later, ours still does not lead.
        await wait_for(Renewals(pair).seen(4), timeout=10)
        assert not ours.leading.is_set()
        assert ours.manager is None
        stopped = await upstream.stop()
        await wait_for(lambda: _flag(ours.leading), timeout=15)
        assert asyncio.get_running_loop().time() - stopped >= lease_duration * 0.9
        lease = await pair.karmada_get(LE_LEASE)
        assert lease is not None
        if lease_cluster == "karmada":
            assert lease["spec"]["holderIdentity"] == "python-agent"
        else:
            assert lease["spec"]["holderIdentity"] == "upstream-go-agent"
            member_lease = await pair.member_get(LE_LEASE)
            assert member_lease is not None
            assert member_lease["spec"]["holderIdentity"] == "python-agent"
        ours.stop_event.set()
        assert await asyncio.wait_for(task, 15) == EXIT_OK


async def test_this_agent_hands_over_to_an_upstream_agent(tmp_path: Path) -> None:
    """This one -> Go agent: with the default placement, an upstream candidate waits while ours
    leads and takes over at once when ours stops (ours releases the Lease)."""
    async with emulator_pair(tmp_path) as pair:
        options = electing(pair, 2, 1.2)
        ours, task = start(options, identity="python-agent")
        await wait_for(lambda: _flag(ours.leading), timeout=15)
        async with kube_client(pair.karmada_kubeconfig) as karmada:
            upstream = ForeignLeader(karmada, 2.0)
            await wait_for(Renewals(pair).seen(3), timeout=10)
            assert not upstream.leading.is_set()
            ours.stop_event.set()
            assert await asyncio.wait_for(task, 15) == EXIT_OK
            await wait_for(lambda: _flag(upstream.leading), timeout=5)
            await upstream.stop()


async def test_leader_metric_follows_leadership(tmp_path: Path) -> None:
    async with emulator_pair(tmp_path) as pair:
        options = electing(pair, 2, 1.2)
        ours, task = start(options, identity="python-agent")
        await wait_for(lambda: _flag(ours.leading), timeout=15)
        sample = {"name": "karmada-agent-member1"}
        assert ours.registry.get_sample_value("leader_election_master_status", sample) == 1.0
        ours.stop_event.set()
        assert await asyncio.wait_for(task, 15) == EXIT_OK
        assert ours.registry.get_sample_value("leader_election_master_status", sample) == 0.0


class Renewals:
    """The different renewTimes of the control-plane Lease seen so far."""

    def __init__(self, pair: Pair) -> None:
        self.pair = pair
        self.times: set[str] = set()

    def seen(self, count: int) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            lease = await self.pair.karmada_get(LE_LEASE)
            if lease is not None:
                self.times.add(str(lease["spec"].get("renewTime")))
            return len(self.times) >= count

        return check
