"""ControlPlaneLink: a long outage is a gap of more than the lease duration between renewals,
as this process saw them on its monotonic clock, or as the Lease's renewTime says by the control
plane's clock (after a restart); the agent's own wall clock has no say."""

from __future__ import annotations

import datetime
import time

import pytest

from agent.kube.clock import FakeClock
from agent.sources.link import ControlPlaneLink, Outage

LEASE = 40.0
WALL = datetime.datetime(2026, 5, 1, 12, 0, 0, tzinfo=datetime.UTC)


def link_at(clock: FakeClock) -> ControlPlaneLink:
    """A link whose control plane's clock reads WALL when the agent's monotonic clock reads
    1000 (FakeClock's start)."""
    return ControlPlaneLink(
        LEASE,
        clock=clock,
        server_time=lambda: WALL.timestamp() + clock.now() - 1000.0,
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


def test_the_agents_wall_clock_has_no_say(monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent whose clock is 10 minutes ahead, restarted right after another agent renewed:
    by the control plane's clock the Lease is 4 s old, no outage."""
    ahead = WALL + datetime.timedelta(minutes=10)
    monkeypatch.setattr(time, "time", lambda: ahead.timestamp())
    clock = FakeClock()
    link = link_at(clock)
    recent = (WALL - datetime.timedelta(seconds=4)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    link.renewed(recent)
    assert link.outage() is None


def test_without_the_control_planes_time_the_lease_tells_nothing() -> None:
    clock = FakeClock()
    link = ControlPlaneLink(LEASE, clock=clock, server_time=lambda: None)
    stale = (WALL - datetime.timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    link.observe_lease({"spec": {"renewTime": stale}})
    link.renewed(stale)
    assert link.outage() is None


def test_a_first_renewal_long_after_start_is_an_outage() -> None:
    """Started while the control plane was out of reach (serving its record): the first
    renewal, 90 s later on the agent's monotonic clock, ends an outage of at least that."""
    clock = FakeClock()
    link = ControlPlaneLink(LEASE, clock=clock, server_time=lambda: None)
    clock.advance(90)
    link.renewed()
    outage = link.outage()
    assert outage is not None
    assert outage.seconds == 90
