"""A reconcile's log fields: bound once per reconcile in the context (no logger handed down),
seen by every module it calls, and not lent to tasks that outlive it."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from agent.kube.controller import Controller, Result
from agent.kube.tasks import background
from agent.kube.workqueue import WorkQueue
from agent.logs import get_logger
from tests.polling import eventually

# A module the reconcile calls, with its own logger (as apply.py and deletion.py have).
called = get_logger("agent.test.called")


def fields(record: logging.LogRecord) -> dict[str, Any]:
    value = getattr(record, "agent_log_fields", {})
    return value if isinstance(value, dict) else {}


async def test_each_reconcile_binds_its_work_and_an_id_for_every_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    queue: WorkQueue[str] = WorkQueue("test")
    done: list[str] = []

    async def reconcile(key: str) -> Result | None:
        called.info("applied")
        done.append(key)
        return None

    controller = Controller(
        "test", queue, reconcile, log_context=lambda key: {"work": f"karmada-es-m/{key}"}
    )
    controller.start()
    queue.add("a")
    queue.add("b")
    await eventually(lambda: len(done) == 2, what="both reconciled")
    await controller.stop(1.0)
    lines = [fields(r) for r in caplog.records if r.getMessage() == "applied"]
    assert sorted(f["work"] for f in lines) == ["karmada-es-m/a", "karmada-es-m/b"]
    ids = {f["reconcile_id"] for f in lines}
    assert len(ids) == 2
    # Nothing is left bound once the reconciles are over.
    called.info("after")
    [after] = [fields(r) for r in caplog.records if r.getMessage() == "after"]
    assert "work" not in after
    assert "reconcile_id" not in after


async def test_a_failed_reconcile_is_logged_with_its_fields(
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue: WorkQueue[str] = WorkQueue("test")

    async def reconcile(key: str) -> Result | None:
        queue.shutdown()
        raise ValueError("bad")

    controller = Controller("test", queue, reconcile, log_context=lambda key: {"work": key})
    queue.add("w")
    await controller.run()
    [failed] = [r for r in caplog.records if "failed" in r.getMessage()]
    assert fields(failed)["work"] == "w"
    assert fields(failed)["reconcile_id"]


async def test_a_task_started_by_a_reconcile_that_outlives_it_logs_without_its_fields(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    queue: WorkQueue[str] = WorkQueue("test")
    go_on = asyncio.Event()
    tasks: list[asyncio.Task[None]] = []

    async def writer() -> None:
        await go_on.wait()
        called.info("written")

    async def inner() -> None:
        called.info("part of the reconcile")

    async def reconcile(key: str) -> Result | None:
        tasks.append(background(writer(), name="writer"))
        await asyncio.create_task(inner())
        return None

    controller = Controller("test", queue, reconcile, log_context=lambda key: {"work": key})
    controller.start()
    queue.add("w")
    await eventually(lambda: tasks, what="the writer started")
    await controller.stop(1.0)
    go_on.set()
    await tasks[0]
    [written] = [fields(r) for r in caplog.records if r.getMessage() == "written"]
    assert "work" not in written
    assert "reconcile_id" not in written
    # A task the reconcile awaits is part of it.
    [part] = [fields(r) for r in caplog.records if r.getMessage() == "part of the reconcile"]
    assert part["work"] == "w"
