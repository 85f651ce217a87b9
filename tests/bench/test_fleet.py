"""bench.fleet's pure parts: the bounded start, the progress wait, the Lease ages, the idle
request breakdown and the connection counts."""

from __future__ import annotations

import asyncio
import datetime
import os
import socket

import pytest

from bench.agent_latency import tcp_connections
from bench.fleet import (
    age_summary,
    bounded,
    connection_summary,
    idle_requests,
    is_lease_renewal,
    lease_ages,
    wait_counting,
)


async def test_bounded_never_runs_more_than_the_limit_and_runs_every_item() -> None:
    running, peak, seen = [0], [0], []
    lines: list[str] = []

    async def start(item: int) -> None:
        running[0] += 1
        peak[0] = max(peak[0], running[0])
        await asyncio.sleep(0)  # let the others in if the gate allowed them
        await asyncio.sleep(0)
        seen.append(item)
        running[0] -= 1

    await bounded(list(range(20)), 3, start, "started", lines.append)
    assert sorted(seen) == list(range(20))
    assert peak[0] == 3
    assert lines[-1].startswith("  started: 20/20")


async def test_bounded_lets_every_start_finish_then_raises_the_failure() -> None:
    finished: list[int] = []

    async def start(item: int) -> None:
        await asyncio.sleep(0)
        if item == 1:
            raise RuntimeError("member 1 did not start")
        finished.append(item)

    with pytest.raises(RuntimeError, match="member 1"):
        await bounded([0, 1, 2, 3], 2, start, "started", lambda _: None)
    # The others were started and are known (so that they can be stopped).
    assert sorted(finished) == [0, 2, 3]


async def test_wait_counting_returns_at_the_total_and_times_out_with_the_count() -> None:
    values = iter([1, 2, 3])

    async def count() -> int:
        return next(values)

    lines: list[str] = []
    await wait_counting(count, 3, 10, "ready", lines.append, interval=0)
    assert len(lines) == 1
    assert lines[0].startswith("  ready: 3/3")

    async def stuck() -> int:
        return 1

    with pytest.raises(TimeoutError, match="ready: 1/3"):
        await wait_counting(stuck, 3, 0.0, "ready", lambda _: None, interval=0)


def test_lease_ages_are_of_the_wanted_leases_since_their_renewal() -> None:
    now = datetime.datetime(2026, 11, 28, 8, 0, 10, tzinfo=datetime.UTC)
    leases = [
        {"metadata": {"name": "member1"}, "spec": {"renewTime": "2026-11-28T08:00:00.000000Z"}},
        {"metadata": {"name": "member2"}, "spec": {"renewTime": "2026-11-28T08:00:07.500000Z"}},
        {"metadata": {"name": "member3"}, "spec": {}},  # never renewed yet
        {"metadata": {"name": "other"}, "spec": {"renewTime": "2026-11-28T07:00:00.000000Z"}},
    ]
    ages = lease_ages(leases, {"member1", "member2", "member3"}, now)
    assert ages == [10.0, 2.5]


def test_age_summary_gives_the_p99_and_max() -> None:
    summary = age_summary([float(i) for i in range(1, 101)])
    assert summary == {"samples": 100, "p50_seconds": 50.5, "p99_seconds": 99.0,
                       "max_seconds": 100.0}  # fmt: skip
    assert age_summary([]) == {"samples": 0}


def test_idle_requests_tell_lease_renewals_from_everything_else() -> None:
    assert is_lease_renewal("update leases")
    assert not is_lease_renewal("get leases")
    assert not is_lease_renewal("patch clusters/status")
    only = idle_requests({"update leases": 600}, 1.0, 100)
    assert only["only_lease_renewals"]
    assert only["lease_renewals_per_minute_per_agent"] == 6.0
    assert only["per_minute"] == {"total": 600.0, "update leases": 600.0}
    mixed = idle_requests(
        {"update leases": 60, "patch clusters/status": 10, "watch works": 5}, 0.5, 10
    )
    assert not mixed["only_lease_renewals"]
    assert mixed["not_lease_renewals_per_minute"] == {
        "total": 30.0,
        "patch clusters/status": 20.0,
        "watch works": 10.0,
    }
    assert mixed["writes_not_lease_renewals_per_minute"] == {
        "total": 20.0,
        "patch clusters/status": 20.0,
    }
    assert mixed["lease_renewals_per_minute_per_agent"] == 12.0


def test_connection_summary_names_the_agents_off_one_connection() -> None:
    summary = connection_summary({"member1": 1, "member2": 2, "member3": 0})
    assert summary == {
        "total": 3,
        "per_agent_min": 0,
        "per_agent_max": 2,
        "agents_with_more_than_one": ["member2"],
        "agents_with_none": ["member3"],
    }


async def test_established_connections_are_counted_on_each_side() -> None:
    accepted: list[socket.socket] = []
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
        try:
            accepted = [server.accept()[0] for _ in clients]
            # This process holds both ends: 3 to the port, 3 accepted on it.
            assert tcp_connections(os.getpid(), port) == 3
            assert tcp_connections(os.getpid(), port, end="local") == 3
        finally:
            for sock in clients + accepted:
                sock.close()
