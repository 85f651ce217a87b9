"""WATCH: the initial state when asked for, then the storage's events for the type, filtered
by the selectors (an object leaving them is DELETED), with bookmarks, until the timeout."""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import AsyncIterator, Callable

from .. import errors
from ..errors import ApiError
from ..registry import JSON, ResourceType
from ..selectors import FieldSelector, parse_field_selector
from ..storage import Event, Watcher, seen_as
from ..streams import Body
from ..wire import ApiRequest, ApiResponse
from .backend import JSON_CT, Backend, dumps
from .selection import matcher, selectors, validate_list_options


class Watches:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.storage = backend.storage

    async def watch(self, rt: ResourceType, ns: str, name: str, req: ApiRequest) -> ApiResponse:
        validate_list_options(req, watch=True)
        labels, fields = selectors(rt, req)
        if name:
            fields = FieldSelector(
                (*fields.requirements, *parse_field_selector(
                    f"metadata.name={name}", lambda _f: True, False
                ).requirements)
            )  # fmt: skip
        match = matcher(rt, labels, fields)
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
                await self.backend.check_rv(rv_text)
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
            return ApiResponse(200, b"", {"content-type": JSON_CT}, error_stream(exc))
        # The watcher goes when the body is closed, even if it never sent a chunk.
        stream = Body(
            self._stream(rt, watcher, initial, backlog, match, bookmarks, timeout), watcher.close
        )
        return ApiResponse(
            200, b"", {"content-type": JSON_CT, "transfer-encoding": "chunked"}, stream
        )

    def _line(self, type_: str, rt: ResourceType, body: bytes) -> bytes:
        return b'{"type":"' + type_.encode() + b'","object":' + self.backend.full(rt, body) + b"}\n"

    def _bookmark(self, rt: ResourceType, rv: int, initial_end: bool = False) -> bytes:
        meta: JSON = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        obj = {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}
        return b'{"type":"BOOKMARK","object":' + dumps(obj).encode() + b"}\n"

    def _event_line(
        self, rt: ResourceType, ev: Event, match: Callable[[JSON], bool] | None
    ) -> bytes | None:
        type_ = seen_as(ev, match)
        if type_ is None:
            return None
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
            interval = self.backend.config.bookmark_interval
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


async def error_stream(exc: ApiError) -> AsyncIterator[bytes]:
    yield dumps({"type": "ERROR", "object": exc.status()}).encode() + b"\n"
