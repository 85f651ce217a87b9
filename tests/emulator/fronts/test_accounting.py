from __future__ import annotations

import json

import httpx

from emulator.accounting import Accounting, ResourceSpec
from emulator.emulator import run_emulator
from emulator.faults import ControlRouter, Faults
from emulator.streams import close
from emulator.transport import EmulatorTransport
from emulator.wire import ApiRequest

from .core import ADMIN_TOKEN, USER_TOKEN, Core

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
ALICE = {"Authorization": f"Bearer {USER_TOKEN}"}


def rig() -> tuple[Core, Accounting, Faults, ControlRouter]:
    api = Core()
    accounting = Accounting()
    faults = Faults(api.storage, seed=1)
    api.server.hooks += [accounting.hook, faults.hook]
    router = ControlRouter(
        api.server, api.authenticate, {"requests": accounting.http, "faults": faults.http}
    )
    return api, accounting, faults, router


def client(router: ControlRouter, headers: dict[str, str]) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=EmulatorTransport(router, headers=headers), base_url="https://e"
    )


async def test_counts_by_verb_resource_user_and_namespace() -> None:
    _, accounting, _, router = rig()
    async with client(router, ADMIN) as admin, client(router, ALICE) as alice:
        await admin.get("/api/v1/namespaces/a/pods")
        await admin.get("/api/v1/namespaces/a/pods/p1")
        await alice.get("/api/v1/namespaces/b/pods")
        await alice.put("/api/v1/namespaces/b/pods/p1/status", content=b"{}")
        await admin.post("/apis/apps/v1/namespaces/a/deployments", content=b"{}")
        await admin.get("/apis")
        async with admin.stream("GET", "/api/v1/pods?watch=true"):
            pass
    assert accounting.total() == 7
    assert accounting.counts(verb="list") == 2
    assert accounting.counts(verb="list", user="alice") == 1
    assert accounting.counts(resource="pods") == 4
    assert accounting.counts(resource="pods/status") == 1
    assert accounting.counts(resource="pods/*") == 5
    assert accounting.counts(resource="deployments.apps", verb="create") == 1
    assert accounting.counts(resource="deployments.batch") == 0
    assert accounting.counts(namespace="b") == 2
    assert accounting.counts(path="/apis") == 1
    assert accounting.counts(user="admin") == 5
    assert accounting.watches_opened() == 1
    assert accounting.watches_opened(resource="pods", user="admin") == 1
    accounting.reset()
    assert accounting.total() == 0


async def test_watches_that_start_with_the_current_state_are_told_apart() -> None:
    """A watch-list (sendInitialEvents) is a watch, counted as one, and marked as the list it
    stands for; a plain watch is not."""
    _, accounting, _, router = rig()
    watch_list = (
        "/api/v1/namespaces/a/configmaps?watch=true&sendInitialEvents=true"
        "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
    )
    async with client(router, ADMIN) as admin:
        async with admin.stream("GET", watch_list) as answer:
            assert answer.status_code == 200
        async with admin.stream("GET", "/api/v1/namespaces/a/configmaps?watch=true"):
            pass
    [row] = accounting.rows(resource="configmaps")
    assert (row["verb"], row["count"], row["initialEvents"]) == ("watch", 2, 1)


async def test_failed_by_faults_still_counted_control_calls_not() -> None:
    api, accounting, faults, router = rig()
    await api.pod("a", "p")
    accounting.reset()
    faults.fail_next(1, 503, verb="get")
    async with client(router, ADMIN) as admin:
        assert (await admin.get("/api/v1/namespaces/a/pods/p")).status_code == 503
        assert (await admin.get("/api/v1/namespaces/a/pods/p")).status_code == 200
        assert (await admin.get("/_emulator/faults")).status_code == 200
    assert accounting.counts(verb="get", resource="pods") == 2
    assert accounting.total() == 2


