from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from agent.kube.clock import FakeClock
from agent.kube.leaderelection import LeaderElectionConfig, LeaderElector
from agent.timefmt import micro_time
from tests.agent.kube.wire import Emulated, emulated, wait_for

PATH = "/apis/coordination.k8s.io/v1/namespaces/karmada-system/leases"
MICRO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def config(identity: str) -> LeaderElectionConfig:
    return LeaderElectionConfig(
        "karmada-system",
        "karmada-agent-member1",
        identity,
        lease_duration=0.6,
        renew_deadline=0.4,
        retry_period=0.1,
    )


def lease(api: Emulated) -> dict[str, Any]:
    stored = api.server.storage.get(
        ("coordination.k8s.io", "leases"), "karmada-system", "karmada-agent-member1"
    )
    assert stored is not None
    return stored


async def karmada_system() -> Emulated:
    api = emulated()
    await api.namespace("karmada-system")
    return api


def elector(
    api: Emulated, identity: str, log: list[str], clock: FakeClock | None = None
) -> LeaderElector:
    async def lead() -> None:
        log.append(f"start {identity}")
        await asyncio.Event().wait()

    return LeaderElector(
        api.client(),
        config(identity),
        on_started_leading=lead,
        on_stopped_leading=lambda: log.append(f"stop {identity}"),
        **({"clock": clock} if clock is not None else {}),
    )


def test_config_validation_and_micro_time() -> None:
    with pytest.raises(ValueError, match="renew deadline"):
        LeaderElectionConfig("ns", "n", "me", lease_duration=15, renew_deadline=2, retry_period=2)
    assert MICRO.match(micro_time())


async def test_acquire_renew_and_release_on_cancel() -> None:
    api = await karmada_system()
    log: list[str] = []
    le = elector(api, "a", log)
    task = asyncio.create_task(le.run())
    await wait_for(lambda: log == ["start a"])
    spec = lease(api)["spec"]
    assert spec["holderIdentity"] == "a"
    assert spec["leaseTransitions"] == 0
    assert spec["leaseDurationSeconds"] == 1  # 0.6 s rounds to at least one second
    assert MICRO.match(spec["renewTime"])
    assert MICRO.match(spec["acquireTime"])
    first_rv = lease(api)["metadata"]["resourceVersion"]
    await wait_for(lambda: lease(api)["metadata"]["resourceVersion"] != first_rv)
    assert le.is_leader
    assert lease(api)["spec"]["acquireTime"] == spec["acquireTime"]
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    released = lease(api)["spec"]
    # Released: no holder (the API drops the null holderIdentity, as it drops nil pointers).
    assert "holderIdentity" not in released
    assert released["leaseDurationSeconds"] == 1
    assert log == ["start a", "stop a"]


async def test_waits_for_expiry_then_takes_over() -> None:
    api = await karmada_system()
    await api.admin.create(
        PATH,
        {
            "metadata": {"name": "karmada-agent-member1", "namespace": "karmada-system"},
            "spec": {
                "holderIdentity": "other",
                "leaseDurationSeconds": 1,
                "renewTime": micro_time(),
                "leaseTransitions": 4,
            },
        },
    )
    log: list[str] = []
    clock = FakeClock()
    le = elector(api, "b", log, clock)
    task = asyncio.create_task(le.run())
    await wait_for(lambda: le.leader == "other")

    async def retry_after(seconds: float) -> None:
        """Let `seconds` pass on the elector's clock and wait for its next attempt."""
        attempts = len(api.wire.calls)
        clock.advance(seconds)
        await wait_for(lambda: len(api.wire.calls) > attempts or bool(log))

    # Retries come every retry period plus up to 20 % jitter (0.1-0.12 s here). About half
    # the lease (1 s, timed on our own clock from when we first saw it): not ours yet.
    for _ in range(4):
        await retry_after(0.12)
    assert log == []
    assert not le.is_leader
    # Past the lease: taken over at the next attempt.
    for _ in range(8):
        if log:
            break
        await retry_after(0.12)
    await wait_for(lambda: log == ["start b"])
    assert lease(api)["spec"]["holderIdentity"] == "b"
    assert lease(api)["spec"]["leaseTransitions"] == 5
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_loses_leadership_when_renewals_fail() -> None:
    api = await karmada_system()
    log: list[str] = []
    le = elector(api, "c", log)
    task = asyncio.create_task(le.run())
    await wait_for(lambda: log == ["start c"])
    api.faults.add_error(500, verb="update", resource="leases")
    await asyncio.wait_for(task, 3)  # run() returns once the renew deadline passes
    assert log == ["start c", "stop c"]
    assert not le.is_leader
    assert lease(api)["spec"]["holderIdentity"] == "c"  # lost, so no release was attempted


