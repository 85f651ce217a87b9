"""REST verbs with kube-apiserver's semantics over `Storage`.

Every method raises `ApiError` on failure; `ApiServer` turns it into a Status body.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import contextlib
import json
import random
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import yaml

from . import errors, protobuf, tables
from .admission import Request, WebhookAdmission
from .errors import ApiError, field_cause
from .fieldmeta import FieldMeta, NoFieldMeta
from .registry import JSON, Registry, ResourceType
from .selectors import (
    FieldSelector,
    LabelSelector,
    get_path,
    label_selector_string,
    parse_field_selector,
    parse_label_selector,
)
from .storage import Event, Storage, Stored, Watcher, encode_body
from .timefmt import rfc3339
from .validation import validate_object_meta
from .wire import ApiRequest, ApiResponse, UserInfo

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode

JSON_CT = "application/json"
PATCH_JSON = "application/json-patch+json"
PATCH_MERGE = "application/merge-patch+json"
PATCH_STRATEGIC = "application/strategic-merge-patch+json"
PATCH_APPLY = "application/apply-patch+yaml"
# Media types an object body may come in as JSON or YAML.
JSON_YAML_TYPES = (JSON_CT, "application/yaml", "application/x-yaml", "text/yaml")
# How often an update through admission starts over when the object is written meanwhile.
_UPDATE_ATTEMPTS = 5
_SCALE_KIND = {"group": "autoscaling", "version": "v1", "kind": "Scale"}
_GEN_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_SERVER_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds")
UNDELETABLE_NAMESPACES = ("default", "kube-system", "kube-public")


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
        from . import apply, patch

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


STRICT_DECODING = "strict decoding error: "


@dataclass
class WriteCtx:
    user: UserInfo | None
    dry_run: bool = False
    manager: str = ""
    validation: str = "Warn"
    warnings: builtins.list[str] = field(default_factory=list)
    subresource: str = ""
    # The request's Create/Update options as given (what admission webhooks are shown).
    options: JSON = field(default_factory=dict)


def _copy(obj: JSON) -> JSON:
    result: JSON = json.loads(_dumps(obj))
    return result


def _strip_volatile(obj: JSON) -> JSON:
    meta = {
        k: v
        for k, v in obj.get("metadata", {}).items()
        if k not in ("resourceVersion", "managedFields")
    }
    return {**obj, "metadata": meta}


_NAMESPACE_MISMATCH = (
    "the namespace of the provided object does not match the namespace sent on the request"
)


def check_url_identity(
    rt: ResourceType, ns: str, name: str, meta: JSON, *, empty_matches: bool
) -> None:
    """The body's name and namespace must be those of the URL, as kube's request handlers
    check them. On update and apply an empty value matches (it is filled from the URL); a
    patched object must keep exactly the URL's."""
    body_name = meta.get("name") if empty_matches else meta.get("name", name)
    if (body_name or not empty_matches) and body_name != name:
        raise errors.bad_request(
            f"the name of the object ({body_name}) does not match the name on the URL ({name})"
        )
    body_ns = meta.get("namespace") if empty_matches else meta.get("namespace", ns)
    if rt.namespaced and (body_ns or not empty_matches) and body_ns != ns:
        raise errors.bad_request(_NAMESPACE_MISMATCH)


