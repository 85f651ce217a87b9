"""Backoff and the reconnect slots of an unreachable server."""

from __future__ import annotations

import asyncio

from agent.kube.backoff import Backoff
from agent.kube.reachability import Reachability, sleep_unless_answered


def test_backoff_doubles_with_jitter_up_to_the_cap_and_resets() -> None:
    backoff = Backoff(initial=1.0, cap=8.0, jitter=0.5)
    waits = [backoff.next() for _ in range(8)]
    for wait, base in zip(waits, (1, 2, 4, 8, 8, 8, 8, 8), strict=True):
        assert base * 0.5 <= wait <= base * 1.5
    backoff.reset()
    assert 0.5 <= backoff.next() <= 1.5


def test_without_jitter_the_schedule_is_exact() -> None:
    backoff = Backoff(initial=0.2, cap=7.0, jitter=0.0)
    assert [backoff.next() for _ in range(7)] == [0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 7.0]
    backoff.reset()
    assert backoff.next() == 0.2


def test_spread_above_never_waits_less_than_the_schedule() -> None:
    # client-go's wait.Jitter(d, 1.0), as its reflector backs off: d up to 2d.
    backoff = Backoff(initial=0.8, cap=30.0, jitter=1.0, spread="above")
    waits = [backoff.next() for _ in range(8)]
    for wait, base in zip(waits, (0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0), strict=True):
        assert base <= wait <= 2 * base


def test_step_counts_failures_kept_elsewhere_and_never_overflows() -> None:
    backoff = Backoff(initial=0.005, cap=1000.0, jitter=0.0)
    assert [backoff.step(n) for n in range(4)] == [0.005, 0.01, 0.02, 0.04]
    assert backoff.step(100) == 1000.0
    assert backoff.step(5000) == 1000.0
    assert backoff.failures == 0  # step leaves the schedule's own count alone


def test_jitter_spreads_clients_cut_off_together() -> None:
    firsts = {round(Backoff(initial=10.0).next(), 3) for _ in range(20)}
    assert len(firsts) > 10


def test_unreachable_server_admits_one_request_per_slot() -> None:
    reachability = Reachability("server", backoff=Backoff(initial=60.0, cap=60.0))
    assert reachability.admit() is None  # reachable: everything goes
    reachability.failed("connect refused")
    # The first slot is a backoff away: meanwhile nothing dials.
    waits = [reachability.admit() for _ in range(5)]
    assert all(w is not None and 0 < w <= 90.0 for w in waits)
    assert reachability.refused == 5
    reachability.answered()
    assert reachability.admit() is None


def test_without_a_backoff_nothing_is_held_back() -> None:
    reachability = Reachability("member")
    reachability.failed("connect refused")
    assert [reachability.admit() for _ in range(3)] == [None, None, None]


async def test_a_retry_waiting_out_an_outage_goes_when_either_server_answers() -> None:
    reachability = Reachability("server", backoff=Backoff(initial=60.0, cap=60.0))
    reachability.failed("connect refused")
    member = Reachability("member")
    member.failed("connection reset")
    waiting = asyncio.create_task(sleep_unless_answered(3600, [member, reachability]))
    await asyncio.sleep(0)  # let it start waiting
    assert not waiting.done()
    reachability.answered()
    await asyncio.wait_for(waiting, 1)
    # Reachable now: no wait at all (a failure that got an answer is retried after a plain
    # sleep by the callers).
    await asyncio.wait_for(sleep_unless_answered(3600, [reachability]), 1)