async def test_a_leader_renews_with_one_update_and_reads_after_a_conflict() -> None:
    api = await karmada_system()
    log: list[str] = []
    le = elector(api, "a", log)
    task = asyncio.create_task(le.run())
    try:
        await wait_for(lambda: log == ["start a"])
        api.wire.calls.clear()

        def renewals() -> list[str]:
            return [c.method for c in api.wire.calls if c.path.startswith(PATH)]

        await wait_for(lambda: renewals().count("PUT") >= 3)
        # client-go's fast path: the leader updates the lease its last write returned.
        assert "GET" not in renewals()
        # Someone else writes the lease: the next update conflicts, the lease is read again.
        current = lease(api)
        await api.admin.update(
            f"{PATH}/karmada-agent-member1",
            {**current, "metadata": {**current["metadata"], "labels": {"x": "y"}}},
        )
        api.wire.calls.clear()
        await wait_for(lambda: "GET" in renewals() and renewals()[-1] == "PUT")
        assert le.is_leader
        assert lease(api)["metadata"]["labels"] == {"x": "y"}
        assert lease(api)["spec"]["holderIdentity"] == "a"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_no_renewal_after_the_release() -> None:
    """Cancelling run() ends the renewals before the Lease is released: a renewal after the
    release would take the Lease again for a leader that has stopped."""
    api = await karmada_system()
    log: list[str] = []
    clock = FakeClock()
    le = elector(api, "a", log, clock)
    task = asyncio.create_task(le.run())
    await wait_for(lambda: log == ["start a"])
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert "holderIdentity" not in lease(api)["spec"]
    calls = len(api.wire.calls)
    for _ in range(10):
        clock.advance(0.2)
        for _ in range(5):
            await asyncio.sleep(0)
    assert len(api.wire.calls) == calls
    assert "holderIdentity" not in lease(api)["spec"]


async def test_wait_until_free_waits_for_a_live_holder_only() -> None:
    api = await karmada_system()
    await api.admin.create(
        PATH,
        {
            "metadata": {"name": "karmada-agent-member1", "namespace": "karmada-system"},
            "spec": {
                "holderIdentity": "upstream",
                "leaseDurationSeconds": 1,
                "renewTime": micro_time(),
            },
        },
    )
    clock = FakeClock()
    le = elector(api, "b", [], clock)
    waiting = asyncio.create_task(le.wait_until_free())
    await wait_for(lambda: le.leader == "upstream")

    async def next_attempt() -> None:
        attempts = len(api.wire.calls)
        clock.advance(0.5)
        await wait_for(lambda: len(api.wire.calls) > attempts or waiting.done())

    async def renewed_by_its_holder() -> None:
        current = lease(api)
        await api.admin.update(
            f"{PATH}/karmada-agent-member1",
            {**current, "spec": {**current["spec"], "renewTime": micro_time()}},
        )

    for _ in range(4):  # renewed by its holder: never free
        await renewed_by_its_holder()
        await next_attempt()
    assert not waiting.done()
    for _ in range(4):  # no longer renewed: free once a lease duration passed on our clock
        if not waiting.done():
            await next_attempt()
    await asyncio.wait_for(waiting, 5)
    assert lease(api)["spec"]["holderIdentity"] == "upstream"  # never written
    assert not le.is_leader