class Handlers:
    def __init__(
        self,
        registry: Registry,
        storage: Storage,
        config: ServerConfig | None = None,
        engines: PatchEngines | None = None,
    ) -> None:
        self.registry = registry
        self.storage = storage
        self.config = config or ServerConfig()
        self.engines = engines if engines is not None else PatchEngines.load()
        self._headers: dict[tuple[str, str], bytes] = {}
        # Objects whose uid a profile fixes, e.g. kube-system (a member's Karmada cluster id),
        # keyed by (group, resource, namespace, name).
        self.fixed_uids: dict[tuple[str, str, str, str], str] = {}
        self.admission: WebhookAdmission | None = None

    # ------------------------------------------------------------------ encoding

    def now(self) -> str:
        return rfc3339(datetime.fromtimestamp(self.config.clock(), UTC))

    def _header(self, kind: str, api_version: str) -> bytes:
        key = (kind, api_version)
        h = self._headers.get(key)
        if h is None:
            h = (
                b'{"kind":'
                + _dumps(kind).encode()
                + b',"apiVersion":'
                + _dumps(api_version).encode()
            )
            self._headers[key] = h
        return h

    def _full(self, rt: ResourceType, body: bytes) -> bytes:
        return self._header(rt.kind, rt.api_version) + b"," + body[1:]

    def _out(self, rt: ResourceType, obj: JSON) -> JSON:
        """The object as the requested version shows it."""
        if obj.get("apiVersion") != rt.api_version:
            obj = {**obj, "apiVersion": rt.api_version}
        return obj

    def respond_obj(
        self, rt: ResourceType, obj: JSON, code: int, ctx: WriteCtx | None = None,
        body: bytes | None = None,
    ) -> ApiResponse:  # fmt: skip
        raw = self._full(rt, body if body is not None else encode_body(obj))
        headers = {"content-type": JSON_CT}
        if ctx is not None and ctx.warnings:
            headers["warning"] = warning_header(ctx.warnings)
        return ApiResponse(code, raw, headers)

    # ------------------------------------------------------------------ parsing

    def parse_body(
        self, req: ApiRequest, yaml_ok: bool = True, rt: ResourceType | None = None
    ) -> Any:
        if not req.body:
            raise errors.bad_request("the body of the request was empty")
        ct = req.content_type
        if rt is not None and ct not in ("", *JSON_YAML_TYPES):
            # Built-in types also take protobuf (kubectl's typed clients send it); custom
            # resources only JSON and YAML, as kube-apiserver's negotiation answers.
            if ct == protobuf.PROTOBUF and not rt.crd_name:
                return protobuf.decode_object(req.body, rt.kind)
            accepted = protobuf.CUSTOM_MEDIA_TYPES if rt.crd_name else protobuf.BUILTIN_MEDIA_TYPES
            raise protobuf.unsupported_media_type(accepted)
        try:
            if ct in ("application/yaml", "application/x-yaml", "text/yaml", PATCH_APPLY):
                return yaml.safe_load(req.body)
            return json.loads(req.body)
        except (ValueError, yaml.YAMLError) as exc:
            raise errors.bad_request(f"json: cannot unmarshal request body: {exc}") from exc

    def write_ctx(self, req: ApiRequest, kind: str, subresource: str = "") -> WriteCtx:
        causes = []
        dry = req.query.get("dryRun", [])
        for value in dry:
            if value != "All":
                causes.append(
                    field_cause(
                        "FieldValueNotSupported", "dryRun",
                        f'Unsupported value: {json.dumps(dry)}: supported values: "All"',
                    )
                )  # fmt: skip
                break
        validation = req.param("fieldValidation") or "Warn"
        if validation not in ("Ignore", "Warn", "Strict"):
            causes.append(
                field_cause(
                    "FieldValueNotSupported", "fieldValidation",
                    f'Unsupported value: "{validation}": supported values: "Ignore", "Strict", "Warn"',
                )
            )  # fmt: skip
        manager = req.param("fieldManager") or ""
        if len(manager) > 128:
            causes.append(
                field_cause(
                    "FieldValueTooLong", "fieldManager",
                    "Too long: may not be more than 128 bytes",
                )
            )  # fmt: skip
        if causes:
            raise errors.invalid("meta.k8s.io", kind, "", causes)
        options: JSON = {"dryRun": dry} if dry else {}
        if manager:
            options["fieldManager"] = manager
        if req.param("fieldValidation"):
            options["fieldValidation"] = validation
        if not manager:
            manager = req.headers.get("user-agent", "").split("/", 1)[0][:128]
        return WriteCtx(
            user=req.user, dry_run=bool(dry), manager=manager, validation=validation,
            subresource=subresource, options=options,
        )  # fmt: skip

    # ------------------------------------------------------------------ GET

    async def get(self, rt: ResourceType, ns: str, name: str, req: ApiRequest) -> ApiResponse:
        await self._check_rv(req.param("resourceVersion"))
        stored = self.storage.get_stored(rt.group_resource, ns, name)
        if stored is None:
            raise errors.not_found(rt.group, rt.resource, name)
        if wants_table(req):
            return self._table(rt, [stored.obj], {"resourceVersion": str(stored.rv)}, req)
        return ApiResponse(200, self._full(rt, stored.body), {"content-type": JSON_CT})

    def get_obj(self, rt: ResourceType, ns: str, name: str) -> Stored:
        stored = self.storage.get_stored(rt.group_resource, ns, name)
        if stored is None:
            raise errors.not_found(rt.group, rt.resource, name)
        return stored

    async def _check_rv(self, rv_text: str | None) -> int | None:
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

    # ------------------------------------------------------------------ LIST

    def _selectors(self, rt: ResourceType, req: ApiRequest) -> tuple[LabelSelector, FieldSelector]:
        labels = parse_label_selector(req.param("labelSelector"))
        supported = {"metadata.name", "metadata.namespace", *rt.field_labels}
        fields = parse_field_selector(
            req.param("fieldSelector"), supported.__contains__, bool(rt.field_labels)
        )
        return labels, fields

    def _matcher(
        self, rt: ResourceType, labels: LabelSelector, fields: FieldSelector
    ) -> Callable[[JSON], bool] | None:
        if labels.empty() and fields.empty():
            return None
        wanted = {r.field for r in fields.requirements}

        def match(obj: JSON) -> bool:
            meta = obj.get("metadata") or {}
            if not labels.matches(meta.get("labels")):
                return False
            if fields.empty():
                return True
            values: dict[str, str] = {}
            for f in wanted:
                if f == "metadata.name":
                    values[f] = meta.get("name", "")
                elif f == "metadata.namespace":
                    values[f] = meta.get("namespace", "")
                else:
                    values[f] = rt.field_labels[f](obj)
            return fields.matches(values)

        return match

    def _validate_list_options(self, req: ApiRequest, watch: bool) -> None:
        match = req.param("resourceVersionMatch") or ""
        rv = req.param("resourceVersion") or ""
        cont = req.param("continue") or ""
        sie = req.param("sendInitialEvents")
        causes = []

        def forbid(f: str, msg: str) -> None:
            causes.append(field_cause("FieldValueForbidden", f, f"Forbidden: {msg}"))

        if watch:
            if sie is not None and match != "NotOlderThan":
                forbid(
                    "resourceVersionMatch",
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                )
            if match:
                if sie is None:
                    forbid(
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden for watch unless sendInitialEvents is "
                        "provided",
                    )
                if match != "NotOlderThan":
                    causes.append(
                        field_cause(
                            "FieldValueNotSupported", "resourceVersionMatch",
                            f'Unsupported value: "{match}": supported values: "NotOlderThan"',
                        )
                    )  # fmt: skip
                if cont:
                    forbid(
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden when continue is provided",
                    )
            if sie is not None and sie.lower() == "true" and not req.flag("allowWatchBookmarks"):
                forbid(
                    "allowWatchBookmarks",
                    "allowWatchBookmarks must be set to true when sendInitialEvents is provided",
                )
        else:
            if match:
                if not rv:
                    forbid(
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden unless resourceVersion is provided",
                    )
                if cont:
                    forbid(
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden when continue is provided",
                    )
                if match not in ("Exact", "NotOlderThan"):
                    causes.append(
                        field_cause(
                            "FieldValueNotSupported", "resourceVersionMatch",
                            f'Unsupported value: "{match}": supported values: "Exact", '
                            '"NotOlderThan", ""',
                        )
                    )  # fmt: skip
                if match == "Exact" and rv == "0":
                    forbid(
                        "resourceVersionMatch",
                        'resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                    )
            if sie is not None:
                forbid("sendInitialEvents", "sendInitialEvents is forbidden for list")
        if causes:
            raise errors.invalid("meta.k8s.io", "ListOptions", "", causes)

    async def list(self, rt: ResourceType, ns: str, req: ApiRequest) -> ApiResponse:
        self._validate_list_options(req, watch=False)
        labels, fields = self._selectors(rt, req)
        match = self._matcher(rt, labels, fields)
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
                objs = self.storage.snapshot(gr, namespace, snap_rv)
                list_rv = snap_rv
        elif rv_text == "0" and rv_match != "Exact":
            # From the watch cache: any state; the cache ignores limit.
            objs = [s.obj for s in self.storage.list_stored(gr, namespace)]
            list_rv = self.storage.revision
            limit = 0
        elif rv_text:
            rv = await self._check_rv(rv_text)
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
            objs = [o for o in objs if _key(o) > start]
        if match is not None:
            objs = [o for o in objs if match(o)]
        meta: JSON = {"resourceVersion": str(list_rv)}
        if limit > 0 and len(objs) > limit:
            rest = len(objs) - limit
            objs = objs[:limit]
            meta["continue"] = encode_continue(list_rv, _key(objs[-1]))
            if match is None:
                meta["remainingItemCount"] = rest
        if wants_table(req):
            return self._table(rt, objs, meta, req)
        return self._list_response(rt, objs, meta)

    def _list_response(
        self, rt: ResourceType, objs: builtins.list[JSON], meta: JSON
    ) -> ApiResponse:
        full = bool(rt.crd_name)
        parts = []
        for o in objs:
            stored = self.storage.get_stored(
                rt.group_resource, o["metadata"].get("namespace", ""), o["metadata"]["name"]
            )
            body = stored.body if stored is not None and stored.obj is o else encode_body(o)
            parts.append(self._full(rt, body) if full else body)
        raw = (
            self._header(rt.list_kind, rt.api_version)
            + b',"metadata":'
            + _dumps(meta).encode()
            + b',"items":['
            + b",".join(parts)
            + b"]}"
        )
        return ApiResponse(200, raw, {"content-type": JSON_CT})

    def _table(
        self, rt: ResourceType, objs: builtins.list[JSON], meta: JSON, req: ApiRequest
    ) -> ApiResponse:
        include = req.param("includeObject") or "Metadata"
        table = tables.build_table(
            rt, [self._out(rt, o) for o in objs], meta, include, self.config.clock()
        )
        return ApiResponse(
            200,
            _dumps(table).encode(),
            {"content-type": "application/json;as=Table;v=v1;g=meta.k8s.io"},
        )

    # ------------------------------------------------------------------ WATCH

    async def watch(self, rt: ResourceType, ns: str, name: str, req: ApiRequest) -> ApiResponse:
        self._validate_list_options(req, watch=True)
        labels, fields = self._selectors(rt, req)
        if name:
            fields = FieldSelector(
                (*fields.requirements, *parse_field_selector(
                    f"metadata.name={name}", lambda _f: True, False
                ).requirements)
            )  # fmt: skip
        match = self._matcher(rt, labels, fields)
        rv_text = req.param("resourceVersion") or ""
        sie_text = req.param("sendInitialEvents")
        send_initial = sie_text is not None and sie_text.lower() in ("true", "1")
        bookmarks = req.flag("allowWatchBookmarks")
        timeout_text = req.param("timeoutSeconds")
        timeout = float(timeout_text) if timeout_text else None
        gr = rt.group_resource
        initial: builtins.list[bytes] = []
        since: int | None
        legacy_initial = sie_text is None and rv_text in ("", "0")
        if send_initial or legacy_initial:
            if rv_text not in ("", "0"):
                await self._check_rv(rv_text)
            snapshot_rv = self.storage.revision
            for stored in self.storage.list_stored(gr, ns or None):
                if name and stored.obj["metadata"]["name"] != name:
                    continue
                if match is None or match(stored.obj):
                    initial.append(self._line("ADDED", rt, stored.body))
            if send_initial:
                initial.append(self._bookmark(rt, snapshot_rv, initial_end=True))
            since = snapshot_rv
        else:
            try:
                since = int(rv_text)
            except ValueError as exc:
                raise errors.bad_request(f'invalid resource version "{rv_text}"') from exc
        try:
            watcher, backlog = self.storage.watch(gr, ns, since)
        except ApiError as exc:
            return ApiResponse(200, b"", {"content-type": JSON_CT}, _error_stream(exc))
        stream = self._stream(rt, watcher, initial, backlog, match, bookmarks, timeout)
        return ApiResponse(
            200, b"", {"content-type": JSON_CT, "transfer-encoding": "chunked"}, stream
        )

    def _line(self, type_: str, rt: ResourceType, body: bytes) -> bytes:
        return b'{"type":"' + type_.encode() + b'","object":' + self._full(rt, body) + b"}\n"

    def _bookmark(self, rt: ResourceType, rv: int, initial_end: bool = False) -> bytes:
        meta: JSON = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        obj = {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}
        return b'{"type":"BOOKMARK","object":' + _dumps(obj).encode() + b"}\n"

    def _event_line(
        self, rt: ResourceType, ev: Event, match: Callable[[JSON], bool] | None
    ) -> bytes | None:
        type_ = ev.type
        if match is not None:
            if type_ == "DELETED":
                if not match(ev.prev if ev.prev is not None else ev.obj):
                    return None
            else:
                now = match(ev.obj)
                before = ev.prev is not None and match(ev.prev)
                if type_ == "ADDED" or not before:
                    if not now:
                        return None
                    type_ = "ADDED"
                elif not now:
                    type_ = "DELETED"
        key = type_ + "|" + rt.api_version
        line = ev.lines.get(key)
        if line is None:
            line = self._line(type_, rt, ev.body)
            ev.lines[key] = line
        return line

    async def _stream(
        self,
        rt: ResourceType,
        watcher: Watcher,
        initial: builtins.list[bytes],
        backlog: builtins.list[Event],
        match: Callable[[JSON], bool] | None,
        bookmarks: bool,
        timeout: float | None,
    ) -> AsyncIterator[bytes]:
        loop = asyncio.get_running_loop()
        try:
            for line in initial:
                yield line
            for ev in backlog:
                out = self._event_line(rt, ev, match)
                if out is not None:
                    yield out
            deadline = loop.time() + timeout if timeout is not None else None
            interval = self.config.bookmark_interval
            next_bookmark = loop.time() + interval if bookmarks else None
            queue = watcher.queue
            while True:
                waits = [t for t in (deadline, next_bookmark) if t is not None]
                item: Event | None
                if not queue.empty():
                    item = queue.get_nowait()
                elif waits:
                    remaining = min(waits) - loop.time()
                    try:
                        async with asyncio.timeout(max(remaining, 0)):
                            item = await queue.get()
                    except TimeoutError:
                        now = loop.time()
                        if deadline is not None and now >= deadline:
                            return
                        if next_bookmark is not None and now >= next_bookmark:
                            yield self._bookmark(rt, self.storage.revision)
                            next_bookmark = now + interval
                        continue
                else:
                    item = await queue.get()
                if item is None:
                    return
                out = self._event_line(rt, item, match)
                if out is not None:
                    yield out
        finally:
            watcher.close()

    # ------------------------------------------------------------------ CREATE

    async def create(
        self, rt: ResourceType, ns: str, body: Any, ctx: WriteCtx, code: int = 201
    ) -> ApiResponse:
        with _decoding(rt):
            obj = await self.admit_create(rt, ns, body, ctx)
        return self.respond_obj(rt, obj, code, ctx)

    def _webhooks(self, rt: ResourceType) -> WebhookAdmission | None:
        admission = self.admission
        return admission if admission is not None and admission.applies(rt) else None

    async def admit_create(self, rt: ResourceType, ns: str, body: Any, ctx: WriteCtx) -> JSON:
        """Create through admission: mutating webhooks see the decoded object, validating
        webhooks the finished one (uid, generated name), as kube's create handler orders it."""
        webhooks = self._webhooks(rt)
        if webhooks is None:
            return self.create_prepared(rt, self.prepare_new(rt, ns, body, ctx), ctx)
        obj = self.decode_new(rt, ns, body)
        self._schema_pass(rt, obj, ctx)
        req = Request(
            rt, "CREATE", obj["metadata"].get("namespace", ""), obj["metadata"].get("name") or "",
            "", ctx.user, ctx.dry_run, ctx.options, ctx.warnings,
        )  # fmt: skip
        with _warnings_on_error(ctx.warnings):
            mutated, _ = await webhooks.mutate(req, obj, None)
            assert mutated is not None
            obj = self.finish_new(rt, mutated, ctx, quiet=True)
            self.assign_name(rt, obj)
            await webhooks.validate(req, obj, None)
        return self.create_prepared(rt, obj, ctx)

    def _check_type(self, rt: ResourceType, obj: Any) -> JSON:
        if not isinstance(obj, dict):
            raise errors.bad_request(
                f"Object '{rt.kind}' is not a valid object: expected a JSON object"
            )
        kind = obj.get("kind")
        api_version = obj.get("apiVersion")
        if kind and kind != rt.kind:
            raise errors.bad_request(
                f'{kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                f'no kind "{kind}" is registered for version "{rt.api_version}"'
            )
        if api_version and api_version != rt.api_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API "
                f"version ({rt.api_version})"
            )
        meta = obj.get("metadata")
        if meta is None:
            obj["metadata"] = {}
        elif not isinstance(meta, dict):
            raise errors.bad_request("metadata: expected an object")
        return obj

    def prepare_new(self, rt: ResourceType, ns: str, body: Any, ctx: WriteCtx) -> JSON:
        return self.finish_new(rt, self.decode_new(rt, ns, body), ctx)

    def decode_new(self, rt: ResourceType, ns: str, body: Any) -> JSON:
        """A create's body checked and stripped of what the server sets."""
        obj = self._check_type(rt, body)
        obj["kind"] = rt.kind
        obj["apiVersion"] = rt.group + "/" + rt.storage_version if rt.group else rt.storage_version
        meta = obj["metadata"]
        if rt.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and body_ns != ns:
                raise errors.bad_request(_NAMESPACE_MISMATCH)
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        if meta.get("resourceVersion"):
            raise errors.bad_request("resourceVersion should not be set on objects to be created")
        meta.pop("selfLink", None)
        meta.pop("deletionTimestamp", None)
        meta.pop("deletionGracePeriodSeconds", None)
        meta.pop("resourceVersion", None)
        return obj

    def finish_new(self, rt: ResourceType, obj: JSON, ctx: WriteCtx, quiet: bool = False) -> JSON:
        """System fields, the type's preparation, defaults and validation of a new object.
        `quiet`: the user's fields were checked already (what is left to prune came from
        webhooks, and is dropped without a word)."""
        meta = obj["metadata"]
        now = self.now()
        meta["uid"] = self.fixed_uids.get(
            (rt.group, rt.resource, meta.get("namespace", ""), meta.get("name", ""))
        ) or str(uuid.uuid4())
        meta["creationTimestamp"] = now
        if rt.tracks_generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        if rt.reset_status_on_create:
            obj.pop("status", None)
            if rt.empty_status is not None:
                obj["status"] = json.loads(json.dumps(rt.empty_status))
        if rt.prepare_create is not None:
            rt.prepare_create(obj, ctx.user)
        self._schema_pass(rt, obj, _quiet(ctx) if quiet else ctx)
        causes = validate_object_meta(meta, rt.name_validation, rt.namespaced)
        if rt.schema is not None:
            causes += rt.schema.validate(obj)
        if rt.validate is not None:
            causes += rt.validate(obj, None)
        if causes:
            raise errors.invalid(
                rt.group, rt.kind, meta.get("name") or meta.get("generateName", ""), causes
            )
        if rt.namespaced:
            self._admit_namespace(rt, meta["namespace"], meta.get("name", ""))
        if self.engines.track_update is not None and not meta.get("managedFields"):
            self.engines.track_update(
                None, obj, manager=ctx.manager, meta=_meta(rt), api_version=rt.api_version,
                subresource=ctx.subresource, now=now,
            )  # fmt: skip
        return obj

    def create_prepared(self, rt: ResourceType, obj: JSON, ctx: WriteCtx) -> JSON:
        self.assign_name(rt, obj)
        if ctx.dry_run:
            return obj
        return self.storage.create(rt.group_resource, obj).obj

    def assign_name(self, rt: ResourceType, obj: JSON) -> None:
        """Generate the name if asked to; refuse a name in use."""
        meta = obj["metadata"]
        gr = rt.group_resource
        ns = meta.get("namespace", "")
        if not meta.get("name"):
            base = meta["generateName"][:58]
            for _ in range(8):
                candidate = base + "".join(random.choice(_GEN_ALPHABET) for _ in range(5))
                if self.storage.get_stored(gr, ns, candidate) is None:
                    meta["name"] = candidate
                    break
            else:
                raise errors.already_exists(rt.group, rt.resource, candidate)
        elif self.storage.get_stored(gr, ns, meta["name"]) is not None:
            raise errors.already_exists(rt.group, rt.resource, meta["name"])

    def _admit_namespace(self, rt: ResourceType, ns: str, name: str) -> None:
        nsobj = self.storage.get(("", "namespaces"), "", ns)
        if nsobj is None:
            raise errors.not_found("", "namespaces", ns)
        if (nsobj.get("status") or {}).get("phase") == "Terminating" or nsobj["metadata"].get(
            "deletionTimestamp"
        ):
            target = f'{rt.qualified} "{name}"' if name else rt.qualified
            details: JSON = {"name": name} if name else {}
            if rt.group:
                details["group"] = rt.group
            details["kind"] = rt.resource
            details["causes"] = [
                {
                    "reason": "NamespaceTerminating",
                    "message": f"namespace {ns} is being terminated",
                    "field": "metadata.namespace",
                }
            ]
            raise ApiError(
                403,
                "Forbidden",
                f"{target} is forbidden: unable to create new content in namespace {ns} "
                "because it is being terminated",
                details,
            )

    def _schema_pass(self, rt: ResourceType, obj: JSON, ctx: WriteCtx) -> None:
        schema = rt.schema
        if schema is None:
            return
        unknown = schema.prune(obj)
        if unknown and ctx.validation != "Ignore":
            if ctx.validation == "Strict":
                raise errors.bad_request(
                    STRICT_DECODING + ", ".join(f'unknown field "{p}"' for p in unknown)
                )
            ctx.warnings.extend(f'unknown field "{p}"' for p in unknown)
        schema.default(obj)

    # ------------------------------------------------------------------ UPDATE

    async def update(
        self, rt: ResourceType, ns: str, name: str, body: Any, ctx: WriteCtx
    ) -> ApiResponse:
        obj = self._check_type(rt, body)
        meta = obj["metadata"]
        check_url_identity(rt, ns, name, meta, empty_matches=True)
        meta["name"] = name
        stored = self.storage.get_stored(rt.group_resource, ns, name)
        if stored is None:
            if rt.allow_create_on_update and not ctx.subresource:
                meta.pop("resourceVersion", None)
                return await self.create(rt, ns, obj, ctx)
            raise errors.not_found(rt.group, rt.resource, name)
        remake = None
        if self._webhooks(rt) is not None:
            body = _copy(obj)
            remake = lambda _live: _copy(body)  # noqa: E731
        with _decoding(rt):
            result, code = await self.admit_update(rt, stored, obj, ctx, remake=remake)
        return self.respond_obj(rt, result, code, ctx)

    async def admit_update(
        self, rt: ResourceType, stored: Stored, new: JSON, ctx: WriteCtx, *,
        patched: bool = False, applied: bool = False,
        remake: Callable[[Stored], JSON] | None = None,
    ) -> tuple[JSON, int]:  # fmt: skip
        """`apply_update` through admission: mutating webhooks see the updated object as the
        client made it, validating webhooks the prepared and validated one. When the object
        is written meanwhile, the update starts over on the new one (`remake` makes the
        updated object again), as kube-apiserver's retried storage update does."""
        webhooks = self._webhooks(rt)
        if webhooks is None:
            return self.apply_update(rt, stored, new, ctx, patched=patched, applied=applied)
        meta = stored.obj["metadata"]
        ns, name = meta.get("namespace", ""), meta["name"]
        req = Request(
            rt, "UPDATE", ns, name, ctx.subresource, ctx.user, ctx.dry_run, ctx.options,
            ctx.warnings,
        )  # fmt: skip
        for _ in range(_UPDATE_ATTEMPTS):
            old = stored.obj
            with _warnings_on_error(ctx.warnings):
                mutated, changed = await webhooks.mutate(req, new, old)
                assert mutated is not None
                if changed:
                    self._schema_pass(rt, mutated, _quiet(ctx))
                checked = self.check_update(rt, stored, mutated, ctx, patched=patched)
                await webhooks.validate(req, checked, old)
            current = self.storage.get_stored(rt.group_resource, ns, name)
            if current is stored:
                return self.finish_update(rt, old, checked, ctx, applied=applied)
            if current is None:
                raise errors.not_found(rt.group, rt.resource, name)
            if remake is None:
                break
            stored, new = current, remake(current)
        raise errors.conflict(rt.group, rt.resource, name, errors.STALE_OBJECT)

    def apply_update(
        self,
        rt: ResourceType,
        stored: Stored,
        new: JSON,
        ctx: WriteCtx,
        *,
        patched: bool = False,
        applied: bool = False,
    ) -> tuple[JSON, int]:
        """The shared tail of PUT and PATCH: preconditions, strategy, validation, write."""
        new = self.check_update(rt, stored, new, ctx, patched=patched)
        return self.finish_update(rt, stored.obj, new, ctx, applied=applied)

    def check_update(
        self, rt: ResourceType, stored: Stored, new: JSON, ctx: WriteCtx, *, patched: bool
    ) -> JSON:
        """Preconditions, the type's update strategy and validation of an update."""
        old = stored.obj
        name = old["metadata"]["name"]
        meta = new["metadata"]
        rv = meta.get("resourceVersion")
        if rv:
            if rv != str(stored.rv):
                raise errors.conflict(rt.group, rt.resource, name, errors.STALE_OBJECT)
        elif not rt.allow_unconditional_update and not patched:
            raise errors.invalid(
                rt.group, rt.kind, name,
                [field_cause("FieldValueInvalid", "metadata.resourceVersion",
                             "Invalid value: 0x0: must be specified for an update")],
            )  # fmt: skip
        new = self._prepare_update(rt, old, new, ctx)
        self._schema_pass(rt, new, ctx)
        causes = validate_object_meta(
            new["metadata"], rt.name_validation, rt.namespaced, old["metadata"]
        )
        if rt.schema is not None:
            causes += rt.schema.validate(new)
        if rt.validate is not None:
            causes += rt.validate(new, old)
        old_fins = set(old["metadata"].get("finalizers") or [])
        if old["metadata"].get("deletionTimestamp"):
            added = [f for f in new["metadata"].get("finalizers") or [] if f not in old_fins]
            if added:
                causes.append(
                    field_cause(
                        "FieldValueForbidden", "metadata.finalizers",
                        "Forbidden: no new finalizers can be added if the object is being "
                        f"deleted, found new finalizers []string{{{', '.join(json.dumps(a) for a in added)}}}",
                    )
                )  # fmt: skip
        if causes:
            raise errors.invalid(rt.group, rt.kind, name, causes)
        return new

    def finish_update(
        self, rt: ResourceType, old: JSON, new: JSON, ctx: WriteCtx, *, applied: bool
    ) -> tuple[JSON, int]:
        """Store a checked update (nothing, when it changes nothing)."""
        if _strip_volatile(new) == _strip_volatile(old):
            return old, 200
        # An apply patch has recorded its own managed fields (operation Apply); tracking it
        # again would add an Update entry for the same manager.
        if self.engines.track_update is not None and not applied:
            self.engines.track_update(
                old, new, manager=ctx.manager, meta=_meta(rt), api_version=rt.api_version,
                subresource=ctx.subresource, now=self.now(),
            )  # fmt: skip
        return self.commit_update(rt, new, ctx), 200

    def commit_update(self, rt: ResourceType, new: JSON, ctx: WriteCtx) -> JSON:
        meta = new["metadata"]
        gr = rt.group_resource
        if (
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and not _ns_finalizers(rt, new)
        ):
            if ctx.dry_run:
                return new
            self.storage.delete(gr, meta.get("namespace", ""), meta["name"])
            return new
        if ctx.dry_run:
            return new
        return self.storage.update(gr, new).obj

    def _prepare_update(self, rt: ResourceType, old: JSON, new: JSON, ctx: WriteCtx) -> JSON:
        sub = ctx.subresource
        new["kind"] = rt.kind
        new["apiVersion"] = old.get("apiVersion", rt.api_version)
        old_meta = old["metadata"]
        if sub in ("status", "approval", "finalize"):
            # Only the subresource's part changes; metadata other than managedFields stays.
            result = _copy(old)
            managed = new["metadata"].get("managedFields")
            if managed is not None:
                result["metadata"]["managedFields"] = managed
            if sub == "finalize":
                result.setdefault("spec", {})["finalizers"] = (new.get("spec") or {}).get(
                    "finalizers"
                ) or []
            elif sub == "approval":
                result.setdefault("status", {})["conditions"] = (new.get("status") or {}).get(
                    "conditions"
                ) or []
            elif rt.resource == "certificatesigningrequests":
                status = dict(new.get("status") or {})
                status["conditions"] = _keep_approval(
                    (old.get("status") or {}).get("conditions") or [],
                    status.get("conditions") or [],
                )
                result["status"] = status
            elif "status" in new:
                result["status"] = new["status"]
            else:
                result.pop("status", None)
            result["metadata"]["resourceVersion"] = old_meta.get("resourceVersion")
            return result
        meta = new["metadata"]
        meta.pop("selfLink", None)
        for key in _SERVER_META:
            if key in old_meta:
                if key == "uid" and meta.get("uid") and meta["uid"] != old_meta["uid"]:
                    continue
                meta[key] = old_meta[key]
            else:
                meta.pop(key, None)
        if rt.namespaced:
            meta["namespace"] = old_meta.get("namespace", "")
        else:
            meta.pop("namespace", None)
        if rt.has("status"):
            if "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
        if rt.prepare_update is not None:
            rt.prepare_update(new, old)
        if rt.tracks_generation:
            gen = old_meta.get("generation", 1)
            if _spec_changed(rt, old, new):
                gen += 1
            meta["generation"] = gen
        else:
            meta.pop("generation", None)
        return new

    # ------------------------------------------------------------------ PATCH

    async def patch(
        self, rt: ResourceType, ns: str, name: str, req: ApiRequest, ctx: WriteCtx
    ) -> ApiResponse:
        ct = req.content_type
        allowed = (PATCH_JSON, PATCH_MERGE, PATCH_APPLY) + (
            (PATCH_STRATEGIC,) if rt.strategic_merge else ()
        )
        if ct not in allowed:
            if not rt.strategic_merge:
                raise ApiError(
                    415, "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media types "
                    f"include: {', '.join(allowed)}",
                )  # fmt: skip
            raise errors.unsupported_media_type(ct)
        force_text = req.param("force")
        if force_text is not None and ct != PATCH_APPLY:
            raise errors.invalid(
                "meta.k8s.io", "PatchOptions", "",
                [field_cause("FieldValueForbidden", "force",
                             "Forbidden: may not be specified for non-apply patch")],
            )  # fmt: skip
        if ct == PATCH_APPLY and not req.param("fieldManager"):
            raise errors.invalid(
                "meta.k8s.io", "PatchOptions", "",
                [field_cause("FieldValueRequired", "fieldManager",
                             "Required value: is required for apply patch")],
            )  # fmt: skip
        patch = self.parse_body(req)
        stored = self.storage.get_stored(rt.group_resource, ns, name)
        force = force_text is not None and force_text.lower() in ("true", "1", "")
        if ctx.subresource == "scale":
            return await self._patch_scale(rt, ns, name, stored, patch, ct, ctx, force)
        if stored is None:
            if ct != PATCH_APPLY or ctx.subresource:
                raise errors.not_found(rt.group, rt.resource, name)
            applied = self._check_type(rt, patch)
            self._check_apply_identity(rt, applied, ns, name)
            engine = self._engine("apply")
            created = engine(
                None, applied, manager=ctx.manager, force=force, meta=_meta(rt),
                api_version=rt.api_version, subresource="", now=self.now(),
            )  # fmt: skip
            obj = await self.admit_create(rt, ns, created, ctx)
            return self.respond_obj(rt, obj, 201, ctx)

        def patched(live: Stored) -> JSON:
            new = self._patched(rt, live.obj, patch, ct, ctx, force)
            meta = new.get("metadata") if isinstance(new, dict) else None
            if not isinstance(meta, dict):
                raise errors.bad_request("metadata: expected an object")
            check_url_identity(rt, ns, name, meta, empty_matches=False)
            meta["name"] = name
            return new

        result, code = await self.admit_update(
            rt, stored, patched(stored), ctx, patched=True, applied=ct == PATCH_APPLY,
            remake=patched,
        )  # fmt: skip
        return self.respond_obj(rt, result, code, ctx)

    def _engine(self, which: str) -> Callable[..., JSON]:
        fn = getattr(self.engines, which)
        if fn is None:
            raise errors.internal(f"the {which} patch engine is not available")
        result: Callable[..., JSON] = fn
        return result

    def _check_apply_identity(self, rt: ResourceType, applied: JSON, ns: str, name: str) -> None:
        if not applied.get("apiVersion") or not applied.get("kind"):
            raise errors.bad_request(
                "invalid object type: "
                + ("apiVersion" if not applied.get("apiVersion") else "kind")
                + " must be set in an apply patch"
            )
        meta = applied.get("metadata") or {}
        check_url_identity(rt, ns, name, meta, empty_matches=True)

    def _patched(
        self, rt: ResourceType, live: JSON, patch: Any, ct: str, ctx: WriteCtx, force: bool
    ) -> JSON:
        current = _copy(live)
        current["apiVersion"] = rt.api_version
        if ct == PATCH_JSON:
            if not isinstance(patch, list):
                raise errors.bad_request(
                    "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
                )
            return self._engine("json_patch")(current, patch)
        if ct == PATCH_MERGE:
            return self._engine("merge_patch")(current, patch)
        if ct == PATCH_STRATEGIC:
            return self._engine("strategic")(current, patch, _meta(rt))
        applied = self._check_type(rt, patch)
        self._check_apply_identity(
            rt, applied, live["metadata"].get("namespace", ""), live["metadata"]["name"]
        )
        return self._engine("apply")(
            current, applied, manager=ctx.manager, force=force, meta=_meta(rt),
            api_version=rt.api_version, subresource=ctx.subresource, now=self.now(),
        )  # fmt: skip

    # ------------------------------------------------------------------ SCALE

    def scale_of(self, rt: ResourceType, obj: JSON) -> JSON:
        spec = rt.scale
        assert spec is not None
        replicas = get_path(obj, spec.spec_replicas_path.lstrip(".")) or 0
        status: JSON = {"replicas": get_path(obj, spec.status_replicas_path.lstrip(".")) or 0}
        selector = ""
        if spec.selector_from_spec:
            selector = label_selector_string(get_path(obj, "spec.selector"))
        elif spec.label_selector_path:
            selector = get_path(obj, spec.label_selector_path.lstrip(".")) or ""
        if selector:
            status["selector"] = selector
        meta = obj["metadata"]
        out_meta = {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        }
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": out_meta,
            "spec": {"replicas": replicas},
            "status": status,
        }

    def get_scale(self, rt: ResourceType, ns: str, name: str) -> ApiResponse:
        stored = self.get_obj(rt, ns, name)
        return ApiResponse(
            200, _dumps(self.scale_of(rt, stored.obj)).encode(), {"content-type": JSON_CT}
        )

    async def update_scale(
        self, rt: ResourceType, ns: str, name: str, body: Any, ctx: WriteCtx
    ) -> ApiResponse:
        stored = self.get_obj(rt, ns, name)
        if not isinstance(body, dict):
            raise errors.bad_request("Scale: expected an object")
        return await self._write_scale(rt, stored, body, ctx)

    async def _write_scale(
        self, rt: ResourceType, stored: Stored, scale: JSON, ctx: WriteCtx
    ) -> ApiResponse:
        """A /scale write: webhooks see Scale objects (the new and the stored one's)."""
        name = stored.obj["metadata"]["name"]
        webhooks = self._webhooks(rt)
        old_scale = self.scale_of(rt, stored.obj)
        req = Request(
            rt, "UPDATE", stored.obj["metadata"].get("namespace", ""), name, "scale", ctx.user,
            ctx.dry_run, ctx.options, ctx.warnings, kind=_SCALE_KIND,
        )  # fmt: skip
        if webhooks is not None:
            with _warnings_on_error(ctx.warnings):
                mutated, _ = await webhooks.mutate(req, scale, old_scale)
            assert mutated is not None
            scale = mutated
        rv = (scale.get("metadata") or {}).get("resourceVersion")
        if rv and rv != str(stored.rv):
            raise errors.conflict(rt.group, rt.resource, name, errors.STALE_OBJECT)
        replicas = (scale.get("spec") or {}).get("replicas", 0)
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise errors.invalid(
                "autoscaling", "Scale", name,
                [field_cause("FieldValueInvalid", "spec.replicas",
                             f"Invalid value: {replicas}: must be greater than or equal to 0")],
            )  # fmt: skip
        assert rt.scale is not None
        new = _copy(stored.obj)
        _set_path(new, rt.scale.spec_replicas_path.lstrip("."), replicas)
        new["metadata"].pop("resourceVersion", None)
        main_ctx = WriteCtx(
            user=ctx.user, dry_run=ctx.dry_run, manager=ctx.manager, validation="Ignore",
            warnings=ctx.warnings, subresource="",
        )  # fmt: skip
        if webhooks is not None:
            with _warnings_on_error(ctx.warnings):
                await webhooks.validate(req, self.scale_of(rt, new), old_scale)
            if self.storage.get_stored(rt.group_resource, req.namespace, name) is not stored:
                raise errors.conflict(rt.group, rt.resource, name, errors.STALE_OBJECT)
        result, _ = self.apply_update(rt, stored, new, main_ctx, patched=True)
        body = self.scale_of(rt, result)
        headers = {"content-type": JSON_CT}
        if ctx.warnings:
            headers["warning"] = warning_header(ctx.warnings)
        return ApiResponse(200, _dumps(body).encode(), headers)

    async def _patch_scale(
        self, rt: ResourceType, ns: str, name: str, stored: Stored | None, patch: Any, ct: str,
        ctx: WriteCtx, force: bool,
    ) -> ApiResponse:  # fmt: skip
        if stored is None:
            raise errors.not_found(rt.group, rt.resource, name)
        current = self.scale_of(rt, stored.obj)
        if ct == PATCH_JSON:
            new = self._engine("json_patch")(current, patch)
        elif ct == PATCH_MERGE:
            new = self._engine("merge_patch")(current, patch)
        elif ct == PATCH_STRATEGIC:
            new = self._engine("strategic")(current, patch, NoFieldMeta())
        else:
            new = self._engine("merge_patch")(current, patch)
        return await self._write_scale(rt, stored, new, ctx)

    # ------------------------------------------------------------------ DELETE

    def delete_options(self, req: ApiRequest) -> JSON:
        opts: JSON = {}
        if req.body and req.content_type == protobuf.PROTOBUF:
            # client-go's typed clients send their DeleteOptions as protobuf too.
            opts.update(protobuf.decode_object(req.body, "DeleteOptions"))
        elif req.body:
            try:
                body = json.loads(req.body)
            except ValueError as exc:
                raise errors.bad_request(f"json: cannot unmarshal DeleteOptions: {exc}") from exc
            if isinstance(body, dict):
                opts.update(body)
        for key in ("propagationPolicy", "gracePeriodSeconds", "orphanDependents"):
            value = req.param(key)
            if value is not None and key not in opts:
                opts[key] = value
        if req.query.get("dryRun") and "dryRun" not in opts:
            opts["dryRun"] = req.query["dryRun"]
        policy = opts.get("propagationPolicy")
        causes = []
        if policy is not None and policy not in ("Foreground", "Background", "Orphan"):
            causes.append(
                field_cause(
                    "FieldValueNotSupported", "propagationPolicy",
                    f'Unsupported value: "{policy}": supported values: "Foreground", '
                    '"Background", "Orphan", "nil"',
                )
            )  # fmt: skip
        for value in opts.get("dryRun") or []:
            if value != "All":
                causes.append(
                    field_cause(
                        "FieldValueNotSupported", "dryRun",
                        f'Unsupported value: {json.dumps(opts["dryRun"])}: supported values: "All"',
                    )
                )  # fmt: skip
        orphan = opts.get("orphanDependents")
        if orphan is not None and policy is not None:
            causes.append(
                field_cause(
                    "FieldValueInvalid", "propagationPolicy",
                    f'Invalid value: "{policy}": orphanDependents and deletionPropagation cannot '
                    "be both set",
                )
            )  # fmt: skip
        if causes:
            raise errors.invalid("meta.k8s.io", "DeleteOptions", "", causes)
        if orphan is not None and policy is None:
            opts["propagationPolicy"] = "Orphan" if str(orphan).lower() == "true" else "Background"
        return opts

    async def admit_delete(
        self, rt: ResourceType, ns: str, name: str, opts: JSON, user: UserInfo | None,
        warnings: builtins.list[str],
    ) -> None:  # fmt: skip
        """Webhooks on a DELETE: both kinds see the stored object as oldObject."""
        webhooks = self._webhooks(rt)
        if webhooks is None:
            return
        stored = self.get_obj(rt, ns, name)
        options = {k: v for k, v in opts.items() if k not in ("kind", "apiVersion")}
        if isinstance(options.get("gracePeriodSeconds"), str):
            options["gracePeriodSeconds"] = int(options["gracePeriodSeconds"])
        req = Request(rt, "DELETE", ns, name, "", user, bool(opts.get("dryRun")), options, warnings)
        with _warnings_on_error(warnings):
            await webhooks.mutate(req, None, stored.obj)
            await webhooks.validate(req, None, stored.obj)

    async def delete(
        self, rt: ResourceType, ns: str, name: str, opts: JSON, user: UserInfo | None
    ) -> ApiResponse:
        ctx = WriteCtx(user=user)
        await self.admit_delete(rt, ns, name, opts, user, ctx.warnings)
        result, deleted = self.delete_one(rt, ns, name, opts)
        if deleted and not rt.return_deleted_object:
            details: JSON = {"name": name}
            if rt.group:
                details["group"] = rt.group
            details["kind"] = rt.resource
            details["uid"] = result["metadata"].get("uid", "")
            status = {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": details,
            }
            headers = {"content-type": JSON_CT}
            if ctx.warnings:
                headers["warning"] = warning_header(ctx.warnings)
            return ApiResponse(200, _dumps(status).encode(), headers)
        return self.respond_obj(rt, self._out(rt, result), 200, ctx)

    def delete_one(self, rt: ResourceType, ns: str, name: str, opts: JSON) -> tuple[JSON, bool]:
        """Delete or mark for deletion; returns (object, removed-now)."""
        gr = rt.group_resource
        stored = self.get_obj(rt, ns, name)
        obj = stored.obj
        meta = obj["metadata"]
        pre = opts.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != meta.get("uid"):
            raise errors.conflict(
                rt.group, rt.resource, name,
                f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: "
                f"{meta.get('uid')}",
            )  # fmt: skip
        if pre.get("resourceVersion") and pre["resourceVersion"] != meta.get("resourceVersion"):
            raise errors.conflict(
                rt.group, rt.resource, name,
                f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
                f"ResourceVersion in object meta: {meta.get('resourceVersion')}",
            )  # fmt: skip
        dry = bool(opts.get("dryRun"))
        if gr == ("", "namespaces") and name in UNDELETABLE_NAMESPACES:
            raise ApiError(
                403, "Forbidden",
                f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                {"name": name, "kind": "namespaces"},
            )  # fmt: skip
        policy = opts.get("propagationPolicy") or "Background"
        finalizers = list(meta.get("finalizers") or [])
        if policy == "Orphan" and "orphan" not in finalizers:
            finalizers.append("orphan")
            if "foregroundDeletion" in finalizers:
                finalizers.remove("foregroundDeletion")
        elif policy == "Foreground" and "foregroundDeletion" not in finalizers:
            finalizers.append("foregroundDeletion")
            if "orphan" in finalizers:
                finalizers.remove("orphan")
        elif policy == "Background" and opts.get("propagationPolicy"):
            finalizers = [f for f in finalizers if f not in ("orphan", "foregroundDeletion")]
        if meta.get("deletionTimestamp") is None:
            for f in rt.delete_finalizers:
                if f not in finalizers:
                    finalizers.append(f)
        pending = bool(finalizers) or _ns_finalizers(rt, obj)
        if not pending:
            if not dry:
                self.storage.delete(gr, ns, name)
            return obj, True
        if meta.get("deletionTimestamp") and finalizers == list(meta.get("finalizers") or []):
            return obj, False
        new = _copy(obj)
        nmeta = new["metadata"]
        nmeta["finalizers"] = finalizers
        if not nmeta.get("deletionTimestamp"):
            nmeta["deletionTimestamp"] = self.now()
            nmeta["deletionGracePeriodSeconds"] = 0
            if rt.tracks_generation:
                nmeta["generation"] = nmeta.get("generation", 1) + 1
        if gr == ("", "namespaces"):
            new.setdefault("status", {})["phase"] = "Terminating"
        if dry:
            return new, False
        return self.storage.update(gr, new).obj, False

    async def delete_collection(
        self, rt: ResourceType, ns: str, req: ApiRequest, opts: JSON
    ) -> ApiResponse:
        labels, fields = self._selectors(rt, req)
        match = self._matcher(rt, labels, fields)
        items = []
        for stored in self.storage.list_stored(rt.group_resource, ns or None):
            obj = stored.obj
            if match is not None and not match(obj):
                continue
            o_ns = obj["metadata"].get("namespace", "")
            try:
                await self.admit_delete(rt, o_ns, obj["metadata"]["name"], opts, req.user, [])
                result, _ = self.delete_one(rt, o_ns, obj["metadata"]["name"], opts)
            except ApiError as exc:
                if exc.code == 404:
                    continue
                raise
            items.append(result)
        return self._list_response(rt, items, {"resourceVersion": str(self.storage.revision)})


