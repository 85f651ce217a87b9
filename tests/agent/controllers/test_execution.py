"""The execution controller end to end: an emulated Karmada control plane and member cluster."""

from __future__ import annotations

from typing import Any

import pytest

from agent.controllers.execution import EVENT_WORK_ORPHANED, FIELD_MANAGER, ExecutionController
from agent.karmada import names
from agent.kube.errors import NotFoundError
from agent.kube.resources import CONFIGMAPS, DEPLOYMENTS, NAMESPACES, SERVICES
from agent.resources import WORKS
from agent.sources.work_records import WorkRecords

from .harness import (
    CLUSTER,
    EXEC_NS,
    WIDGETS,
    condition,
    configmap,
    crd,
    deployment,
    eventually,
    has_condition,
    karmada_work,
    running_pair,
    service,
)

JsonDict = dict[str, Any]
APPLIED_OK = has_condition(names.WORK_APPLIED, "True", names.REASON_APPLIED_SUCCESSFUL)
APPLIED_FAILED = has_condition(names.WORK_APPLIED, "False", names.REASON_APPLIED_FAILED)


def labels(obj: JsonDict) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def annotations_of(obj: JsonDict) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


async def test_applies_deployment_service_and_configmap() -> None:
    async with running_pair("execution") as pair:
        work = karmada_work("web", [deployment("web"), service("web"), configmap("web-config")])
        await pair.create_work(work)
        applied = await pair.wait_work("web", APPLIED_OK, "Applied=True")

        cond = condition(applied, names.WORK_APPLIED)
        assert cond is not None
        assert cond["message"] == "Manifest has been successfully applied"
        assert cond["lastTransitionTime"]
        dispatching = condition(applied, names.WORK_DISPATCHING)
        assert dispatching is not None
        assert (dispatching["status"], dispatching["reason"]) == ("True", "Dispatching")

        for gvr, name in ((DEPLOYMENTS, "web"), (SERVICES, "web"), (CONFIGMAPS, "web-config")):
            obj = await pair.get_member(gvr, name)
            assert labels(obj)[names.MANAGED_LABEL] == "true"
            assert annotations_of(obj)[names.WORK_NAMESPACE_ANNOTATION] == EXEC_NS
            assert annotations_of(obj)[names.WORK_NAME_ANNOTATION] == "web"
            managers = {
                (m["manager"], m["operation"]) for m in obj["metadata"].get("managedFields") or []
            }
            assert (FIELD_MANAGER, "Apply") in managers
        member_deploy = await pair.get_member(DEPLOYMENTS, "web")
        assert member_deploy["spec"]["replicas"] == 2
        member_svc = await pair.get_member(SERVICES, "web")
        # A field the member's API server owns stays; we never set it.
        assert member_svc["spec"].get("clusterIP")

        reasons = {e["reason"] for e in await pair.events_for("web")}
        assert {names.EVENT_WORK_DISPATCHING, names.EVENT_SYNC_SUCCEED} <= reasons
        assert pair.metrics.results().count("success") >= 3
        assert "error" not in pair.metrics.results()


async def test_crd_then_its_object_and_namespace_then_objects() -> None:
    widget = {
        "apiVersion": "example.io/v1",
        "kind": "Widget",
        "metadata": {"name": "w1", "namespace": "team-a"},
        "spec": {"size": 3},
    }
    team_ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
    # Out of order on purpose: the object first, the things it needs last.
    work = karmada_work("widgets", [widget, configmap("cfg", "team-a"), crd(), team_ns])
    async with running_pair("execution") as pair:
        await pair.create_work(work)
        await pair.wait_work("widgets", APPLIED_OK, "Applied=True")
        obj = await pair.get_member(WIDGETS, "w1", "team-a")
        assert obj["spec"] == {"size": 3}
        assert labels(await pair.get_member(NAMESPACES, "team-a", None))[names.MANAGED_LABEL]
        assert (await pair.get_member(CONFIGMAPS, "cfg", "team-a"))["data"] == {"key": "value"}


async def test_work_update_changes_member_object() -> None:
    async with running_pair("execution") as pair:
        await pair.create_work(karmada_work("cfg", [configmap("cfg", data={"a": "1", "b": "2"})]))
        await pair.wait_member(CONFIGMAPS, "cfg", lambda o: o.get("data") == {"a": "1", "b": "2"})

        work = await pair.get_work("cfg")
        work["spec"]["workload"]["manifests"][0]["data"] = {"a": "10"}
        await pair.karmada.replace(WORKS, work)
        # "b" left the manifest, so it leaves the object: we applied it, we own it.
        await pair.wait_member(CONFIGMAPS, "cfg", lambda o: o.get("data") == {"a": "10"})
        await pair.wait_work("cfg", APPLIED_OK)


