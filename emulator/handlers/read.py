"""GET and LIST: one object, or a collection from the current state or a past snapshot,
in pages (continue tokens), as JSON or as a Table."""

from __future__ import annotations

import base64
import builtins
import json

from .. import errors, tables
from ..errors import ApiError
from ..registry import JSON, ResourceType
from ..wire import ApiRequest, ApiResponse
from .backend import JSON_CT, Backend, dumps
from .selection import matcher, selectors, validate_list_options


class Reads:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.storage = backend.storage

    async def get(self, rt: ResourceType, ns: str, name: str, req: ApiRequest) -> ApiResponse:
        await self.backend.check_rv(req.param("resourceVersion"))
        stored = self.storage.get_stored(rt.group_resource, ns, name)
        if stored is None:
            raise errors.not_found(rt.group, rt.resource, name)
        if wants_table(req):
            return self.table(rt, [stored.obj], {"resourceVersion": str(stored.rv)}, req)
        return ApiResponse(200, self.backend.full(rt, stored.body), {"content-type": JSON_CT})

    async def list(self, rt: ResourceType, ns: str, req: ApiRequest) -> ApiResponse:
        validate_list_options(req, watch=False)
        labels, fields = selectors(rt, req)
        match = matcher(rt, labels, fields)
        gr = rt.group_resource
        namespace = ns or None
        rv_text = req.param("resourceVersion") or ""
        rv_match = req.param("resourceVersionMatch") or ""
        cont = req.param("continue") or ""
        limit_text = req.param("limit") or ""
        try:
            limit = int(limit_text) if limit_text else 0
        except ValueError as exc:
            raise errors.bad_request(f"invalid limit {limit_text!r}") from exc
        start = ""
        if cont:
            snap_rv, start = decode_continue(cont)
            if snap_rv == -1:
                # The inconsistent token that a 410 hands out: continue at the current state.
                objs = [s.obj for s in self.storage.list_stored(gr, namespace)]
                list_rv = self.storage.revision
            else:
                if snap_rv < self.storage.floor(gr):
                    raise expired_continue(start, snap_rv)
                objs = self.storage.snapshot(gr, namespace, snap_rv, after=start)
                list_rv = snap_rv
                start = ""  # the snapshot begins after it
        elif rv_text == "0" and rv_match != "Exact":
            # From the watch cache: any state; the cache ignores limit.
            objs = [s.obj for s in self.storage.list_stored(gr, namespace)]
            list_rv = self.storage.revision
            limit = 0
        elif rv_text:
            rv = await self.backend.check_rv(rv_text)
            assert rv is not None
            if rv_match == "Exact" or (not rv_match and limit > 0):
                objs = self.storage.snapshot(gr, namespace, rv)
                list_rv = rv
            else:
                objs = [s.obj for s in self.storage.list_stored(gr, namespace)]
                list_rv = self.storage.revision
        else:
            objs = [s.obj for s in self.storage.list_stored(gr, namespace)]
            list_rv = self.storage.revision
        if start:
            objs = [o for o in objs if object_key(o) > start]
        if match is not None:
            objs = [o for o in objs if match(o)]
        meta: JSON = {"resourceVersion": str(list_rv)}
        if limit > 0 and len(objs) > limit:
            rest = len(objs) - limit
            objs = objs[:limit]
            meta["continue"] = encode_continue(list_rv, object_key(objs[-1]))
            if match is None:
                meta["remainingItemCount"] = rest
        if wants_table(req):
            return self.table(rt, objs, meta, req)
        return self.backend.list_response(rt, objs, meta)

    def table(
        self, rt: ResourceType, objs: builtins.list[JSON], meta: JSON, req: ApiRequest
    ) -> ApiResponse:
        include = req.param("includeObject") or "Metadata"
        table = tables.build_table(
            rt, [self.backend.out(rt, o) for o in objs], meta, include, self.backend.config.clock()
        )
        return ApiResponse(
            200,
            dumps(table).encode(),
            {"content-type": "application/json;as=Table;v=v1;g=meta.k8s.io"},
        )


def object_key(obj: JSON) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


def encode_continue(rv: int, start: str) -> str:
    token = dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start + "\x00"})
    return base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, str]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = json.loads(raw)
        if data.get("v") != "meta.k8s.io/v1":
            raise ValueError("unexpected version")
        rv = int(data["rv"])
        start = str(data["start"]).rstrip("\x00")
    except (ValueError, KeyError, TypeError) as exc:
        raise errors.bad_request(f"continue key is not valid: {exc}") from exc
    return rv, start


def expired_continue(start: str, rv: int) -> ApiError:
    err = errors.gone(
        "The provided continue parameter is too old to display a consistent list result. You can "
        "start a new list without the continue parameter, or use the continue token in this "
        "response to retrieve the remainder of the results. Continuing with the provided token "
        "results in an inconsistent list - objects that were created, modified, or deleted "
        "between the time the first chunk was returned and now may show up in the list."
    )
    err.list_continue = encode_continue(-1, start)  # type: ignore[attr-defined]
    return err


def wants_table(req: ApiRequest) -> bool:
    accept = req.headers.get("accept", "")
    if "as=Table" not in accept:
        return False
    first = accept.split(",")[0]
    return "as=Table" in first
