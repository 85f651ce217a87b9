"""agent.kube's tests talk to the emulator's API server, in process, through `Wire`.

`Wire` is an httpx transport in front of the server: it records every request as the client
sent it (`calls`), and `answers` may reply to a request in the server's place, with exact
wire responses that no real API server produces on demand (an HTTP 410 to a watch request, a
stream cut in the middle, discovery from a server older than aggregated discovery). An answer
that returns None lets the request through; it may change the server's state first.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx

from agent.kube.client import KubeClient
from agent.kube.config import ClientConfig
from agent.kube.transport import RetryPolicy, Transport
from emulator.apiserver import ApiServer
from emulator.authn import Authenticator
from emulator.faults import Faults
from emulator.handlers import ServerConfig
from emulator.local import LocalClient
from emulator.schema import builtin_schema, crd_schema
from emulator.transport import EmulatorTransport
from emulator.wire import UserInfo
from emulator.wiring import kubernetes_version
from tests import polling

JsonDict = dict[str, Any]
HOST = "https://emulator.example:6443"
ADMIN = UserInfo("admin", ("system:masters", "system:authenticated"))


def status(code: int, reason: str, message: str = "", **details: Any) -> JsonDict:
    """A metav1.Status body, as a server answers a failed request."""
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


@dataclass
class Call:
    method: str
    path: str
    params: dict[str, str]
    body: Any
    headers: dict[str, str]
    # The TLS server name the client asked for (httpx's sni_hostname extension).
    sni: str | None = None


Answer = Callable[[Call], "httpx.Response | Awaitable[httpx.Response | None] | None"]


@dataclass
class Wire(httpx.AsyncBaseTransport):
    server: ApiServer
    calls: list[Call] = field(default_factory=list)
    answers: list[Answer] = field(default_factory=list)

    def __post_init__(self) -> None:
        # The emulator's in-process front: faults can cut its streams.
        self.front = EmulatorTransport(self.server)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        raw = await request.aread()
        call = Call(
            request.method,
            request.url.path,
            dict(request.url.params),
            json.loads(raw) if raw else None,
            {k.lower(): v for k, v in request.headers.items()},
            request.extensions.get("sni_hostname"),
        )
        self.calls.append(call)
        for answer in self.answers:
            response = answer(call)
            if inspect.isawaitable(response):
                response = await response
            if response is not None:
                return response
        return await self.front.handle_async_request(request)

    def answer_at(self, path: str, body: Any, code: int = 200) -> None:
        """Answer every request for `path` with `body`."""
        self.answers.append(lambda c: httpx.Response(code, json=body) if c.path == path else None)

    def watch_calls(self) -> list[Call]:
        return [c for c in self.calls if c.params.get("watch") == "true"]


@dataclass
class Emulated:
    """The emulator's API server (built-in types and their schemas, CRDs), its admin's
    loopback client for setting up state, its fault injection, and the wire to it."""

    server: ApiServer
    wire: Wire
    admin: LocalClient
    faults: Faults

    def transport(self, config: ClientConfig | None = None, **kwargs: Any) -> Transport:
        """agent.kube's Transport, its every request crossing the wire."""
        cfg = config or ClientConfig(host=HOST, qps=0)
        return Transport(cfg, transport_factory=lambda _c: self.wire, **kwargs)

    def client(self, *, config: ClientConfig | None = None, **kwargs: Any) -> KubeClient:
        """A KubeClient whose every request crosses the wire."""
        kwargs.setdefault("retry", RetryPolicy(connection_backoff=0.0))
        return KubeClient(self.transport(config, **kwargs))

    async def namespace(self, name: str) -> None:
        await self.admin.create("/api/v1/namespaces", {"metadata": {"name": name}})


def emulated(*, tokens: Iterable[str] | None = None, **config: Any) -> Emulated:
    """`config`: ServerConfig's settings, e.g. a short bookmark_interval. With `tokens`, the
    server authenticates: those bearer tokens are the admin's, others are refused."""
    authenticator = None
    if tokens is not None:
        authenticator = Authenticator(
            static_tokens=dict.fromkeys(tokens, ADMIN),
            sa_tokens=None,
            lookup=lambda group, resource, namespace, name: None,
        )
    server = ApiServer(
        authenticator=authenticator,
        builtin_schema=builtin_schema,
        crd_schema=crd_schema,
        config=ServerConfig(**config),
        version=kubernetes_version(),
    )
    faults = Faults(server.storage)
    server.hooks.append(faults.hook)
    wire = Wire(server)
    faults.attach(wire.front)
    return Emulated(server, wire, server.loopback(), faults)


async def wait_for(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    await polling.eventually(predicate, timeout=timeout, interval=0.005)
