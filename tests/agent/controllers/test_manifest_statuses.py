"""The hand-off of a Work's manifestStatuses: the execution controller writes the first ones
together with Applied, the workStatus controller waits for that write and keeps them from then
on."""

from __future__ import annotations

from agent.karmada import names
from agent.kube.resources import CONFIGMAPS

from .harness import (
    WorkIds,
    condition,
    configmap,
    karmada_manifest,
    karmada_work,
    running_pair,
)
from .test_work_status import statuses


async def test_execution_writes_the_first_statuses_with_applied_in_one_write() -> None:
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        await pair.create_work(karmada_work("first", [configmap("first")]))
        reported = await pair.wait_work("first", lambda w: len(statuses(w)) == 1)
        await pair.idle(pair.execution)
        applied = condition(reported, names.WORK_APPLIED)
        assert applied is not None
        assert applied["status"] == "True"
        [entry] = statuses(reported)
        assert entry["identifier"]["ordinal"] == 0
        assert entry["identifier"]["kind"] == "ConfigMap"
        assert entry["identifier"]["resource"] == "configmaps"
        assert entry["health"] == names.HEALTHY
        assert pair.cp.accounting.counts(resource="works/status") == 1
        reasons = {e["reason"] for e in await pair.events_for("first")}
        assert names.EVENT_INTERPRET_HEALTH_SUCCEED in reasons

        # Reported once: the entries are the workStatus controller's from now on, and another
        # apply of the same Work leaves them alone.
        await pair.member_client.patch(
            CONFIGMAPS, "first", {"data": {"key": "drifted"}}, namespace="default"
        )
        await pair.wait_member(CONFIGMAPS, "first", lambda o: o["data"] == {"key": "value"})
        await pair.idle(pair.execution)
        assert pair.cp.accounting.counts(resource="works/status") == 1


async def test_waits_for_the_execution_controllers_first_report() -> None:
    async with running_pair("workStatus") as pair:
        assert pair.work_status is not None
        ids = WorkIds()
        cm = karmada_manifest(configmap("early"), "early", ids)
        await pair.member_client.create(CONFIGMAPS, cm)
        await pair.create_work(karmada_work("early", [cm], raw=True))
        await pair.idle(pair.work_status)
        # No Applied condition yet: the first manifestStatuses are the execution controller's
        # to write, together with Applied.
        assert statuses(await pair.get_work("early")) == []
        assert pair.cp.accounting.counts(resource="works/status") == 0
        await pair.mark_applied("early")
        reported = await pair.wait_work("early", lambda w: len(statuses(w)) == 1)
        assert statuses(reported)[0]["health"] == names.HEALTHY