# ---------------------------------------------------------------------- helpers


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def warning_header(warnings: builtins.list[str]) -> str:
    return ", ".join(f'299 - "{_escape(w)}"' for w in warnings)


@contextlib.contextmanager
def _warnings_on_error(warnings: builtins.list[str]) -> Iterator[None]:
    """A refused write still carries the warnings gathered so far, as kube's do."""
    try:
        yield
    except ApiError as exc:
        if warnings:
            exc.headers["warning"] = warning_header(warnings)
        raise


@contextlib.contextmanager
def _decoding(rt: ResourceType) -> Iterator[None]:
    """Unknown fields of a create's or PUT's body are reported as kube's decoder reports
    them; a patch's are found once the patch is applied, and reported without this prefix."""
    try:
        yield
    except ApiError as exc:
        if exc.code == 400 and exc.message.startswith(STRICT_DECODING):
            exc.message = (
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                + exc.message
            )
            exc.args = (exc.message,)
        raise


def _quiet(ctx: WriteCtx) -> WriteCtx:
    return WriteCtx(user=ctx.user, dry_run=ctx.dry_run, manager=ctx.manager, validation="Ignore")


def _meta(rt: ResourceType) -> FieldMeta:
    return rt.schema if rt.schema is not None else NoFieldMeta()


