"""Deleting a Work: its member objects removed (or released with preserveResourcesOnDeletion),
only Karmada's own touched, the finalizer and the record dropped; a Work deleted without the
agent's cleanup reported orphaned."""

from __future__ import annotations

from typing import Any

from agent.controllers.execution import ExecutionController
from agent.controllers.execution.deletion import EVENT_WORK_ORPHANED
from agent.karmada import names
from agent.kube.resources import CONFIGMAPS, DEPLOYMENTS
from agent.resources import WORKS
from agent.sources.work_records import WorkRecords
from tests.agent.controllers.harness import (
    APPLIED_FAILED,
    APPLIED_OK,
    CLUSTER,
    EXEC_NS,
    annotations_of,
    configmap,
    deployment,
    eventually,
    karmada_work,
    labels,
    running_pair,
)

JsonDict = dict[str, Any]


async def test_deletion_removes_member_objects_and_finalizer() -> None:
    async with running_pair("execution") as pair:
        await pair.create_work(karmada_work("gone", [deployment("gone"), configmap("gone")]))
        await pair.wait_work("gone", APPLIED_OK)
        await pair.karmada.delete(WORKS, "gone", namespace=EXEC_NS)
        await pair.wait_work_gone("gone")
        await pair.wait_member_gone(DEPLOYMENTS, "gone")
        await pair.wait_member_gone(CONFIGMAPS, "gone")


async def test_deletion_costs_one_member_request_per_object() -> None:
    """The objects to delete come from the member caches (or, for an object applied just
    before, from the apply's answer): one DELETE each, no GET; the record's deletion goes out
    with the next record write (agent.sources.work_records)."""
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        await pair.create_work(karmada_work("gone", [deployment("gone"), configmap("gone")]))
        await pair.wait_work("gone", APPLIED_OK)
        await pair.idle(pair.execution)
        await pair.ctx.sources.records.flush()
        pair.member.accounting.reset()
        await pair.karmada.delete(WORKS, "gone", namespace=EXEC_NS)
        await pair.wait_work_gone("gone")  # our finalizer goes once the deletes were answered
        assert pair.member.accounting.counts(verb="delete", resource="deployments") == 1
        assert pair.member.accounting.counts(verb="delete", resource="configmaps") == 1
        assert pair.member.accounting.counts(verb="get", resource="deployments") == 0
        assert pair.member.accounting.counts(verb="get", resource="configmaps") == 0
        await pair.wait_member_gone(DEPLOYMENTS, "gone")
        await pair.wait_member_gone(CONFIGMAPS, "gone")


async def test_preserve_resources_on_deletion_strips_karmada_metadata() -> None:
    async with running_pair("execution") as pair:
        await pair.create_work(karmada_work("kept", [configmap("kept")], preserve=True))
        before = await pair.wait_member(CONFIGMAPS, "kept")
        assert labels(before)[names.WORK_PERMANENT_ID_LABEL]
        await pair.karmada.delete(WORKS, "kept", namespace=EXEC_NS)
        await pair.wait_work_gone("kept")
        after = await pair.get_member(CONFIGMAPS, "kept")
        assert after["data"] == {"key": "value"}
        for key in names.MANAGED_RESOURCE_LABELS:
            assert key not in labels(after)
        for key in names.MANAGED_RESOURCE_ANNOTATIONS:
            assert key not in annotations_of(after)


async def test_deletion_leaves_unmanaged_object_alone() -> None:
    async with running_pair("execution") as pair:
        await pair.member_client.create(CONFIGMAPS, configmap("keep", data={"x": "y"}))
        await pair.create_work(karmada_work("collide", [configmap("keep"), configmap("mine")]))
        await pair.wait_work("collide", APPLIED_FAILED)
        await pair.karmada.delete(WORKS, "collide", namespace=EXEC_NS)
        await pair.wait_work_gone("collide")
        await pair.wait_member_gone(CONFIGMAPS, "mine")
        assert (await pair.get_member(CONFIGMAPS, "keep"))["data"] == {"x": "y"}


async def test_the_record_follows_the_work_and_a_vanished_work_is_reported_orphaned() -> None:
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        await pair.create_work(karmada_work("kept", [configmap("kept")]))
        await pair.create_work(karmada_work("gone", [configmap("gone")]))
        await pair.create_work(karmada_work("done", [configmap("done")]))
        for name in ("kept", "gone", "done"):
            await pair.wait_work(name, APPLIED_OK)
        await pair.ctx.sources.records.flush()  # written within a second; now, for the test
        loaded = await WorkRecords(pair.member_client, "karmada-system", CLUSTER).load()
        assert sorted(w["metadata"]["name"] for w in loaded) == ["done", "gone", "kept"]

        # Deleted the normal way: objects and record go with the Work.
        await pair.karmada.delete(WORKS, "done", namespace=EXEC_NS)
        await pair.wait_work_gone("done")
        await pair.wait_member_gone(CONFIGMAPS, "done")

        # While no agent watches, "gone" is deleted with our finalizer taken off by hand.
        await pair.execution.stop()
        work = await pair.get_work("gone")
        work["metadata"]["finalizers"] = []
        await pair.karmada.replace(WORKS, work, namespace=EXEC_NS)
        await pair.karmada.delete(WORKS, "gone", namespace=EXEC_NS)
        await pair.wait_work_gone("gone")

        # The next agent finds the record of a Work that no longer exists.
        restarted = ExecutionController(pair.ctx)
        await restarted.start()
        try:

            async def records_left() -> list[str]:
                fresh = WorkRecords(pair.member_client, "karmada-system", CLUSTER)
                return sorted(w["metadata"]["name"] for w in await fresh.load())

            await eventually(records_left, lambda names: names == ["kept"], what="records")
            reasons = {e["reason"]: e for e in await pair.events_for("gone")}
            assert EVENT_WORK_ORPHANED in reasons
            assert "configmaps default/gone" in reasons[EVENT_WORK_ORPHANED]["message"]
            assert EVENT_WORK_ORPHANED not in {e["reason"] for e in await pair.events_for("done")}
            # Reported, never deleted.
            assert (await pair.get_member(CONFIGMAPS, "gone"))["data"] == {"key": "value"}
        finally:
            await restarted.stop()
