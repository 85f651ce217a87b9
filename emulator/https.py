"""The emulator's HTTPS front on 127.0.0.1: HTTP/2 (http2.py) and HTTP/1.1 (aiohttp's
low-level server), chosen per connection by ALPN as kube-apiserver offers them.

Translates each HTTP request into an `ApiRequest`, hands it to a `Handler` (the
ApiServer, or the control router wrapping it) and writes the `ApiResponse` back, gzip-
compressed where kube-apiserver would compress it; streaming bodies (watch) are written
chunk by chunk as they come.

A 101 answer to an HTTP/1.1 upgrade request (`ApiResponse.upgraded`: exec, attach,
port-forward through the aggregation layer) takes the connection over: the head is written as
given, and from then on the client's bytes go to the response's relay instead of the HTTP
parser.

It can go offline (close the listener and reset every open connection, so clients
see "connection refused" or "connection reset") and come back on the same port;
the state lives in the handler, so nothing is lost in between.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import ssl
import tempfile
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import parse_qs

from aiohttp import HttpVersion11, web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.http_parser import RawRequestMessage
from aiohttp.streams import StreamReader
from aiohttp.web_protocol import RequestHandler

from .compression import compress_response
from .connection_log import ConnectionLog, ConnectionRecord
from .http2 import Http2Connection
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


def load_key_pair(ctx: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """Load a PEM certificate and key into `ctx` (the stdlib reads a key pair only from files:
    they exist, mode 0600, just long enough to load)."""
    with tempfile.TemporaryDirectory(prefix="emulator-tls-") as tmp:
        cert_file = os.path.join(tmp, "tls.crt")
        key_file = os.path.join(tmp, "tls.key")
        for path, data in ((cert_file, cert_pem), (key_file, key_pem)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        ctx.load_cert_chain(cert_file, key_file)


def server_ssl_context(
    cert_pem: bytes, key_pem: bytes, client_ca_pem: bytes | None
) -> ssl.SSLContext:
    """TLS for the server: client certificates are optional, and verified against the CA
    when presented."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    load_key_pair(ctx, cert_pem, key_pem)
    if client_ca_pem:
        ctx.load_verify_locations(cadata=client_ca_pem.decode())
        ctx.verify_mode = ssl.CERT_OPTIONAL
        # kube-apiserver completes the handshake with an expired client certificate and then
        # answers 401 from its x509 authenticator; OpenSSL would abort the handshake. The
        # chain is still verified here; the authenticator checks the validity period.
        ctx.verify_flags |= _X509_V_FLAG_NO_CHECK_TIME
    else:
        ctx.verify_mode = ssl.CERT_NONE
    # As kube-apiserver: HTTP/2 preferred, HTTP/1.1 for clients that do not offer h2.
    ctx.set_alpn_protocols(["h2", "http/1.1"])
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


def _peer_cert_der(transport: asyncio.BaseTransport | None) -> bytes | None:
    if transport is None:
        return None
    ssl_object = transport.get_extra_info("ssl_object")
    if ssl_object is None:
        return None
    der = ssl_object.getpeercert(binary_form=True)
    return der if der else None


