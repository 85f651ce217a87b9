"""An agent whose clock is 10 minutes ahead of the API servers', end to end (issue 25 item 4).

The agent runs in this process, so its clock is this process's: time-machine moves it 10 minutes
ahead, and the emulators' own clocks are set back as much, so that the API servers keep the
true time. Then the agent's clock is set right (moved back 10 minutes, the servers' untouched).
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
import time_machine
from prometheus_client import CollectorRegistry

from agent.controllers.execution.deletion_guard import CONDITION_DELETION_HELD, EVENT_DELETION_HELD
from agent.kube.client import KubeClient
from agent.kube.errors import NotFoundError
from agent.kube.resources import EVENTS, LEASES
from agent.resources import CLUSTERS, WORKS
from emulator.controllers import Knobs
from emulator.emulator import run_emulator
from emulator.works import configmap, control_plane_work

from .support import client_for, condition, eventually, running_agent, work_applied

CLUSTER = "member1"
ES = f"karmada-es-{CLUSTER}"
NAMES = tuple(f"skew-{i}" for i in range(6))
AHEAD = 600.0
# The control plane takes the cluster for gone after 3 s without a renewal (its grace period).
GRACE = 3.0
FLAGS = (
    "--cluster-status-update-frequency=1s",
    "--cluster-lease-duration=2s",
    # A held deletion would outlast the test.
    "--work-deletion-grace-period=1h",
    "--work-deletion-hold-threshold=0.5",
)


async def _gone(admin: KubeClient, name: str) -> bool:
    try:
        await admin.get(WORKS, name, namespace=ES)
    except NotFoundError:
        return True
    return False


async def _cluster(admin: KubeClient) -> dict[str, Any]:
    return await admin.get(CLUSTERS, CLUSTER)


async def _clock_condition(admin: KubeClient, status: str) -> dict[str, Any] | None:
    try:
        cluster = await _cluster(admin)
    except NotFoundError:
        return None  # not registered yet
    found = condition(cluster, "ClockSynchronized")
    return found if found is not None and found["status"] == status else None


async def _renew_time(admin: KubeClient) -> datetime.datetime:
    lease = await admin.get(LEASES, CLUSTER, namespace="karmada-cluster")
    return datetime.datetime.strptime(lease["spec"]["renewTime"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.UTC
    )


@pytest.mark.timeout(120)
async def test_an_agent_ahead_holds_no_deletion_flaps_nothing_and_says_so(tmp_path: Path) -> None:
    knobs = Knobs(cluster_monitor_period=0.2, cluster_monitor_grace_period=GRACE)
    async with (
        run_emulator(profile="karmada", name="karmada", knobs=knobs) as cp,
        run_emulator(profile="member", name=CLUSTER) as member,
    ):
        karmada_kc = cp.write_kubeconfig(tmp_path / "karmada")
        member_kc = member.write_kubeconfig(tmp_path / "member")
        admin = await client_for(karmada_kc)
        try:
            # An agent with a right clock applies the Works, and stops.
            async with running_agent(karmada_kc, member_kc, CLUSTER, *FLAGS):
                await eventually(lambda: _clock_condition(admin, "True"), what="clocks agree")
                for name in NAMES:
                    work = control_plane_work(CLUSTER, name, [configmap(name)])
                    await admin.create(WORKS, work, namespace=ES)
                for name in NAMES:
                    await eventually(lambda n=name: work_applied(admin, CLUSTER, n), what=name)

            true_now = datetime.datetime.now(datetime.UTC)
            with time_machine.travel(true_now + datetime.timedelta(seconds=AHEAD), tick=True) as t:
                for emulator in (cp, member):
                    emulator.set_clock_offset(-AHEAD)
                registry = CollectorRegistry()
                async with running_agent(
                    karmada_kc, member_kc, CLUSTER, *FLAGS, registry=registry
                ) as (task, _agent):
                    # The skew is reported: condition, Event, gauge.
                    skewed = await eventually(
                        lambda: _clock_condition(admin, "False"), what="ClockSynchronized=False"
                    )
                    assert skewed["reason"] == "ClockSkewed"
                    assert "600s ahead of the Karmada control plane" in skewed["message"]
                    assert "600s ahead of the member cluster" in skewed["message"]
                    gauge = registry.get_sample_value(
                        "karmada_agent_clock_skew_seconds", {"server": "karmada"}
                    )
                    assert gauge is not None
                    assert abs(gauge - AHEAD) < 2
                    events = (await admin.list(EVENTS, namespace="default"))["items"]
                    assert [e["type"] for e in events if e["reason"] == "ClockSkewed"] == [
                        "Warning"
                    ]

                    # The control plane deletes every Work: no outage happened, nothing is held.
                    for name in NAMES:
                        await admin.delete(WORKS, name, namespace=ES)
                    for name in NAMES:
                        await eventually(lambda n=name: _gone(admin, n), what=f"{name} deleted")
                    reasons = {
                        e["reason"] for e in (await admin.list(EVENTS, namespace=ES))["items"]
                    }
                    assert EVENT_DELETION_HELD not in reasons
                    held = condition(await _cluster(admin), CONDITION_DELETION_HELD)
                    assert held is None or held["status"] == "False"

                    # The agent's clock set right: 10 minutes back, the servers' untouched.
                    ready = condition(await _cluster(admin), "Ready")
                    assert ready is not None
                    assert ready["status"] == "True"
                    corrected_at = await _renew_time(admin)
                    t.shift(-AHEAD)
                    for emulator in (cp, member):
                        emulator.set_clock_offset(0)

                    # Renewals go on, in the control plane's time, for longer than its grace.
                    async def renewed_well_after() -> bool:
                        renewed = await _renew_time(admin)
                        return (renewed - corrected_at).total_seconds() > 2 * GRACE

                    await eventually(renewed_well_after, timeout=30, what="renewals go on")
                    after = condition(await _cluster(admin), "Ready")
                    assert after is not None
                    assert after["status"] == "True"
                    assert after["lastTransitionTime"] == ready["lastTransitionTime"], (
                        "Ready flapped"
                    )
                    await eventually(
                        lambda: _clock_condition(admin, "True"), what="ClockSynchronized=True"
                    )
                    assert not task.done()
        finally:
            await admin.close()
