"""The workStatus controller end to end: per-manifest statuses and health, written when changed."""

from __future__ import annotations

from typing import Any

from agent.karmada import names
from agent.kube.resources import CONFIGMAPS, DEPLOYMENTS
from agent.resources import WORKS
from emulator.controllers import Knobs

from .harness import (
    EXEC_NS,
    WorkIds,
    configmap,
    deployment,
    karmada_manifest,
    karmada_work,
    running_pair,
    service,
)

JsonDict = dict[str, Any]


def statuses(work: JsonDict) -> list[JsonDict]:
    return list((work.get("status") or {}).get("manifestStatuses") or [])


def all_healthy(count: int) -> Any:
    def check(work: JsonDict) -> bool:
        entries = statuses(work)
        return len(entries) == count and all(e.get("health") == names.HEALTHY for e in entries)

    return check


async def test_one_status_per_manifest_with_identifier_status_and_health() -> None:
    async with running_pair("execution", "workStatus") as pair:
        work = karmada_work("web", [deployment("web"), service("web"), configmap("web-config")])
        await pair.create_work(work)
        done = await pair.wait_work("web", all_healthy(3), "three healthy manifest statuses")
        entries = statuses(done)
        assert [e["identifier"] for e in entries] == [
            {
                "ordinal": 0,
                "group": "apps",
                "version": "v1",
                "kind": "Deployment",
                "resource": "deployments",
                "namespace": "default",
                "name": "web",
            },
            {
                "ordinal": 1,
                "version": "v1",
                "kind": "Service",
                "resource": "services",
                "namespace": "default",
                "name": "web",
            },
            {
                "ordinal": 2,
                "version": "v1",
                "kind": "ConfigMap",
                "resource": "configmaps",
                "namespace": "default",
                "name": "web-config",
            },
        ]
        deploy_status = entries[0]["status"]
        live = await pair.get_member(DEPLOYMENTS, "web")
        assert deploy_status["readyReplicas"] == live["status"]["readyReplicas"] == 2
        assert deploy_status["generation"] == live["metadata"]["generation"]
        assert deploy_status["resourceTemplateGeneration"] == 1
        assert "status" not in entries[2]  # a ConfigMap has no status
        # Status conditions of the execution controller are still there (separate writers).
        assert any(c["type"] == names.WORK_APPLIED for c in done["status"]["conditions"])

        events = await pair.events_for("web")
        reasons = [e["reason"] for e in events]
        assert names.EVENT_REFLECT_STATUS_SUCCEED in reasons
        # Health Events for the kinds whose health something judges; a ConfigMap is Healthy
        # without one, as upstream's (no InterpretHealth hook for the kind).
        judged = {
            e["message"].split(" ")[2]
            for e in events
            if e["reason"] == names.EVENT_INTERPRET_HEALTH_SUCCEED
        }
        assert judged == {"Deployment", "Service"}


async def test_unhealthy_then_healthy_and_entry_dropped_when_object_goes() -> None:
    # The member's workload simulator makes Deployments ready after a second.
    async with running_pair("workStatus", knobs=Knobs(workload_ready_delay=1.0)) as pair:
        assert pair.work_status is not None
        # workStatus alone: the objects are put on the member by hand, with the back-references.
        ids = WorkIds()
        deploy = karmada_manifest(deployment("slow"), "slow", ids)
        cm = karmada_manifest(configmap("slow-config"), "slow", ids)
        await pair.create_work(karmada_work("slow", [deploy, cm], raw=True))
        await pair.mark_applied("slow")
        await pair.member_client.create(CONFIGMAPS, cm)
        await pair.member_client.create(DEPLOYMENTS, deploy)
        first = await pair.wait_work("slow", lambda w: len(statuses(w)) == 2, "two statuses")
        health = {e["identifier"]["kind"]: e["health"] for e in statuses(first)}
        assert health == {"Deployment": names.UNHEALTHY, "ConfigMap": names.HEALTHY}
        healthy = await pair.wait_work("slow", all_healthy(2), "deployment healthy")
        assert statuses(healthy)[0]["status"]["availableReplicas"] == 2

        await pair.member_client.delete(CONFIGMAPS, "slow-config", namespace="default")
        left = await pair.wait_work("slow", lambda w: len(statuses(w)) == 1, "entry dropped")
        assert statuses(left)[0]["identifier"]["kind"] == "Deployment"
        reasons = [e["reason"] for e in await pair.events_for("slow")]
        # Deployment Unhealthy -> Healthy; a ConfigMap's health nothing judges: no Event.
        assert reasons.count(names.EVENT_INTERPRET_HEALTH_SUCCEED) == 2


async def test_status_written_only_when_changed() -> None:
    async with running_pair("execution", "workStatus") as pair:
        assert pair.execution is not None
        assert pair.work_status is not None
        await pair.create_work(karmada_work("quiet", [configmap("quiet")]))
        await pair.wait_work("quiet", all_healthy(1))
        await pair.idle(pair.execution, pair.work_status)
        writes = pair.cp.accounting.counts(resource="works/status")
        # One write: conditions and the first manifest statuses together (execution).
        assert writes == 1
        for _ in range(3):
            pair.work_status.queue.add("quiet")
            pair.execution.queue.add("quiet")
            await pair.idle(pair.execution, pair.work_status)
        # A member change that does not change the reported status: no write either.
        live = await pair.get_member(CONFIGMAPS, "quiet")
        live["metadata"]["annotations"]["unrelated"] = "x"
        await pair.member_client.replace(CONFIGMAPS, live)
        await pair.wait_member(
            CONFIGMAPS, "quiet", lambda o: "unrelated" not in o["metadata"]["annotations"] or True
        )
        await pair.idle(pair.execution, pair.work_status)
        assert pair.cp.accounting.counts(resource="works/status") == writes
        # Nothing judges a ConfigMap's health and it has no status: no status Event at all.
        events = [e["reason"] for e in await pair.events_for("quiet")]
        assert names.EVENT_INTERPRET_HEALTH_SUCCEED not in events
        assert names.EVENT_REFLECT_STATUS_SUCCEED not in events


async def test_deleting_work_is_skipped() -> None:
    async with running_pair("workStatus") as pair:
        assert pair.work_status is not None
        ids = WorkIds()
        cm = karmada_manifest(configmap("bye"), "bye", ids)
        await pair.member_client.create(CONFIGMAPS, cm)
        await pair.create_work(karmada_work("bye", [cm], raw=True))
        await pair.mark_applied("bye")
        await pair.wait_work("bye", lambda w: len(statuses(w)) == 1)
        await pair.karmada.delete(WORKS, "bye", namespace=EXEC_NS)  # finalizer keeps it
        await pair.wait_work("bye", lambda w: bool(w["metadata"].get("deletionTimestamp")))
        await pair.member_client.delete(CONFIGMAPS, "bye", namespace="default")
        await pair.idle(pair.work_status)
        pair.work_status.queue.add("bye")
        await pair.idle(pair.work_status)
        assert len(statuses(await pair.get_work("bye"))) == 1