class HttpsServer:
    """`async with HttpsServer(handler, cert_pem, key_pem, ca_pem) as srv: srv.url`.

    Offers HTTP/2 and HTTP/1.1 through ALPN, as kube-apiserver does; `connection_log` records
    every connection it accepted.
    """

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
        self.connection_log = ConnectionLog()
        self._web: web.Server | None = None
        self._listener: asyncio.Server | None = None
        self._http1_records: dict[asyncio.BaseTransport, ConnectionRecord] = {}
        self._connections: dict[asyncio.BaseTransport, _AlpnConnection] = {}
        self._http2: set[Http2Connection] = set()
        # Tasks currently writing a streaming (watch) response, and how to cut each.
        self._streaming: dict[asyncio.Task[Any], Callable[[], None]] = {}
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
            self._serve_http1,
            request_factory=self._make_request,
            handler_cancellation=True,
            access_log=None,
        )
        self._listener = await loop.create_server(
            lambda: _AlpnConnection(self), self.host, self.port, ssl=self._ssl, reuse_address=True
        )
        sock = self._listener.sockets[0]
        self.port = sock.getsockname()[1]

    async def stop(self) -> None:
        """Stop serving: end streams, send GOAWAY on HTTP/2, close connections, release the
        port."""
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
        """Cut every streaming (watch) response: an HTTP/1.1 connection that carries one is
        reset, an HTTP/2 stream is reset on its connection."""
        dropped = list(self._streaming.items())
        self._streaming.clear()
        for task, cut in dropped:
            cut()
            task.cancel()
        return len(dropped)

    # --- StreamTracker (for the HTTP/2 connections) ----------------------------------------

    def streaming(self, task: asyncio.Task[None], cut: Callable[[], None]) -> None:
        self._streaming[task] = cut

    def done(self, task: asyncio.Task[None]) -> None:
        self._streaming.pop(task, None)

    # --- connections -----------------------------------------------------------------------

    def _accept(
        self, transport: asyncio.BaseTransport, alpn: _AlpnConnection
    ) -> tuple[asyncio.Protocol, ConnectionRecord]:
        ssl_object = transport.get_extra_info("ssl_object")
        protocol = ssl_object.selected_alpn_protocol() if ssl_object is not None else None
        if self._web is None:
            raise ConnectionAbortedError("the server went offline")
        remote = _remote_of(transport)
        record = self.connection_log.opened(protocol or "http/1.1", remote)
        if protocol == "h2":
            connection = Http2Connection(
                functools.partial(self._dispatch, record),
                peer_cert_der=_peer_cert_der(transport),
                remote=remote,
                max_body_bytes=MAX_BODY_BYTES,
                tracker=self,
                after=self._follow_up,
            )
            self._http2.add(connection)
            return connection, record
        self._http1_records[transport] = record
        self._connections[transport] = alpn
        return self._web(), record

    def _release(
        self, protocol: asyncio.Protocol, transport: asyncio.BaseTransport, record: ConnectionRecord
    ) -> None:
        self.connection_log.closed(record)
        self._http1_records.pop(transport, None)
        self._connections.pop(transport, None)
        if isinstance(protocol, Http2Connection):
            self._http2.discard(protocol)

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
        http2 = list(self._http2)
        if abort:
            for connection in http2:
                connection.abort()
        else:
            await asyncio.gather(*(c.close() for c in http2), return_exceptions=True)
        for protocol in web_server.connections:
            transport = protocol.transport
            if transport is None:
                continue
            if abort:
                transport.abort()
            else:
                # Ends an idle keep-alive connection's wait for its next request now: a TLS
                # transport is lost only once the peer answers its close_notify, and shutdown
                # would otherwise wait out its timeout on every such connection.
                protocol.close()
                transport.close()
        # Closing the transports cancels their handlers (handler_cancellation).
        await web_server.shutdown(timeout=1.0)
        await listener.wait_closed()

    # --- requests --------------------------------------------------------------------------

    async def _dispatch(self, record: ConnectionRecord, req: ApiRequest) -> ApiResponse:
        handling = asyncio.ensure_future(self._handler.handle(req))
        try:
            # A client that goes away mid-request must not abort the core halfway.
            resp = await asyncio.shield(handling)
        except asyncio.CancelledError:
            handling.add_done_callback(_close_orphan_stream)
            raise
        record.served(req)
        compressed = compress_response(req, resp)
        if compressed is not resp:
            record.gzipped += 1
        return compressed

    def _follow_up(self, resp: ApiResponse) -> None:
        """Run a response's follow-up once the response has been written."""
        if isinstance(resp, ResponseWithFollowUp) and resp.then is not None:
            task = asyncio.create_task(resp.then())
            self._follow_ups.add(task)
            task.add_done_callback(self._follow_ups.discard)

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

    async def _serve_http1(self, request: web.BaseRequest) -> web.StreamResponse:
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
        record = self._http1_records.get(transport) if transport is not None else None
        if record is None:
            raise ConnectionResetError("the client went away")
        resp = await self._dispatch(record, req)
        if resp.upgraded is not None and transport is not None:
            return await self._upgrade_http1(request, transport, resp)
        if resp.stream is not None:
            return await self._stream_http1(request, transport, resp)
        out = web.Response(status=resp.status, body=resp.body, headers=resp.headers)
        if isinstance(resp, ResponseWithFollowUp) and resp.then is not None:
            await out.prepare(request)
            await out.write_eof()
            self._follow_up(resp)
        return out

    async def _upgrade_http1(
        self, request: web.BaseRequest, transport: asyncio.Transport, resp: ApiResponse
    ) -> web.StreamResponse:
        """Write the 101 head, hand the connection's bytes to the response's relay until it is
        done, then close the connection."""
        assert resp.upgraded is not None
        connection = self._connections.get(transport)
        if connection is None:
            raise ConnectionResetError("the client went away")
        # Bytes a client sent right behind its upgrade request wait in the HTTP server.
        tail = bytes(getattr(request.protocol, "_message_tail", b""))
        raw = _UpgradedConnection(transport, tail)
        connection.hijack(raw)
        head = f"HTTP/1.1 {resp.status} Switching Protocols\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in resp.headers.items()) + "\r\n"
        transport.write(head.encode("latin-1"))
        task = asyncio.current_task()
        if task is not None:
            self._streaming[task] = transport.abort
        try:
            await resp.upgraded(raw)
        finally:
            if task is not None:
                self._streaming.pop(task, None)
            transport.close()
        # Nothing more goes out on this connection: aiohttp finds it closed.
        return web.Response(status=resp.status)

    async def _stream_http1(
        self, request: web.BaseRequest, transport: asyncio.Transport | None, resp: ApiResponse
    ) -> web.StreamResponse:
        assert resp.stream is not None
        stream = resp.stream
        out = web.StreamResponse(status=resp.status, headers=resp.headers)
        task = asyncio.current_task()
        if task is not None:
            self._streaming[task] = transport.abort if transport is not None else _nothing
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


