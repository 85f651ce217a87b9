"""The execution controller's reconcile end to end (an emulated Karmada control plane and member
cluster): Works applied, Dispatching and Applied written only when they change, suspended
dispatching, and a member cluster that is not Ready."""

from __future__ import annotations

from typing import Any

import pytest

from agent.controllers.execution.apply import FIELD_MANAGER
from agent.karmada import names
from agent.kube.errors import NotFoundError
from agent.kube.resources import CONFIGMAPS, DEPLOYMENTS, SERVICES
from agent.resources import WORKS
from tests.agent.controllers.harness import (
    APPLIED_OK,
    EXEC_NS,
    annotations_of,
    condition,
    configmap,
    deployment,
    eventually,
    has_condition,
    karmada_work,
    labels,
    running_pair,
    service,
)

JsonDict = dict[str, Any]


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
