"""Metadata-only answers, as kube-apiserver's response transformation gives them to any verb
that answers with objects, when asked with

    Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1

an object answers as a PartialObjectMetadata (its metadata only), each watch event's object too,
and with `as=PartialObjectMetadataList` a list answers as a PartialObjectMetadataList. Only the
first media range of Accept is looked at, as the emulator's Table does; errors (Status) are
never transformed, nor an answer already as asked (an aggregated API server's, passed on as it
came). A re-encoded answer carries its own length, never the one the original came with.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from .streams import wrapping
from .wire import ApiRequest, ApiResponse

JSON = dict[str, Any]

GROUP = "meta.k8s.io"
VERSIONS = ("v1", "v1beta1")
OBJECT = "PartialObjectMetadata"
LIST = "PartialObjectMetadataList"


def wanted(req: ApiRequest) -> tuple[str, str] | None:
    """(kind, version) the request's Accept asks for, when it asks for metadata only."""
    accept = req.headers.get("accept", "")
    if "PartialObjectMetadata" not in accept:
        return None
    media, *params = (part.strip() for part in accept.split(",")[0].split(";"))
    values = dict(p.split("=", 1) for p in params if "=" in p)
    kind, group, version = values.get("as"), values.get("g"), values.get("v")
    if media not in ("application/json", "*/*") or kind not in (OBJECT, LIST):
        return None
    if group != GROUP or version not in VERSIONS:
        return None
    return kind, version


def _partial(obj: JSON, version: str) -> JSON:
    return {"kind": OBJECT, "apiVersion": f"{GROUP}/{version}", "metadata": obj.get("metadata", {})}


def transform(req: ApiRequest, response: ApiResponse) -> ApiResponse:
    """The answer as the request's Accept asks: metadata only, or unchanged."""
    asked = wanted(req)
    if asked is None or not 200 <= response.status < 300:
        return response
    kind, version = asked
    content_type = f"application/json;as={kind};g={GROUP};v={version}"
    if response.stream is not None:
        if kind == OBJECT:
            response.stream = wrapping(_events(response.stream, version), response.stream)
            response.headers["content-type"] = content_type
        return response
    try:
        body = json.loads(response.body)
    except ValueError:
        return response
    if not isinstance(body, dict) or body.get("kind") in ("Status", kind):
        return response  # an error, or (an aggregated API server's answer) already as asked
    is_list = isinstance(body.get("items"), list)
    if is_list and kind == LIST:
        body = {
            "kind": LIST,
            "apiVersion": f"{GROUP}/{version}",
            "metadata": body.get("metadata", {}),
            "items": [_partial(item, version) for item in body["items"]],
        }
    elif not is_list and kind == OBJECT and "metadata" in body:
        body = _partial(body, version)
    else:
        return response
    response.replace_body(json.dumps(body, separators=(",", ":")).encode())
    response.headers["content-type"] = content_type
    return response


async def _events(stream: AsyncIterator[bytes], version: str) -> AsyncIterator[bytes]:
    """Watch events (one JSON object a line) with each object's metadata only."""
    pending = b""
    async for chunk in stream:
        pending += chunk
        *lines, pending = pending.split(b"\n")
        out = b""
        for line in lines:
            if line.strip():
                event = json.loads(line)
                obj = event.get("object")
                if isinstance(obj, dict) and obj.get("kind") != "Status":
                    event["object"] = _partial(obj, version)
                out += json.dumps(event, separators=(",", ":")).encode()
            out += b"\n"
        if out:
            yield out
    if pending:
        yield pending
