"""Requests for an aggregated group version, carried to its backend as kube-aggregator does.

The request already passed this server's authentication and authorization. What goes on to the
backend: the method, the path, the query (re-encoded, keys sorted, as Go encodes it), the body
and the client's headers, except the credentials (`Authorization`), the impersonation headers
(the impersonated user is now the user), identity headers the client may have sent
(X-Remote-*), and hop-by-hop headers; then the user as a front proxy names it (X-Remote-User,
X-Remote-Uid, X-Remote-Group, X-Remote-Extra-*) and X-Forwarded-For. The connection presents the
front-proxy client certificate and verifies the backend's certificate for
`<service>.<namespace>.svc` against `spec.caBundle` (the system roots when it is empty), or not
at all with `spec.insecureSkipTLSVerify`.

Answers come back as they are: status, headers (hop-by-hop ones dropped) and body bytes, never
decompressed or re-encoded; a body without a known small length (a watch, a followed log, a
large list) streams chunk by chunk. An upgrade request (exec, attach, port-forward: SPDY or
WebSocket) is sent on a connection of its own; on 101 the two connections are joined byte for
byte until either side closes. A backend that cannot be reached gives 503 with Go's words for
the failure, as kube-aggregator's error responder writes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from urllib.parse import quote, urlencode

import httpx

from ..https import load_key_pair
from ..registry import JSON
from ..requestheader import is_identity_header, proxy_headers
from ..services import ServiceNetwork, dial_error, service_dns_name
from ..streams import Body
from ..wire import ApiRequest, ApiResponse, RawConnection, UserInfo
from . import apiservice

HOP_BY_HOP = frozenset(
    (
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    )
)
# Answers up to this size are passed on whole (with their Content-Length); larger ones, and
# those of unknown length, stream.
INLINE_LIMIT = 128 * 1024
CONNECT_TIMEOUT = 30.0
_PATH_SAFE = "/$&+,:;=@"


@dataclass(frozen=True)
class Backend:
    """Where an APIService's requests go (kube-aggregator's proxy handling info)."""

    name: str
    namespace: str
    service: str
    port: int
    ca_bundle: bytes = b""
    insecure: bool = False

    @classmethod
    def of(cls, obj: JSON) -> Backend | None:
        """The backend of a remote APIService; None for a local one."""
        service = apiservice.service_of(obj)
        if service is None:
            return None
        return cls(
            name=obj["metadata"]["name"],
            namespace=str(service.get("namespace") or ""),
            service=str(service.get("name") or ""),
            port=int(service.get("port") or apiservice.DEFAULT_PORT),
            ca_bundle=apiservice.ca_bundle(obj),
            insecure=bool(apiservice.spec_of(obj).get("insecureSkipTLSVerify")),
        )

    @property
    def server_name(self) -> str:
        return service_dns_name(self.namespace, self.service)


class UnreachableError(Exception):
    """The backend could not be reached; the message is Go's."""


def text_response(status: int, message: str) -> ApiResponse:
    """http.Error's answer: plain text, one line."""
    return ApiResponse(
        status,
        f"{message}\n".encode(),
        {"content-type": "text/plain; charset=utf-8", "x-content-type-options": "nosniff"},
    )


def is_upgrade(req: ApiRequest) -> bool:
    tokens = {t.strip().lower() for t in req.headers.get("connection", "").split(",")}
    return "upgrade" in tokens and bool(req.headers.get("upgrade"))


def target_of(path: str, query: dict[str, list[str]]) -> str:
    """The escaped path and the query as Go re-encodes it (keys sorted)."""
    target = quote(path, safe=_PATH_SAFE)
    encoded = urlencode(sorted(query.items()), doseq=True)
    return f"{target}?{encoded}" if encoded else target


def forwarded_headers(req: ApiRequest, user: UserInfo, *, upgrade: bool) -> list[tuple[str, str]]:
    """The client's headers as the backend gets them, with the front proxy's identity."""
    named = {t.strip().lower() for t in req.headers.get("connection", "").split(",")}
    kept = {"connection", "upgrade"} if upgrade else set()
    out: list[tuple[str, str]] = []
    for name, value in req.headers.items():
        lower = name.lower()
        if lower in kept:
            out.append((name, value))
            continue
        if lower in HOP_BY_HOP or lower in named or lower in ("host", "content-length"):
            continue
        if lower == "authorization" or lower.startswith("impersonate-"):
            continue
        if is_identity_header(lower) or lower == "x-forwarded-for":
            continue
        out.append((name, value))
    client_ip = req.remote.rpartition(":")[0] if req.remote.count(":") == 1 else req.remote
    if client_ip and client_ip != "loopback":
        prior = req.headers.get("x-forwarded-for")
        out.append(("X-Forwarded-For", f"{prior}, {client_ip}" if prior else client_ip))
    return out + proxy_headers(user)


