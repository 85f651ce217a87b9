"""Metadata-only answers (as=PartialObjectMetadata), for reads, writes, lists and watches."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from emulator.apiserver import ApiServer
from emulator.wire import ApiRequest

from .conftest import call, make_ns

CM = "/api/v1/namespaces/default/configmaps"
PARTIAL = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
PARTIAL_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"


async def test_a_write_answers_with_the_metadata_only() -> None:
    api = ApiServer()
    await make_ns(api, "default")
    code, created, response = await call(
        api, "POST", CM, {"metadata": {"name": "c", "labels": {"a": "b"}}, "data": {"k": "v"}},
        accept=PARTIAL,
    )  # fmt: skip
    assert code == 201
    assert response.headers["content-type"] == PARTIAL
    assert set(created) == {"kind", "apiVersion", "metadata"}
    assert (created["kind"], created["apiVersion"]) == ("PartialObjectMetadata", "meta.k8s.io/v1")
    assert created["metadata"]["labels"] == {"a": "b"}
    code, patched, _ = await call(
        api, "PATCH", f"{CM}/c", {"data": {"k": "w"}}, "application/merge-patch+json",
        accept=PARTIAL,
    )  # fmt: skip
    assert code == 200
    assert "data" not in patched
    assert int(patched["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    # Without the Accept, the whole object; errors are never transformed.
    _, whole, _ = await call(api, "GET", f"{CM}/c")
    assert whole["data"] == {"k": "w"}
    code, missing, _ = await call(api, "GET", f"{CM}/nothing", accept=PARTIAL)
    assert (code, missing["kind"]) == (404, "Status")


async def test_a_list_and_a_watch_answer_with_metadata_only() -> None:
    api = ApiServer()
    await make_ns(api, "default")
    await call(api, "POST", CM, {"metadata": {"name": "one"}, "data": {"k": "v"}})
    code, listed, response = await call(api, "GET", CM, accept=PARTIAL_LIST)
    assert code == 200
    assert response.headers["content-type"] == PARTIAL_LIST
    assert listed["kind"] == "PartialObjectMetadataList"
    assert [item["kind"] for item in listed["items"]] == ["PartialObjectMetadata"]
    assert "data" not in listed["items"][0]
    request = ApiRequest.from_target(
        "GET", f"{CM}?watch=1&resourceVersion=0", headers={"accept": PARTIAL}
    )
    answer = await api.handle(request)
    assert answer.stream is not None
    events: list[dict[str, Any]] = []

    async def first() -> None:
        async for chunk in answer.stream:  # type: ignore[union-attr]
            events.extend(json.loads(line) for line in chunk.splitlines() if line.strip())
            if events:
                return

    await asyncio.wait_for(first(), 2)
    assert events[0]["type"] == "ADDED"
    assert events[0]["object"]["kind"] == "PartialObjectMetadata"
    assert events[0]["object"]["metadata"]["name"] == "one"


def test_a_passed_on_length_goes_with_the_body_it_measured() -> None:
    """An aggregated API server's answer comes with its Content-Length; the metadata-only
    answer made of it is shorter, and must not carry that length (an HTTP/2 client refuses a
    body shorter than announced)."""
    from emulator.partial import transform
    from emulator.wire import ApiResponse

    whole = json.dumps(
        {"kind": "Cluster", "apiVersion": "cluster.karmada.io/v1alpha1",
         "metadata": {"name": "edge-a"}, "spec": {"syncMode": "Pull"}}
    ).encode() + b"\n"  # fmt: skip
    headers = {"Content-Type": "application/json", "Content-Length": str(len(whole))}
    request = ApiRequest("GET", "/apis/cluster.karmada.io/v1alpha1/clusters/edge-a",
                         headers={"accept": PARTIAL})  # fmt: skip
    answer = transform(request, ApiResponse(200, whole, headers))
    assert json.loads(answer.body)["kind"] == "PartialObjectMetadata"
    assert not any(k.lower() == "content-length" for k in answer.headers)