class _UpgradedConnection:
    """A client connection after 101 (wire.RawConnection): what it sends is buffered here, at
    most `LIMIT` bytes before reading from it pauses; writes wait while its window is full."""

    LIMIT = 256 * 1024

    def __init__(self, transport: asyncio.Transport, tail: bytes) -> None:
        self._transport = transport
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self._eof = False
        self._readable = asyncio.Event()
        self._writable = asyncio.Event()
        self._writable.set()
        self._paused = False
        if tail:
            self.feed(tail)

    def feed(self, data: bytes) -> None:
        self._chunks.append(data)
        self._size += len(data)
        self._readable.set()
        if self._size > self.LIMIT and not self._paused:
            self._paused = True
            self._transport.pause_reading()

    def feed_eof(self) -> None:
        self._eof = True
        self._readable.set()
        self._writable.set()

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    async def read(self) -> bytes:
        while not self._chunks and not self._eof:
            self._readable.clear()
            await self._readable.wait()
        data = b"".join(self._chunks)
        self._chunks.clear()
        self._size = 0
        if self._paused and not self._transport.is_closing():
            self._paused = False
            self._transport.resume_reading()
        return data

    def write(self, data: bytes) -> None:
        if not self._transport.is_closing():
            self._transport.write(data)

    async def drain(self) -> None:
        await self._writable.wait()
        if self._transport.is_closing():
            raise ConnectionResetError("the client went away")

    def close(self) -> None:
        self._transport.close()


class _AlpnConnection(asyncio.Protocol):
    """The protocol of one accepted connection: once TLS has negotiated, it hands everything
    to the HTTP/2 or HTTP/1.1 protocol that ALPN chose, and tells the server when it ends.
    After an upgrade, the connection's bytes go to the upgraded relay instead."""

    def __init__(self, server: HttpsServer) -> None:
        self._server = server
        self._inner: asyncio.Protocol | None = None
        self._transport: asyncio.BaseTransport | None = None
        self._record: ConnectionRecord | None = None
        self._upgraded: _UpgradedConnection | None = None

    def hijack(self, upgraded: _UpgradedConnection) -> None:
        self._upgraded = upgraded

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        try:
            self._inner, self._record = self._server._accept(transport, self)
        except ConnectionAbortedError:
            transport.abort()
            return
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._upgraded is not None:
            self._upgraded.feed(data)
        elif self._inner is not None:
            self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        if self._upgraded is not None:
            self._upgraded.feed_eof()
            return None
        return self._inner.eof_received() if self._inner is not None else None

    def pause_writing(self) -> None:
        if self._upgraded is not None:
            self._upgraded.pause_writing()
        elif self._inner is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._upgraded is not None:
            self._upgraded.resume_writing()
        elif self._inner is not None:
            self._inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._upgraded is not None:
            self._upgraded.feed_eof()
        if self._inner is None or self._transport is None or self._record is None:
            return
        self._inner.connection_lost(exc)
        self._server._release(self._inner, self._transport, self._record)


def _remote_of(transport: asyncio.BaseTransport) -> str:
    peer = transport.get_extra_info("peername")
    return str(peer[0]) if isinstance(peer, tuple) and peer else ""


def _nothing() -> None:
    return None


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
