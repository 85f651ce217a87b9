"""What the emulator's controllers see of the storage: every object, then every change."""

from __future__ import annotations

import logging

import pytest

from emulator.controllers.subscription import Subscription

from .harness import ControlPlane, Running, eventually

CONFIGMAPS = ("", "configmaps")


def configmap(name: str, **labels: str) -> dict[str, object]:
    return {"metadata": {"name": name, "labels": labels}}


async def test_sees_what_was_stored_then_every_change_through_compaction() -> None:
    plane = ControlPlane("member")
    await plane.namespace("a")
    cms = "/api/v1/namespaces/a/configmaps"
    await plane.api.create(cms, configmap("one"))
    subscription = Subscription(plane.server.storage, CONFIGMAPS)
    events: list[tuple[str, str]] = []
    subscription.add_handler(lambda t, o: events.append((t, o["metadata"]["name"])))
    async with Running(subscription.run()):
        await eventually(lambda: ("ADDED", "one") in events)
        await plane.api.create(cms, configmap("two"))
        # Reported within the write: the handler has run when the create returns.
        assert events[-1] == ("ADDED", "two")
        # What ends the watches of clients and expires their resourceVersions does not
        # touch a subscription: "one" going away meanwhile is still reported.
        plane.server.storage.close_all_watches()
        plane.server.storage.compact()
        await plane.api.delete(f"{cms}/one")
        assert events[-1] == ("DELETED", "one")
        await plane.api.create(cms, configmap("three"))
        assert events[-1] == ("ADDED", "three")
        assert [o["metadata"]["name"] for o in subscription.items()] == ["three", "two"]
        assert subscription.get("a/two") is not None
        assert subscription.get("a/one") is None
    assert events == [("ADDED", "one"), ("ADDED", "two"), ("DELETED", "one"), ("ADDED", "three")]
    # Once cancelled, it no longer listens.
    assert not subscription.subscribed
    await plane.api.create(cms, configmap("four"))
    assert events[-1] == ("ADDED", "three")


async def test_a_selection_reports_objects_entering_and_leaving_it() -> None:
    plane = ControlPlane("member")
    for ns in ("a", "b"):
        await plane.namespace(ns)
    subscription = Subscription(
        plane.server.storage,
        CONFIGMAPS,
        namespace="a",
        where=lambda o: (o["metadata"].get("labels") or {}).get("tier") == "front",
    )
    events: list[tuple[str, str]] = []
    subscription.add_handler(lambda t, o: events.append((t, o["metadata"]["name"])))
    async with Running(subscription.run()):
        await eventually(lambda: subscription.subscribed)
        await plane.api.create(
            "/api/v1/namespaces/b/configmaps", configmap("elsewhere", tier="front")
        )
        created = await plane.api.create(
            "/api/v1/namespaces/a/configmaps", configmap("x", tier="back")
        )
        assert events == []
        created["metadata"]["labels"] = {"tier": "front"}
        updated = await plane.api.update("/api/v1/namespaces/a/configmaps/x", created)
        assert events == [("ADDED", "x")]
        updated["data"] = {"k": "v"}
        updated = await plane.api.update("/api/v1/namespaces/a/configmaps/x", updated)
        assert events[-1] == ("MODIFIED", "x")
        updated["metadata"]["labels"] = {"tier": "back"}
        await plane.api.update("/api/v1/namespaces/a/configmaps/x", updated)
        assert events[-1] == ("DELETED", "x")
        assert subscription.items() == []
        assert subscription.items("b") == []
        assert subscription.get("a/x") is None


async def test_a_failing_handler_does_not_fail_the_write(caplog: pytest.LogCaptureFixture) -> None:
    plane = ControlPlane("member")
    await plane.namespace("a")
    subscription = Subscription(plane.server.storage, CONFIGMAPS)

    def broken(_event_type: str, _obj: object) -> None:
        raise RuntimeError("boom")

    subscription.add_handler(broken)
    async with Running(subscription.run()):
        await eventually(lambda: subscription.subscribed)
        with caplog.at_level(logging.ERROR, logger="emulator.controllers.subscription"):
            created = await plane.api.create("/api/v1/namespaces/a/configmaps", configmap("c"))
    assert created["metadata"]["name"] == "c"
    assert "handler of ('', 'configmaps') failed on ADDED a/c" in caplog.text


def owned(name: str, *owners: dict[str, object]) -> dict[str, object]:
    refs = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": o["name"], "uid": o["uid"]}
        for o in owners
    ]
    return {"metadata": {"name": name, "ownerReferences": refs}}


async def test_owned_by_follows_owner_references_as_a_scan_would() -> None:
    plane = ControlPlane("member")
    for ns in ("a", "b"):
        await plane.namespace(ns)
    cms = "/api/v1/namespaces/a/configmaps"
    # Owners that exist, so that the garbage collector leaves their dependents be.
    o1, o2, ob = [
        (await plane.api.create(f"/api/v1/namespaces/{ns}/configmaps", configmap(name)))["metadata"]
        for ns, name in (("a", "o1"), ("a", "o2"), ("b", "ob"))
    ]
    u1, u2, ub = str(o1["uid"]), str(o2["uid"]), str(ob["uid"])
    await plane.api.create(cms, owned("early", o1))
    subscription = Subscription(plane.server.storage, CONFIGMAPS)

    def names(namespace: str, uid: str) -> list[str]:
        found = [o["metadata"]["name"] for o in subscription.owned_by(namespace, uid)]
        # The same as a scan of every object finds.
        scanned = [
            o["metadata"]["name"]
            for o in subscription.items(namespace)
            if any(r["uid"] == uid for r in o["metadata"].get("ownerReferences") or ())
        ]
        assert found == scanned
        return found

    assert names("a", u1) == ["early"]  # not subscribed yet: a scan
    async with Running(subscription.run()):
        await eventually(lambda: subscription.subscribed)
        assert names("a", u1) == ["early"]
        await plane.api.create(cms, owned("two", o1, o2))
        await plane.api.create(cms, owned("one", o2))
        await plane.api.create("/api/v1/namespaces/b/configmaps", owned("other", ob))
        assert names("a", u1) == ["early", "two"]
        assert names("a", u2) == ["one", "two"]
        assert names("b", ub) == ["other"]
        assert names("a", ub) == []
        two = await plane.api.get(f"{cms}/two")
        two["metadata"]["ownerReferences"] = two["metadata"]["ownerReferences"][1:]
        await plane.api.update(f"{cms}/two", two)
        assert names("a", u1) == ["early"]
        await plane.api.delete(f"{cms}/one")
        assert names("a", u2) == ["two"]
