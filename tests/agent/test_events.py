"""EventEmitter: core/v1 Events, aggregation of repeats, failures never raised."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

import httpx
import pytest

from agent.events import EventEmitter
from agent.kube.client import KubeClient
from agent.kube.config import ClientConfig
from agent.kube.errors import ForbiddenError
from agent.kube.resources import EVENTS, NAMESPACES
from agent.kube.transport import Transport
from emulator.emulator import run_emulator
from tests.agent.controllers.harness import kube_client
from tests.agent.kube.wire import wait_for

JsonDict = dict[str, Any]

WORK: JsonDict = {
    "apiVersion": "work.karmada.io/v1alpha1",
    "kind": "Work",
    "metadata": {
        "name": "web-abc",
        "namespace": "karmada-es-member1",
        "uid": "0f6c1d8e-1111-2222-3333-444455556666",
        "resourceVersion": "42",
    },
}


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_creates_then_aggregates_identical_events() -> None:
    async with run_emulator("karmada") as emu:
        client = kube_client(emu)
        await _namespace(client)
        clock = Clock()
        emitter = EventEmitter(client, component="karmada-agent", wall_clock=clock, monotonic=clock)
        try:
            emitter.emit(WORK, "Normal", "SyncSucceed", "synced")
            assert await emitter.flush(5.0)
            listed = (await client.list(EVENTS, namespace="karmada-es-member1"))["items"]
            assert len(listed) == 1
            event = listed[0]
            assert event["metadata"]["name"].startswith("web-abc.")
            int(event["metadata"]["name"].split(".", 1)[1], 16)
            assert event["involvedObject"] == {
                "apiVersion": "work.karmada.io/v1alpha1",
                "kind": "Work",
                "namespace": "karmada-es-member1",
                "name": "web-abc",
                "uid": "0f6c1d8e-1111-2222-3333-444455556666",
                "resourceVersion": "42",
            }
            assert (event["type"], event["reason"], event["message"]) == (
                "Normal",
                "SyncSucceed",
                "synced",
            )
            assert event["source"] == {"component": "karmada-agent"}
            assert event["reportingComponent"] == "karmada-agent"
            assert event["count"] == 1
            assert event["firstTimestamp"] == event["lastTimestamp"] == "2027-01-15T08:00:00Z"

            clock.now += 30
            emitter.emit(WORK, "Normal", "SyncSucceed", "synced")
            emitter.emit(WORK, "Normal", "SyncSucceed", "synced")
            assert await emitter.flush(5.0)
            listed = (await client.list(EVENTS, namespace="karmada-es-member1"))["items"]
            assert len(listed) == 1
            assert listed[0]["count"] == 3
            assert listed[0]["lastTimestamp"] == "2027-01-15T08:00:30Z"
            assert listed[0]["firstTimestamp"] == "2027-01-15T08:00:00Z"
            assert emu.accounting.counts(verb="create", resource="events") == 1
            assert emu.accounting.counts(verb="patch", resource="events") >= 1

            # A different message is a different Event; so is a repeat after the window.
            emitter.emit(WORK, "Warning", "SyncFailed", "boom")
            clock.now += 3600
            emitter.emit(WORK, "Normal", "SyncSucceed", "synced")
            assert await emitter.flush(5.0)
            listed = (await client.list(EVENTS, namespace="karmada-es-member1"))["items"]
            assert sorted((e["reason"], e["count"]) for e in listed) == [
                ("SyncFailed", 1),
                ("SyncSucceed", 1),
                ("SyncSucceed", 3),
            ]
        finally:
            await emitter.stop()
            await client.close()


async def test_event_deleted_meanwhile_is_created_again() -> None:
    async with run_emulator("karmada") as emu:
        client = kube_client(emu)
        await _namespace(client)
        emitter = EventEmitter(client)
        try:
            emitter.emit(WORK, "Normal", "X", "y")
            await emitter.flush(5.0)
            (event,) = (await client.list(EVENTS, namespace="karmada-es-member1"))["items"]
            await client.delete(EVENTS, event["metadata"]["name"], namespace="karmada-es-member1")
            emitter.emit(WORK, "Normal", "X", "y")
            await emitter.flush(5.0)
            (again,) = (await client.list(EVENTS, namespace="karmada-es-member1"))["items"]
            assert again["count"] == 2
        finally:
            await emitter.stop()
            await client.close()


async def test_an_event_whose_namespace_does_not_exist_is_tried_once() -> None:
    """A create answered 404 (the namespace is missing: a resource template's, gone or never
    there) is the server rejecting that Event, as client-go takes it: one request, and the
    Events behind it are written all the same."""
    async with run_emulator("karmada") as emu:
        client = kube_client(emu)
        await _namespace(client)
        emitter = EventEmitter(client, writers=1)
        template = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"namespace": "no-such-namespace", "name": "cm", "uid": "u1"},
        }
        try:
            emu.accounting.reset()
            emitter.emit(template, "Normal", "SyncSucceed", "applied")
            emitter.emit(WORK, "Normal", "SyncSucceed", "synced")
            assert await emitter.flush(5.0)
            assert emu.accounting.counts(verb="create", resource="events") == 2
            (event,) = (await client.list(EVENTS, namespace="karmada-es-member1"))["items"]
            assert event["reason"] == "SyncSucceed"
        finally:
            await emitter.stop()
            await client.close()


async def test_failures_are_logged_not_raised_and_writes_are_bounded() -> None:
    async with run_emulator("karmada") as emu:
        client = kube_client(emu)
        await _namespace(client)
        emitter = EventEmitter(client, max_in_flight=2)
        try:
            # The namespace does not exist: the API server refuses, the caller never knows.
            missing = {**WORK, "metadata": {**WORK["metadata"], "namespace": "nowhere"}}
            emitter.emit(missing, "Warning", "SyncFailed", "nope")
            emitter.emit({"kind": "Work"}, "Normal", "NoName", "ignored")
            for i in range(5):
                emitter.emit(WORK, "Normal", "Burst", f"message {i}")
            assert emitter.dropped == 4  # one write for "nowhere", one Burst, rest dropped
            assert await emitter.flush(5.0)
            listed = (await client.list(EVENTS, namespace="karmada-es-member1"))["items"]
            assert [e["message"] for e in listed] == ["message 0"]
            long = "x" * 5000
            emitter.emit(WORK, "Normal", "Long", long)
            await emitter.flush(5.0)
            listed = (await client.list(EVENTS, namespace="karmada-es-member1"))["items"]
            assert max(len(e["message"]) for e in listed) == 1024
        finally:
            await emitter.stop()
            await client.close()
        emitter.emit(WORK, "Normal", "AfterStop", "ignored")
        assert not emitter._writer_tasks
        assert not emitter._queue


async def _namespace(client: Any) -> None:
    await client.create(
        NAMESPACES,
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": WORK["metadata"]["namespace"]},
        },
    )


class _SlowClient:
    """Stands in for KubeClient: counts how many writes run at once."""

    def __init__(self) -> None:
        self.running = 0
        self.most = 0
        self.created = 0
        self.release = asyncio.Event()
        self.two_running = asyncio.Event()

    async def create(self, *_: Any, **__: Any) -> dict[str, Any]:
        self.running += 1
        self.most = max(self.most, self.running)
        if self.running == 2:
            self.two_running.set()
        await self.release.wait()
        self.running -= 1
        self.created += 1
        return {}


async def test_writes_are_sent_a_few_at_a_time_and_repeats_fold_into_counts() -> None:
    client = _SlowClient()
    emitter = EventEmitter(cast(Any, client), writers=2)
    for i in range(10):
        emitter.emit(WORK, "Normal", "Burst", f"message {i}")
    emitter.emit(WORK, "Normal", "Burst", "message 9")  # a repeat while queued: a count
    await asyncio.wait_for(client.two_running.wait(), 5)
    assert client.running == 2
    client.release.set()
    assert await emitter.flush(5.0)
    assert client.most == 2
    assert client.created == 10
    await emitter.stop()


async def test_waiting_writes_hold_no_task_of_their_own() -> None:
    """Issue 34: a burst queues thousands of writes; a task each (~1.8 KB, allocated and
    freed among the caches growing meanwhile) left the heap fragmented. They wait in a queue
    that `writers` tasks drain."""
    client = _SlowClient()
    before = asyncio.all_tasks()
    emitter = EventEmitter(cast(Any, client), writers=2)
    for i in range(100):
        emitter.emit(_work(f"w{i}"), "Normal", "SyncSucceed", "applied")
    await asyncio.wait_for(client.two_running.wait(), 5)
    assert len(asyncio.all_tasks() - before) == 2
    client.release.set()
    assert await emitter.flush(5.0)
    assert client.created == 100
    await emitter.stop()


class _RecordingClient:
    """Stands in for KubeClient: records the writes in the order sent, each held until
    `release`."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, int]] = []
        self.release = asyncio.Event()

    async def create(self, _: Any, body: JsonDict, **__: Any) -> JsonDict:
        self.sent.append(("create", body["involvedObject"]["name"], body["count"]))
        await self.release.wait()
        return body

    async def patch(self, _: Any, name: str, body: JsonDict, **__: Any) -> JsonDict:
        self.sent.append(("patch", name.split(".")[0], body["count"]))
        await self.release.wait()
        return body


