from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent.kube.reflector import HandlerFuncs, Reflector
from agent.kube.resources import CONFIGMAPS
from agent.kube.store import drop_managed_fields
from tests.agent.controllers.harness import HeldEvents
from tests.agent.kube.wire import Call, Emulated, emulated, status, wait_for

PATH = "/api/v1/namespaces/ns/configmaps"
MERGE = "application/merge-patch+json"


def cm(name: str, data: str = "") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns"}, "data": {"v": data}}


async def with_configmaps(*names: str, **config: float) -> Emulated:
    api = emulated(**config)
    await api.namespace("ns")
    for name in names:
        await api.admin.create(PATH, cm(name))
    return api


async def write_elsewhere(api: Emulated) -> str:
    """A write the reflector does not watch; the server's revision moves on. Returns it."""
    await api.admin.create("/api/v1/namespaces", {"metadata": {"generateName": "elsewhere-"}})
    return str(api.server.storage.revision)


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def handler(self) -> HandlerFuncs:
        return HandlerFuncs(
            add=lambda o: self.events.append(("add", o["metadata"]["name"])),
            update=lambda old, new: self.events.append(("update", new["metadata"]["name"])),
            delete=lambda o: self.events.append(("delete", o["metadata"]["name"])),
        )


async def start(reflector: Reflector) -> asyncio.Task[None]:
    task = asyncio.create_task(reflector.run())
    assert await reflector.wait_synced(5)
    return task


async def break_watch_and_hold_the_next(api: Emulated) -> asyncio.Event:
    """The server ends the reflector's (first) watch; the next one is made and waits for its
    answer until the returned gate is set."""
    gate = asyncio.Event()

    async def hold_watches(call: Call) -> None:
        if call.params.get("watch"):
            await gate.wait()

    api.wire.answers.append(hold_watches)
    api.server.close()
    await wait_for(lambda: len(api.wire.watch_calls()) == 2)
    return gate


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_list_then_watch_resume_from_bookmark() -> None:
    api = await with_configmaps("a", bookmark_interval=0.02)
    listed = str(api.server.storage.revision)
    rec = Recorder()
    reflector = Reflector(
        api.client(),
        CONFIGMAPS,
        namespace="ns",
        transform=drop_managed_fields,
        backoff_initial=0.001,
    )
    reflector.add_handler(rec.handler())
    task = await start(reflector)
    assert rec.events == [("add", "a")]
    await api.admin.create(PATH, cm("b"))
    current = await api.admin.get(f"{PATH}/a")
    await api.admin.update(f"{PATH}/a", {**current, "data": {"v": "x"}})
    await wait_for(lambda: len(rec.events) == 3)
    # Only a bookmark can bring the reflector to a revision of a write it does not watch.
    bookmarked = await write_elsewhere(api)
    await wait_for(lambda: reflector.last_resource_version == bookmarked)
    api.server.close()  # the server ends the stream
    await wait_for(lambda: len(api.wire.watch_calls()) >= 2)
    first, second = api.wire.watch_calls()[:2]
    assert first.params["resourceVersion"] == listed
    assert first.params["allowWatchBookmarks"] == "true"
    assert second.params["resourceVersion"] == bookmarked
    assert reflector.lists == 1
    assert rec.events == [("add", "a"), ("add", "b"), ("update", "a")]
    stored = reflector.store.get("ns/a")
    assert stored is not None
    assert "managedFields" not in stored["metadata"]
    assert stored["data"] == {"v": "x"}
    await api.admin.delete(f"{PATH}/b")
    await wait_for(lambda: ("delete", "b") in rec.events)
    assert "ns/b" not in reflector.store
    await stop(task)


