"""The execution controller applies, and records on the member, the Work as the shared Works
cache holds it: a late watch event of an older spec must not take that cache back behind an
answer of ours that carried a newer one (the older spec would be applied and recorded again)."""

from __future__ import annotations

from typing import Any

from agent.kube.resources import CONFIGMAPS
from agent.resources import WORKS
from agent.sources.work_records import WorkRecords
from tests.agent.controllers.harness import (
    APPLIED_OK,
    CLUSTER,
    HeldEvents,
    configmap,
    karmada_work,
    named,
    running_pair,
)

JsonDict = dict[str, Any]


def data_of(work: JsonDict) -> Any:
    return work["spec"]["workload"]["manifests"][0]["data"]


async def test_a_late_event_of_an_older_spec_is_neither_applied_nor_recorded() -> None:
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        await pair.create_work(karmada_work("w", [configmap("w", data={"v": "1"})]))
        await pair.wait_work("w", APPLIED_OK)
        await pair.idle(pair.execution)
        works = pair.ctx.sources.works
        cached = works.get("w")
        assert cached is not None
        # The control plane changes the spec twice; the Works watch brings neither yet.
        events = HeldEvents(works.reflector, named("w"))
        for value in ("2", "3"):
            work = await pair.get_work("w")
            data_of(work)["v"] = value
            await pair.karmada.replace(WORKS, work)
        # A status write of ours (one that changes nothing) answers with the newest Work.
        await works.patch_status(cached, {"conditions": cached["status"]["conditions"]})
        await pair.wait_member(CONFIGMAPS, "w", lambda o: o["data"] == {"v": "3"})
        await pair.idle(pair.execution)
        await events.arrived(2)
        events.release(until=lambda _e: True)  # the first change: older than the cache
        await pair.idle(pair.execution)
        assert (await pair.get_member(CONFIGMAPS, "w"))["data"] == {"v": "3"}
        await pair.ctx.sources.records.flush()
        loaded = await WorkRecords(pair.member_client, "karmada-system", CLUSTER).load()
        assert [data_of(w) for w in loaded] == [{"v": "3"}]
        events.release()
        await pair.idle(pair.execution)
        assert (await pair.get_member(CONFIGMAPS, "w"))["data"] == {"v": "3"}