async def test_series_are_written_in_the_order_they_were_first_queued() -> None:
    client = _RecordingClient()
    emitter = EventEmitter(cast(Any, client), writers=1)
    for name in ["a", "b", "c"]:
        emitter.emit(_work(name), "Normal", "SyncSucceed", "applied")
    await wait_for(lambda: client.sent == [("create", "a", 1)])
    # Repeats while queued or being written keep their place and only raise the count.
    for name in ["c", "a", "d", "b", "c"]:
        emitter.emit(_work(name), "Normal", "SyncSucceed", "applied")
    client.release.set()
    assert await emitter.flush(5.0)
    assert client.sent == [
        ("create", "a", 1),
        ("patch", "a", 2),  # caught up by the same write, before the series behind it
        ("create", "b", 2),
        ("create", "c", 3),
        ("create", "d", 1),
    ]
    await emitter.stop()


async def test_an_idle_emitter_holds_no_task() -> None:
    client = _RecordingClient()
    client.release.set()
    before = asyncio.all_tasks()
    emitter = EventEmitter(cast(Any, client))
    for round_ in range(2):  # writers end when the queue is empty, and start again
        for i in range(10):
            emitter.emit(_work(f"w{i}"), "Normal", "SyncSucceed", f"round {round_}")
        assert await emitter.flush(5.0)
        assert asyncio.all_tasks() == before
    assert len(client.sent) == 20
    await emitter.stop()


