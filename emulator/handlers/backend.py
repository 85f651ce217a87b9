"""What every verb's handler shares: the server's parts, and how objects go on the wire."""

from __future__ import annotations

import builtins
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .. import errors
from ..admission import WebhookAdmission
from ..fieldmeta import FieldMeta, NoFieldMeta
from ..registry import JSON, Registry, ResourceType
from ..storage import Storage, Stored, encode_body
from ..timefmt import rfc3339
from ..wire import ApiResponse
from .context import WriteCtx, warning_header

dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode

JSON_CT = "application/json"


@dataclass
class PatchEngines:
    """The PATCH module's functions (emulator/patch.py and apply.py)."""

    json_patch: Callable[[JSON, Any], JSON] | None = None
    merge_patch: Callable[[JSON, Any], JSON] | None = None
    strategic: Callable[[JSON, Any, FieldMeta], JSON] | None = None
    apply: Callable[..., JSON] | None = None
    track_update: Callable[..., None] | None = None

    @classmethod
    def load(cls) -> PatchEngines:
        from .. import apply, patch

        return cls(
            json_patch=patch.apply_json_patch,
            merge_patch=patch.apply_merge_patch,
            strategic=patch.apply_strategic_merge_patch,
            apply=apply.server_side_apply,
            track_update=apply.track_update,
        )


@dataclass
class ServerConfig:
    # Watch: bookmark interval (kube: about a minute) and how long a read waits for a
    # future resourceVersion before answering 504 "Too large resource version" (kube: 3s).
    bookmark_interval: float = 60.0
    too_large_wait: float = 3.0
    clock: Callable[[], float] = time.time


def copy_json(obj: JSON) -> JSON:
    result: JSON = json.loads(dumps(obj))
    return result


def field_meta(rt: ResourceType) -> FieldMeta:
    return rt.schema if rt.schema is not None else NoFieldMeta()


def too_large(requested: int, current: int) -> errors.ApiError:
    return errors.ApiError(
        504,
        "Timeout",
        f"Timeout: Too large resource version: {requested}, current: {current}",
        {
            "causes": [
                {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
            ],
            "retryAfterSeconds": 1,
        },
    )


class Backend:
    """The registry, the storage and the server's settings, with the encoding every answer
    shares: objects are sent as the stored body behind a cached kind/apiVersion header."""

    def __init__(
        self,
        registry: Registry,
        storage: Storage,
        config: ServerConfig | None = None,
        engines: PatchEngines | None = None,
        *,
        admission: WebhookAdmission | None = None,
        fixed_uids: Mapping[tuple[str, str, str, str], str] | None = None,
    ) -> None:
        self.registry = registry
        self.storage = storage
        self.config = config or ServerConfig()
        self.engines = engines if engines is not None else PatchEngines.load()
        self.admission = admission
        # Objects whose uid a profile fixes, e.g. kube-system (a member's Karmada cluster id),
        # keyed by (group, resource, namespace, name).
        self.fixed_uids: dict[tuple[str, str, str, str], str] = dict(fixed_uids or {})
        self._headers: dict[tuple[str, str], bytes] = {}

    def now(self) -> str:
        return rfc3339(datetime.fromtimestamp(self.config.clock(), UTC))

    # ------------------------------------------------------------------ reading

    def get_obj(self, rt: ResourceType, ns: str, name: str) -> Stored:
        stored = self.storage.get_stored(rt.group_resource, ns, name)
        if stored is None:
            raise errors.not_found(rt.group, rt.resource, name)
        return stored

    async def check_rv(self, rv_text: str | None) -> int | None:
        """A request's resourceVersion; one the storage has not reached yet is waited for."""
        if not rv_text:
            return None
        try:
            rv = int(rv_text)
        except ValueError as exc:
            raise errors.bad_request(f'invalid resource version "{rv_text}"') from exc
        if rv < 0:
            raise errors.bad_request(f'invalid resource version "{rv_text}"')
        if rv > self.storage.revision:
            ok = await self.storage.wait_for_revision(rv, self.config.too_large_wait)
            if not ok:
                raise too_large(rv, self.storage.revision)
        return rv

    # ------------------------------------------------------------------ writing

    def webhooks(self, rt: ResourceType) -> WebhookAdmission | None:
        """The admission webhooks, when any may apply to `rt`."""
        admission = self.admission
        return admission if admission is not None and admission.applies(rt) else None

    def engine(self, which: str) -> Callable[..., JSON]:
        fn = getattr(self.engines, which)
        if fn is None:
            raise errors.internal(f"the {which} patch engine is not available")
        result: Callable[..., JSON] = fn
        return result

    # ------------------------------------------------------------------ encoding

    def header(self, kind: str, api_version: str) -> bytes:
        key = (kind, api_version)
        h = self._headers.get(key)
        if h is None:
            h = b'{"kind":' + dumps(kind).encode() + b',"apiVersion":' + dumps(api_version).encode()
            self._headers[key] = h
        return h

    def full(self, rt: ResourceType, body: bytes) -> bytes:
        return self.header(rt.kind, rt.api_version) + b"," + body[1:]

    @staticmethod
    def out(rt: ResourceType, obj: JSON) -> JSON:
        """The object as the requested version shows it."""
        if obj.get("apiVersion") != rt.api_version:
            obj = {**obj, "apiVersion": rt.api_version}
        return obj

    def respond_obj(
        self, rt: ResourceType, obj: JSON, code: int, ctx: WriteCtx | None = None,
        body: bytes | None = None,
    ) -> ApiResponse:  # fmt: skip
        raw = self.full(rt, body if body is not None else encode_body(obj))
        return ApiResponse(code, raw, _headers(ctx))

    @staticmethod
    def respond_json(body: JSON, ctx: WriteCtx | None = None) -> ApiResponse:
        """A 200 answer that is not one of the type's objects (a Scale, a Status)."""
        return ApiResponse(200, dumps(body).encode(), _headers(ctx))

    def list_response(self, rt: ResourceType, objs: builtins.list[JSON], meta: JSON) -> ApiResponse:
        full = bool(rt.crd_name)
        parts = []
        for o in objs:
            stored = self.storage.get_stored(
                rt.group_resource, o["metadata"].get("namespace", ""), o["metadata"]["name"]
            )
            body = stored.body if stored is not None and stored.obj is o else encode_body(o)
            parts.append(self.full(rt, body) if full else body)
        raw = (
            self.header(rt.list_kind, rt.api_version)
            + b',"metadata":'
            + dumps(meta).encode()
            + b',"items":['
            + b",".join(parts)
            + b"]}"
        )
        return ApiResponse(200, raw, {"content-type": JSON_CT})


def _headers(ctx: WriteCtx | None) -> dict[str, str]:
    headers = {"content-type": JSON_CT}
    if ctx is not None and ctx.warnings:
        headers["warning"] = warning_header(ctx.warnings)
    return headers
