"""Deleting a Work: its member objects removed (or released with preserveResourcesOnDeletion),
only Karmada's own touched, the finalizer and the record dropped; a Work deleted without the
agent's cleanup reported orphaned."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from agent.controllers.execution import ExecutionController
from agent.controllers.execution.deletion import (
    CONDITION_DELETED,
    EVENT_CLEANUP_WORK_FAILED,
    EVENT_WORK_ORPHANED,
    REASON_DELETION_FAILED,
)
from agent.karmada import names
from agent.karmada.work import ADOPTED_ANNOTATION
from agent.kube.client import GVR
from agent.kube.errors import NotFoundError
from agent.kube.resources import CONFIGMAPS, DEPLOYMENTS, NAMESPACES
from agent.options import Options
from agent.resources import WORKS
from agent.sources.work_records import WorkRecords
from tests.agent.controllers.harness import (
    APPLIED_FAILED,
    APPLIED_OK,
    CLUSTER,
    EXEC_NS,
    annotations_of,
    condition,
    configmap,
    deployment,
    eventually,
    has_condition,
    karmada_work,
    kube_client,
    labels,
    running_pair,
)

CLUSTERROLES = GVR("rbac.authorization.k8s.io", "v1", "clusterroles")
CLUSTERROLEBINDINGS = GVR("rbac.authorization.k8s.io", "v1", "clusterrolebindings")

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


async def test_an_object_the_agent_deleted_is_not_taken_for_drift(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 34: an object deleted with its Work whose watch event came before the Work was
    done with (at scale, the rule) was taken for drift: one more reconcile and log line per
    deletion."""
    caplog.set_level(logging.INFO)
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        deletion = pair.execution.deletion
        await pair.create_work(karmada_work("gone", [deployment("gone"), configmap("gone")]))
        await pair.wait_work("gone", APPLIED_OK)
        objects = pair.ctx.sources.member_objects

        async def cached() -> int:
            return sum(
                objects.get(gvr, "default", "gone")[0] is not None
                for gvr in (DEPLOYMENTS, CONFIGMAPS)
            )

        remove_finalizer = deletion._remove_finalizer

        async def after_the_watch_events(work: JsonDict) -> None:
            await eventually(cached, lambda n: n == 0, what="the deletions' watch events")
            await remove_finalizer(work)

        deletion._remove_finalizer = after_the_watch_events  # type: ignore[method-assign]
        await pair.karmada.delete(WORKS, "gone", namespace=EXEC_NS)
        await pair.wait_work_gone("gone")
        assert not [r for r in caplog.records if "out of band" in r.getMessage()]


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
        await pair.stop(pair.execution)
        work = await pair.get_work("gone")
        work["metadata"]["finalizers"] = []
        await pair.karmada.replace(WORKS, work, namespace=EXEC_NS)
        await pair.karmada.delete(WORKS, "gone", namespace=EXEC_NS)
        await pair.wait_work_gone("gone")

        # The next agent finds the record of a Work that no longer exists.
        restarted = ExecutionController(pair.ctx)
        await pair.start("execution", restarted)
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
            await pair.stop(restarted)


# --- what the agent did not create ----------------------------------------------------------


OVERWRITE = {names.CONFLICT_RESOLUTION_ANNOTATION: names.CONFLICT_OVERWRITE}


async def _adopt(pair: Any, name: str) -> None:
    """A ConfigMap that exists on the member before a Work takes it over with overwrite."""
    await pair.member_client.create(
        CONFIGMAPS, configmap(name, data={"mine": "yes"}), namespace="default"
    )
    await pair.create_work(
        karmada_work(name, [configmap(name, data={"k": "karmada"})], annotations=OVERWRITE)
    )
    await pair.wait_work(name, APPLIED_OK)
    adopted = await pair.get_member(CONFIGMAPS, name)
    assert annotations_of(adopted)[ADOPTED_ANNOTATION] == "true"


