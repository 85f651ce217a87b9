"""MemberObjects: on-demand watches (watch-list) of Karmada-managed member objects."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent.karmada import names
from agent.kube.client import GVR
from agent.kube.informers import label_matcher
from agent.kube.resources import CONFIGMAPS
from agent.options import Options
from agent.sources.member_objects import MemberObjects
from emulator.emulator import run_emulator
from tests.agent.controllers.harness import HeldEvents, configmap, eventually, kube_client, named

JsonDict = dict[str, Any]


def managed(obj: JsonDict) -> JsonDict:
    obj["metadata"]["labels"] = {names.MANAGED_LABEL: "true"}
    return obj


async def test_caches_only_managed_objects_and_reports_changes() -> None:
    async with run_emulator("member") as emu:
        client = kube_client(emu)
        objects = MemberObjects(client, Options())
        seen: list[tuple[str, str]] = []
        unsubscribe = objects.subscribe(lambda t, _g, o: seen.append((t, o["metadata"]["name"])))
        try:
            await client.create(CONFIGMAPS, managed(configmap("before")))
            await client.create(CONFIGMAPS, configmap("unmanaged"))
            assert objects.get(CONFIGMAPS, "default", "before") == (None, False)

            objects.ensure(CONFIGMAPS, "ConfigMap")
            objects.ensure(CONFIGMAPS)  # idempotent: still one watch
            assert await objects.wait_synced(CONFIGMAPS, 5.0)
            assert objects.watched == [CONFIGMAPS]
            cached, synced = objects.get(CONFIGMAPS, "default", "before")
            assert synced
            assert cached is not None
            # Filled in although list items of built-in types come without them.
            assert (cached["apiVersion"], cached["kind"]) == ("v1", "ConfigMap")
            # Of managedFields, who wrote and when; never the field sets.
            writers = cached["metadata"]["managedFields"]
            assert writers
            assert all("fieldsV1" not in entry for entry in writers)
            # The writer: the manager a client without a field manager gets (its user agent).
            assert {entry["manager"] for entry in writers} == {"karmada-agent"}
            assert objects.get(CONFIGMAPS, "default", "unmanaged") == (None, True)
            assert [o["metadata"]["name"] for o in objects.list(CONFIGMAPS)] == ["before"]
            assert ("ADDED", "before") in seen

            await client.create(CONFIGMAPS, managed(configmap("after")))
            await eventually(_probe(seen), lambda s: ("ADDED", "after") in s, what="ADDED after")
            live = await client.get(CONFIGMAPS, "after", namespace="default")
            live["data"] = {"changed": "yes"}
            await client.replace(CONFIGMAPS, live)
            await eventually(
                _probe(seen), lambda s: ("MODIFIED", "after") in s, what="MODIFIED after"
            )
            # Removing the label takes the object out of the selection: reported as deleted.
            live = await client.get(CONFIGMAPS, "after", namespace="default")
            live["metadata"]["labels"] = {}
            await client.replace(CONFIGMAPS, live)
            await eventually(
                _probe(seen), lambda s: ("DELETED", "after") in s, what="DELETED after"
            )
            assert objects.get(CONFIGMAPS, "default", "after") == (None, True)
            assert not any(name == "unmanaged" for _, name in seen)
            # One watch of Karmada's objects and one of the other objects' names, per type,
            # each starting with the objects (sendInitialEvents, as client-go's reflector):
            # no list before it.
            assert emu.accounting.watches_opened(resource="configmaps") == 2
            assert emu.accounting.counts(verb="list", resource="configmaps") == 0
            # Ownership without a GET: unmanaged objects are known by name, so only a name
            # that no object has is known to be absent; "after" lost its label, so it is
            # known by name now.
            await eventually(
                _absent(objects, "after"), lambda absent: not absent, what="after known by name"
            )
            assert not objects.known_absent(CONFIGMAPS, "default", "unmanaged")
            assert objects.known_absent(CONFIGMAPS, "default", "no-such-object")
            assert not objects.known_absent(CONFIGMAPS, "default", "before")

            # A late subscriber gets what is cached replayed as ADDED.
            late: list[str] = []
            objects.subscribe(lambda t, _g, o: late.append(f"{t} {o['metadata']['name']}"))
            assert late == ["ADDED before"]
        finally:
            unsubscribe()
            await objects.stop()
            await client.close()
        assert objects.watched == []


async def test_a_failing_subscriber_does_not_stop_the_others() -> None:
    async with run_emulator("member") as emu:
        client = kube_client(emu)
        objects = MemberObjects(client)
        good: list[str] = []

        def bad(_t: str, _g: Any, _o: JsonDict) -> None:
            raise RuntimeError("boom")

        objects.subscribe(bad)
        objects.subscribe(lambda _t, _g, o: good.append(o["metadata"]["name"]))
        try:
            objects.ensure(CONFIGMAPS)
            assert await objects.wait_synced(CONFIGMAPS, 5.0)
            await client.create(CONFIGMAPS, managed(configmap("x")))
            await eventually(_probe(good), lambda g: "x" in g, what="good subscriber called")
        finally:
            await objects.stop()
            await client.close()


def _rv(obj: JsonDict) -> str:
    return str(obj["metadata"]["resourceVersion"])


async def test_the_cache_never_goes_back_behind_the_answer_to_our_write() -> None:
    """The watch lags behind our writes (its events held, the writes answered first): the
    answer is cached at once, older events are left out, and subscribers hear of each version
    once."""
    async with run_emulator("member") as emu:
        client = kube_client(emu)
        objects = MemberObjects(client)
        seen: list[tuple[str, str, str]] = []
        objects.subscribe(lambda t, _g, o: seen.append((t, o["metadata"]["name"], _rv(o))))
        try:
            objects.ensure(CONFIGMAPS, "ConfigMap")
            assert await objects.wait_synced(CONFIGMAPS, 5.0)
            reflector = objects._reflectors[CONFIGMAPS]
            held = HeldEvents(reflector, named("new"))
            with objects.writing(CONFIGMAPS, "default", "new") as write:
                created = await client.create(CONFIGMAPS, managed(configmap("new")))
                write.answered(created)
            await held.arrived(1)
            cached, _ = objects.get(CONFIGMAPS, "default", "new")
            assert cached is not None
            assert _rv(cached) == _rv(created)
            assert seen == [("ADDED", "new", _rv(created))]

            # Someone else changes it, then our write: both answered before the watch brings
            # either. Someone else's version is older than our answer and never shows.
            edited = await client.replace(CONFIGMAPS, {**created, "data": {"by": "someone"}})
            with objects.writing(CONFIGMAPS, "default", "new") as write:
                ours = await client.replace(CONFIGMAPS, {**edited, "data": {"by": "us"}})
                write.answered(ours)
            await held.arrived(3)
            assert objects.get(CONFIGMAPS, "default", "new")[0] == reflector.store.prepare(ours)
            held.release()
            assert objects.get(CONFIGMAPS, "default", "new")[0] == reflector.store.prepare(ours)
            assert [rv for _t, _n, rv in seen] == [_rv(created), _rv(ours)]
            assert _rv(edited) not in {rv for _t, _n, rv in seen}

            # An answer the selector does not select is left to the watch (which never brings
            # it to this cache).
            with objects.writing(CONFIGMAPS, "default", "plain") as write:
                write.answered(await client.create(CONFIGMAPS, configmap("plain")))
            assert objects.get(CONFIGMAPS, "default", "plain") == (None, True)

            # Deleted before its events came, and those lost to a compacted history: the
            # relist says what there is.
            held = HeldEvents(reflector, named("gone"))
            with objects.writing(CONFIGMAPS, "default", "gone") as write:
                write.answered(await client.create(CONFIGMAPS, managed(configmap("gone"))))
            assert objects.get(CONFIGMAPS, "default", "gone")[0] is not None
            await client.delete(CONFIGMAPS, "gone", namespace="default")
            await held.arrived(2)
            held.events.clear()
            lists = reflector.lists
            await emu.faults.compact()
            await emu.faults.drop_watches(include_loopback=True)
            await eventually(_probe([reflector]), lambda r: r[0].lists > lists, what="relisted")
            assert objects.get(CONFIGMAPS, "default", "gone") == (None, True)
        finally:
            await objects.stop()
            await client.close()


async def test_a_write_of_a_type_not_watched_is_left_to_its_watch() -> None:
    async with run_emulator("member") as emu:
        client = kube_client(emu)
        objects = MemberObjects(client)
        try:
            with objects.writing(CONFIGMAPS, "default", "early") as write:
                write.answered(await client.create(CONFIGMAPS, managed(configmap("early"))))
            objects.ensure(CONFIGMAPS, "ConfigMap")
            assert await objects.wait_synced(CONFIGMAPS, 5.0)
            assert objects.get(CONFIGMAPS, "default", "early")[0] is not None
        finally:
            await objects.stop()
            await client.close()


def test_label_matcher_takes_equality_based_selectors() -> None:
    selects = label_matcher(f"{names.MANAGED_LABEL}=true")
    assert selects({names.MANAGED_LABEL: "true", "other": "x"})
    assert not selects({names.MANAGED_LABEL: "false"})
    assert not selects({})
    others = label_matcher(f"{names.MANAGED_LABEL}!=true")
    assert others({})
    assert others({names.MANAGED_LABEL: "no"})
    assert not others({names.MANAGED_LABEL: "true"})
    both = label_matcher("a==1, b, !c")
    assert both({"a": "1", "b": ""})
    assert not both({"a": "1", "b": "", "c": "y"})
    assert not both({"a": "1"})
    assert label_matcher("")({"any": "thing"})
    with pytest.raises(ValueError, match="set-based"):
        label_matcher("env in (a,b)")


async def test_a_type_whose_caches_do_not_sync_in_time_is_waited_for_once() -> None:
    missing = GVR("example.io", "v1", "missings")  # not served: its watches never sync
    async with run_emulator("member") as emu:
        client = kube_client(emu)
        objects = MemberObjects(client)
        try:
            objects.ensure(missing)
            assert not await objects.wait_known(missing, 0.1)
            # Answered at once, without waiting at all: the coroutine ends on its first step.
            again = objects.wait_known(missing, 30.0)
            with pytest.raises(StopIteration) as answered:
                again.send(None)
            assert answered.value.value is False
            assert not objects.known(CONFIGMAPS)
            objects.ensure(CONFIGMAPS, "ConfigMap")
            assert await objects.wait_known(CONFIGMAPS, 5.0)
            assert objects.known(CONFIGMAPS)
        finally:
            await objects.stop()
            await client.close()


async def test_a_wait_never_starts_a_watch_but_waits_for_one_started_meanwhile() -> None:
    """Watches are started by what follows the kinds in use (agent.sources.work_kinds), never
    by a reader: a reader that comes first waits, within its bound, for them."""
    async with run_emulator("member") as emu:
        client = kube_client(emu)
        objects = MemberObjects(client)
        try:
            assert not await objects.wait_synced(CONFIGMAPS, 0.05)
            assert objects.watched == []
            waiting = asyncio.ensure_future(objects.wait_known(CONFIGMAPS, 5.0))
            await asyncio.sleep(0)
            assert not waiting.done()
            objects.ensure(CONFIGMAPS, "ConfigMap")
            assert await waiting
        finally:
            await objects.stop()
            await client.close()


def _probe(values: list[Any]) -> Any:
    async def probe() -> list[Any]:
        return list(values)

    return probe


def _absent(objects: MemberObjects, name: str) -> Any:
    async def probe() -> bool:
        return objects.known_absent(CONFIGMAPS, "default", name)

    return probe