async def test_an_event_emitted_as_the_last_writer_ends_is_written() -> None:
    """The writer that finds the queue empty is done at once, but leaves the emitter's set of
    writers a loop turn later: an Event emitted in between starts a writer all the same."""
    client = _RecordingClient()
    client.release.set()
    emitter = EventEmitter(cast(Any, client), writers=1)
    loop = asyncio.get_running_loop()
    original = client.create

    async def create_then_emit(*args: Any, **kwargs: Any) -> JsonDict:
        answer = await original(*args, **kwargs)
        # Runs after the writer's last step (it returns with this answer), before the done
        # callbacks that step schedules.
        if len(client.sent) == 1:
            loop.call_soon(emitter.emit, _work("b"), "Normal", "SyncSucceed", "applied")
        return answer

    client.create = create_then_emit  # type: ignore[method-assign]
    emitter.emit(_work("a"), "Normal", "SyncSucceed", "applied")
    await wait_for(lambda: len(client.sent) == 2)
    assert await emitter.flush(5.0)
    assert client.sent == [("create", "a", 1), ("create", "b", 1)]
    await emitter.stop()


async def test_similar_events_are_combined_after_ten_messages() -> None:
    async with run_emulator("karmada") as emu:
        client = kube_client(emu)
        await _namespace(client)
        clock = Clock()
        emitter = EventEmitter(client, wall_clock=clock, monotonic=clock)
        try:
            for i in range(12):
                clock.now += 1  # distinct Event names
                emitter.emit(WORK, "Warning", "SyncFailed", f"attempt {i} failed")
                assert await emitter.flush(5.0)
            # An identical message again is a count update of its own Event, not a new one.
            emitter.emit(WORK, "Warning", "SyncFailed", "attempt 0 failed")
            # Other reasons are counted apart.
            emitter.emit(WORK, "Normal", "SyncSucceed", "synced")
            assert await emitter.flush(5.0)
            listed = (await client.list(EVENTS, namespace="karmada-es-member1"))["items"]
            failed = [e for e in listed if e["reason"] == "SyncFailed"]
            # Nine on their own; from the tenth different message on, one combined Event.
            assert len(failed) == 10
            combined = [e for e in failed if e["message"].startswith("(combined from similar")]
            assert len(combined) == 1
            assert combined[0]["count"] == 3
            assert combined[0]["message"] == "(combined from similar events): attempt 11 failed"
            first = next(e for e in failed if e["message"] == "attempt 0 failed")
            assert first["count"] == 2
            assert [e["reason"] for e in listed].count("SyncSucceed") == 1
        finally:
            await emitter.stop()
            await client.close()


