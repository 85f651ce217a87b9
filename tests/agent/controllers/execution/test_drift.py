"""Drift: a change of a member object by someone else is put back; status-only changes and the
agent's own writes are never taken for drift."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from agent.karmada import names
from agent.kube.resources import CONFIGMAPS, DEPLOYMENTS
from tests.agent.controllers.harness import (
    APPLIED_OK,
    HeldEvents,
    configmap,
    deployment,
    karmada_work,
    named,
    running_pair,
    settled_patches,
)

JsonDict = dict[str, Any]


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


async def test_a_watch_event_older_than_our_apply_is_not_taken_for_drift() -> None:
    """Someone edits a Deployment, the member's deployment controller writes the status of
    that edit, and the watch brings that status write only after our apply has put the edit
    back and answered. It is older than our write, not a change after it: no second apply.
    (What made test_status_only_changes_are_not_taken_for_drift flaky, ordered here.)"""
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        await pair.create_work(karmada_work("probe", [deployment("probe")]))
        await pair.wait_work("probe", APPLIED_OK)
        await pair.wait_member(DEPLOYMENTS, "probe", _available(2, generation=1))
        await pair.idle(pair.execution)
        patches = pair.member.accounting.counts(verb="patch", resource="deployments")

        held = HeldEvents(pair.ctx.sources.member_objects._reflectors[DEPLOYMENTS], named("probe"))
        probe = await pair.get_member(DEPLOYMENTS, "probe")
        probe["spec"]["replicas"] = 5
        edited = await pair.member_client.replace(DEPLOYMENTS, probe)
        # The member's controller has written the status of the edit; the watch holds it all.
        await pair.wait_member(DEPLOYMENTS, "probe", _available(5, generation=2))
        held.release(until=lambda event: _rv(event["object"]) == _rv(edited))
        await pair.wait_member(DEPLOYMENTS, "probe", lambda o: o["spec"]["replicas"] == 2)
        await pair.idle(pair.execution)
        assert held.events, "the status write of the edit came before the apply's answer"
        held.release()
        await pair.idle(pair.execution)

        assert pair.member.accounting.counts(verb="patch", resource="deployments") == patches + 1


def _available(replicas: int, *, generation: int) -> Callable[[JsonDict], bool]:
    def check(obj: JsonDict) -> bool:
        status = obj.get("status") or {}
        return bool(
            status.get("observedGeneration") == generation
            and status.get("availableReplicas") == replicas
        )

    return check


def _rv(obj: JsonDict) -> str:
    return str(obj["metadata"]["resourceVersion"])


async def test_own_writes_of_two_manifests_are_not_drift() -> None:
    """The agent writes one object twice in a reconcile (a Work carrying the same object under
    two manifests that differ only in how the control plane rendered them is one example; two
    Works taking it over one after the other with overwrite another): every resourceVersion our
    applies returned is ours, whichever came last."""
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        await pair.create_work(karmada_work("first", [configmap("first")]))
        await pair.wait_work("first", APPLIED_OK)
        overwrite = {names.CONFLICT_RESOLUTION_ANNOTATION: names.CONFLICT_OVERWRITE}
        await pair.create_work(
            karmada_work("a", [configmap("shared", data={"v": "a"})], annotations=overwrite)
        )
        await pair.wait_work("a", APPLIED_OK)
        await pair.create_work(
            karmada_work("b", [configmap("shared", data={"v": "b"})], annotations=overwrite)
        )
        await pair.wait_work("b", APPLIED_OK)
        await pair.wait_member(CONFIGMAPS, "shared", lambda o: o["data"] == {"v": "b"})
        settled = await settled_patches(pair)
        await pair.create_work(karmada_work("barrier", [configmap("barrier", "kube-public")]))
        await pair.wait_work("barrier", APPLIED_OK)
        # Work a no longer owns the object: b took it over, and a is not re-applied for it.
        assert await settled_patches(pair) == settled + 1
        assert (await pair.get_member(CONFIGMAPS, "shared"))["data"] == {"v": "b"}


async def test_a_delete_that_arrives_before_the_write_is_recorded_is_not_hidden() -> None:
    """The member deletes the object right after the apply, and the watch brings the deletion
    before the agent has recorded its write (ordered here: the apply's answer is held until the
    agent's own handlers have seen the deletion). The Work must not say Applied=True for an
    object that is gone: the object is applied again."""
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        # The ConfigMap watch runs already, so the deletion comes as an event.
        await pair.create_work(karmada_work("first", [configmap("first")]))
        await pair.wait_work("first", APPLIED_OK)
        client = pair.member_client
        apply = client.apply
        raced: list[str] = []

        async def apply_then_deleted(gvr: Any, body: JsonDict, **kwargs: Any) -> JsonDict:
            applied = await apply(gvr, body, **kwargs)
            if body["metadata"]["name"] != "raced" or raced:
                return applied
            uid = applied["metadata"]["uid"]
            raced.append(uid)
            seen = asyncio.Event()

            def on_event(event_type: str, _gvr: Any, obj: JsonDict) -> None:
                if event_type == "DELETED" and obj["metadata"].get("uid") == uid:
                    seen.set()

            # Subscribed after the controller: when this handler runs, its handler has run.
            unsubscribe = pair.ctx.sources.member_objects.subscribe(on_event)
            try:
                await client.delete(CONFIGMAPS, "raced", namespace="default")
                await asyncio.wait_for(seen.wait(), 10)
            finally:
                unsubscribe()
            return applied

        client.apply = apply_then_deleted  # type: ignore[method-assign]
        await pair.create_work(karmada_work("raced", [configmap("raced")]))
        await pair.wait_work("raced", APPLIED_OK)
        await pair.idle(pair.execution)
        assert raced, "the apply was not raced"
        live = await pair.get_member(CONFIGMAPS, "raced")
        assert live["metadata"]["uid"] != raced[0]
        assert APPLIED_OK(await pair.get_work("raced"))


def test_own_writes_keep_a_digest_and_the_metadata_not_the_object() -> None:
    from agent.controllers.execution.drift import OwnWrites

    writes = OwnWrites()
    key = (CONFIGMAPS, "default", "kept")
    answer: JsonDict = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "kept", "namespace": "default", "uid": "u1", "resourceVersion": "5",
            "labels": {names.MANAGED_LABEL: "true"},
            "managedFields": [{"manager": "karmada-agent", "operation": "Apply"}],
        },
        "data": {"k": "v" * 4096},
    }  # fmt: skip
    with writes.in_flight(key):
        writes.note(key, "work-a", answer)
    writer, identity = writes.last_written(key) or ("", {})
    assert writer == "work-a"
    # What a deletion reads; neither the data nor write bookkeeping is held twice.
    assert identity == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "kept", "namespace": "default", "uid": "u1",
                     "labels": {names.MANAGED_LABEL: "true"}},
    }  # fmt: skip
    # The same content with keys in another order, another version and a status: not drift.
    status_only = {
        "data": {"k": "v" * 4096},
        "status": {"observed": 1},
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {**answer["metadata"], "resourceVersion": "6", "managedFields": []},
    }
    assert not writes.is_drift("MODIFIED", key, status_only)
    # The watch brought our write to the member objects' cache: the metadata is no longer kept.
    assert writes.last_written(key) is None
    edited = {**status_only, "data": {"k": "edited"}}
    edited["metadata"] = {**status_only["metadata"], "resourceVersion": "7"}
    assert writes.is_drift("MODIFIED", key, edited)
    assert writes.is_drift("DELETED", key, edited)


def test_own_writes_forget_the_metadata_once_the_watch_brings_the_write() -> None:
    from agent.controllers.execution.drift import OwnWrites

    writes = OwnWrites()
    key = (CONFIGMAPS, "default", "seen")
    answer: JsonDict = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "seen", "namespace": "default", "uid": "u1", "resourceVersion": "5"},
    }
    with writes.in_flight(key):
        writes.note(key, "work-a", answer)
    assert writes.last_written(key) is not None
    assert not writes.is_drift("ADDED", key, answer)
    assert writes.last_written(key) is None
    # Seen while the apply was in flight: not kept either.
    with writes.in_flight(key):
        assert not writes.is_drift(
            "MODIFIED", key, {**answer, "metadata": {**answer["metadata"], "resourceVersion": "6"}}
        )
        writes.note(
            key, "work-a", {**answer, "metadata": {**answer["metadata"], "resourceVersion": "6"}}
        )
    assert writes.last_written(key) is None
    assert writes.writer(key) == "work-a"


def test_own_writes_remember_the_last_versions_only() -> None:
    from agent.controllers.execution.drift import OWN_WRITES_KEPT, OwnWrites

    writes = OwnWrites()
    key = (CONFIGMAPS, "default", "many")

    def version(rv: int, value: str) -> JsonDict:
        meta = {"name": "many", "namespace": "default", "uid": "u1", "resourceVersion": str(rv)}
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": value}}

    for rv in range(1, OWN_WRITES_KEPT + 3):
        with writes.in_flight(key):
            writes.note(key, "work-a", version(rv, str(rv)))
    # The latest versions are ours; the oldest, with content unlike our last write, is not.
    assert not writes.is_drift("MODIFIED", key, version(3, "3"))
    assert writes.is_drift("MODIFIED", key, version(2, "2"))


def test_own_writes_keep_no_metadata_of_an_object_the_cache_holds() -> None:
    from agent.controllers.execution.drift import OwnWrites

    writes = OwnWrites()
    key = (CONFIGMAPS, "default", "cached")
    live: JsonDict = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cached", "namespace": "default", "uid": "u1", "resourceVersion": "5"},
    }
    writes.note(key, "work-a", live, cached=True)
    assert writes.last_written(key) is None
    assert writes.writer(key) == "work-a"
    assert not writes.is_drift("MODIFIED", key, live)
    writes.note(key, "work-a", live)
    assert writes.last_written(key) == (
        "work-a",
        {**live, "metadata": {k: v for k, v in live["metadata"].items() if k != "resourceVersion"}},
    )