async def test_relist_on_watch_410_emits_synthetic_deltas() -> None:
    api = await with_configmaps("keep", "change", "gone")
    rec = Recorder()
    reflector = Reflector(api.client(), CONFIGMAPS, namespace="ns", backoff_initial=0.001)
    reflector.add_handler(rec.handler())
    task = await start(reflector)
    rec.events.clear()
    await wait_for(lambda: len(api.wire.watch_calls()) == 1)
    # The server ends the watch; the next one waits while the server changes and compacts.
    gate = await break_watch_and_hold_the_next(api)
    # Meanwhile on the server: one changed, one deleted, one added.
    await api.admin.delete(f"{PATH}/gone")
    current = await api.admin.get(f"{PATH}/change")
    await api.admin.update(f"{PATH}/change", {**current, "data": {"v": "changed"}})
    await api.admin.create(PATH, cm("new"))
    api.server.storage.compact()
    # The watch from the old resourceVersion gets an ERROR event: 410 Expired.
    gate.set()
    await wait_for(lambda: reflector.lists == 2 and len(rec.events) == 3)
    assert sorted(rec.events) == [("add", "new"), ("delete", "gone"), ("update", "change")]
    assert sorted(reflector.store.keys()) == ["ns/change", "ns/keep", "ns/new"]
    await stop(task)


async def test_watch_request_410_relists_and_other_errors_back_off() -> None:
    api = await with_configmaps("a")
    failures = {"n": 0}

    def interceptor(call: Any) -> Any:
        import httpx

        if call.params.get("watch") and failures["n"] < 2:
            failures["n"] += 1
            code, reason = (500, "InternalError") if failures["n"] == 1 else (410, "Expired")
            return httpx.Response(code, json=status(code, reason))
        return None

    # HTTP errors on the watch request itself, as a proxy or an older server may answer.
    api.wire.answers.append(interceptor)
    reflector = Reflector(api.client(), CONFIGMAPS, namespace="ns", backoff_initial=0.001)
    task = await start(reflector)
    await wait_for(lambda: len(api.wire.watch_calls()) >= 3)
    assert reflector.lists == 2  # the 500 resumed the watch, the 410 relisted
    await stop(task)


async def test_watch_list_mode() -> None:
    api = await with_configmaps("a")
    snapshot = str(api.server.storage.revision)
    rec = Recorder()
    reflector = Reflector(api.client(), CONFIGMAPS, namespace="ns", use_watch_list=True)
    reflector.add_handler(rec.handler())
    task = await start(reflector)
    assert rec.events == [("add", "a")]
    # The bookmark that ends the initial events carries the snapshot's resourceVersion.
    assert reflector.last_resource_version == snapshot
    params = api.wire.watch_calls()[0].params
    assert params["sendInitialEvents"] == "true"
    assert params["resourceVersionMatch"] == "NotOlderThan"
    assert not any(c.params.get("watch") is None for c in api.wire.calls)  # no list call
    await stop(task)


async def test_watch_list_refused_falls_back_to_list_then_watch_for_good() -> None:
    # A server without the WatchList feature refuses sendInitialEvents (422), as kube-apiserver
    # does with the feature off.
    api = await with_configmaps("a")
    refused = {"n": 0, "expire": 0}

    def interceptor(call: Any) -> Any:
        import httpx

        if call.params.get("sendInitialEvents") == "true":
            refused["n"] += 1
            return httpx.Response(422, json=status(422, "Invalid"))
        if call.params.get("watch") and refused["expire"]:
            refused["expire"] -= 1
            return httpx.Response(410, json=status(410, "Expired"))
        return None

    api.wire.answers.append(interceptor)
    rec = Recorder()
    reflector = Reflector(
        api.client(), CONFIGMAPS, namespace="ns", use_watch_list=True, backoff_initial=0.001
    )
    reflector.add_handler(rec.handler())
    task = await start(reflector)
    assert rec.events == [("add", "a")]
    assert (refused["n"], reflector.lists) == (1, 1)
    # A relist (the watch expired) lists at once: the refusal is remembered.
    refused["expire"] = 1
    await api.admin.create(PATH, cm("b"))
    assert await api.faults.drop_watches() == 1
    await wait_for(lambda: reflector.lists == 2 and ("add", "b") in rec.events)
    assert refused["n"] == 1
    await stop(task)


class _RecordingClock:
    """Real time, except that sleeps are recorded and return at once."""

    def __init__(self) -> None:
        from agent.kube.clock import RealClock

        self._real = RealClock()
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self._real.now()

    def call_later(self, delay: float, callback: Any) -> Any:
        return self._real.call_later(delay, callback)

    async def sleep(self, delay: float) -> None:
        self.sleeps.append(delay)
        await asyncio.sleep(0)