async def test_suspend_dispatching_then_resume() -> None:
    async with running_pair("execution") as pair:
        await pair.create_work(karmada_work("held", [configmap("held")], suspend=True))
        held = await pair.wait_work(
            "held",
            has_condition(names.WORK_DISPATCHING, "False", names.REASON_SUSPEND_DISPATCHING),
        )
        assert condition(held, names.WORK_APPLIED) is None
        assert pair.execution is not None
        await pair.idle(pair.execution)
        with pytest.raises(NotFoundError):
            await pair.get_member(CONFIGMAPS, "held")

        held["spec"]["suspendDispatching"] = False
        await pair.karmada.replace(WORKS, held)
        resumed = await pair.wait_work("held", APPLIED_OK)
        assert has_condition(names.WORK_DISPATCHING, "True", names.REASON_DISPATCHING)(resumed)
        await pair.get_member(CONFIGMAPS, "held")


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


async def test_deletion_leaves_unmanaged_object_alone() -> None:
    async with running_pair("execution") as pair:
        await pair.member_client.create(CONFIGMAPS, configmap("keep", data={"x": "y"}))
        await pair.create_work(karmada_work("collide", [configmap("keep"), configmap("mine")]))
        await pair.wait_work("collide", APPLIED_FAILED)
        await pair.karmada.delete(WORKS, "collide", namespace=EXEC_NS)
        await pair.wait_work_gone("collide")
        await pair.wait_member_gone(CONFIGMAPS, "mine")
        assert (await pair.get_member(CONFIGMAPS, "keep"))["data"] == {"x": "y"}


async def test_drift_is_put_back_from_watch_events() -> None:
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        await pair.create_work(karmada_work("drift", [configmap("drift", data={"k": "v"})]))
        await pair.wait_work("drift", APPLIED_OK)
        # Work list/watch once; no polling of the control plane.
        works_lists = pair.cp.accounting.counts(verb="list", resource="works")

        await pair.member_client.delete(CONFIGMAPS, "drift", namespace="default")
        await pair.wait_member(CONFIGMAPS, "drift", what="deleted object recreated")

        current = await pair.get_member(CONFIGMAPS, "drift")
        current["data"] = {"k": "edited"}
        await pair.member_client.replace(CONFIGMAPS, current)
        await pair.wait_member(CONFIGMAPS, "drift", lambda o: o.get("data") == {"k": "v"})

        await pair.idle(pair.execution)
        patches = pair.member.accounting.counts(
            verb="patch", resource="configmaps", namespace="default"
        )
        # A barrier: another Work goes through the same workers.
        await pair.create_work(karmada_work("barrier", [configmap("barrier", "kube-public")]))
        await pair.wait_work("barrier", APPLIED_OK)
        await pair.idle(pair.execution)
        # The settled object is not re-applied again and again.
        assert (
            pair.member.accounting.counts(verb="patch", resource="configmaps", namespace="default")
            == patches
        )
        assert pair.cp.accounting.counts(verb="list", resource="works") == works_lists


async def test_deletion_removes_member_objects_and_finalizer() -> None:
    async with running_pair("execution") as pair:
        await pair.create_work(karmada_work("gone", [deployment("gone"), configmap("gone")]))
        await pair.wait_work("gone", APPLIED_OK)
        await pair.karmada.delete(WORKS, "gone", namespace=EXEC_NS)
        await pair.wait_work_gone("gone")
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


async def test_malformed_manifest_and_unknown_kind_do_not_block_the_others() -> None:
    good = configmap("good")
    unknown = {
        "apiVersion": "nothere.io/v1",
        "kind": "Gadget",
        "metadata": {"name": "g", "namespace": "default"},
    }
    no_kind = {"apiVersion": "v1", "metadata": {"name": "x", "namespace": "default"}}
    async with running_pair("execution") as pair:
        work = karmada_work("mixed", [good, unknown, no_kind])
        await pair.create_work(work)
        failed = await pair.wait_work("mixed", APPLIED_FAILED)
        message = condition(failed, names.WORK_APPLIED)["message"]  # type: ignore[index]
        assert message.startswith("Failed to apply all manifests (1/3): [")
        assert "manifest 2 (default/x) has no kind" in message
        assert "Gadget default/g" in message
        assert (await pair.get_member(CONFIGMAPS, "good"))["data"] == {"key": "value"}
        assert "error" in pair.metrics.results()


async def test_status_written_only_when_changed() -> None:
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        await pair.create_work(karmada_work("quiet", [configmap("quiet")]))
        await pair.wait_work("quiet", APPLIED_OK)
        await pair.idle(pair.execution)
        writes = pair.cp.accounting.counts(resource="works/status")
        assert writes == 1  # Dispatching and Applied together, once
        for _ in range(3):
            pair.execution.queue.add("quiet")
            await pair.idle(pair.execution)
        assert pair.cp.accounting.counts(resource="works/status") == writes


