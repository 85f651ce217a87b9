"""List pagination, resourceVersion semantics, watch streams, GC, namespaces, CRDs, discovery."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from emulator.apiserver import ApiServer
from emulator.streams import close
from tests import polling

from .conftest import call, make_ns

CM = "/api/v1/namespaces/default/configmaps"


async def _collect(api: ApiServer, path: str, n: int, **query: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []

    async def run() -> None:
        async for ev in api.loopback().watch(path, **query):
            events.append(ev)
            if len(events) >= n:
                return

    await asyncio.wait_for(run(), 2)
    return events


async def test_pagination_and_expired_continue(api: ApiServer) -> None:
    await make_ns(api, "default")
    for i in range(5):
        await call(api, "POST", CM, {"metadata": {"name": f"c{i}", "labels": {"i": str(i)}}})
    _, page1, _ = await call(api, "GET", f"{CM}?limit=2")
    assert [o["metadata"]["name"] for o in page1["items"]] == ["c0", "c1"]
    assert page1["metadata"]["remainingItemCount"] == 3
    assert "kind" not in page1["items"][0]  # typed lists carry no item kind
    # a write between pages does not show up: the list is consistent at its RV
    await call(api, "POST", CM, {"metadata": {"name": "c9"}})
    token = page1["metadata"]["continue"]
    _, page2, _ = await call(api, "GET", f"{CM}?limit=10&continue={token}")
    assert [o["metadata"]["name"] for o in page2["items"]] == ["c2", "c3", "c4"]
    assert page2["metadata"]["resourceVersion"] == page1["metadata"]["resourceVersion"]
    assert "continue" not in page2["metadata"]
    api.storage.compact()
    code, body, _ = await call(api, "GET", f"{CM}?limit=10&continue={token}")
    assert code == 410
    assert body["reason"] == "Expired"
    assert body["message"].startswith(
        "The provided continue parameter is too old to display a consistent list result."
    )
    inconsistent = body["metadata"]["continue"]
    code, rest, _ = await call(api, "GET", f"{CM}?continue={inconsistent}")
    assert [o["metadata"]["name"] for o in rest["items"]] == ["c2", "c3", "c4", "c9"]


async def test_selectors(api: ApiServer) -> None:
    await make_ns(api, "default")
    for name, labels in [("a", {"env": "prod", "tier": "web"}), ("b", {"env": "dev"}), ("c", {})]:
        await call(api, "POST", CM, {"metadata": {"name": name, "labels": labels}})

    async def names(q: str) -> list[str]:
        code, body, _ = await call(api, "GET", f"{CM}?{q}")
        assert code == 200, body
        return [o["metadata"]["name"] for o in body["items"]]

    assert await names("labelSelector=env%3Dprod") == ["a"]
    assert await names("labelSelector=env%21%3Dprod") == ["b", "c"]
    assert await names("labelSelector=env+in+(prod,dev)") == ["a", "b"]
    assert await names("labelSelector=env+notin+(prod)") == ["b", "c"]
    assert await names("labelSelector=tier") == ["a"]
    assert await names("labelSelector=%21tier") == ["b", "c"]
    assert await names("fieldSelector=metadata.name%3Db") == ["b"]
    assert await names("fieldSelector=metadata.name%21%3Db") == ["a", "c"]
    code, body, _ = await call(api, "GET", f"{CM}?fieldSelector=spec.foo%3Dx")
    assert (code, body["reason"], body["message"]) == (
        400,
        "BadRequest",
        '"spec.foo" is not a known field selector: only "metadata.name", "metadata.namespace"',
    )
    code, body, _ = await call(api, "GET", "/api/v1/pods?fieldSelector=spec.foo%3Dx")
    assert (code, body["message"]) == (400, "field label not supported: spec.foo")
    code, _, _ = await call(api, "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1")
    assert code == 200


async def test_list_resource_version_semantics(api: ApiServer) -> None:
    await make_ns(api, "default")
    _, a, _ = await call(api, "POST", CM, {"metadata": {"name": "a"}})
    rv = a["metadata"]["resourceVersion"]
    await call(api, "POST", CM, {"metadata": {"name": "b"}})
    _, exact, _ = await call(api, "GET", f"{CM}?resourceVersion={rv}&resourceVersionMatch=Exact")
    assert [o["metadata"]["name"] for o in exact["items"]] == ["a"]
    assert exact["metadata"]["resourceVersion"] == rv
    _, zero, _ = await call(api, "GET", f"{CM}?resourceVersion=0&limit=1")
    assert len(zero["items"]) == 2  # the watch cache ignores limit for RV=0
    future = api.storage.revision + 100
    code, body, _ = await call(
        api, "GET", f"{CM}?resourceVersion={future}&resourceVersionMatch=NotOlderThan"
    )
    assert code == 504
    assert body["reason"] == "Timeout"
    assert (
        body["message"]
        == f"Timeout: Too large resource version: {future}, current: {api.storage.revision}"
    )
    assert body["details"] == {
        "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
        "retryAfterSeconds": 1,
    }
    api.storage.compact()
    code, body, _ = await call(api, "GET", f"{CM}?resourceVersion={rv}&resourceVersionMatch=Exact")
    assert (code, body["reason"], body["message"]) == (
        410,
        "Expired",
        "The resourceVersion for the provided list is too old.",
    )
    code, body, _ = await call(api, "GET", f"{CM}?resourceVersionMatch=Exact")
    assert code == 422
    assert body["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
        "resourceVersionMatch is forbidden unless resourceVersion is provided"
    )


async def test_watch_from_rv_initial_state_and_selectors(api: ApiServer) -> None:
    await make_ns(api, "default")
    _, a, _ = await call(api, "POST", CM, {"metadata": {"name": "a", "labels": {"x": "1"}}})
    rv = a["metadata"]["resourceVersion"]
    # initial state for RV ""
    events = await _collect(api, CM, 1)
    assert events[0]["type"] == "ADDED"
    assert events[0]["object"]["metadata"]["name"] == "a"
    assert events[0]["object"]["kind"] == "ConfigMap"

    got: list[dict[str, Any]] = []

    async def watcher() -> None:
        async for ev in api.loopback().watch(CM, resourceVersion=rv, labelSelector="x=1"):
            got.append(ev)
            if len(got) == 3:
                return

    task = asyncio.create_task(watcher())
    await asyncio.sleep(0)
    a["metadata"]["labels"] = {"x": "2"}  # stops matching -> DELETED
    _, a2, _ = await call(api, "PUT", f"{CM}/a", a)
    a2["metadata"]["labels"] = {"x": "1"}  # matches again -> ADDED
    _, a3, _ = await call(api, "PUT", f"{CM}/a", a2)
    await call(api, "DELETE", f"{CM}/a")
    await asyncio.wait_for(task, 2)
    assert [e["type"] for e in got] == ["DELETED", "ADDED", "DELETED"]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in got]
    assert rvs == sorted(rvs)
    assert rvs[1] == int(a3["metadata"]["resourceVersion"])


async def test_watch_too_old_gives_error_event(api: ApiServer) -> None:
    await make_ns(api, "default")
    _, a, _ = await call(api, "POST", CM, {"metadata": {"name": "a"}})
    await call(api, "POST", CM, {"metadata": {"name": "b"}})
    floor = api.storage.compact()
    old = int(a["metadata"]["resourceVersion"])
    code, _, resp = await call(api, "GET", f"{CM}?watch=true&resourceVersion={old}")
    assert code == 200
    assert resp.stream is not None
    lines = [json.loads(chunk) async for chunk in resp.stream]
    assert lines == [
        {
            "type": "ERROR",
            "object": {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": f"too old resource version: {old} ({floor})",
                "reason": "Expired",
                "code": 410,
            },
        }
    ]


async def test_watch_bookmarks_timeout_and_initial_events_end(api: ApiServer) -> None:
    await make_ns(api, "default")
    await call(api, "POST", CM, {"metadata": {"name": "a"}})
    events = await _collect(
        api,
        CM,
        2,
        sendInitialEvents="true",
        resourceVersionMatch="NotOlderThan",
        allowWatchBookmarks="true",
    )
    assert events[0]["type"] == "ADDED"
    assert events[1] == {
        "type": "BOOKMARK",
        "object": {
            "kind": "ConfigMap",
            "apiVersion": "v1",
            "metadata": {
                "resourceVersion": str(api.storage.revision),
                "annotations": {"k8s.io/initial-events-end": "true"},
            },
        },
    }
    rv = str(api.storage.revision)
    events = await _collect(api, CM, 1, resourceVersion=rv, allowWatchBookmarks="true")
    assert events == [
        {
            "type": "BOOKMARK",
            "object": {
                "kind": "ConfigMap",
                "apiVersion": "v1",
                "metadata": {"resourceVersion": rv},
            },
        }
    ]
    # timeoutSeconds ends the stream
    out = [e async for e in api.loopback().watch(CM, resourceVersion=rv, timeoutSeconds="0.05")]
    assert out == []


async def test_close_all_watches_ends_streams(api: ApiServer) -> None:
    await make_ns(api, "default")
    rv = str(api.storage.revision)
    seen: list[Any] = []

    async def run() -> None:
        async for ev in api.loopback().watch(CM, resourceVersion=rv):
            seen.append(ev)

    task = asyncio.create_task(run())
    for _ in range(10):
        await asyncio.sleep(0)
    assert api.storage.watcher_count() == 1
    api.close()
    await asyncio.wait_for(task, 1)
    assert seen == []
    assert api.storage.watcher_count() == 0


@pytest.mark.parametrize(
    "accept", ["application/json", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"]
)
async def test_watch_closed_before_its_first_event_releases_its_watcher(
    api: ApiServer, accept: str
) -> None:
    # A client that leaves while the answer is still on its way never reads a chunk: the
    # front closes the body unread, and the watcher must go with it.
    await make_ns(api, "default")
    rv = api.storage.revision
    _, _, resp = await call(api, "GET", f"{CM}?watch=1&resourceVersion={rv}", accept=accept)
    assert resp.stream is not None
    assert api.storage.watcher_count() == 1
    await close(resp.stream)
    assert api.storage.watcher_count() == 0


async def _until(cond: Any, timeout: float = 2.0) -> None:
    await polling.eventually(cond, timeout=timeout, interval=0.005)


async def test_namespace_deletion_removes_content(api: ApiServer) -> None:
    await make_ns(api, "doomed")
    path = "/api/v1/namespaces/doomed/configmaps"
    await call(api, "POST", path, {"metadata": {"name": "held", "finalizers": ["x.io/f"]}})
    await call(api, "POST", path, {"metadata": {"name": "free"}})
    code, ns, _ = await call(api, "DELETE", "/api/v1/namespaces/doomed")
    assert code == 200
    assert ns["status"]["phase"] == "Terminating"
    assert ns["spec"]["finalizers"] == ["kubernetes"]
    code, body, _ = await call(api, "POST", path, {"metadata": {"name": "late"}})
    assert code == 403
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'configmaps "late" is forbidden: unable to create new content in namespace '
        "doomed because it is being terminated",
        "reason": "Forbidden",
        "details": {
            "name": "late",
            "kind": "configmaps",
            "causes": [
                {
                    "reason": "NamespaceTerminating",
                    "message": "namespace doomed is being terminated",
                    "field": "metadata.namespace",
                }
            ],
        },
        "code": 403,
    }

    async def free_gone() -> bool:
        return (await call(api, "GET", f"{path}/free"))[0] == 404

    await _until(free_gone)
    assert (await call(api, "GET", "/api/v1/namespaces/doomed"))[0] == 200
    await call(
        api,
        "PATCH",
        f"{path}/held",
        {"metadata": {"finalizers": None}},
        "application/merge-patch+json",
    )

    async def ns_gone() -> bool:
        return (await call(api, "GET", "/api/v1/namespaces/doomed"))[0] == 404

    await _until(ns_gone)
    code, body, _ = await call(api, "DELETE", "/api/v1/namespaces/default")
    assert (
        code == 404
        or body["message"] == 'namespaces "default" is forbidden: this namespace may not be deleted'
    )


async def test_owner_reference_gc_background_and_orphan(api: ApiServer) -> None:
    await make_ns(api, "default")
    _, owner, _ = await call(api, "POST", CM, {"metadata": {"name": "owner"}})
    ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
    }
    await call(api, "POST", CM, {"metadata": {"name": "child", "ownerReferences": [ref]}})
    await call(api, "DELETE", f"{CM}/owner")

    async def child_gone() -> bool:
        return (await call(api, "GET", f"{CM}/child"))[0] == 404

    await _until(child_gone)
    _, owner, _ = await call(api, "POST", CM, {"metadata": {"name": "owner2"}})
    ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner2",
        "uid": owner["metadata"]["uid"],
    }
    await call(api, "POST", CM, {"metadata": {"name": "kept", "ownerReferences": [ref]}})
    code, body, _ = await call(api, "DELETE", f"{CM}/owner2?propagationPolicy=Orphan")
    assert code == 200
    assert body["metadata"]["finalizers"] == ["orphan"]

    async def owner_gone() -> bool:
        return (await call(api, "GET", f"{CM}/owner2"))[0] == 404

    await _until(owner_gone)
    code, kept, _ = await call(api, "GET", f"{CM}/kept")
    assert code == 200
    assert "ownerReferences" not in kept["metadata"]


async def test_foreground_deletion_waits_for_blocking_dependents(api: ApiServer) -> None:
    await make_ns(api, "default")
    _, owner, _ = await call(api, "POST", CM, {"metadata": {"name": "o"}})
    ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "o",
        "uid": owner["metadata"]["uid"],
        "blockOwnerDeletion": True,
    }
    await call(
        api,
        "POST",
        CM,
        {"metadata": {"name": "d", "ownerReferences": [ref], "finalizers": ["x.io/f"]}},
    )
    _code, body, _ = await call(api, "DELETE", f"{CM}/o?propagationPolicy=Foreground")
    assert body["metadata"]["finalizers"] == ["foregroundDeletion"]

    async def dependent_deleting() -> bool:
        _, dep, _ = await call(api, "GET", f"{CM}/d")
        return bool(dep["metadata"].get("deletionTimestamp"))

    # Once the garbage collector has acted on the dependent, the owner must still be there:
    # its blocking dependent has a finalizer left.
    await _until(dependent_deleting)
    assert (await call(api, "GET", f"{CM}/o"))[0] == 200
    await call(
        api, "PATCH", f"{CM}/d", {"metadata": {"finalizers": None}}, "application/merge-patch+json"
    )

    async def owner_gone() -> bool:
        return (await call(api, "GET", f"{CM}/o"))[0] == 404

    await _until(owner_gone)


async def test_crd_serves_resource_and_removal(api: ApiServer) -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.io"},
        "spec": {
            "group": "example.io",
            "scope": "Namespaced",
            "names": {
                "plural": "widgets",
                "singular": "widget",
                "kind": "Widget",
                "shortNames": ["wd"],
            },
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {
                        "status": {},
                        "scale": {
                            "specReplicasPath": ".spec.size",
                            "statusReplicasPath": ".status.size",
                        },
                    },
                    "additionalPrinterColumns": [
                        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"}
                    ],
                }
            ],
        },
    }
    code, body, _ = await call(
        api, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd
    )
    assert code == 201, body
    await make_ns(api, "default")
    path = "/apis/example.io/v1/namespaces/default/widgets"
    code, w, _ = await call(
        api,
        "POST",
        path,
        {
            "apiVersion": "example.io/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"size": 2},
            "status": {"size": 9},
        },
    )
    assert code == 201
    assert w["metadata"]["generation"] == 1
    assert "status" not in w
    _, lst, _ = await call(api, "GET", path)
    assert lst["kind"] == "WidgetList"
    assert lst["items"][0]["kind"] == "Widget"
    code, body, _ = await call(api, "PUT", f"{path}/w", {**w, "metadata": {"name": "w"}})
    assert code == 422
    assert body["details"]["causes"][0]["field"] == "metadata.resourceVersion"
    code, body, _ = await call(
        api, "PATCH", f"{path}/w", {}, "application/strategic-merge-patch+json"
    )
    assert code == 415
    _, table, _ = await call(
        api, "GET", path, accept="application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    )
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Size"]
    assert table["rows"][0]["cells"] == ["w", 2]
    _, scale, _ = await call(api, "GET", f"{path}/w/scale")
    assert scale["spec"]["replicas"] == 2
    crd_path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.io"

    async def established() -> bool:
        return "status" in (await call(api, "GET", crd_path))[1]

    await _until(established)
    _, crd_now, _ = await call(api, "GET", crd_path)
    assert {c["type"]: c["status"] for c in crd_now["status"]["conditions"]} == {
        "NamesAccepted": "True",
        "Established": "True",
    }
    code, _, _ = await call(
        api, "DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.io"
    )
    assert code == 200

    async def gone() -> bool:
        return (await call(api, "GET", path))[0] == 404

    await _until(gone)


async def test_discovery_documents(api: ApiServer) -> None:
    _, apis, _ = await call(api, "GET", "/apis")
    assert apis["kind"] == "APIGroupList"
    assert "apps" in [g["name"] for g in apis["groups"]]
    _, v1, _ = await call(api, "GET", "/api/v1")
    pods = next(r for r in v1["resources"] if r["name"] == "pods")
    assert pods["shortNames"] == ["po"]
    assert pods["namespaced"] is True
    assert any(r["name"] == "pods/status" for r in v1["resources"])
    _, apps, _ = await call(api, "GET", "/apis/apps/v1")
    scale = next(r for r in apps["resources"] if r["name"] == "deployments/scale")
    assert scale["group"] == "autoscaling"
    assert scale["kind"] == "Scale"
    accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
    code, agg, resp = await call(api, "GET", "/apis", accept=accept)
    assert (
        resp.headers["content-type"]
        == "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    )
    assert agg["kind"] == "APIGroupDiscoveryList"
    assert agg["apiVersion"] == "apidiscovery.k8s.io/v2"
    _, version, _ = await call(api, "GET", "/version")
    assert version["major"] == "1"
    code, text, _ = await call(api, "GET", "/readyz?verbose")
    assert code == 200
    assert text.endswith(b"readyz check passed\n")


async def test_table_for_builtins(api: ApiServer) -> None:
    await make_ns(api, "default")
    await call(api, "POST", CM, {"metadata": {"name": "a"}, "data": {"x": "1", "y": "2"}})
    _, table, _ = await call(api, "GET", CM, accept="application/json;as=Table;v=v1;g=meta.k8s.io")
    assert table["kind"] == "Table"
    assert table["apiVersion"] == "meta.k8s.io/v1"
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Data", "Age"]
    assert table["rows"][0]["cells"][:2] == ["a", 2]
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


async def test_get_throughput(api: ApiServer) -> None:
    import time

    from emulator.wire import ApiRequest

    await make_ns(api, "default")
    await call(api, "POST", CM, {"metadata": {"name": "a"}})
    start = time.perf_counter()
    n = 2000
    for _ in range(n):
        resp = await api.handle(ApiRequest("GET", f"{CM}/a"))
        assert resp.status == 200
    rate = n / (time.perf_counter() - start)
    assert rate > 2000, rate
