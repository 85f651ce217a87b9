"""cancel_and_wait: children stopped, their endings ignored, the caller's cancellation kept."""

from __future__ import annotations

import asyncio

import pytest

from agent.kube.tasks import cancel_and_wait


async def test_children_are_cancelled_and_their_failures_ignored() -> None:
    async def forever() -> None:
        await asyncio.Event().wait()

    async def fails() -> None:
        raise RuntimeError("boom")

    children = [asyncio.create_task(forever()), asyncio.create_task(fails())]
    await asyncio.sleep(0)
    await cancel_and_wait(children)
    assert children[0].cancelled()
    assert isinstance(children[1].exception(), RuntimeError)


async def test_a_cancellation_of_the_caller_while_it_waits_is_raised() -> None:
    """The caller is cancelled while its child is still finishing: it must stop, where
    `suppress(CancelledError): await child` would carry on as if nothing had happened."""
    child_stopping = asyncio.Event()
    release = asyncio.Event()

    async def slow_to_stop() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            child_stopping.set()
            await release.wait()

    carried_on = False

    async def caller() -> None:
        nonlocal carried_on
        child = asyncio.create_task(slow_to_stop())
        await asyncio.sleep(0)
        await cancel_and_wait([child])
        carried_on = True

    task = asyncio.create_task(caller())
    await asyncio.wait_for(child_stopping.wait(), 5)
    task.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not carried_on
