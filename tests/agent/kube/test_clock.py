"""ServerClock: an API server's clock from the Date of its answers, on the agent's monotonic
clock; and the transport feeding it from the answers it gets anyway."""

from __future__ import annotations

import time
from email.utils import formatdate

import pytest

from agent.kube.clock import ServerClock
from agent.kube.resources import CONFIGMAPS
from tests.agent.kube.wire import emulated

# The server's clock reads SERVER_EPOCH when the agent's monotonic clock reads 0.
SERVER_EPOCH = 1_800_000_000.25


class Moments:
    """The agent's monotonic clock and wall clock, moved by hand."""

    def __init__(self, wall_ahead: float = 0.0) -> None:
        self.monotonic = 0.0
        self.wall_ahead = wall_ahead

    def wall(self) -> float:
        return SERVER_EPOCH + self.monotonic + self.wall_ahead

    def answer(self, clock: ServerClock, rtt: float = 0.05, server_offset: float = 0.0) -> None:
        """One request and its answer, dated by the server at the middle of the round trip."""
        sent = self.monotonic
        dated = SERVER_EPOCH + server_offset + sent + rtt / 2
        self.monotonic += rtt
        clock.observe(formatdate(dated, usegmt=True), sent, self.monotonic)


def server_clock(moments: Moments) -> ServerClock:
    return ServerClock(monotonic=lambda: moments.monotonic, wall=moments.wall)


def test_unknown_until_a_dated_answer() -> None:
    moments = Moments()
    clock = server_clock(moments)
    clock.observe(None, 0.0, 0.1)
    clock.observe("not a date", 0.0, 0.1)
    assert not clock.known
    assert clock.now() is None
    assert clock.skew() is None


def test_answers_at_different_moments_narrow_the_estimate_below_a_second() -> None:
    moments = Moments()
    clock = server_clock(moments)
    moments.answer(clock)
    assert clock.uncertainty == pytest.approx(0.5 + 0.025, abs=0.03)
    for _ in range(40):
        moments.monotonic += 0.37  # answers fall at different fractions of the second
        moments.answer(clock)
    assert clock.uncertainty < 0.1
    now = clock.now()
    assert now is not None
    assert now == pytest.approx(SERVER_EPOCH + moments.monotonic, abs=0.1)


def test_the_agents_wall_clock_has_no_say_in_the_servers_time_and_skew_tells_it() -> None:
    moments = Moments(wall_ahead=600.0)
    clock = server_clock(moments)
    for _ in range(10):
        moments.monotonic += 0.29
        moments.answer(clock)
    now = clock.now()
    skew = clock.skew()
    assert now is not None
    assert skew is not None
    assert now == pytest.approx(SERVER_EPOCH + moments.monotonic, abs=0.5)
    assert skew == pytest.approx(600.0, abs=0.5)
    # The agent's clock set right: its skew follows, the server's time does not move.
    moments.wall_ahead = 0.0
    assert clock.now() == pytest.approx(now, abs=0.01)
    assert clock.skew() == pytest.approx(0.0, abs=0.5)


def test_a_server_clock_that_steps_is_followed() -> None:
    moments = Moments()
    clock = server_clock(moments)
    for _ in range(10):
        moments.monotonic += 0.31
        moments.answer(clock)
    moments.monotonic += 1.0
    moments.answer(clock, server_offset=-120.0)  # the server's clock set back two minutes
    assert clock.now() == pytest.approx(SERVER_EPOCH - 120.0 + moments.monotonic, abs=0.6)


def test_a_header_is_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import agent.kube.clock as module

    parsed: list[str] = []
    real = module.parsedate_to_datetime

    def counting(value: str) -> object:
        parsed.append(value)
        return real(value)

    monkeypatch.setattr(module, "parsedate_to_datetime", counting)
    clock = ServerClock(monotonic=lambda: 0.0)
    for _ in range(5):
        clock.observe("Tue, 01 Dec 2026 10:00:00 GMT", 0.0, 0.01)
    assert len(parsed) == 1
    assert clock.answers == 5


async def test_the_transport_learns_the_servers_clock_from_its_answers() -> None:
    api = emulated(clock=lambda: time.time() - 600)  # a server 10 minutes behind this host
    client = api.client()
    try:
        assert not client.transport.server_clock.known
        await client.list(CONFIGMAPS, namespace="default")
        with pytest.raises(Exception, match="404"):
            await client.get(CONFIGMAPS, "missing", namespace="default")
        clock = client.transport.server_clock
        assert clock.answers == 2
        skew = clock.skew()
        assert skew is not None
        assert skew == pytest.approx(600.0, abs=1.5)
        # The background sibling (Events, the Work record) shares what the connections learnt.
        assert client.transport.background().server_clock is clock
    finally:
        await client.close()
