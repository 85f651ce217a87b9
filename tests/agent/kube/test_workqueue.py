from __future__ import annotations

import asyncio
import logging

import pytest
from prometheus_client import CollectorRegistry

from agent.kube.clock import FakeClock
from agent.kube.controller import Controller, Result, RetryableError, TerminalError
from agent.kube.metrics import PrometheusMetrics
from agent.kube.ratelimit import (
    BucketRateLimiter,
    ItemExponentialRateLimiter,
    MaxOfRateLimiter,
    default_controller_rate_limiter,
)
from agent.kube.workqueue import QueueShutDownError, WorkQueue
from tests.agent.kube.wire import wait_for


def test_rate_limiters() -> None:
    exp: ItemExponentialRateLimiter[str] = ItemExponentialRateLimiter(0.005, 1.0)
    assert [exp.when("a") for _ in range(4)] == [0.005, 0.01, 0.02, 0.04]
    assert exp.num_requeues("a") == 4
    assert max(exp.when("a") for _ in range(20)) == 1.0
    exp.forget("a")
    assert exp.when("a") == 0.005
    clock = FakeClock()
    bucket: BucketRateLimiter[str] = BucketRateLimiter(10, 2, clock=clock)
    assert [bucket.when(str(i)) for i in range(4)] == pytest.approx([0, 0, 0.1, 0.2])
    combined: MaxOfRateLimiter[str] = default_controller_rate_limiter(clock=clock)
    assert combined.when("x") == 0.005
    assert combined.num_requeues("x") == 1


async def test_dedup_and_processing_set() -> None:
    q: WorkQueue[str] = WorkQueue("t", clock=FakeClock())
    q.add("a")
    q.add("a")
    q.add("b")
    assert len(q) == 2
    key = await q.get()
    assert key == "a"
    q.add("a")  # re-added while processing: not handed out again yet
    assert await q.get() == "b"
    assert len(q) == 0
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    assert not getter.done()
    q.done("a")  # now queued once more
    assert await asyncio.wait_for(getter, 1) == "a"
    q.done("b")
    q.done("a")
    assert len(q) == 0
    assert q.processing == 0


async def test_add_after_and_rate_limited_with_fake_clock() -> None:
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(
        "t", clock=clock, rate_limiter=ItemExponentialRateLimiter(1.0, 100.0)
    )
    q.add_after("x", 10)
    q.add_after("x", 5)  # the earlier time wins
    q.add_after("x", 20)
    clock.advance(4.9)
    assert len(q) == 0
    clock.advance(0.2)
    assert len(q) == 1
    assert q.waiting == 0
    assert await q.get() == "x"
    q.done("x")
    q.add_rate_limited("y")
    q.add_rate_limited("y")
    assert q.num_requeues("y") == 2
    clock.advance(1.0)
    assert len(q) == 1  # first delay 1 s; the 2 s one merges (already waiting earlier)
    q.forget("y")
    assert q.num_requeues("y") == 0


async def test_shutdown_and_drain() -> None:
    q: WorkQueue[str] = WorkQueue("t", clock=FakeClock())
    waiter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.shutdown()
    with pytest.raises(QueueShutDownError):
        await waiter
    q.add("late")
    assert len(q) == 0

    q2: WorkQueue[str] = WorkQueue("t2", clock=FakeClock())
    q2.add("a")
    q2.add("b")
    first = await q2.get()
    drained = asyncio.create_task(q2.shutdown_with_drain(timeout=5))
    await asyncio.sleep(0)
    assert await q2.get() == "b"  # queued keys are still handed out while draining
    q2.done("b")
    assert not drained.done()
    q2.done(first)
    assert await drained is True
    with pytest.raises(QueueShutDownError):
        await q2.get()