async def test_waits_for_cluster_ready_and_deletion_waits_too() -> None:
    async with running_pair("execution", ready=False) as pair:
        assert pair.execution is not None
        await pair.create_work(karmada_work("later", [configmap("later")]))
        await pair.wait_work("later", has_condition(names.WORK_DISPATCHING, "True"))
        await pair.idle(pair.execution)
        with pytest.raises(NotFoundError):
            await pair.get_member(CONFIGMAPS, "later")
        await pair.set_cluster_ready("True")
        await pair.wait_work("later", APPLIED_OK)

        await pair.set_cluster_ready("False")
        await eventually(lambda: _ready(pair), lambda r: r is False, what="cluster seen not ready")
        await pair.karmada.delete(WORKS, "later", namespace=EXEC_NS)
        # Not Ready and not terminating: the Work stays, finalizer and member object too.
        await pair.wait_work("later", lambda w: bool(w["metadata"].get("deletionTimestamp")))
        await pair.get_member(CONFIGMAPS, "later")
        await pair.set_cluster_ready("True")
        await pair.wait_work_gone("later")
        await pair.wait_member_gone(CONFIGMAPS, "later")


async def _ready(pair: Any) -> bool:
    return bool(pair.execution.cluster.ready)


async def test_status_only_changes_are_not_taken_for_drift() -> None:
    def ready(obj: JsonDict) -> bool:
        return bool((obj.get("status") or {}).get("availableReplicas") == 2)

    async with running_pair("execution") as pair:
        assert pair.execution is not None
        await pair.create_work(karmada_work("web", [deployment("web")]))
        await pair.create_work(karmada_work("probe", [deployment("probe")]))
        for name in ("web", "probe"):
            await pair.wait_work(name, APPLIED_OK)
            await pair.wait_member(DEPLOYMENTS, name, ready)
        await pair.idle(pair.execution)
        patches = pair.member.accounting.counts(verb="patch", resource="deployments")

        # Another controller writes status only: nothing of ours changed.
        web = await pair.get_member(DEPLOYMENTS, "web")
        web["status"]["observedGeneration"] = web["metadata"]["generation"]
        web["status"]["conditions"] = [{"type": "Available", "status": "True", "reason": "Seen"}]
        await pair.member_client.update_status(DEPLOYMENTS, web, namespace="default")
        # Then a real edit of another Deployment; its events follow on the same watch stream,
        # so once it is put back the status event has been handled too.
        probe = await pair.get_member(DEPLOYMENTS, "probe")
        probe["spec"]["replicas"] = 5
        await pair.member_client.replace(DEPLOYMENTS, probe)
        await pair.wait_member(DEPLOYMENTS, "probe", lambda o: o["spec"]["replicas"] == 2)
        await pair.idle(pair.execution)

        assert pair.member.accounting.counts(verb="patch", resource="deployments") == patches + 1


async def test_no_get_before_apply_once_the_caches_know_every_name() -> None:
    async with running_pair("execution") as pair:
        objects = pair.ctx.sources.member_objects
        await pair.create_work(karmada_work("first", [configmap("first")]))
        await pair.wait_work("first", APPLIED_OK)

        async def absent(name: str) -> bool:
            return objects.known_absent(CONFIGMAPS, "default", name)

        await eventually(lambda: absent("second"), bool, what="configmap caches synced")
        pair.member.accounting.reset()
        await pair.create_work(karmada_work("second", [configmap("second")]))
        await pair.wait_work("second", APPLIED_OK)
        assert pair.member.accounting.counts(verb="get", resource="configmaps") == 0
        assert pair.member.accounting.counts(verb="patch", resource="configmaps") == 1
        # An object that is not Karmada's, created after the caches synced, is known by name:
        # the ownership guard still refuses it (after one GET to look at it).
        await pair.member_client.create(CONFIGMAPS, configmap("late", data={"owner": "them"}))
        await eventually(lambda: absent("late"), lambda known: not known, what="late seen")
        await pair.create_work(karmada_work("late", [configmap("late", data={"owner": "us"})]))
        await pair.wait_work("late", APPLIED_FAILED, "Applied=False")
        assert (await pair.get_member(CONFIGMAPS, "late"))["data"] == {"owner": "them"}


async def test_the_record_follows_the_work_and_a_vanished_work_is_reported_orphaned() -> None:
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        await pair.create_work(karmada_work("kept", [configmap("kept")]))
        await pair.create_work(karmada_work("gone", [configmap("gone")]))
        await pair.create_work(karmada_work("done", [configmap("done")]))
        for name in ("kept", "gone", "done"):
            await pair.wait_work(name, APPLIED_OK)
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
