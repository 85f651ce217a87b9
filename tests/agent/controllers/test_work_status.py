"""The workStatus controller end to end: per-manifest statuses and health, written when changed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent.karmada import names
from agent.kube.client import GVR
from agent.kube.reflector import Reflector
from agent.kube.resources import CONFIGMAPS, DEPLOYMENTS
from agent.resources import WORKS
from emulator.controllers import Knobs

from .harness import (
    EXEC_NS,
    HeldEvents,
    WorkIds,
    configmap,
    deployment,
    eventually,
    has_condition,
    karmada_manifest,
    karmada_work,
    named,
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
        await reported_work(pair, "bye")
        await pair.karmada.delete(WORKS, "bye", namespace=EXEC_NS)  # finalizer keeps it
        await pair.wait_work("bye", lambda w: bool(w["metadata"].get("deletionTimestamp")))
        await pair.member_client.delete(CONFIGMAPS, "bye", namespace="default")
        await pair.idle(pair.work_status)
        pair.work_status.queue.add("bye")
        await pair.idle(pair.work_status)
        assert len(statuses(await pair.get_work("bye"))) == 1


def member_watch(pair: Any, gvr: GVR) -> Reflector:
    reflector: Reflector = pair.ctx.sources.member_objects._reflectors[gvr]
    return reflector


async def test_an_applied_object_the_member_watch_has_not_brought_keeps_its_reported_status() -> (
    None
):
    async with running_pair("execution", "workStatus") as pair:
        assert pair.execution is not None
        assert pair.work_status is not None
        await configmaps_watched(pair)
        held = HeldEvents(member_watch(pair, CONFIGMAPS), named("later"))
        writes = pair.cp.accounting.counts(resource="works/status")
        await pair.create_work(karmada_work("later", [configmap("later")]))
        await pair.wait_work("later", has_condition("Applied", "True"))
        await pair.idle(pair.execution, pair.work_status)
        assert held.events, "the member watch brought the object before the test held it"
        # What the execution controller reported from its apply stands while the watch lags.
        assert all_healthy(1)(await pair.get_work("later"))
        held.release()
        await pair.idle(pair.execution, pair.work_status)
        assert all_healthy(1)(await pair.get_work("later"))
        assert pair.cp.accounting.counts(resource="works/status") == writes + 1


async def test_the_reported_status_survives_both_watches_lagging_behind_the_apply() -> None:
    async with running_pair("execution", "workStatus") as pair:
        assert pair.execution is not None
        assert pair.work_status is not None
        await configmaps_watched(pair)
        member = HeldEvents(member_watch(pair, CONFIGMAPS), named("later"))
        # From the execution controller's report on: the writes before it are what it waits for.
        reported = has_condition_event("Applied", "True")
        works = HeldEvents(
            pair.ctx.sources.works.reflector, lambda e: named("later")(e) and reported(e)
        )
        await pair.create_work(karmada_work("later", [configmap("later")]))
        await pair.wait_work("later", has_condition("Applied", "True"))
        await pair.idle(pair.execution, pair.work_status)
        # The Works watch catches up to the execution controller's report, the member watch
        # brings the object, then the Works watch brings the rest.
        works.release(until=reported)
        member.release()
        await pair.idle(pair.execution, pair.work_status)
        works.release()
        await pair.idle(pair.execution, pair.work_status)
        await pair.wait_work("later", all_healthy(1), "the reported status back", timeout=3.0)


async def test_a_stale_work_in_the_cache_does_not_keep_the_status_from_the_member_truth() -> None:
    async with running_pair("workStatus") as pair:
        assert pair.work_status is not None
        cm = await reported_work(pair, "back")
        await pair.idle(pair.work_status)
        # The Works watch lags: another writer's change of the status (the conditions), then
        # ours (the object deleted: no entry) come late, the other writer's after our write.
        works = HeldEvents(pair.ctx.sources.works.reflector, named("back"))
        work = await pair.get_work("back")
        work["status"]["conditions"][0]["message"] = "Manifest has been applied again"
        await pair.karmada.update_status(WORKS, work)
        await pair.member_client.delete(CONFIGMAPS, "back", namespace="default")
        await pair.wait_work("back", lambda w: not statuses(w))
        await pair.idle(pair.work_status)
        works.release(until=lambda _e: True)  # the other writer's: the entry still there
        await pair.idle(pair.work_status)
        await pair.member_client.create(CONFIGMAPS, cm)
        await eventually(
            lambda: cached(pair, CONFIGMAPS, "back"), bool, what="the object in the cache again"
        )
        await pair.idle(pair.work_status)
        works.release()
        await pair.idle(pair.work_status)
        await pair.wait_work("back", lambda w: len(statuses(w)) == 1, "the entry back", timeout=3.0)


async def test_a_change_of_the_entries_sends_the_work_back_unless_it_is_our_write() -> None:
    async with running_pair("workStatus") as pair:
        controller = pair.work_status
        assert controller is not None
        await reported_work(pair, "echo")
        await pair.idle(controller)
        before = controller.works.get("echo")
        assert before is not None
        ours = [{**statuses(before)[0], "health": names.UNHEALTHY}]
        # The Works watch brings the write back only at the end, as it may over a slow link.
        held = HeldEvents(controller.works.reflector, named("echo"))
        # Our write of these entries: its answer in the cache is no news.
        written = await controller.works.patch_status(before, {"manifestStatuses": ours})
        assert len(controller.queue) == 0
        # ... the same entries written by someone else.
        other = {**written, "metadata": {**written["metadata"], "resourceVersion": "theirs"}}
        controller._work_updated(before, other)
        assert len(controller.queue) == 1
        held.release()


async def reported_work(pair: Any, name: str) -> JsonDict:
    """A Work of one ConfigMap the member has, marked applied and reported on by workStatus;
    returns the ConfigMap as the Work has it."""
    cm = karmada_manifest(configmap(name), name, WorkIds())
    await pair.member_client.create(CONFIGMAPS, cm)
    await pair.create_work(karmada_work(name, [cm], raw=True))
    await pair.mark_applied(name)
    await pair.wait_work(name, lambda w: len(statuses(w)) == 1)
    return cm


async def configmaps_watched(pair: Any) -> None:
    """A first Work applied and reported: the ConfigMap caches are synced, the next Work's
    objects are looked up in them."""
    await pair.create_work(karmada_work("first", [configmap("first")]))
    await pair.wait_work("first", all_healthy(1))
    await pair.idle(pair.execution, pair.work_status)


async def cached(pair: Any, gvr: GVR, name: str) -> JsonDict | None:
    obj: JsonDict | None = pair.ctx.sources.member_objects.get(gvr, "default", name)[0]
    return obj


def has_condition_event(type_: str, status: str) -> Callable[[JsonDict], bool]:
    check = has_condition(type_, status)
    return lambda event: check(event.get("object") or {})


async def test_a_late_event_of_an_older_work_costs_no_second_status_write() -> None:
    async with running_pair("workStatus") as pair:
        assert pair.work_status is not None
        await reported_work(pair, "late")
        await pair.idle(pair.work_status)
        # The Works watch lags: another writer's change of the conditions, then our write of
        # the entries (the object deleted), come after the answer to our write.
        works = HeldEvents(pair.ctx.sources.works.reflector, named("late"))
        work = await pair.get_work("late")
        work["status"]["conditions"][0]["message"] = "Manifest has been applied again"
        await pair.karmada.update_status(WORKS, work)
        writes = pair.cp.accounting.counts(resource="works/status")
        await pair.member_client.delete(CONFIGMAPS, "late", namespace="default")
        await pair.wait_work("late", lambda w: not statuses(w))
        await pair.idle(pair.work_status)
        assert pair.cp.accounting.counts(resource="works/status") == writes + 1
        await works.arrived(2)
        # The other writer's event, older than our write, arrives: the cache stays at our
        # write, so nothing is written again.
        works.release(until=lambda _e: True)
        assert not statuses(pair.work_status.works.get("late") or {})
        await pair.idle(pair.work_status)
        works.release()
        await pair.idle(pair.work_status)
        assert not statuses(await pair.get_work("late"))
        assert pair.cp.accounting.counts(resource="works/status") == writes + 1