async def test_controller_outcomes() -> None:
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(
        "c", clock=clock, rate_limiter=ItemExponentialRateLimiter(1.0, 100.0)
    )
    calls: list[str] = []
    outcomes: list[tuple[str, str]] = []
    in_flight: set[str] = set()
    overlap: list[str] = []

    async def reconcile(key: str) -> Result | None:
        if key in in_flight:
            overlap.append(key)
        in_flight.add(key)
        calls.append(key)
        await asyncio.sleep(0)
        in_flight.discard(key)
        if key == "boom" and calls.count("boom") == 1:
            raise RetryableError("transient")
        if key == "bug" and calls.count("bug") == 1:
            raise RuntimeError("a bug")
        if key == "fatal":
            raise TerminalError("bad spec")
        if key == "later" and calls.count("later") == 1:
            return Result(requeue_after=30)
        return None

    busy: list[int] = []

    class Metrics:
        def controller_started(self, controller: str, workers: int) -> None:
            outcomes.append((controller, f"started with {workers}"))

        def worker_active(self, controller: str, delta: int) -> None:
            busy.append(delta)

        def reconcile(self, controller: str, result: str, seconds: float) -> None:
            outcomes.append((controller, result))

    ctl = Controller("c", q, reconcile, workers=3, metrics=Metrics())
    ctl.start()
    for key in ("ok", "boom", "fatal", "later", "bug"):
        q.add(key)
    await wait_for(lambda: len(outcomes) == 6)
    assert sorted(outcomes) == sorted(
        [
            ("c", "started with 3"),
            ("c", "success"),
            ("c", "error"),
            ("c", "terminal_error"),
            ("c", "requeue_after"),
            ("c", "panic"),
        ]
    )
    assert sum(busy) == 0
    assert busy.count(1) == 5
    assert q.num_requeues("boom") == 1
    assert q.num_requeues("fatal") == 0
    clock.advance(1.0)  # rate-limited retry of boom is due
    await wait_for(lambda: calls.count("boom") == 2)
    clock.advance(29.0)
    await wait_for(lambda: calls.count("later") == 2)
    await wait_for(lambda: q.processing == 0)
    assert q.num_requeues("boom") == 0  # forgotten after success
    assert calls.count("fatal") == 1
    assert overlap == []
    assert ctl.running
    assert await ctl.stop(timeout=1)
    assert not ctl.running


async def test_controller_stop_bounds_in_flight() -> None:
    q: WorkQueue[str] = WorkQueue("s", clock=FakeClock())
    started = asyncio.Event()

    async def slow(key: str) -> None:
        started.set()
        await asyncio.Event().wait()  # never finishes: stop() must give up after its bound

    ctl = Controller("s", q, slow)
    ctl.start()
    q.add("k")
    await asyncio.wait_for(started.wait(), 1)
    assert await ctl.stop(timeout=0.05) is False
    assert not ctl.running


async def test_expected_failures_are_logged_without_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    q: WorkQueue[str] = WorkQueue("c", rate_limiter=ItemExponentialRateLimiter(60.0, 60.0))
    done: list[str] = []

    async def reconcile(key: str) -> Result | None:
        done.append(key)
        if key == "expected":
            raise RetryableError("manifest 1: no matches for kind CronTab")
        raise KeyError("a bug")

    caplog.set_level(logging.WARNING, logger="agent.kube.controller")
    ctl = Controller("c", q, reconcile, workers=1)
    ctl.start()
    q.add("expected")
    q.add("bug")
    await wait_for(lambda: len(done) == 2)
    await ctl.stop(timeout=1)
    records = {r.getMessage().split(" failed")[0]: r for r in caplog.records}
    expected, bug = records["c: reconcile of expected"], records["c: reconcile of bug"]
    assert "no matches for kind CronTab" in expected.getMessage()
    assert not expected.exc_info  # an expected failure: its message says it all
    assert bug.exc_info  # a bug: the traceback is what someone needs
    assert q.num_requeues("expected") == 1  # both are retried
    assert q.num_requeues("bug") == 1


async def test_prometheus_names_labels_and_in_flight_gauges() -> None:
    """controller-runtime's names and labels: `name` and `controller` (both the controller's
    name) on every workqueue series, `priority` on the depth; the in-progress gauges computed
    at scrape time from the keys the workers hold; every reconcile series at zero from the
    start."""
    registry = CollectorRegistry()
    metrics = PrometheusMetrics(registry)
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue("execution-controller", clock=clock, metrics=metrics)
    release = asyncio.Event()

    async def reconcile(key: str) -> Result | None:
        if key == "slow":
            await release.wait()
        return Result(requeue_after=5) if key == "again" else None

    ctl = Controller("execution-controller", q, reconcile, workers=2, metrics=metrics)
    labels = {"name": "execution-controller", "controller": "execution-controller"}
    value = registry.get_sample_value
    ctl.start()
    assert (
        value("controller_runtime_max_concurrent_reconciles", {"controller": labels["name"]}) == 2
    )
    for result in ("success", "error", "requeue", "requeue_after"):
        sample = {"controller": labels["name"], "result": result}
        assert value("controller_runtime_reconcile_total", sample) == 0
    assert value("workqueue_depth", {**labels, "priority": "0"}) == 0
    q.add("slow")
    q.add("again")
    await wait_for(
        lambda: (
            value(
                "controller_runtime_reconcile_total",
                {"controller": labels["name"], "result": "requeue_after"},
            )
            == 1
        )
    )
    clock.advance(3.0)
    assert value("controller_runtime_active_workers", {"controller": labels["name"]}) == 1
    assert value("workqueue_unfinished_work_seconds", labels) == 3.0
    assert value("workqueue_longest_running_processor_seconds", labels) == 3.0
    release.set()
    await wait_for(
        lambda: value("controller_runtime_active_workers", {"controller": labels["name"]}) == 0
    )
    assert value("workqueue_unfinished_work_seconds", labels) == 0.0
    assert value("workqueue_adds_total", labels) == 2
    assert value("workqueue_retries_total", labels) == 1  # the RequeueAfter
    assert value("workqueue_work_duration_seconds_count", labels) == 2
    assert value("workqueue_queue_duration_seconds_count", labels) == 2
    assert (
        value("controller_runtime_reconcile_time_seconds_count", {"controller": labels["name"]})
        == 2
    )
    await ctl.stop(timeout=1)


