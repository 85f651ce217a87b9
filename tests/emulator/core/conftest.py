"""Fixtures for the emulator core: an ApiServer with stand-in patch engines."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from emulator.apiserver import ApiServer
from emulator.handlers import PatchEngines, ServerConfig
from emulator.wire import ApiRequest, ApiResponse


def merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge(out.get(k), v)
    return out


def json_patch(obj: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        cur: Any = out
        for p in parts[:-1]:
            cur = cur[int(p)] if isinstance(cur, list) else cur[p]
        last = parts[-1]
        if op["op"] in ("add", "replace"):
            if isinstance(cur, list):
                cur.insert(int(last), op["value"]) if op["op"] == "add" else None
            else:
                cur[last] = op["value"]
        elif op["op"] == "remove":
            del cur[last]
    return out


def apply_standin(live: Any, applied: dict[str, Any], **kw: Any) -> dict[str, Any]:
    base = copy.deepcopy(live) if live else {}
    result: dict[str, Any] = merge(base, applied)
    result["metadata"]["managedFields"] = [{"manager": kw["manager"], "operation": "Apply"}]
    return result


def track_standin(old: Any, new: dict[str, Any], **kw: Any) -> None:
    new["metadata"]["managedFields"] = [{"manager": kw["manager"], "operation": "Update"}]


ENGINES = PatchEngines(
    json_patch=json_patch,
    merge_patch=merge,
    strategic=lambda obj, patch, meta: merge(obj, patch),
    apply=apply_standin,
    track_update=track_standin,
)


@pytest.fixture
def api() -> ApiServer:
    config = ServerConfig(bookmark_interval=0.05, too_large_wait=0.05)
    server = ApiServer(engines=ENGINES, config=config, history_size=50)
    return server


async def call(
    api: ApiServer,
    method: str,
    target: str,
    body: Any = None,
    ct: str = "application/json",
    **headers: str,
) -> tuple[int, Any, ApiResponse]:
    raw = b""
    hdrs = {k.replace("_", "-"): v for k, v in headers.items()}
    if body is not None:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        hdrs["content-type"] = ct
    resp = await api.handle(ApiRequest.from_target(method, target, headers=hdrs, body=raw))
    is_json = resp.headers.get("content-type", "").startswith("application/json")
    data = json.loads(resp.body) if resp.body and is_json else resp.body
    return resp.status, data, resp


def status(
    code: int, reason: str, message: str, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details is not None:
        body["details"] = details
    return body


async def make_ns(api: ApiServer, name: str) -> dict[str, Any]:
    code, body, _ = await call(api, "POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    assert code == 201, body
    return body  # type: ignore[no-any-return]
