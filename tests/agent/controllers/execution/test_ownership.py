"""Ownership: an object Karmada does not manage, or that another Work manages, is refused unless
the Work says it may overwrite; a refused Work looks again when the object changes hands."""

from __future__ import annotations

from typing import Any

from agent.karmada import names
from agent.kube.resources import CONFIGMAPS
from agent.resources import WORKS
from tests.agent.controllers.harness import (
    APPLIED_FAILED,
    APPLIED_OK,
    EXEC_NS,
    annotations_of,
    applied_message,
    condition,
    configmap,
    karmada_work,
    labels,
    running_pair,
    settled_patches,
)

JsonDict = dict[str, Any]


async def test_ownership_guard_refuses_then_overwrite_takes_over() -> None:
    async with running_pair("execution") as pair:
        mine = configmap("theirs", data={"owner": "someone else"})
        created = await pair.member_client.create(CONFIGMAPS, mine)
        await pair.create_work(
            karmada_work("takeover", [configmap("theirs", data={"owner": "karmada"})])
        )
        failed = await pair.wait_work("takeover", APPLIED_FAILED, "Applied=False")
        cond = condition(failed, names.WORK_APPLIED)
        assert cond is not None
        assert cond["message"].startswith("Failed to apply all manifests (0/1): ")
        assert "not managed by Karmada" in cond["message"]
        assert names.CONFLICT_RESOLUTION_ANNOTATION in cond["message"]
        untouched = await pair.get_member(CONFIGMAPS, "theirs")
        assert untouched["data"] == {"owner": "someone else"}
        assert untouched["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
        assert names.EVENT_SYNC_FAILED in {e["reason"] for e in await pair.events_for("takeover")}

        work = await pair.get_work("takeover")
        work["metadata"]["annotations"][names.CONFLICT_RESOLUTION_ANNOTATION] = "overwrite"
        await pair.karmada.replace(WORKS, work)
        await pair.wait_work("takeover", APPLIED_OK)
        taken = await pair.get_member(CONFIGMAPS, "theirs")
        assert taken["data"] == {"owner": "karmada"}
        assert labels(taken)[names.MANAGED_LABEL] == "true"
        assert names.CONFLICT_RESOLUTION_ANNOTATION not in annotations_of(taken)


async def test_object_of_another_work_is_not_taken_over_silently() -> None:
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        await pair.create_work(karmada_work("owner", [configmap("shared", data={"v": "owner"})]))
        await pair.wait_work("owner", APPLIED_OK)
        await pair.wait_member(CONFIGMAPS, "shared", lambda o: o["data"] == {"v": "owner"})

        await pair.create_work(karmada_work("intruder", [configmap("shared", data={"v": "x"})]))
        failed = await pair.wait_work("intruder", APPLIED_FAILED, "Applied=False")
        message = applied_message(failed)
        assert f"Work {EXEC_NS}/owner" in message
        assert names.CONFLICT_RESOLUTION_ANNOTATION in message
        assert (await pair.get_member(CONFIGMAPS, "shared"))["data"] == {"v": "owner"}
        await pair.wait_work("owner", APPLIED_OK)

        # With conflict-resolution: overwrite the second Work takes the object over.
        work = await pair.get_work("intruder")
        work["metadata"]["annotations"][names.CONFLICT_RESOLUTION_ANNOTATION] = "overwrite"
        await pair.karmada.replace(WORKS, work)
        await pair.wait_work("intruder", APPLIED_OK)
        taken = await pair.get_member(CONFIGMAPS, "shared")
        assert taken["data"] == {"v": "x"}
        assert taken["metadata"]["annotations"][names.WORK_NAME_ANNOTATION] == "intruder"
        # The first Work now sees it has lost the object rather than fighting for it.
        lost = await pair.wait_work("owner", APPLIED_FAILED, "owner Applied=False")
        assert f"Work {EXEC_NS}/intruder" in applied_message(lost)
        settled = await settled_patches(pair)
        await pair.create_work(karmada_work("barrier", [configmap("barrier", "kube-public")]))
        await pair.wait_work("barrier", APPLIED_OK)
        assert await settled_patches(pair) == settled + 1