async def test_an_adopted_object_is_released_not_deleted_with_its_work() -> None:
    async with running_pair("execution") as pair:
        await _adopt(pair, "adopted")
        # A later apply keeps the mark (the object is Karmada's by now).
        work = await pair.get_work("adopted")
        work["spec"]["workload"]["manifests"][0]["data"] = {"k": "changed"}
        await pair.karmada.replace(WORKS, work)
        await pair.wait_member(CONFIGMAPS, "adopted", lambda o: o["data"]["k"] == "changed")
        assert annotations_of(await pair.get_member(CONFIGMAPS, "adopted"))[ADOPTED_ANNOTATION]

        await pair.karmada.delete(WORKS, "adopted", namespace=EXEC_NS)
        await pair.wait_work_gone("adopted")
        left = await pair.get_member(CONFIGMAPS, "adopted")
        assert names.MANAGED_LABEL not in labels(left)
        assert not set(annotations_of(left)) & {
            names.WORK_NAME_ANNOTATION,
            names.WORK_NAMESPACE_ANNOTATION,
            ADOPTED_ANNOTATION,
        }
        assert pair.member.accounting.counts(verb="delete", resource="configmaps") == 0


async def test_delete_adopted_resources_restores_upstreams_deletion() -> None:
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        pair.execution.deletion.delete_adopted = True  # --delete-adopted-resources
        await _adopt(pair, "adopted")
        await pair.karmada.delete(WORKS, "adopted", namespace=EXEC_NS)
        await pair.wait_work_gone("adopted")
        await pair.wait_member_gone(CONFIGMAPS, "adopted")


async def test_the_clusters_own_namespaces_are_never_deleted() -> None:
    """kube-system adopted with overwrite, and the agent's own namespace created by a Work: both
    released with their Works, in any mode; not a DELETE sent."""
    own = Options().karmada_kubeconfig_namespace

    def namespace(name: str) -> JsonDict:
        return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}

    async with running_pair("execution") as pair:
        assert pair.execution is not None
        pair.execution.deletion.delete_adopted = True
        await pair.create_work(
            karmada_work("system", [namespace("kube-system")], annotations=OVERWRITE)
        )
        await pair.create_work(karmada_work("own", [namespace(own)]))
        for name in ("system", "own"):
            await pair.wait_work(name, APPLIED_OK)
            await pair.karmada.delete(WORKS, name, namespace=EXEC_NS)
            await pair.wait_work_gone(name)
        for name in ("kube-system", own):
            left = await pair.get_member(NAMESPACES, name, None)
            assert names.MANAGED_LABEL not in labels(left)
            assert not left["metadata"].get("deletionTimestamp")
        assert pair.member.accounting.counts(verb="delete", resource="namespaces") == 0


async def test_a_deletion_the_member_refuses_is_reported_and_retried() -> None:
    """The agent may not delete ConfigMaps on the member (RBAC): the Work says so (Deleted=False,
    a CleanupWorkFailed Warning Event) and keeps its finalizer; once allowed, the retry deletes
    the object and the Work goes."""
    user = "restricted-agent"
    async with running_pair("execution", member_user=user) as pair:
        admin = kube_client(pair.member)
        try:
            await _grant(admin, user, ["get", "list", "watch", "create", "update", "patch"])
            await pair.create_work(karmada_work("kept", [configmap("kept")]))
            await pair.wait_work("kept", APPLIED_OK)
            await pair.karmada.delete(WORKS, "kept", namespace=EXEC_NS)
            refused = await pair.wait_work(
                "kept", has_condition(CONDITION_DELETED, "False", REASON_DELETION_FAILED)
            )
            message = str(condition(refused, CONDITION_DELETED)["message"])  # type: ignore[index]
            assert "ConfigMap default/kept" in message
            assert "403" in message
            assert names.EXECUTION_CONTROLLER_FINALIZER in refused["metadata"]["finalizers"]
            warnings = [
                e for e in await pair.events_for("kept") if e["reason"] == EVENT_CLEANUP_WORK_FAILED
            ]
            assert len(warnings) == 1
            assert warnings[0]["type"] == "Warning"

            await _grant(admin, user, ["delete"], name="deleter")
            await pair.wait_work_gone("kept")
            await eventually(lambda: _gone(admin, "kept"), bool, what="object deleted")
        finally:
            await admin.close()


async def _grant(admin: Any, user: str, verbs: list[str], name: str = "agent") -> None:
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": f"test-{name}"},
        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": verbs}],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"test-{name}"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": role["metadata"]["name"],
        },
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    await admin.create(CLUSTERROLES, role)
    await admin.create(CLUSTERROLEBINDINGS, binding)


async def _gone(admin: Any, name: str) -> bool:
    try:
        await admin.get(CONFIGMAPS, name, namespace="default")
    except NotFoundError:
        return True
    return False
