from __future__ import annotations

import pytest

from agent.kube import errors
from agent.kube.client import GVR
from agent.kube.resources import CONFIGMAPS, DEPLOYMENTS, NODES
from emulator.handlers.read import encode_continue
from emulator.wiring import kubernetes_version
from tests.agent.controllers.harness import deployment
from tests.agent.kube.wire import Call, Emulated, emulated, status

CM_PATH = "/api/v1/namespaces/ns/configmaps"


def cm(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns"},
        "data": {"k": "v"},
    }


async def with_configmaps(count: int, **config: float) -> Emulated:
    """The emulator with namespace ns holding configmaps c0, c1, ..."""
    api = emulated(**config)
    await api.namespace("ns")
    for i in range(count):
        await api.admin.create(CM_PATH, cm(f"c{i}"))
    return api


def test_paths() -> None:
    assert (
        DEPLOYMENTS.path("ns", "web", "status")
        == "/apis/apps/v1/namespaces/ns/deployments/web/status"
    )
    assert NODES.path(None, "n1") == "/api/v1/nodes/n1"
    assert GVR.of("apps/v1", "deployments") == DEPLOYMENTS
    assert GVR.of("v1", "pods").api_version == "v1"


def test_status_mapping() -> None:
    err = errors.from_status(status(409, "AlreadyExists", "x exists"))
    assert isinstance(err, errors.AlreadyExistsError)
    assert not isinstance(err, errors.ConflictError)
    assert isinstance(errors.from_status(status(409, "Conflict")), errors.ConflictError)
    assert isinstance(errors.from_status(status(410, "Expired")), errors.ExpiredError)
    assert isinstance(errors.from_status(status(410, "Gone")), errors.GoneError)
    invalid = errors.from_status(status(422, "Invalid", causes=[{"field": "spec.replicas"}]))
    assert isinstance(invalid, errors.InvalidError)
    assert invalid.causes == [{"field": "spec.replicas"}]
    assert isinstance(errors.from_status(status(503, "ServiceUnavailable")), errors.ServerError)
    generic = errors.from_response(502, b"<html>bad gateway</html>", {"retry-after": "3"})
    assert isinstance(generic, errors.ServerError)
    assert generic.status["kind"] == "Status"
    assert generic.status["code"] == 502
    assert generic.status["details"] == {"retryAfterSeconds": 3}
    assert generic.retry_after == 3.0
    forbidden = errors.from_response(403, b'{"kind":"Status","code":403,"reason":"Forbidden"}')
    assert isinstance(forbidden, errors.ForbiddenError)


def test_writes_refused_for_their_size() -> None:
    body = errors.from_status(status(413, "RequestEntityTooLarge", "limit is 3145728"))
    assert errors.is_request_too_large(body)
    # etcd's refusal, passed on by kube-apiserver as a 500 without a reason.
    stored = errors.from_status({"code": 500, "message": "etcdserver: request is too large"})
    assert errors.is_request_too_large(stored)
    assert not errors.is_request_too_large(errors.from_status(status(500, "InternalError")))
    assert not errors.is_request_too_large(ValueError("too large"))


async def test_list_pages_and_merges() -> None:
    api = await with_configmaps(5)
    snapshot = api.server.storage.revision
    client = api.client()
    result = await client.list(CONFIGMAPS, namespace="ns", limit=2)
    assert [o["metadata"]["name"] for o in result["items"]] == ["c0", "c1", "c2", "c3", "c4"]
    # One consistent list: every page from the first page's snapshot.
    assert result["metadata"] == {"resourceVersion": str(snapshot)}
    pages = [c.params for c in api.wire.calls]
    assert pages == [
        {"limit": "2"},
        {"limit": "2", "continue": encode_continue(snapshot, "ns/c1")},
        {"limit": "2", "continue": encode_continue(snapshot, "ns/c3")},
    ]


async def test_expired_continue_falls_back_to_full_list() -> None:
    api = await with_configmaps(3)

    async def compact_before_next_page(call: Call) -> None:
        # The list's snapshot is compacted away before its second page is asked for.
        if "continue" in call.params:
            await api.admin.create(CM_PATH, cm("later"))
            api.server.storage.compact()

    api.wire.answers.append(compact_before_next_page)
    client = api.client()
    result = await client.list(CONFIGMAPS, namespace="ns", limit=2)
    # The first page is discarded when the list starts over in full: no object twice.
    assert [o["metadata"]["name"] for o in result["items"]] == ["c0", "c1", "c2", "later"]
    assert api.wire.calls[-1].params == {}


