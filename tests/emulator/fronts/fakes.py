"""A small stand-in for the core ApiServer and its CA, for testing the fronts alone."""

from __future__ import annotations

import asyncio
import hashlib
import json
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from emulator import errors
from emulator.requestinfo import RequestAttributes, parse_request_info
from emulator.wire import ApiRequest, ApiResponse, UserInfo
from tests import polling

ADMIN_TOKEN = "admin-token"
USER_TOKEN = "user-token"
ADMIN = UserInfo("admin", ("system:masters", "system:authenticated"))
ALICE = UserInfo("alice", ("dev", "system:authenticated"))
ANONYMOUS = UserInfo("system:anonymous", ("system:unauthenticated",))


# --- certificates ---------------------------------------------------------------------


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def client_ssl_context(
    ca_pem: bytes, tmp: Path, cert_key: tuple[bytes, bytes] | None = None
) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cadata=ca_pem.decode())
    if cert_key is not None:
        cert_file, key_file = tmp / "client.crt", tmp / "client.key"
        cert_file.write_bytes(cert_key[0])
        key_file.write_bytes(cert_key[1])
        ctx.load_cert_chain(cert_file, key_file)
    return ctx


def der_of(cert_pem: bytes) -> bytes:
    return x509.load_pem_x509_certificate(cert_pem).public_bytes(serialization.Encoding.DER)


def cn_of(der: bytes) -> str:
    cert = x509.load_der_x509_certificate(der)
    value = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
    return value if isinstance(value, str) else value.decode()


# --- a fake request chain -------------------------------------------------------------


def status_response(err: errors.ApiError) -> ApiResponse:
    return ApiResponse(
        err.code,
        json.dumps(err.status()).encode(),
        {"Content-Type": "application/json", **err.headers},
    )


def authenticate(req: ApiRequest) -> UserInfo:
    auth = req.headers.get("authorization", "")
    if auth == f"Bearer {ADMIN_TOKEN}":
        return ADMIN
    if auth == f"Bearer {USER_TOKEN}":
        return ALICE
    if auth:
        raise errors.unauthorized()
    if req.peer_cert_der is not None:
        return UserInfo(cn_of(req.peer_cert_der), ("system:authenticated",))
    return ANONYMOUS


Hook = Callable[[ApiRequest, RequestAttributes], Awaitable[None]]


@dataclass
class FakeStorage:
    compactions: int = 0
    closes: int = 0

    def compact(self) -> None:
        self.compactions += 1

    def close_all_watches(self) -> None:
        self.closes += 1


@dataclass
class FakeApi:
    """Mimics ApiServer.handle: authenticate -> attributes -> hooks -> route.

    Routes: /echo (the request as JSON), /api/v1/... (resource requests, echoed),
    ?watch=true (a stream of one event per `release()`, ends on `finish()`),
    /unauthorized (a 401 Status), /big?size=N (a JSON body of N bytes, compressible),
    /events?count=N&size=M (a stream of its own: N lines of M bytes).
    """

    hooks: list[Hook] = field(default_factory=list)
    storage: FakeStorage = field(default_factory=FakeStorage)
    handled: int = 0
    streams_opened: int = 0
    streams_closed: int = 0
    seen: list[ApiRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._events: asyncio.Queue[bytes | None] = asyncio.Queue()

    def release(self, chunk: bytes) -> None:
        self._events.put_nowait(chunk)

    def finish(self) -> None:
        self._events.put_nowait(None)

    async def handle(self, req: ApiRequest) -> ApiResponse:
        self.handled += 1
        self.seen.append(req)
        try:
            req.user = authenticate(req)
            attrs = parse_request_info(req)
            for hook in self.hooks:
                await hook(req, attrs)
            return self._route(req, attrs)
        except errors.ApiError as err:
            return status_response(err)

    def _route(self, req: ApiRequest, attrs: RequestAttributes) -> ApiResponse:
        if req.path == "/unauthorized":
            raise errors.unauthorized()
        if req.path == "/big":
            size = int(req.param("size", "0") or 0)
            body = b'{"data":"' + b"x" * max(size - 11, 0) + b'"}'
            return ApiResponse(200, body, {"Content-Type": "application/json"})
        if req.path == "/events":
            count, size = int(req.param("count", "1") or 1), int(req.param("size", "16") or 16)
            return ApiResponse(
                200, headers={"Content-Type": "application/json"}, stream=self._lines(count, size)
            )
        if attrs.verb == "watch" or req.path == "/stream":
            return ApiResponse(
                200, headers={"Content-Type": "application/json"}, stream=self._watch()
            )
        body = {
            "method": req.method,
            "path": req.path,
            "query": req.query,
            "headers": req.headers,
            "bodyLength": len(req.body),
            "bodySha256": hashlib.sha256(req.body).hexdigest(),
            "peerCN": cn_of(req.peer_cert_der) if req.peer_cert_der else None,
            "user": req.user.name if req.user else None,
            "handled": self.handled,
        }
        return ApiResponse(200, json.dumps(body).encode(), {"Content-Type": "application/json"})

    async def _lines(self, count: int, size: int) -> AsyncIterator[bytes]:
        """A stream of its own: `count` lines of `size` bytes, as fast as the client reads."""
        self.streams_opened += 1
        try:
            for n in range(count):
                yield b"%0*d\n" % (size - 1, n)
        finally:
            self.streams_closed += 1

    async def _watch(self) -> AsyncIterator[bytes]:
        self.streams_opened += 1
        try:
            while True:
                chunk = await self._events.get()
                if chunk is None:
                    return
                yield chunk
        finally:
            self.streams_closed += 1


async def eventually(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    """Wait until `cond()` holds."""
    await polling.eventually(cond, timeout=timeout, interval=0.005)


def loads(data: bytes) -> Any:
    return json.loads(data)
