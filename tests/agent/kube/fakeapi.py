"""A tiny in-memory API server for agent.kube tests, plugged in through httpx.MockTransport."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from agent.kube.client import KubeClient
from agent.kube.config import ClientConfig
from agent.kube.transport import RetryPolicy, Transport
from tests import polling

JsonDict = dict[str, Any]


def status(code: int, reason: str, message: str = "", **details: Any) -> JsonDict:
    body: JsonDict = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message or reason,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


class _Body(httpx.AsyncByteStream):
    def __init__(self, events: asyncio.Queue[JsonDict | None]) -> None:
        self.events = events

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            event = await self.events.get()
            if event is None:
                return
            yield json.dumps(event).encode() + b"\n"


@dataclass
class Call:
    method: str
    path: str
    params: dict[str, str]
    body: Any
    headers: dict[str, str]


@dataclass
class FakeApi:
    """Collections keyed by their path; objects by name. Watches stream from `watch_queues`."""

    collections: dict[str, dict[str, JsonDict]] = field(default_factory=dict)
    routes: dict[str, Any] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    watch_queues: dict[str, asyncio.Queue[JsonDict | None]] = field(default_factory=dict)
    interceptors: list[Callable[[Call], httpx.Response | None]] = field(default_factory=list)
    rv: int = 100
    expire_continue: bool = False

    def next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    def seed(self, collection: str, obj: JsonDict) -> JsonDict:
        obj.setdefault("metadata", {})["resourceVersion"] = self.next_rv()
        self.collections.setdefault(collection, {})[obj["metadata"]["name"]] = obj
        return obj

    def queue(self, collection: str) -> asyncio.Queue[JsonDict | None]:
        return self.watch_queues.setdefault(collection, asyncio.Queue())

    def watch_calls(self) -> list[Call]:
        return [c for c in self.calls if c.params.get("watch") == "true"]

    async def handle(self, request: httpx.Request) -> httpx.Response:
        raw = request.content
        body = json.loads(raw) if raw else None
        call = Call(
            request.method,
            request.url.path,
            dict(request.url.params),
            body,
            {k.lower(): v for k, v in request.headers.items()},
        )
        self.calls.append(call)
        for interceptor in self.interceptors:
            response = interceptor(call)
            if response is not None:
                return response
        if call.path in self.routes:
            return httpx.Response(200, json=self.routes[call.path])
        return self._rest(call)

    def _rest(self, call: Call) -> httpx.Response:
        path = call.path
        if path in self.collections or call.method == "POST" or call.params.get("watch"):
            return self._collection(call, path)
        collection, _, name = path.rpartition("/")
        if collection.endswith("/status"):
            collection, _, name = collection.rpartition("/")
        items = self.collections.get(collection, {})
        obj = items.get(name)
        if obj is None:
            return httpx.Response(404, json=status(404, "NotFound", f'"{name}" not found'))
        if call.method == "GET":
            return httpx.Response(200, json=obj)
        if call.method == "PUT":
            sent_rv = (call.body.get("metadata") or {}).get("resourceVersion")
            if sent_rv and sent_rv != obj["metadata"]["resourceVersion"]:
                return httpx.Response(409, json=status(409, "Conflict", "stale"))
            new = json.loads(json.dumps(call.body))
            new["metadata"]["resourceVersion"] = self.next_rv()
            items[name] = new
            return httpx.Response(200, json=new)
        if call.method == "PATCH":
            new = {**obj, **(call.body if isinstance(call.body, dict) else {})}
            new["metadata"] = {**obj["metadata"], "resourceVersion": self.next_rv()}
            items[name] = new
            return httpx.Response(200, json=new)
        if call.method == "DELETE":
            del items[name]
            return httpx.Response(200, json={"kind": "Status", "status": "Success"})
        return httpx.Response(405, json=status(405, "MethodNotAllowed"))

    def _collection(self, call: Call, path: str) -> httpx.Response:
        if call.params.get("watch") == "true":
            return httpx.Response(200, stream=_Body(self.queue(path)))
        items = self.collections.setdefault(path, {})
        if call.method == "POST":
            name = call.body["metadata"]["name"]
            if name in items:
                return httpx.Response(409, json=status(409, "AlreadyExists", "exists"))
            obj = json.loads(json.dumps(call.body))
            obj["metadata"]["resourceVersion"] = self.next_rv()
            items[name] = obj
            return httpx.Response(201, json=obj)
        ordered = [items[k] for k in sorted(items)]
        start = 0
        if "continue" in call.params:
            if self.expire_continue:
                return httpx.Response(410, json=status(410, "Expired", "continue expired"))
            start = int(call.params["continue"])
        limit = int(call.params.get("limit", "0")) or len(ordered) or 1
        page = ordered[start : start + limit]
        meta: JsonDict = {"resourceVersion": str(self.rv)}
        if start + limit < len(ordered):
            meta["continue"] = str(start + limit)
        return httpx.Response(
            200, json={"kind": "List", "apiVersion": "v1", "metadata": meta, "items": page}
        )


def make_client(api: FakeApi, *, config: ClientConfig | None = None, **kwargs: Any) -> KubeClient:
    cfg = config or ClientConfig(host="https://fake.example:6443", qps=0)
    kwargs.setdefault("retry", RetryPolicy(connection_backoff=0.0))
    transport = Transport(
        cfg, transport_factory=lambda _c: httpx.MockTransport(api.handle), **kwargs
    )
    return KubeClient(transport)


async def wait_for(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    await polling.eventually(predicate, timeout=timeout, interval=0.005)