async def test_http_view_filter_and_reset() -> None:
    _, accounting, _, router = rig()
    async with client(router, ADMIN) as admin, client(router, ALICE) as alice:
        await alice.get("/api/v1/namespaces/b/configmaps")
        await alice.get("/api/v1/namespaces/b/configmaps")
        await admin.get("/api/v1/namespaces/b/configmaps/c")
        async with alice.stream("GET", "/api/v1/namespaces/b/configmaps?watch=1"):
            pass
        everything = (await admin.get("/_emulator/requests")).json()
        alices = (await admin.get("/_emulator/requests", params={"user": "alice"})).json()
        lists = (
            await admin.get(
                "/_emulator/requests", params={"verb": "list", "resource": "configmaps"}
            )
        ).json()
        denied = await alice.get("/_emulator/requests")
        reset = (await admin.delete("/_emulator/requests")).json()
    assert everything["total"] == 4
    assert everything["watchStreams"] == 1
    assert alices["total"] == 3
    assert lists == {
        "total": 2,
        "watchStreams": 0,
        "items": [
            {
                "verb": "list",
                "user": "alice",
                "count": 2,
                "requestBytes": 0,
                # The rig registers no response hook: answers are not measured.
                "responseBytes": 0,
                "group": "",
                "resource": "configmaps",
                "subresource": "",
                "namespace": "b",
            }
        ],
    }
    assert denied.status_code == 403
    assert denied.json()["reason"] == "Forbidden"
    assert reset == {"reset": True, "total": 4}
    assert accounting.total() == 0


def test_resource_spec_parsing() -> None:
    assert ResourceSpec.parse("pods") == ResourceSpec("pods", None, "")
    assert ResourceSpec.parse("pods.") == ResourceSpec("pods", "", "")
    assert ResourceSpec.parse("clusters.cluster.karmada.io/status") == ResourceSpec(
        "clusters", "cluster.karmada.io", "status"
    )
    core_pods = ResourceSpec.parse("pods.")
    assert core_pods.matches("", "pods", "")
    assert not core_pods.matches("metrics.k8s.io", "pods", "")
    assert str(ResourceSpec.parse("leases.coordination.k8s.io")) == "leases.coordination.k8s.io"


async def test_body_bytes_each_way_watches_as_they_stream() -> None:
    async with run_emulator("member", name="member1") as emu, emu.client() as admin:
        emu.accounting.reset()  # what the emulator's own controllers did at start
        body = json.dumps({"metadata": {"name": "c1"}, "data": {"k": "v" * 1000}}).encode()
        created = await admin.post(
            "/api/v1/namespaces/default/configmaps",
            content=body,
            headers={"content-type": "application/json"},
        )
        got = await admin.get("/api/v1/namespaces/default/configmaps/c1")
        sent, answered = emu.accounting.body_bytes(verb="create", resource="configmaps")
        assert (sent, answered) == (len(body), len(created.content))
        assert emu.accounting.body_bytes(verb="get", resource="configmaps") == (0, len(got.content))
        version = created.json()["metadata"]["resourceVersion"]
        async with admin.stream(
            "GET",
            "/api/v1/namespaces/default/configmaps",
            params={"watch": "1", "resourceVersion": "0"},
        ) as watch:
            async for line in watch.aiter_lines():
                if version in line:
                    streamed = len(line)
                    break
        _, watched = emu.accounting.body_bytes(verb="watch", resource="configmaps")
        assert watched >= streamed
        rows = emu.accounting.rows(verb="create")
        assert rows[0]["requestBytes"] == len(body)


async def test_a_counted_watch_closed_unread_releases_its_watcher() -> None:
    # The front closes a watch's body unread when its client leaves before the answer is
    # sent: the counting layer must close the watch it wraps.
    api, accounting, _, _ = rig()
    api.server.response_hooks.append(accounting.response_hook)
    resp = await api.server.handle(
        ApiRequest.from_target("GET", api.watch_path(), headers=dict(ADMIN))
    )
    assert resp.stream is not None
    assert accounting.watches_opened() == 1
    assert api.watchers() == 1
    await close(resp.stream)
    assert api.watchers() == 0
