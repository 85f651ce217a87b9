"""The emulator's HTTPS front: aiohttp's low-level server on 127.0.0.1.

Translates each HTTP request into an `ApiRequest`, hands it to a `Handler` (the
ApiServer, or the control router wrapping it) and writes the `ApiResponse` back;
streaming bodies (watch) are written chunk by chunk as they come.

It can go offline (close the listener and reset every open connection, so clients
see "connection refused" or "connection reset") and come back on the same port;
the state lives in the handler, so nothing is lost in between.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
import tempfile
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import parse_qs

from aiohttp import HttpVersion11, web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.http_parser import RawRequestMessage
from aiohttp.streams import StreamReader
from aiohttp.web_protocol import RequestHandler

from .wire import ApiRequest, ApiResponse

HOST = "127.0.0.1"
# kube-apiserver itself refuses bodies above 3 MiB per object; the front accepts far
# more so that such limits, if any, are the core's to decide.
MAX_BODY_BYTES = 64 * 1024 * 1024


class Handler(Protocol):
    async def handle(self, req: ApiRequest) -> ApiResponse: ...


@dataclass
class ResponseWithFollowUp(ApiResponse):
    """A response after which the front runs `then` (e.g. a control call that takes the
    server offline must answer first)."""

    then: Callable[[], Coroutine[Any, Any, None]] | None = None


# OpenSSL's X509_V_FLAG_NO_CHECK_TIME; Python passes verify_flags through unchanged.
_X509_V_FLAG_NO_CHECK_TIME = 0x200000


def server_ssl_context(
    cert_pem: bytes, key_pem: bytes, client_ca_pem: bytes | None
) -> ssl.SSLContext:
    """TLS for the server: client certificates are optional, and verified against the CA
    when presented."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    # The stdlib loads a key pair only from files: keep them just long enough to load.
    with tempfile.TemporaryDirectory(prefix="emulator-tls-") as tmp:
        cert_file = os.path.join(tmp, "tls.crt")
        key_file = os.path.join(tmp, "tls.key")
        for path, data in ((cert_file, cert_pem), (key_file, key_pem)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        ctx.load_cert_chain(cert_file, key_file)
    if client_ca_pem:
        ctx.load_verify_locations(cadata=client_ca_pem.decode())
        ctx.verify_mode = ssl.CERT_OPTIONAL
        # kube-apiserver completes the handshake with an expired client certificate and then
        # answers 401 from its x509 authenticator; OpenSSL would abort the handshake. The
        # chain is still verified here; the authenticator checks the validity period.
        ctx.verify_flags |= _X509_V_FLAG_NO_CHECK_TIME
    else:
        ctx.verify_mode = ssl.CERT_NONE
    # HTTP/1.1 only: clients that prefer h2 (kubectl, httpx http2=True) fall back via ALPN.
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def _headers_of(request: web.BaseRequest) -> dict[str, str]:
    headers: dict[str, str] = {}
    for key, value in request.headers.items():
        name = key.lower()
        if name in headers:
            headers[name] += ", " + value
        else:
            headers[name] = value
    return headers


def _peer_cert_der(transport: asyncio.Transport | None) -> bytes | None:
    if transport is None:
        return None
    ssl_object = transport.get_extra_info("ssl_object")
    if ssl_object is None:
        return None
    der = ssl_object.getpeercert(binary_form=True)
    return der if der else None


class HttpsServer:
    """`async with HttpsServer(handler, cert_pem, key_pem, ca_pem) as srv: srv.url`."""

    def __init__(
        self,
        handler: Handler,
        cert_pem: bytes,
        key_pem: bytes,
        client_ca_pem: bytes | None = None,
        *,
        port: int = 0,
        host: str = HOST,
    ) -> None:
        self._handler = handler
        self._ssl = server_ssl_context(cert_pem, key_pem, client_ca_pem)
        self.host = host
        self.port = port
        self._web: web.Server | None = None
        self._listener: asyncio.Server | None = None
        # Handler tasks currently writing a streaming (watch) response, and their transports.
        self._streaming: dict[asyncio.Task[Any], asyncio.Transport | None] = {}
        self._follow_ups: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    @property
    def online(self) -> bool:
        return self._listener is not None

    async def __aenter__(self) -> HttpsServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        if self._listener is not None:
            return
        loop = asyncio.get_running_loop()
        # A fresh low-level server per listening period, so that going offline leaves no
        # connection behind. Cancelling the handler on disconnect ends watch streams.
        self._web = web.Server(
            self._serve,
            request_factory=self._make_request,
            handler_cancellation=True,
            access_log=None,
        )
        self._listener = await loop.create_server(
            self._web, self.host, self.port, ssl=self._ssl, reuse_address=True
        )
        sock = self._listener.sockets[0]
        self.port = sock.getsockname()[1]

    async def stop(self) -> None:
        """Stop serving: end streams, close connections, release the port."""
        await self._close(abort=False)
        for task in list(self._follow_ups):
            task.cancel()
        await asyncio.gather(*self._follow_ups, return_exceptions=True)

    async def go_offline(self) -> None:
        """Stop listening and reset every open connection."""
        await self._close(abort=True)

    async def come_back(self) -> None:
        """Listen again on the same port."""
        await self.start()

    async def drop_streams(self) -> int:
        """Reset the connections that carry a streaming (watch) response."""
        dropped = list(self._streaming.items())
        self._streaming.clear()
        for task, transport in dropped:
            if transport is not None:
                transport.abort()
            task.cancel()
        return len(dropped)

    async def _close(self, *, abort: bool) -> None:
        listener, web_server = self._listener, self._web
        self._listener = None
        self._web = None
        if listener is None or web_server is None:
            return
        listener.close()
        streams = list(self._streaming)
        self._streaming.clear()
        for task in streams:
            task.cancel()
        for protocol in web_server.connections:
            transport = protocol.transport
            if transport is None:
                continue
            if abort:
                transport.abort()
            else:
                transport.close()
        # Closing the transports cancels their handlers (handler_cancellation).
        await web_server.shutdown(timeout=1.0)
        await listener.wait_closed()

    def _make_request(
        self,
        message: RawRequestMessage,
        payload: StreamReader,
        protocol: RequestHandler,
        writer: AbstractStreamWriter,
        task: asyncio.Task[None],
    ) -> web.BaseRequest:
        return web.BaseRequest(
            message,
            payload,
            protocol,
            writer,
            task,
            asyncio.get_running_loop(),
            client_max_size=MAX_BODY_BYTES,
        )

    async def _serve(self, request: web.BaseRequest) -> web.StreamResponse:
        transport = request.transport
        if request.version == HttpVersion11 and "Expect" in request.headers:
            # curl sends this for large bodies; the low-level server does not answer it.
            await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            request.writer.output_size = 0
        body = await request.read()
        req = ApiRequest(
            method=request.method,
            path=request.path,
            query=parse_qs(request.query_string, keep_blank_values=True),
            headers=_headers_of(request),
            body=body,
            peer_cert_der=_peer_cert_der(transport),
            remote=f"{request.remote}",
        )
        handling = asyncio.ensure_future(self._handler.handle(req))
        try:
            # A client that goes away mid-request must not abort the core halfway.
            resp = await asyncio.shield(handling)
        except asyncio.CancelledError:
            handling.add_done_callback(_close_orphan_stream)
            raise
        if resp.stream is not None:
            return await self._stream(request, transport, resp)
        out = web.Response(status=resp.status, body=resp.body, headers=resp.headers)
        if isinstance(resp, ResponseWithFollowUp) and resp.then is not None:
            await out.prepare(request)
            await out.write_eof()
            task = asyncio.create_task(resp.then())
            self._follow_ups.add(task)
            task.add_done_callback(self._follow_ups.discard)
        return out

    async def _stream(
        self, request: web.BaseRequest, transport: asyncio.Transport | None, resp: ApiResponse
    ) -> web.StreamResponse:
        assert resp.stream is not None
        stream = resp.stream
        out = web.StreamResponse(status=resp.status, headers=resp.headers)
        task = asyncio.current_task()
        if task is not None:
            self._streaming[task] = transport
        try:
            await out.prepare(request)
            async for chunk in stream:
                await out.write(chunk)
            await out.write_eof()
        except (ConnectionResetError, ConnectionError):
            # The client went away mid-write; nothing more to say to it.
            pass
        finally:
            if task is not None:
                self._streaming.pop(task, None)
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()
        return out


def _close_orphan_stream(fut: asyncio.Future[ApiResponse]) -> None:
    """The client left before the response was ready: release a watch nobody will read."""
    if fut.cancelled() or fut.exception() is not None:
        return
    stream = fut.result().stream
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        task = asyncio.ensure_future(aclose())
        _orphans.add(task)
        task.add_done_callback(_orphans.discard)


_orphans: set[asyncio.Future[None]] = set()