def _ns_finalizers(rt: ResourceType, obj: JSON) -> bool:
    return rt.group_resource == ("", "namespaces") and bool(
        (obj.get("spec") or {}).get("finalizers")
    )


def _spec_changed(rt: ResourceType, old: JSON, new: JSON) -> bool:
    for key in set(old) | set(new):
        if key in ("metadata", "status", "kind", "apiVersion"):
            continue
        if old.get(key) != new.get(key):
            return True
    if rt.generation_on_annotations:
        return bool(old["metadata"].get("annotations") != new["metadata"].get("annotations"))
    return False


def _keep_approval(old: builtins.list[JSON], new: builtins.list[JSON]) -> builtins.list[JSON]:
    """CSR /status may not add or drop Approved/Denied conditions."""
    approval = [c for c in old if c.get("type") in ("Approved", "Denied")]
    others = [c for c in new if c.get("type") not in ("Approved", "Denied")]
    return approval + others


def _set_path(obj: JSON, dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    cur = obj
    for k in keys[:-1]:
        nxt = cur.get(k)
        if not isinstance(nxt, dict):
            nxt = {}
            cur[k] = nxt
        cur = nxt
    cur[keys[-1]] = value


def _key(obj: JSON) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


def encode_continue(rv: int, start: str) -> str:
    token = _dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start + "\x00"})
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


def too_large(requested: int, current: int) -> ApiError:
    return ApiError(
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


async def _error_stream(exc: ApiError) -> AsyncIterator[bytes]:
    yield _dumps({"type": "ERROR", "object": exc.status()}).encode() + b"\n"


def wants_table(req: ApiRequest) -> bool:
    accept = req.headers.get("accept", "")
    if "as=Table" not in accept:
        return False
    first = accept.split(",")[0]
    return "as=Table" in first