async def test_writes_send_the_right_requests() -> None:
    api = emulated()
    await api.namespace("ns")
    client = api.client()
    created = await client.create(CONFIGMAPS, cm("a"), field_manager="agent", dry_run=False)
    assert created["metadata"]["resourceVersion"]
    with pytest.raises(errors.AlreadyExistsError) as info:
        await client.create(CONFIGMAPS, cm("a"))
    assert info.value.status["reason"] == "AlreadyExists"
    assert info.value.code == 409
    stale = {**created, "metadata": {**created["metadata"], "resourceVersion": "1"}}
    with pytest.raises(errors.ConflictError):
        await client.replace(CONFIGMAPS, stale)
    await api.admin.create("/apis/apps/v1/namespaces/ns/deployments", deployment("w", "ns"))
    await client.apply(
        DEPLOYMENTS,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "w", "namespace": "ns"},
        },
        field_manager="karmada",
        force=True,
    )
    apply_call = api.wire.calls[-1]
    assert apply_call.method == "PATCH"
    assert apply_call.path == "/apis/apps/v1/namespaces/ns/deployments/w"
    assert apply_call.headers["content-type"] == "application/apply-patch+yaml"
    assert apply_call.params == {"fieldManager": "karmada", "force": "true"}
    await client.patch(
        CONFIGMAPS, "a", [{"op": "remove", "path": "/data"}], patch_type="json", namespace="ns"
    )
    assert api.wire.calls[-1].headers["content-type"] == "application/json-patch+json"
    uid = created["metadata"]["uid"]
    await client.delete(
        CONFIGMAPS,
        "a",
        namespace="ns",
        propagation_policy="Foreground",
        preconditions={"uid": uid},
        dry_run=True,
    )
    assert api.wire.calls[-1].body == {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "propagationPolicy": "Foreground",
        "preconditions": {"uid": uid},
        "dryRun": ["All"],
    }
    with pytest.raises(errors.NotFoundError) as nf:
        await client.get(CONFIGMAPS, "missing", namespace="ns")
    assert nf.value.status["code"] == 404


async def test_watch_decodes_events_and_sets_params() -> None:
    api = emulated(bookmark_interval=0.05)
    await api.namespace("ns")
    since = api.server.storage.revision
    await api.admin.create(CM_PATH, cm("unlabelled"))
    await api.admin.create(CM_PATH, {**cm("a"), "metadata": {"name": "a", "labels": {"a": "b"}}})
    client = api.client()
    got = []
    async with client.watch(
        CONFIGMAPS,
        namespace="ns",
        resource_version=str(since),
        timeout_seconds=60,
        label_selector="a=b",
    ) as events:
        async for event in events:
            got.append(event)
            if event["type"] == "BOOKMARK":
                api.server.close()  # the server ends the stream
    assert [e["type"] for e in got] == ["ADDED", "BOOKMARK"]
    assert api.wire.calls[0].params == {
        "watch": "true",
        "resourceVersion": str(since),
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "60",
        "labelSelector": "a=b",
    }


async def test_raw_get_does_not_raise() -> None:
    client = emulated().client()
    assert (await client.raw_get("/no-such-path")).status == 404
    assert (await client.server_version())["gitVersion"] == kubernetes_version()["gitVersion"]


BAD_SEGMENTS = [
    (".", "may not be '.'"),
    ("..", "may not be '..'"),
    ("a/b", "may not contain '/'"),
    ("50%", "may not contain '%'"),
    ("a/%", "may not contain '/', may not contain '%'"),
]


@pytest.mark.parametrize(("value", "reason"), BAD_SEGMENTS)
async def test_no_request_for_a_name_or_namespace_that_is_not_a_path_segment(
    value: str, reason: str
) -> None:
    """kube-apiserver's path-segment rules, checked before any URL is built: `.` and `..` would
    be collapsed as dot-segments and address another resource."""
    api = await with_configmaps(0)
    await api.admin.create(CM_PATH, cm("ok"))
    client = api.client()
    requests = [
        lambda: client.get(CONFIGMAPS, value, namespace="ns"),
        lambda: client.delete(CONFIGMAPS, value, namespace="ns"),
        lambda: client.patch(CONFIGMAPS, value, {}, patch_type="merge", namespace="ns"),
        lambda: client.apply(CONFIGMAPS, cm(value), field_manager="t", namespace="ns"),
        lambda: client.replace(CONFIGMAPS, cm(value), namespace="ns"),
    ]
    for request in requests:
        with pytest.raises(
            errors.InvalidNameError, match=f'metadata.name: Invalid value: "{value}"'
        ):
            await request()
    ns_requests = [
        lambda: client.get(CONFIGMAPS, "ok", namespace=value),
        lambda: client.list(CONFIGMAPS, namespace=value),
        lambda: client.create(CONFIGMAPS, cm("ok"), namespace=value),
        lambda: client.apply(CONFIGMAPS, cm("ok"), field_manager="t", namespace=value),
    ]
    for request in ns_requests:
        with pytest.raises(errors.InvalidNameError, match=f"metadata.namespace.*{reason}"):
            await request()
    assert api.wire.calls == []