async def test_cut_streams_resume_without_growing_backoff() -> None:
    api = await with_configmaps("a", bookmark_interval=0.02)
    clock = _RecordingClock()
    reflector = Reflector(
        api.client(), CONFIGMAPS, namespace="ns", backoff_initial=0.5, clock=clock
    )
    task = await start(reflector)
    bookmarks = []
    for cut in range(4):
        # A bookmark arrives on the established stream, then the connection is cut.
        await wait_for(lambda n=cut: len(api.wire.watch_calls()) == n + 1)
        bookmarks.append(await write_elsewhere(api))
        await wait_for(lambda: reflector.last_resource_version == bookmarks[-1])
        assert await api.faults.drop_watches() == 1
    await wait_for(lambda: len(api.wire.watch_calls()) >= 5)
    await stop(task)
    # Each cut came after the stream was established: every retry starts from the initial
    # delay (with jitter up to 2x) instead of doubling towards the maximum.
    assert len(clock.sleeps) >= 4
    assert all(0.5 <= s <= 1.0 for s in clock.sleeps[:4])
    # And each resumed from the last bookmark's resourceVersion, without relisting.
    assert reflector.lists == 1
    resumed = [c.params.get("resourceVersion") for c in api.wire.watch_calls()[1:5]]
    assert resumed == bookmarks


async def test_an_outage_does_not_grow_the_backoff() -> None:
    """The first error the server answers once it is back from an outage is retried after the
    initial delay, not after what the outage's failures had doubled it to (a watch started
    during a long outage would otherwise wait up to the maximum, 30 s, after a single 500).
    During the outage the delay grows as usual (each wait ends when the server answers)."""
    import httpx

    api = await with_configmaps("a")
    clock = _RecordingClock()
    outcomes = ["down"] * 12 + ["500"]

    def interceptor(call: Any) -> Any:
        if call.params.get("watch") or not outcomes:
            return None  # lists only
        if outcomes.pop(0) == "down":
            raise httpx.ConnectError("connection refused")
        return httpx.Response(500, json=status(500, "InternalError"))

    api.wire.answers.append(interceptor)
    reflector = Reflector(
        api.client(), CONFIGMAPS, namespace="ns", backoff_initial=0.5, clock=clock
    )
    task = await start(reflector)
    await stop(task)
    assert not outcomes
    *outage, after_500 = clock.sleeps
    assert outage[-1] > 2.0, clock.sleeps  # grown while nothing answered
    assert 0.5 <= after_500 <= 1.0, clock.sleeps


# --- the answers to our own writes ---------------------------------------------------------------


def rv(obj: dict[str, Any] | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("resourceVersion"))


async def watched(*names: str) -> tuple[Emulated, Reflector, list[str], asyncio.Task[None]]:
    """A synced reflector of the ConfigMaps `names`, and the resourceVersions its handlers
    saw, in order."""
    api = await with_configmaps(*names)
    reflector = Reflector(api.client(), CONFIGMAPS, namespace="ns", backoff_initial=0.001)
    seen: list[str] = []
    reflector.add_handler(
        HandlerFuncs(add=lambda o: seen.append(rv(o)), update=lambda _o, n: seen.append(rv(n)))
    )
    return api, reflector, seen, await start(reflector)


async def test_an_answer_is_cached_and_the_older_events_before_it_are_left_out() -> None:
    api, reflector, seen, task = await watched("a")
    client = api.client()
    try:
        held = HeldEvents(reflector, lambda _e: True)
        theirs = await api.admin.patch(f"{PATH}/a", {"data": {"v": "theirs"}}, MERGE)
        with reflector.writing("ns/a") as write:
            ours = await client.patch(CONFIGMAPS, "a", {"data": {"w": "ours"}}, namespace="ns")
            write.answered(ours)
        assert rv(reflector.store.get("ns/a")) == rv(ours)
        assert reflector.is_own_write(ours)
        await held.arrived(2)
        held.release()
        # Their change came inside our answer; its own event and our echo are no news.
        assert seen[1:] == [rv(ours)]
        assert rv(theirs) not in seen
        assert reflector.store.get("ns/a") == ours
        then = await api.admin.patch(f"{PATH}/a", {"data": {"v": "later"}}, MERGE)
        await wait_for(lambda: rv(reflector.store.get("ns/a")) == rv(then))
        assert not reflector.is_own_write(reflector.store.get("ns/a") or {})
    finally:
        await stop(task)