async def test_each_reason_names_the_controller_that_records_it() -> None:
    async with run_emulator("karmada") as emu:
        client = kube_client(emu)
        await _namespace(client)
        emitter = EventEmitter(
            client, component="karmada-agent", sources={"SyncSucceed": "execution-controller"}
        )
        try:
            emitter.emit(WORK, "Normal", "SyncSucceed", "synced")
            emitter.emit(WORK, "Normal", "Other", "other")
            assert await emitter.flush(5.0)
            listed = (await client.list(EVENTS, namespace="karmada-es-member1"))["items"]
            by_reason = {e["reason"]: (e["source"], e["reportingComponent"]) for e in listed}
            assert by_reason == {
                "SyncSucceed": ({"component": "execution-controller"}, "execution-controller"),
                "Other": ({"component": "karmada-agent"}, "karmada-agent"),
            }
        finally:
            await emitter.stop()
            await client.close()


class _LockedClient:
    """Stands in for KubeClient under RBAC that grants Events in some namespaces only."""

    def __init__(self, locked: set[str]) -> None:
        self.locked = locked
        self.created: list[str] = []
        self.refused = 0

    async def create(self, _: Any, body: JsonDict, *, namespace: str) -> JsonDict:
        if namespace in self.locked:
            self.refused += 1
            raise ForbiddenError(
                {"code": 403, "reason": "Forbidden", "message": f"events in {namespace}"}
            )
        self.created.append(body["reason"])
        return body


async def test_forbidden_namespace_is_logged_once_and_events_go_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="agent.events")
    client = _LockedClient({"apps"})
    emitter = EventEmitter(cast(Any, client))
    template = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"namespace": "apps", "name": "web", "uid": "u1"},
    }
    for i in range(3):
        emitter.emit(template, "Normal", "SyncSucceed", f"applied {i}")
        assert await emitter.flush(5.0)
    emitter.emit(WORK, "Normal", "SyncSucceed", "synced")
    assert await emitter.flush(5.0)

    assert client.refused == 3  # tried each time: the RBAC may be fixed meanwhile
    assert client.created == ["SyncSucceed"]  # the Work's Event is written all the same
    refused = [r for r in caplog.records if "permission denied" in r.getMessage()]
    assert len(refused) == 1
    assert getattr(refused[0], "agent_log_fields", {}).get("namespace") == "apps"

    client.locked.clear()  # granted now; refused again later: said again
    emitter.emit(template, "Normal", "SyncSucceed", "applied 3")
    assert await emitter.flush(5.0)
    client.locked.add("apps")
    emitter.emit(template, "Normal", "SyncSucceed", "applied 4")
    assert await emitter.flush(5.0)
    assert len([r for r in caplog.records if "permission denied" in r.getMessage()]) == 2


