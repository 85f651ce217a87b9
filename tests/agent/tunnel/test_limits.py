"""The tunnel's stream cap, and the heap given back after a burst."""

from __future__ import annotations

from agent.tunnel.limits import TRIM_AFTER, StreamLimit


def test_the_cap_holds_and_a_burst_is_trimmed_once_the_tunnel_is_idle() -> None:
    trims: list[int] = []
    limit = StreamLimit(TRIM_AFTER, trim=lambda: trims.append(limit.open))
    assert all(limit.acquire() for _ in range(TRIM_AFTER))
    assert not limit.acquire()
    assert limit.open == TRIM_AFTER
    for _ in range(TRIM_AFTER - 1):
        limit.release()
    assert trims == []  # one still open
    assert limit.acquire()  # a freed place is taken again
    limit.release()
    limit.release()
    assert trims == [0]
    assert limit.acquire()
    limit.release()
    assert trims == [0]  # a single connection is no burst


def test_reaching_the_cap_is_told_once_until_a_place_frees() -> None:
    limit = StreamLimit(1, trim=lambda: None)
    assert limit.acquire()
    assert not limit.acquire()
    assert [limit.first_refusal() for _ in range(3)] == [True, False, False]
    limit.release()
    assert limit.acquire()
    assert limit.first_refusal()
