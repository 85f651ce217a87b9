"""The heartbeat Lease against an emulated control plane."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from agent.controllers.heartbeat import Heartbeat
from agent.kube.clock import ServerClock
from agent.registration import register
from tests.agent.controllers.clusterenv import emulator_pair, kube_client, wait_for
from tests.fakewall import wall_fake_clock

LEASE = "/apis/coordination.k8s.io/v1/namespaces/karmada-cluster/leases/member1"
MICRO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


class ServerTimes(ServerClock):
    """The control plane's clock reading the given moments, one per renewal."""

    def __init__(self, *moments: datetime) -> None:
        super().__init__()
        self.moments = iter(moments)

    def now(self) -> float | None:
        return next(self.moments).timestamp()


class ServerAtWallTime(ServerClock):
    """The control plane's clock reading this process's (faked) wall clock."""

    def now(self) -> float | None:
        return datetime.now(UTC).timestamp()


async def test_lease_created_owned_and_renewed(tmp_path: Path) -> None:
    async with (
        emulator_pair(tmp_path) as pair,
        kube_client(pair.karmada_kubeconfig) as karmada,
        kube_client(pair.member_kubeconfig) as member,
    ):
        await register(karmada, member, pair.options(report_secrets=()))
        cluster = await pair.cluster()
        assert cluster is not None
        server = ServerTimes(
            datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, 0, 0, 10, 5, tzinfo=UTC)
        )
        heartbeat = Heartbeat(
            karmada, "member1", lease_duration=40, renew_interval=10, server_clock=server
        )
        await heartbeat.renew_once()
        lease = await pair.karmada_get(LEASE)
        assert lease is not None
        assert lease["spec"]["holderIdentity"] == "member1"
        assert lease["spec"]["leaseDurationSeconds"] == 40
        assert lease["spec"]["renewTime"] == "2026-01-01T00:00:00.000000Z"
        assert lease["metadata"]["ownerReferences"] == [
            {
                "apiVersion": "cluster.karmada.io/v1alpha1",
                "kind": "Cluster",
                "name": "member1",
                "uid": cluster["metadata"]["uid"],
            }
        ]
        await heartbeat.renew_once()
        renewed = await pair.karmada_get(LEASE)
        assert renewed is not None
        assert renewed["spec"]["renewTime"] == "2026-01-01T00:00:10.000005Z"
        assert len(renewed["metadata"]["ownerReferences"]) == 1


async def test_owner_added_to_an_existing_lease_and_retries(tmp_path: Path) -> None:
    async with (
        emulator_pair(tmp_path) as pair,
        kube_client(pair.karmada_kubeconfig) as karmada,
        kube_client(pair.member_kubeconfig) as member,
    ):
        await register(karmada, member, pair.options(report_secrets=()))
        async with pair.karmada.client() as client:
            response = await client.post(
                "/apis/coordination.k8s.io/v1/namespaces/karmada-cluster/leases",
                json={
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": "member1"},
                    "spec": {"holderIdentity": "member1", "leaseDurationSeconds": 40},
                },
            )
            assert response.status_code == 201, response.text
        pair.karmada.faults.fail_next(2, 500, verb="update", resource="leases.coordination.k8s.io")
        heartbeat = Heartbeat(karmada, "member1", lease_duration=40, renew_interval=10)
        await heartbeat.renew_once()
        lease = await pair.karmada_get(LEASE)
        assert lease is not None
        assert [ref["kind"] for ref in lease["metadata"]["ownerReferences"]] == ["Cluster"]
        assert MICRO.match(lease["spec"]["renewTime"])


