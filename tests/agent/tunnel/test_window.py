"""The bytes one relayed connection may have handed to the shared call and not yet seen written."""

from __future__ import annotations

import asyncio

import pytest

from agent.tunnel.grpc_call import GrpcError
from agent.tunnel.window import SendWindow


def _future() -> asyncio.Future[None]:
    return asyncio.get_running_loop().create_future()


async def test_hands_over_until_the_limit_then_waits_for_a_write() -> None:
    window = SendWindow(100)
    first, second = _future(), _future()
    await asyncio.wait_for(window.admit(), 1)  # nothing in flight
    window.track(first, 60)
    await asyncio.wait_for(window.admit(), 1)  # 60 < 100: room for one more hand-over
    window.track(second, 60)
    assert (window.in_flight, window.has_room) == (120, False)

    waiting = asyncio.create_task(window.admit())
    first.set_result(None)
    await asyncio.wait_for(waiting, 1)  # woken by the write, not by time
    assert (window.in_flight, window.has_room) == (60, True)
    second.set_result(None)
    await asyncio.wait_for(window.admit(), 1)
    assert window.in_flight == 0


async def test_a_write_still_in_flight_keeps_the_window_closed() -> None:
    window = SendWindow(100)
    written, pending = _future(), _future()
    window.track(written, 100)
    window.track(pending, 100)
    waiting = asyncio.create_task(window.admit())
    written.set_result(None)
    await _ran_callbacks()
    assert window.in_flight == 100
    assert not waiting.done()  # 100 is not below the limit of 100
    pending.set_result(None)
    await asyncio.wait_for(waiting, 1)


async def test_a_window_shared_by_connections_wakes_every_waiter() -> None:
    window = SendWindow(100)
    written = _future()
    window.track(written, 150)
    first = asyncio.create_task(window.admit())
    second = asyncio.create_task(window.admit())
    gone = asyncio.create_task(window.admit())
    await _ran_callbacks()  # all three wait
    gone.cancel()  # one of them goes away: the others still wake
    written.set_result(None)
    await asyncio.wait_for(asyncio.gather(first, second), 1)
    assert gone.cancelled()


async def test_withdraw_cancels_what_is_in_flight_and_opens_the_window() -> None:
    window = SendWindow(10)
    written = [_future() for _ in range(3)]
    for future in written:
        window.track(future, 10)
    written[0].set_result(None)  # already written: not withdrawn
    window.withdraw()
    assert [f.cancelled() for f in written] == [False, True, True]
    await asyncio.wait_for(window.admit(), 1)
    assert window.in_flight == 0


async def test_a_failed_write_is_raised_by_the_next_admit() -> None:
    window = SendWindow(10)
    failed = _future()
    window.track(failed, 5)
    failed.set_exception(GrpcError("the call is closed"))
    await _ran_callbacks()
    with pytest.raises(GrpcError, match="the call is closed"):
        await window.admit()
    assert window.in_flight == 0


async def _ran_callbacks() -> None:
    """Let done-callbacks scheduled so far run: a future of our own, done after them."""
    loop = asyncio.get_running_loop()
    after: asyncio.Future[None] = loop.create_future()
    loop.call_soon(after.set_result, None)
    await after