async def test_a_write_that_changed_nothing_waits_for_no_event() -> None:
    api, reflector, _seen, task = await watched("a")
    client = api.client()
    try:
        before = reflector.store.get("ns/a")
        with reflector.writing("ns/a") as write:
            same = await client.patch(CONFIGMAPS, "a", {"data": {"v": ""}}, namespace="ns")
            write.answered(same)
        assert rv(same) == rv(before)
        # The next change by anyone is taken in: nothing is waited for.
        theirs = await api.admin.patch(f"{PATH}/a", {"data": {"v": "theirs"}}, MERGE)
        await wait_for(lambda: rv(reflector.store.get("ns/a")) == rv(theirs))
    finally:
        await stop(task)


async def test_an_answer_the_watch_brought_first_does_not_take_the_cache_back() -> None:
    api, reflector, seen, task = await watched("a")
    client = api.client()
    try:
        with reflector.writing("ns/a") as write:
            ours = await client.patch(CONFIGMAPS, "a", {"data": {"v": "ours"}}, namespace="ns")
            # The answer is slow: the watch brings it, then a later change, first.
            theirs = await api.admin.patch(f"{PATH}/a", {"data": {"v": "theirs"}}, MERGE)
            await wait_for(lambda: rv(reflector.store.get("ns/a")) == rv(theirs))
            write.answered(ours)
        assert rv(reflector.store.get("ns/a")) == rv(theirs)
        assert seen[1:] == [rv(ours), rv(theirs)]
    finally:
        await stop(task)


@pytest.mark.parametrize("newer_first", [True, False])
async def test_two_writes_of_one_object_answered_in_either_order_never_go_back(
    newer_first: bool,
) -> None:
    api, reflector, seen, task = await watched("a")
    client = api.client()
    try:
        held = HeldEvents(reflector, lambda _e: True)
        with reflector.writing("ns/a") as first, reflector.writing("ns/a") as second:
            one = await client.patch(CONFIGMAPS, "a", {"data": {"v": "1"}}, namespace="ns")
            two = await client.patch(CONFIGMAPS, "a", {"data": {"v": "2"}}, namespace="ns")
            # Which of two answers is newer cannot be told from their versions: the first
            # answered is cached, the other left to the watch.
            if newer_first:
                second.answered(two)
                first.answered(one)
            else:
                first.answered(one)
                second.answered(two)
        await held.arrived(2)
        held.release()
        assert seen[1:] == ([rv(two)] if newer_first else [rv(one), rv(two)])
        assert rv(reflector.store.get("ns/a")) == rv(two)
    finally:
        await stop(task)


async def test_after_a_relist_the_list_is_the_truth() -> None:
    api, reflector, _seen, task = await watched("a")
    client = api.client()
    try:
        held = HeldEvents(reflector, lambda _e: True)
        with reflector.writing("ns/a") as write:
            ours = await client.patch(CONFIGMAPS, "a", {"data": {"v": "ours"}}, namespace="ns")
            write.answered(ours)
        # The watch breaks before it brings our write; the next one waits while the server
        # changes and compacts, and gets 410: relist.
        gate = await break_watch_and_hold_the_next(api)
        held.events.clear()  # the broken stream's: never delivered
        held.release()
        theirs = await api.admin.patch(f"{PATH}/a", {"data": {"v": "theirs"}}, MERGE)
        api.server.storage.compact()
        gate.set()
        await wait_for(lambda: reflector.lists == 2)
        assert rv(reflector.store.get("ns/a")) == rv(theirs)
        # Nothing of our write is waited for any more.
        later = await api.admin.patch(f"{PATH}/a", {"data": {"v": "later"}}, MERGE)
        await wait_for(lambda: rv(reflector.store.get("ns/a")) == rv(later))
    finally:
        await stop(task)