async def test_scheduled_heartbeat_renews_every_interval_of_its_clock(tmp_path: Path) -> None:
    async with (
        emulator_pair(tmp_path) as pair,
        kube_client(pair.karmada_kubeconfig) as karmada,
        kube_client(pair.member_kubeconfig) as member,
    ):
        await register(karmada, member, pair.options(report_secrets=()))
        with wall_fake_clock() as clock:
            started = datetime.now(UTC).replace(tzinfo=None)
            heartbeat = Heartbeat(
                karmada,
                "member1",
                lease_duration=40,
                renew_interval=10,
                clock=clock,
                server_clock=ServerAtWallTime(),
            )
            await heartbeat.start()
            try:
                for renewals in (1, 2, 3):
                    await wait_for(lambda n=renewals: _renewals_at_least(heartbeat, n), timeout=10)
                    assert heartbeat.renewals == renewals
                    clock.advance(10.5)  # the interval plus its jitter (at most 4%)
                await wait_for(lambda: _renewals_at_least(heartbeat, 4), timeout=10)
            finally:
                await heartbeat.stop()
            assert not heartbeat.running
            lease = await pair.karmada_get(LEASE)
            assert lease is not None
            renew = datetime.strptime(lease["spec"]["renewTime"], "%Y-%m-%dT%H:%M:%S.%fZ")
            # The fourth renewal happened three advances (31.5 s of the clock) after the start.
            assert renew - started >= timedelta(seconds=31.5)
            assert datetime.now(UTC).replace(tzinfo=None) - renew < timedelta(seconds=5)


async def _renewals_at_least(heartbeat: Heartbeat, count: int) -> bool:
    return heartbeat.renewals >= count


async def test_renewal_is_one_put_and_a_conflict_reads_again(tmp_path: Path) -> None:
    async with (
        emulator_pair(tmp_path) as pair,
        kube_client(pair.karmada_kubeconfig) as karmada,
        kube_client(pair.member_kubeconfig) as member,
    ):
        await register(karmada, member, pair.options(report_secrets=()))
        heartbeat = Heartbeat(karmada, "member1", lease_duration=40, renew_interval=10)
        await heartbeat.renew_once()
        accounting = pair.karmada.accounting
        accounting.reset()
        for _ in range(3):
            await heartbeat.renew_once()
        leases = "leases.coordination.k8s.io"
        assert accounting.counts(verb="update", resource=leases) == 3
        assert accounting.counts(verb="get", resource=leases) == 0
        # Someone else writes the Lease: our next PUT conflicts, so the Lease is read again.
        async with pair.karmada.client() as client:
            lease = (await client.get(LEASE)).json()
            lease["metadata"]["labels"] = {"touched": "yes"}
            assert (await client.put(LEASE, json=lease)).status_code == 200
        accounting.reset()
        await heartbeat.renew_once()
        assert accounting.counts(verb="get", resource=leases) == 1
        renewed = await pair.karmada_get(LEASE)
        assert renewed is not None
        assert renewed["metadata"]["labels"] == {"touched": "yes"}
        assert renewed["metadata"]["resourceVersion"] != lease["metadata"]["resourceVersion"]


async def test_renew_time_is_the_control_planes_time_and_never_goes_back(tmp_path: Path) -> None:
    """The agent's clock is 10 minutes ahead of the control plane's: renewTime is the control
    plane's time (the Date of its answers). Then the agent's clock is set right, as if it had
    jumped 10 minutes back: renewTime still moves forward."""
    async with (
        emulator_pair(tmp_path) as pair,
        kube_client(pair.karmada_kubeconfig) as karmada,
        kube_client(pair.member_kubeconfig) as member,
    ):
        await register(karmada, member, pair.options(report_secrets=()))
        pair.karmada.set_clock_offset(-600)  # the agent is 10 minutes ahead
        heartbeat = Heartbeat(karmada, "member1", lease_duration=40, renew_interval=10)
        await karmada.server_version()  # an answer with the control plane's Date
        await heartbeat.renew_once()
        first = await pair.karmada_get(LEASE)
        assert first is not None
        renewed_at = datetime.strptime(first["spec"]["renewTime"], "%Y-%m-%dT%H:%M:%S.%fZ")
        behind = datetime.now(UTC).replace(tzinfo=None) - timedelta(seconds=600)
        assert abs((renewed_at - behind).total_seconds()) < 3
        # A Lease renewTime someone wrote in the future (an agent whose clock was ahead): the
        # next renewals still move it forward.
        async with pair.karmada.client() as client:
            lease = (await client.get(LEASE)).json()
            lease["spec"]["renewTime"] = "2099-01-01T00:00:00.000000Z"
            assert (await client.put(LEASE, json=lease)).status_code == 200
        await heartbeat.renew_once()
        await heartbeat.renew_once()
        last = await pair.karmada_get(LEASE)
        assert last is not None
        assert last["spec"]["renewTime"] == "2099-01-01T00:00:00.000002Z"
