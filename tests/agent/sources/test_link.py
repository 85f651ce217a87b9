"""ControlPlaneLink: a long outage is a gap of more than the lease duration between renewals,
as this process saw them or as the Lease's renewTime says (after a restart)."""

from __future__ import annotations

import datetime

from agent.kube.clock import FakeClock
from agent.sources.link import ControlPlaneLink, Outage

LEASE = 40.0
WALL = datetime.datetime(2026, 5, 1, 12, 0, 0, tzinfo=datetime.UTC)


def link_at(clock: FakeClock) -> ControlPlaneLink:
    return ControlPlaneLink(
        LEASE,
        clock=clock,
        wall_clock=lambda: WALL + datetime.timedelta(seconds=clock.now() - 1000.0),
    )


def test_renewals_within_the_lease_are_no_outage() -> None:
    clock = FakeClock()
    link = link_at(clock)
    assert not link.known
    link.renewed()
    for _ in range(5):
        clock.advance(10)
        link.renewed()
    assert link.known
    assert link.outage() is None


def test_failing_renewals_past_the_lease_are_an_ongoing_outage_then_a_past_one() -> None:
    clock = FakeClock()
    link = link_at(clock)
    link.renewed()
    clock.advance(LEASE - 1)
    assert link.outage() is None
    clock.advance(31)
    ongoing = link.outage()
    assert ongoing == Outage(70.0, clock.now(), ongoing=True)
    clock.advance(20)
    link.renewed()
    assert link.outage() == Outage(90.0, clock.now())


def test_a_restarted_agent_learns_the_outage_from_the_lease_renew_time() -> None:
    clock = FakeClock()
    link = link_at(clock)
    stale = (WALL - datetime.timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    link.renewed(stale)
    outage = link.outage()
    assert outage is not None
    assert round(outage.seconds) == 300
    assert not outage.ongoing


def test_a_lease_read_by_the_guard_tells_the_same() -> None:
    clock = FakeClock()
    link = link_at(clock)
    fresh = (WALL - datetime.timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    link.observe_lease({"spec": {"renewTime": fresh}})
    assert link.known
    assert link.outage() is None
    link = link_at(clock)
    link.observe_lease(None)  # a new cluster: no Lease yet
    assert link.known
    assert link.outage() is None
    stale = (WALL - datetime.timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    link.observe_lease({"spec": {"renewTime": stale}})
    outage = link.outage()
    assert outage is not None
    assert round(outage.seconds) == 120
