"""A Work that goes while it is being applied: the agent stops applying it as soon as it knows
(the Works watch, or the 404 of its status write), and what it did write is either removed by
the Work's own deletion (our finalizer still on it) or reported orphaned, once, with the
WorkOrphaned Event and a log line naming the objects (the finalizer removed by someone else).
One test per moment the finalizer goes: before, during and after the apply.

The member's apply of one ConfigMap is held at the member's door (an emulator request hook)
to stop the agent's apply at a known manifest, as a slow link would."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from agent.controllers.execution.deletion import EVENT_WORK_ORPHANED
from agent.kube.errors import NotFoundError
from agent.kube.resources import CONFIGMAPS
from agent.resources import WORKS
from emulator.emulator import Emulator
from emulator.requestinfo import RequestAttributes
from emulator.wire import ApiRequest
from tests import polling
from tests.agent.controllers.harness import (
    APPLIED_OK,
    EXEC_NS,
    HeldEvents,
    Pair,
    configmap,
    eventually,
    karmada_work,
    named,
    running_pair,
)

JsonDict = dict[str, Any]
MANIFESTS = 8


class Gate:
    """Holds the member's apply of ConfigMap `name` until `release` is set."""

    def __init__(self, member: Emulator, name: str) -> None:
        self.reached = asyncio.Event()
        self.release = asyncio.Event()

        async def hook(_req: ApiRequest, attrs: RequestAttributes) -> None:
            if (attrs.resource, attrs.verb, attrs.name) == ("configmaps", "patch", name):
                self.reached.set()
                await self.release.wait()

        member.api.hooks.append(hook)


def work_of_configmaps(name: str) -> JsonDict:
    return karmada_work(name, [configmap(f"{name}-{i}") for i in range(MANIFESTS)])


async def remove_finalizer_and_delete(pair: Pair, name: str) -> None:
    """What the adversary did: our finalizer taken off by hand, then the Work deleted (gone at
    once, nothing holding it)."""
    work = await pair.get_work(name)
    work["metadata"]["finalizers"] = []
    await pair.karmada.replace(WORKS, work, namespace=EXEC_NS)
    await pair.karmada.delete(WORKS, name, namespace=EXEC_NS)
    await pair.wait_work_gone(name)


async def on_member(pair: Pair, name: str) -> bool:
    try:
        await pair.get_member(CONFIGMAPS, name)
    except NotFoundError:
        return False
    return True


async def orphan_reports(pair: Pair, name: str) -> list[JsonDict]:
    return [e for e in await pair.events_for(name) if e["reason"] == EVENT_WORK_ORPHANED]


def orphan_log_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        str(getattr(r, "agent_log_fields", {}).get("objects"))
        for r in caplog.records
        if r.getMessage() == "Work deleted without cleanup; member objects orphaned"
    ]


async def assert_reported_orphaned(
    pair: Pair, caplog: pytest.LogCaptureFixture, name: str, written: int
) -> None:
    """One WorkOrphaned Event and one log line, each naming exactly the `written` first
    ConfigMaps, which are left on the member; the others were never applied."""
    assert pair.execution is not None
    reports = await eventually(
        lambda: orphan_reports(pair, name), bool, what=f"Work {name} reported orphaned"
    )
    await pair.idle(pair.execution)
    reports = await orphan_reports(pair, name)
    assert [r["count"] for r in reports] == [1], reports
    message = reports[0]["message"]
    (line,) = orphan_log_lines(caplog)
    for i in range(MANIFESTS):
        object_name = f"configmaps default/{name}-{i}"
        assert (object_name in message) == (i < written), (object_name, message)
        assert (object_name in line) == (i < written), (object_name, line)
        assert await on_member(pair, f"{name}-{i}") == (i < written)


async def test_finalizer_removed_before_the_apply_the_404_of_the_status_write_reports_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The Work's finalizer removed and the Work deleted before any of its objects reached the
    member, while the agent's Works watch lags: the agent applies it all, learns from the 404
    of its status write that the Work is gone, and reports every object orphaned; the delete
    event that comes later reports nothing more."""
    caplog.set_level(logging.INFO)
    async with running_pair("execution") as pair:
        gate = Gate(pair.member, "early-0")
        lagging = None
        try:
            await pair.create_work(work_of_configmaps("early"))
            await asyncio.wait_for(gate.reached.wait(), 10)
            lagging = HeldEvents(pair.ctx.sources.works.reflector, named("early"))
            await remove_finalizer_and_delete(pair, "early")
        finally:
            gate.release.set()
        await assert_reported_orphaned(pair, caplog, "early", written=MANIFESTS)
        assert lagging is not None
        lagging.release()
        assert pair.execution is not None
        await polling.eventually(
            lambda: pair.ctx.sources.works.get("early") is None, what="the delete event delivered"
        )
        await pair.idle(pair.execution)
        assert [r["count"] for r in await orphan_reports(pair, "early")] == [1]
        assert len(orphan_log_lines(caplog)) == 1


async def test_finalizer_removed_during_the_apply_stops_it_and_reports_what_it_wrote(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The finalizer removed and the Work deleted while its fourth ConfigMap is being applied:
    once the Works watch says so, nothing more is applied, and the four written are reported
    orphaned (the Event and the log line name them)."""
    caplog.set_level(logging.INFO)
    async with running_pair("execution") as pair:
        gate = Gate(pair.member, "midway-3")
        try:
            await pair.create_work(work_of_configmaps("midway"))
            await asyncio.wait_for(gate.reached.wait(), 10)
            await remove_finalizer_and_delete(pair, "midway")
            await polling.eventually(
                lambda: pair.ctx.sources.works.get("midway") is None,
                what="the agent's Works watch without the Work",
            )
        finally:
            gate.release.set()
        await assert_reported_orphaned(pair, caplog, "midway", written=4)
        assert pair.member.accounting.counts(verb="patch", resource="configmaps") == 4


async def test_finalizer_removed_after_the_apply_reports_every_object(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    async with running_pair("execution") as pair:
        await pair.create_work(work_of_configmaps("late"))
        await pair.wait_work("late", APPLIED_OK)
        await remove_finalizer_and_delete(pair, "late")
        await assert_reported_orphaned(pair, caplog, "late", written=MANIFESTS)


async def test_a_work_deleted_during_its_apply_stops_and_its_deletion_removes_what_it_wrote(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Deleted the normal way (our finalizer on) while its fourth ConfigMap is being applied:
    nothing more is applied, the four written are deleted with the Work, nothing is reported
    orphaned."""
    caplog.set_level(logging.INFO)
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        gate = Gate(pair.member, "deleted-3")
        try:
            await pair.create_work(work_of_configmaps("deleted"))
            await asyncio.wait_for(gate.reached.wait(), 10)
            await pair.karmada.delete(WORKS, "deleted", namespace=EXEC_NS)

            def deleting() -> bool:
                work = pair.ctx.sources.works.get("deleted")
                return bool(work and work["metadata"].get("deletionTimestamp"))

            await polling.eventually(
                deleting, what="the agent's Works watch with the Work being deleted"
            )
        finally:
            gate.release.set()
        await pair.wait_work_gone("deleted")
        await pair.idle(pair.execution)
        for i in range(MANIFESTS):
            assert not await on_member(pair, f"deleted-{i}")
        assert pair.member.accounting.counts(verb="patch", resource="configmaps") == 4
        assert pair.member.accounting.counts(verb="delete", resource="configmaps") == 4
        assert await orphan_reports(pair, "deleted") == []
        assert orphan_log_lines(caplog) == []
