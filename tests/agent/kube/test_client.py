from __future__ import annotations

import pytest

from agent.kube import errors
from agent.kube.client import GVR
from agent.kube.resources import CONFIGMAPS, DEPLOYMENTS, NODES
from tests.agent.kube.fakeapi import FakeApi, make_client, status

CM_PATH = "/api/v1/namespaces/ns/configmaps"


def cm(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"}}


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


async def test_list_pages_and_merges() -> None:
    api = FakeApi()
    for i in range(5):
        api.seed(CM_PATH, cm(f"c{i}"))
    client = make_client(api)
    result = await client.list(CONFIGMAPS, namespace="ns", limit=2)
    assert [o["metadata"]["name"] for o in result["items"]] == ["c0", "c1", "c2", "c3", "c4"]
    assert result["metadata"] == {"resourceVersion": "105"}
    pages = [c.params for c in api.calls]
    assert pages == [
        {"limit": "2"},
        {"limit": "2", "continue": "2"},
        {"limit": "2", "continue": "4"},
    ]


async def test_expired_continue_falls_back_to_full_list() -> None:
    api = FakeApi(expire_continue=True)
    for i in range(3):
        api.seed(CM_PATH, cm(f"c{i}"))
    client = make_client(api)
    result = await client.list(CONFIGMAPS, namespace="ns", limit=2)
    # The first page is discarded when the list starts over in full: no object twice.
    assert [o["metadata"]["name"] for o in result["items"]] == ["c0", "c1", "c2"]
    assert api.calls[-1].params == {}


async def test_writes_send_the_right_requests() -> None:
    api = FakeApi()
    client = make_client(api)
    created = await client.create(CONFIGMAPS, cm("a"), field_manager="agent", dry_run=False)
    assert created["metadata"]["resourceVersion"]
    with pytest.raises(errors.AlreadyExistsError) as info:
        await client.create(CONFIGMAPS, cm("a"))
    assert info.value.status["reason"] == "AlreadyExists"
    assert info.value.code == 409
    stale = {**created, "metadata": {**created["metadata"], "resourceVersion": "1"}}
    with pytest.raises(errors.ConflictError):
        await client.replace(CONFIGMAPS, stale)
    api.seed("/apis/apps/v1/namespaces/ns/deployments", {"metadata": {"name": "w"}})
    await client.apply(
        DEPLOYMENTS,
        {"metadata": {"name": "w", "namespace": "ns"}},
        field_manager="karmada",
        force=True,
    )
    apply_call = api.calls[-1]
    assert apply_call.method == "PATCH"
    assert apply_call.path == "/apis/apps/v1/namespaces/ns/deployments/w"
    assert apply_call.headers["content-type"] == "application/apply-patch+yaml"
    assert apply_call.params == {"fieldManager": "karmada", "force": "true"}
    await client.patch(
        CONFIGMAPS, "a", [{"op": "remove", "path": "/data"}], patch_type="json", namespace="ns"
    )
    assert api.calls[-1].headers["content-type"] == "application/json-patch+json"
    await client.delete(
        CONFIGMAPS,
        "a",
        namespace="ns",
        propagation_policy="Foreground",
        preconditions={"uid": "u1"},
        dry_run=True,
    )
    assert api.calls[-1].body == {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "propagationPolicy": "Foreground",
        "preconditions": {"uid": "u1"},
        "dryRun": ["All"],
    }
    with pytest.raises(errors.NotFoundError) as nf:
        await client.get(CONFIGMAPS, "missing", namespace="ns")
    assert nf.value.status["code"] == 404


async def test_watch_decodes_events_and_sets_params() -> None:
    api = FakeApi()
    client = make_client(api)
    q = api.queue(CM_PATH)
    q.put_nowait({"type": "ADDED", "object": cm("a")})
    q.put_nowait({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "7"}}})
    q.put_nowait(None)
    async with client.watch(
        CONFIGMAPS, namespace="ns", resource_version="5", timeout_seconds=60, label_selector="a=b"
    ) as events:
        got = [e async for e in events]
    assert [e["type"] for e in got] == ["ADDED", "BOOKMARK"]
    assert api.calls[0].params == {
        "watch": "true",
        "resourceVersion": "5",
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "60",
        "labelSelector": "a=b",
    }


async def test_raw_get_does_not_raise() -> None:
    api = FakeApi(routes={"/version": {"gitVersion": "v1.31.0"}})
    client = make_client(api)
    assert (await client.raw_get("/readyz")).status == 404
    assert (await client.server_version())["gitVersion"] == "v1.31.0"


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
    api = FakeApi()
    api.seed(CM_PATH, cm("ok"))
    client = make_client(api)
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
    assert api.calls == []
