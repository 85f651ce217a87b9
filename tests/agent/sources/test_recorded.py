"""The status an agent queued while it served its record offline is reported once the control
plane answers, through the registered controllers' Works watch when that is listed already."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agent.karmada import names
from agent.kube.client import KubeClient
from agent.kube.resources import NAMESPACES
from agent.resources import WORKS
from agent.sources import recorded as recorded_module
from agent.sources.recorded import RecordedWorks
from agent.sources.works import WorkInformer
from emulator.emulator import Emulator, run_emulator
from tests.agent.controllers.harness import (
    EXEC_NS,
    HeldEvents,
    configmap,
    karmada_work,
    kube_client,
)

APPLIED = {
    "conditions": [
        {
            "type": names.WORK_APPLIED,
            "status": "True",
            "reason": names.REASON_APPLIED_SUCCESSFUL,
            "message": "Manifest has been successfully applied",
            "lastTransitionTime": "2026-11-25T00:00:00Z",
        }
    ]
}


@contextlib.asynccontextmanager
async def watched_works(
    *names: str, status: dict[str, Any] | None = None
) -> AsyncIterator[tuple[Emulator, KubeClient, WorkInformer, list[dict[str, Any]]]]:
    """A control plane with the Works `names` (each with `status`, if given) in the execution
    namespace, a client of it and a synced WorkInformer on them; yields those and the Works as
    created."""
    async with run_emulator("karmada", name="karmada") as cp:
        karmada = kube_client(cp)
        await karmada.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": EXEC_NS}}
        )
        works = []
        for name in names:
            work = karmada_work(name, [configmap(name)])
            works.append(await karmada.create(WORKS, work, namespace=EXEC_NS))
            if status is not None:
                await karmada.patch(
                    WORKS,
                    name,
                    {"status": status},
                    patch_type="merge",
                    namespace=EXEC_NS,
                    subresource="status",
                )
        live = WorkInformer(karmada, EXEC_NS)
        live.start()
        try:
            assert await live.wait_synced(5)
            yield cp, karmada, live, works
        finally:
            await live.stop()
            await karmada.close()


async def test_the_report_goes_through_the_listed_works_watch() -> None:
    """Over a slow link the watch's echo of a write comes seconds later: the controllers that
    start on the watch right after the report must find the reported status in it already, or
    they write it again."""
    async with watched_works("w") as (cp, karmada, live, [work]):
        # The watch's echoes are held back: the resumed watch waits 30 s for its answer.
        cp.faults.add_latency(30.0, verb="watch", resource="works")
        await cp.faults.drop_watches()
        recorded = RecordedWorks(karmada, EXEC_NS, [work])
        recorded.queued["w"] = APPLIED
        assert await recorded.report(karmada, into=live) == 1

        cached = live.get("w")
        assert cached is not None
        assert cached.get("status", {}).get("conditions") == APPLIED["conditions"]
        stored = await karmada.get(WORKS, "w", namespace=EXEC_NS)
        assert stored["status"]["conditions"] == APPLIED["conditions"]
        assert cp.accounting.counts(verb="patch", resource="works/status") == 1


async def test_a_late_event_does_not_take_the_reported_status_back() -> None:
    """Another writer's change of the Work, made before the report and brought by the watch
    after the report's answer, must not put the Work back without the reported status: the
    controllers that start on the watch would write it again."""
    async with watched_works("w") as (_, karmada, live, [work]):
        held = HeldEvents(live.reflector, lambda _e: True)
        edited = {**work, "metadata": {**work["metadata"], "labels": {"edited": "yes"}}}
        await karmada.replace(WORKS, edited)
        recorded = RecordedWorks(karmada, EXEC_NS, [work])
        recorded.queued["w"] = APPLIED
        assert await recorded.report(karmada, into=live) == 1
        await held.arrived(2)
        held.release(until=lambda _e: True)  # the other writer's change: older than ours
        cached = live.get("w")
        assert cached is not None
        assert cached.get("status", {}).get("conditions") == APPLIED["conditions"]
        held.release()
        stored = await karmada.get(WORKS, "w", namespace=EXEC_NS)
        latest = live.get("w") or {}
        assert latest["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]


async def test_a_status_the_control_plane_has_already_is_not_reported_again() -> None:
    """Issue 34: the record keeps a Work's status as of its last apply, so the offline
    controllers queue what the control plane was told since (a Deployment's health): written
    again, every unchanged Work cost a status write at the return."""
    async with watched_works("same", "changed", status=APPLIED) as (cp, karmada, live, _):
        recorded = RecordedWorks(karmada, EXEC_NS, [])
        recorded.queued["same"] = APPLIED
        failed = {"conditions": [{**APPLIED["conditions"][0], "status": "False"}]}
        recorded.queued["changed"] = failed
        writes = cp.accounting.counts(verb="patch", resource="works/status")
        assert await recorded.report(karmada, into=live) == 1
        assert cp.accounting.counts(verb="patch", resource="works/status") == writes + 1
        stored = await karmada.get(WORKS, "changed", namespace=EXEC_NS)
        assert stored["status"]["conditions"][0]["status"] == "False"


async def test_the_report_waits_for_the_control_planes_works_to_be_listed() -> None:
    """Issue 34: at 20,000 Works the report started while the control plane's Works were still
    being listed, and every queued status went out blind, the unchanged Works' too. Compared
    once listed, only the Work whose status is new is written."""
    async with watched_works("same", "changed", status=APPLIED) as (cp, karmada, _, _):
        live = WorkInformer(karmada, EXEC_NS)
        cp.faults.fail_next(1, code=500, verb="list", resource="works")
        live.start()
        try:
            assert not live.synced
            recorded = RecordedWorks(karmada, EXEC_NS, [])
            recorded.queued["same"] = APPLIED
            recorded.queued["changed"] = {
                "conditions": [{**APPLIED["conditions"][0], "status": "False"}]
            }
            writes = cp.accounting.counts(verb="patch", resource="works/status")
            assert await recorded.report(karmada, into=live) == 1
            assert cp.accounting.counts(verb="patch", resource="works/status") == writes + 1
            stored = await karmada.get(WORKS, "changed", namespace=EXEC_NS)
            assert stored["status"]["conditions"][0]["status"] == "False"
            cached = live.get("changed")
            assert cached is not None
            assert cached["status"]["conditions"][0]["status"] == "False"
        finally:
            await live.stop()


async def test_a_queued_status_is_written_when_the_works_cannot_be_listed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What was observed offline is not lost to a list that does not come: once the wait for
    it is over, the queued status is written without comparing."""
    monkeypatch.setattr(recorded_module, "REPORT_SYNC_TIMEOUT", 0.0)
    async with watched_works("w") as (_, karmada, _, [work]):
        never_listed = WorkInformer(karmada, EXEC_NS)  # not started: never synced
        recorded = RecordedWorks(karmada, EXEC_NS, [work])
        recorded.queued["w"] = APPLIED
        assert await recorded.report(karmada, into=never_listed) == 1
        stored = await karmada.get(WORKS, "w", namespace=EXEC_NS)
        assert stored["status"]["conditions"] == APPLIED["conditions"]