class BackendProxy:
    """Connections to backends: one httpx client per trust (caBundle or none), reused."""

    def __init__(self, services: ServiceNetwork, client_cert: tuple[bytes, bytes]) -> None:
        self.services = services
        self.client_cert = client_cert
        self._clients: dict[tuple[bytes, bool, int], httpx.AsyncClient] = {}

    def ssl_context(self, ca_bundle: bytes, *, verify: bool) -> ssl.SSLContext:
        ctx = ssl.create_default_context()
        if not verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        elif ca_bundle:
            ctx = ssl.create_default_context(cadata=ca_bundle.decode(errors="replace"))
        load_key_pair(ctx, *self.client_cert)
        ctx.set_alpn_protocols(["http/1.1"])
        return ctx

    def _client(self, backend: Backend, *, verify: bool) -> httpx.AsyncClient:
        trust = backend.ca_bundle if verify and not backend.insecure else b""
        checked = verify and not backend.insecure
        key = (trust, checked, id(asyncio.get_running_loop()))
        client = self._clients.get(key)
        if client is None:
            client = httpx.AsyncClient(
                verify=self.ssl_context(trust, verify=checked),
                trust_env=False,
                timeout=httpx.Timeout(None, connect=CONNECT_TIMEOUT),
                limits=httpx.Limits(max_connections=None, max_keepalive_connections=20),
            )
            self._clients[key] = client
        return client

    def address(self, backend: Backend) -> tuple[str, int]:
        """Where the backend is dialled: its Service's mapped address, or the Service's DNS name
        (which fails here as it fails for kube-apiserver outside the cluster network)."""
        mapped = self.services.address(backend.namespace, backend.service)
        return mapped if mapped is not None else (backend.server_name, backend.port)

    def url(self, backend: Backend, target: str) -> str:
        host, port = self.address(backend)
        shown = f"[{host}]" if ":" in host else host
        return f"https://{shown}:{port}{target}"

    async def send(
        self,
        backend: Backend,
        method: str,
        target: str,
        headers: Iterable[tuple[str, str]],
        body: bytes = b"",
        *,
        verify: bool = True,
    ) -> httpx.Response:
        """One request, its answer's body still to be read (raw). UnreachableError when the
        backend cannot be reached."""
        client = self._client(backend, verify=verify)
        # Built without the client's default headers: only what the caller gives goes out.
        request = httpx.Request(
            method,
            self.url(backend, target),
            headers=list(headers),
            content=body or None,
            extensions={"sni_hostname": backend.server_name},
        )
        try:
            return await client.send(request, stream=True)
        except httpx.HTTPError as exc:
            host, port = self.address(backend)
            raise UnreachableError(dial_error(exc, host, port, backend.server_name)) from exc

    async def forward(self, req: ApiRequest, user: UserInfo, backend: Backend) -> ApiResponse:
        if is_upgrade(req):
            return await self._upgrade(req, user, backend)
        headers = forwarded_headers(req, user, upgrade=False)
        try:
            response = await self.send(
                backend, req.method, target_of(req.path, req.query), headers, req.body
            )
        except UnreachableError as exc:
            return text_response(503, str(exc))
        passed = {k: v for k, v in response.headers.items() if k.lower() not in HOP_BY_HOP}
        length = response.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) <= INLINE_LIMIT:
            try:
                body = b"".join([chunk async for chunk in response.aiter_raw()])
            except httpx.HTTPError as exc:
                return text_response(503, str(exc) or type(exc).__name__)
            finally:
                await response.aclose()
            return ApiResponse(response.status_code, body, passed)
        passed = {k: v for k, v in passed.items() if k.lower() != "content-length"}
        return ApiResponse(
            response.status_code, b"", passed, stream=Body(_relay_body(response), response.aclose)
        )

    # --- upgrades -------------------------------------------------------------------------

    async def _upgrade(self, req: ApiRequest, user: UserInfo, backend: Backend) -> ApiResponse:
        host, port = self.address(backend)
        ctx = self.ssl_context(backend.ca_bundle, verify=not backend.insecure)
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, ssl=ctx, server_hostname=backend.server_name),
                CONNECT_TIMEOUT,
            )
        except (OSError, ssl.SSLError, TimeoutError) as exc:
            return text_response(503, dial_error(exc, host, port, backend.server_name))
        lines = [f"{req.method} {target_of(req.path, req.query)} HTTP/1.1", f"Host: {host}:{port}"]
        lines += [f"{k}: {v}" for k, v in forwarded_headers(req, user, upgrade=True)]
        if req.body:
            lines.append(f"Content-Length: {len(req.body)}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + req.body)
        try:
            await writer.drain()
            status, headers = await _read_head(reader)
            if status != 101:
                body = await _read_body(reader, headers)
                writer.close()
                passed = {k: v for k, v in headers.items() if k.lower() not in HOP_BY_HOP}
                return ApiResponse(status, body, passed)
        except (OSError, ValueError, asyncio.IncompleteReadError) as exc:
            writer.close()
            return text_response(503, f"error proxying the upgrade: {exc}")

        async def relay(client: RawConnection) -> None:
            await join(client, reader, writer)

        return ApiResponse(101, b"", headers, upgraded=relay)

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()


async def _relay_body(response: httpx.Response) -> AsyncIterator[bytes]:
    try:
        async for chunk in response.aiter_raw():
            yield chunk
    except httpx.HTTPError:
        return  # the backend went away mid-stream: the client sees the body end
    finally:
        await response.aclose()


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    head = await reader.readuntil(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[1].isdigit():
        raise ValueError(f"malformed status line {status_line!r}")
    headers: dict[str, str] = {}
    for line in lines:
        if not line:
            continue
        name, _, value = line.partition(":")
        key, value = name.strip(), value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return int(parts[1]), headers


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    lower = {k.lower(): v for k, v in headers.items()}
    if "chunked" in lower.get("transfer-encoding", "").lower():
        body = b""
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                return body
            body += await reader.readexactly(size)
            await reader.readexactly(2)
    if lower.get("content-length", "").isdigit():
        return await reader.readexactly(int(lower["content-length"]))
    return await reader.read()


async def join(
    client: RawConnection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Bytes both ways until either side closes; then both are closed (as kube's
    upgrade-aware proxy does)."""

    async def upstream() -> None:
        while data := await client.read():
            writer.write(data)
            await writer.drain()

    async def downstream() -> None:
        while data := await reader.read(64 * 1024):
            client.write(data)
            await client.drain()

    tasks = [asyncio.ensure_future(upstream()), asyncio.ensure_future(downstream())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, OSError, ConnectionError):
                await task
        writer.close()
        client.close()