async def test_a_300_work_burst_of_events_waits_rather_than_drops() -> None:
    # About 4.5 Events per Work, all recorded before the first write is answered.
    client = _SlowClient()
    emitter = EventEmitter(cast(Any, client))
    for i in range(1350):
        work = {**WORK, "metadata": {**WORK["metadata"], "name": f"work-{i}"}}
        emitter.emit(work, "Normal", "Burst", "applied")
    assert emitter.dropped == 0
    client.release.set()
    assert await emitter.flush(10.0)
    assert client.created == 1350


async def test_events_not_written_are_logged_without_a_line_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 34: 20,000 Events not written made 20,000 log lines. The first is said at once,
    the others counted into one line a minute (and at stop)."""
    caplog.set_level(logging.INFO, logger="agent.events")
    monotonic = Clock()
    async with run_emulator("karmada") as emu:
        client = kube_client(emu)
        recorder = EventEmitter(client, monotonic=monotonic)
        template = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"namespace": "nowhere", "name": "cm", "uid": "u1"},
        }

        def lines() -> list[logging.LogRecord]:
            return [r for r in caplog.records if "namespace does not exist" in r.getMessage()]

        for i in range(5):
            recorder.emit(template, "Normal", "SyncSucceed", f"applied {i}")
            assert await recorder.flush(5.0)
        assert len(lines()) == 1
        monotonic.now += 61
        recorder.emit(template, "Normal", "SyncSucceed", "applied 5")
        assert await recorder.flush(5.0)
        assert len(lines()) == 2
        assert getattr(lines()[1], "agent_log_fields", {}).get("events") == 5
        recorder.emit(template, "Normal", "SyncSucceed", "applied 6")
        await recorder.stop()
        assert len(lines()) == 3
        await client.close()


class _HeldWire(httpx.AsyncBaseTransport):
    """Answers every request at once (paths in the order sent) except PATCHes, held until
    `release` (a status write on its way)."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.held = asyncio.Event()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(f"{request.method} {request.url.path}")
        if request.method == "PATCH":
            await self.held.wait()
        return httpx.Response(200, json={"kind": "Event"})


def _work(name: str) -> dict[str, Any]:
    return {"apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
            "metadata": {"name": name, "namespace": "karmada-es-m", "uid": name}}  # fmt: skip


async def test_events_wait_for_status_writes_until_their_backlog_grows() -> None:
    """Events go after the status writes in flight (one is held here throughout); once more
    than half of max_in_flight wait, the next answer to anything else lets them go."""
    wire = _HeldWire()
    transport = Transport(
        ClientConfig(host="https://cp:6443", qps=0), transport_factory=lambda _c: wire
    )
    emitter = EventEmitter(KubeClient(transport.background()), max_in_flight=4, writers=1)
    status = asyncio.create_task(transport.request("PATCH", "/status"))
    await wait_for(lambda: wire.sent == ["PATCH /status"])
    emitter.emit(_work("a"), "Normal", "SyncSucceed", "a")
    emitter.emit(_work("b"), "Normal", "SyncSucceed", "b")
    for _ in range(20):
        await asyncio.sleep(0)
    assert wire.sent == ["PATCH /status"]  # behind the status write
    emitter.emit(_work("c"), "Normal", "SyncSucceed", "c")  # three waiting: more than half
    # One answer (fewer than the two a waiting Event otherwise waits for) lets them go.
    await transport.request("GET", "/other")
    event = "POST /api/v1/namespaces/karmada-es-m/events"
    await wait_for(lambda: event in wire.sent)
    assert wire.sent[:3] == ["PATCH /status", "GET /other", event]
    wire.held.set()
    await status
    assert await emitter.flush(5)
    assert wire.sent.count(event) == 3
    await transport.close()