async def test_deferred_keys_wait_behind_every_other_key() -> None:
    """First come, first served, except for keys deferred as needing nothing urgent: those go
    after every other key, also after keys added later; adding one again makes it ordinary."""
    q: WorkQueue[str] = WorkQueue("t", clock=FakeClock())
    for key in ("a", "b", "c", "d", "e"):
        q.add(key)
    assert q.defer(["b", "d", "x"]) == 2  # x is not waiting
    assert len(q) == 5
    assert q.deferred == 2
    q.add("f")  # added later, still before the deferred keys
    q.add("d")  # needs doing after all: in its place by this add
    q.add("b")
    q.add("b")
    q.defer(["b"])
    taken = [await q.get() for _ in range(6)]
    assert taken == ["a", "c", "e", "f", "d", "b"]
    assert len(q) == 0
    assert q.deferred == 0
    for key in taken:
        q.done(key)
    q.add("a")
    q.defer(["a"])
    assert await q.get() == "a"  # deferred keys are taken when nothing else waits
    q.done("a")


async def test_held_deferred_keys_wait_until_released_unless_added_again() -> None:
    """Held deferred keys are not taken even by an idle worker; one added again is (and wakes
    the worker waiting); released, the rest are taken in their order."""
    q: WorkQueue[str] = WorkQueue("t", clock=FakeClock())
    for key in ("a", "b", "c", "d"):
        q.add(key)
    assert q.defer(["a", "b", "c"], held=True) == 3
    assert await q.get() == "d"
    waiting = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    assert not waiting.done()  # only held keys are left
    assert q.is_deferred("b")
    q.add("b")
    assert await waiting == "b"
    assert not q.is_deferred("b")
    waiting = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    assert not waiting.done()
    q.release_deferred()
    assert await waiting == "a"
    assert await q.get() == "c"


async def test_an_add_without_promote_leaves_a_deferred_key_deferred() -> None:
    """An add for every key (the Cluster turned Ready) queues those not waiting and leaves
    the deferred ones behind them, held as they were."""
    q: WorkQueue[str] = WorkQueue("t", clock=FakeClock())
    for key in ("a", "b", "c"):
        q.add(key)
    assert q.defer(["a", "b"], held=True) == 2
    assert await q.get() == "c"
    q.done("c")
    for key in ("a", "b", "c", "d"):
        q.add(key, promote=False)
    assert q.is_deferred("a")
    assert q.is_deferred("b")
    assert len(q) == 4
    assert [await q.get(), await q.get()] == ["c", "d"]
    waiting = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    assert not waiting.done()  # still held
    q.release_deferred()
    assert await waiting == "a"
    assert await q.get() == "b"


async def test_held_deferred_keys_are_drained_on_shutdown() -> None:
    q: WorkQueue[str] = WorkQueue("t", clock=FakeClock())
    q.add("a")
    q.defer(["a"], held=True)
    drained = asyncio.create_task(q.shutdown_with_drain(5))
    assert await q.get() == "a"
    q.done("a")
    assert await drained


async def test_a_deferred_key_wakes_a_worker_and_drains_on_shutdown() -> None:
    q: WorkQueue[str] = WorkQueue("t", clock=FakeClock())
    q.add("a")
    q.add("b")
    q.defer(["a", "b"])
    assert await q.get() == "a"
    drained = asyncio.create_task(q.shutdown_with_drain(5))
    assert await q.get() == "b"  # still taken: shutting down with drain
    assert not drained.done()
    q.done("a")
    q.done("b")
    assert await drained


async def test_keys_are_taken_first_come_first_served_by_every_worker() -> None:
    """A burst of Works: however many workers, each starts the Work that came first among those
    waiting; one added again while it waits keeps its place."""
    q: WorkQueue[str] = WorkQueue("fifo", clock=FakeClock())
    started: list[str] = []
    release = asyncio.Event()

    async def reconcile(key: str) -> Result | None:
        started.append(key)
        await release.wait()
        return None

    keys = [f"w{i}" for i in range(10)]
    for key in keys:
        q.add(key)
    q.add("w0")
    q.add("w5")
    controller: Controller[str] = Controller("fifo", q, reconcile, workers=3)
    controller.start()
    await wait_for(lambda: len(started) == 3)
    assert started == keys[:3]
    release.set()
    await wait_for(lambda: len(started) == len(keys))
    assert started == keys
    await controller.stop(5)
