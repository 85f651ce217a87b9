"""HTTP/2 to one https server on asyncio and h2 directly: every request and stream is a stream of
one TLS connection, as client-go talks to kube-apiserver (and the tunnel's gRPC call, on a client
of its own, to the proxy-server: agent.tunnel.grpc_call).

The transport (agent.kube.transport) uses this for https servers reached without a proxy, and
httpx for the rest (HTTP/1.1, proxies, tests' in-process servers). httpx and httpcore cost about
four times the CPU per request (request and URL objects, anyio locks, one socket write per
frame), which made them the agent's largest cost under load; their HTTP/2 also had to be patched
for watches (one reader per connection, a reset for abandoned streams), which is built in here:

- One connection, opened on first use (TLS with ALPN; a server that picks http/1.1 raises
  NotHttp2Error), replaced once it fails or the server sends GOAWAY. Requests the server did not
  process (above GOAWAY's last stream, or refused) are sent again on the new connection.
- One reader: the protocol's `data_received` hands every frame to its stream as it comes, so no
  request waits behind a quiet watch.
- Flow control as Go's HTTP/2 transport: a 4 MiB window per stream, 1 GiB for the connection. An
  answer read whole is acknowledged as it arrives, a stream (watch) as its reader takes it, so a
  watch nobody reads stops its sender instead of filling memory. A stream left before its end is
  reset (RST_STREAM CANCEL) and what was received for it acknowledged.
- At most the server's SETTINGS_MAX_CONCURRENT_STREAMS streams at once; more wait for a slot.
- Gzip answers are decompressed (the transport asks for them, as client-go does).
- Duplex streams: the request body goes out piece by piece (`StreamAnswer.send`, waiting for the
  server's window and the socket) while the answer comes; the answer's trailers are kept. The
  server's GOAWAY ends a duplex stream at once: it has no end of its own the server could wait
  for, so its owner should reconnect now.
- Keepalive (optional): after `keepalive_interval` seconds without a frame from the server a PING
  goes out, and the connection fails when its ACK does not come within `keepalive_timeout` (a
  dead link is found without waiting for TCP).
- Timeouts: `connect_timeout` for TCP and TLS; a request's `timeout` bounds each wait for the
  server (its headers, then every piece of its body), a stream's `read_timeout` each wait for
  data. A read timeout also retires the connection for new requests (it may be dead).
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import os
import ssl
import time
import zlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
import hpack

from agent.kube.tasks import background

STREAM_WINDOW = 4 * 1024 * 1024
CONNECTION_WINDOW = 1024 * 1024 * 1024
# What h2 accepts anyway (hpack's limit), told to the server.
MAX_HEADER_LIST_SIZE = 64 * 1024
# Requests the server did not process are sent again this many times at most.
UNPROCESSED_RETRIES = 3

Headers = dict[str, str]


@dataclass(frozen=True)
class ConnectionSettings:
    """What each connection of a client grants the server and asks of it."""

    stream_window: int = STREAM_WINDOW
    connection_window: int = CONNECTION_WINDOW
    # None: no keepalive pings.
    keepalive_interval: float | None = None
    keepalive_timeout: float = 20.0
    on_ping: Callable[[], None] | None = None


class ConnectionFailedError(Exception):
    """No answer: the connection could not be made, broke, or went silent."""

    def __init__(self, message: str, *, timeout: bool = False, unprocessed: bool = False) -> None:
        super().__init__(message)
        self.timeout = timeout
        # The server did not process the request: sending it again is safe for any verb.
        self.unprocessed = unprocessed


class NotHttp2Error(Exception):
    """The server chose HTTP/1.1 in the TLS handshake."""


def _header_fields(raw: Sequence[tuple[bytes, bytes]]) -> Headers:
    """Header fields by name; a repeated one joined with commas (RFC 9110)."""
    headers: Headers = {}
    for raw_name, raw_value in raw:
        name = bytes(raw_name).decode("latin-1")
        value = bytes(raw_value).decode("latin-1")
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return headers


def _decoder(headers: Headers) -> Any:
    if headers.get("content-encoding", "").strip().lower() == "gzip":
        return zlib.decompressobj(wbits=31)
    return None


class _Stream:
    """One request and its answer."""

    __slots__ = (
        "_waiter",
        "_window",
        "chunks",
        "conn",
        "duplex",
        "ended",
        "error",
        "headers",
        "id",
        "incremental",
        "status",
        "trailers",
        "unacknowledged",
    )

    def __init__(self, conn: _Connection, stream_id: int, incremental: bool, duplex: bool) -> None:
        self.conn = conn
        self.id = stream_id
        # A stream read as it comes (watch): data acknowledged as the reader takes it.
        self.incremental = incremental
        # The request body is sent while the answer comes (see the module docstring).
        self.duplex = duplex
        self.status = 0
        self.headers: Headers = {}
        self.trailers: Headers | None = None
        self.chunks: collections.deque[tuple[bytes, int]] = collections.deque()
        self.unacknowledged = 0
        self.ended = False
        self.error: ConnectionFailedError | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._window: asyncio.Future[None] | None = None

    # --- told by the connection ----------------------------------------------------------------

    def wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def window_opened(self) -> None:
        waiter, self._window = self._window, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def fail(self, error: ConnectionFailedError) -> None:
        if self.error is None and not self.ended:
            self.error = error
        self.wake()
        self.window_opened()

    # --- waited on by the caller ---------------------------------------------------------------

    async def _wait(self, timeout: float | None) -> None:
        self._waiter = self.conn.loop.create_future()
        try:
            async with asyncio.timeout(timeout):
                await self._waiter
        except TimeoutError:
            self.conn.retire()
            raise ConnectionFailedError(
                f"no answer within {timeout} s on HTTP/2 stream {self.id}", timeout=True
            ) from None

    async def wait_window(self) -> None:
        self._window = self.conn.loop.create_future()
        await self._window

    async def response_headers(self, timeout: float | None) -> None:
        while not self.status:
            if self.error is not None:
                raise self.error
            await self._wait(timeout)

    async def next_chunk(self, timeout: float | None) -> bytes | None:
        """The next piece of the body (acknowledged now); None at its end."""
        while not self.chunks:
            if self.ended:
                return None
            if self.error is not None:
                raise self.error
            await self._wait(timeout)
        data, length = self.chunks.popleft()
        if self.incremental and length:
            self.unacknowledged -= length
            self.conn.acknowledge(self.id, length)
            self.conn.flush()  # the WINDOW_UPDATE, if due, is what lets the server go on
        return data

    async def read_all(self, timeout: float | None) -> bytes:
        parts = []
        while (chunk := await self.next_chunk(timeout)) is not None:
            parts.append(chunk)
        return b"".join(parts)


# Closed streams whose end h2 remembers (to tell a late frame on one from a protocol error).
# h2 keeps 65,536 by default, about 8 MiB per connection once a long-lived connection has
# served that many requests (a burst of 20,000 Works does); a late frame comes within a few
# streams of its own.
CLOSED_STREAMS_KEPT = 1024


class _H2Connection(h2.connection.H2Connection):
    MAX_CLOSED_STREAMS = CLOSED_STREAMS_KEPT


class _Encoder(hpack.Encoder):
    """Header blocks without Huffman coding. With it, and with every request's path indexed
    (each new one evicting another from a table searched entry by entry), encoding a request's
    headers cost about 175 us and the server's decoding them 185 us; literal octets and paths
    not indexed (below) bring that to about 40 and 65 us, for some 25 more bytes a request."""

    def encode(self, headers: Any, huffman: bool = True) -> bytes:
        return super().encode(headers, huffman=False)


class _Connection(asyncio.Protocol):
    """One HTTP/2 connection: its h2 state machine, its streams, its one reader."""

    def __init__(
        self, authority: bytes, loop: asyncio.AbstractEventLoop, settings: ConnectionSettings
    ) -> None:
        self.authority = authority
        self.loop = loop
        self.settings = settings
        self.h2 = _H2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
        self.h2.encoder = _Encoder()
        self.transport: asyncio.Transport | None = None
        self.streams: dict[int, _Stream] = {}
        # Why no new stream may start here (failed, closing, GOAWAY, retired); None while usable.
        self.unusable: str | None = None
        self.error: ConnectionFailedError | None = None
        self._slots: collections.deque[asyncio.Future[None]] = collections.deque()
        self._writable: asyncio.Future[None] | None = None
        # The proxy tunnel's stream the TLS connection runs in, if any.
        self.tunnel: asyncio.StreamWriter | None = None
        self._keepalive: asyncio.Task[None] | None = None
        self._last_frame = 0.0
        self._ping_sent_at: float | None = None

    # --- asyncio.Protocol ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.h2.local_settings = h2.settings.Settings(
            client=True,
            initial_values={
                h2.settings.SettingCodes.ENABLE_PUSH: 0,
                h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: self.settings.stream_window,
                h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: MAX_HEADER_LIST_SIZE,
            },
        )
        self.h2.initiate_connection()
        self.h2.increment_flow_control_window(
            self.settings.connection_window - self.h2.inbound_flow_control_window
        )
        self.flush()
        if self.settings.keepalive_interval is not None:
            self._last_frame = time.monotonic()
            self._keepalive = background(
                self._keep_alive(self.settings.keepalive_interval, self.settings.keepalive_timeout)
            )

    def data_received(self, data: bytes) -> None:
        if self._keepalive is not None:
            self._last_frame = time.monotonic()
        try:
            events = self.h2.receive_data(data)
        except h2.exceptions.ProtocolError as exc:
            self._fail(ConnectionFailedError(f"HTTP/2 protocol error: {exc}"))
            self.flush()
            self.close_transport()
            return
        for event in events:
            self._dispatch(event)
        self.flush()

    def eof_received(self) -> bool:
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        reason = f"{type(exc).__name__}: {exc}" if exc is not None else "closed by the server"
        self._fail(ConnectionFailedError(f"the HTTP/2 connection was lost ({reason})"))
        if self._keepalive is not None:
            self._keepalive.cancel()
        writable, self._writable = self._writable, None
        if writable is not None and not writable.done():
            writable.set_result(None)

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = self.loop.create_future()

    def resume_writing(self) -> None:
        writable, self._writable = self._writable, None
        if writable is not None and not writable.done():
            writable.set_result(None)

    # --- frames in -----------------------------------------------------------------------------

    def _dispatch(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.DataReceived):
            stream = self.streams.get(event.stream_id)
            length = event.flow_controlled_length or 0
            if stream is None:
                # A stream we left: give its window back.
                if length:
                    self.acknowledge(event.stream_id, length)
                return
            stream.chunks.append((event.data, length))
            if stream.incremental:
                stream.unacknowledged += length
            elif length:
                self.acknowledge(event.stream_id, length)
            stream.wake()
        elif isinstance(event, h2.events.ResponseReceived):
            stream = self.streams.get(event.stream_id)
            if stream is not None:
                headers = _header_fields(event.headers)
                stream.status = int(headers.pop(":status", 0))
                stream.headers = headers
                stream.wake()
        elif isinstance(event, h2.events.TrailersReceived):
            stream = self.streams.get(event.stream_id)
            if stream is not None:
                stream.trailers = _header_fields(event.headers)
        elif isinstance(event, h2.events.StreamEnded):
            stream = self.streams.pop(event.stream_id, None)
            if stream is not None:
                stream.ended = True
                stream.wake()
            self._free_slot()
        elif isinstance(event, h2.events.StreamReset):
            stream = self.streams.pop(event.stream_id, None)
            if stream is not None:
                refused = event.error_code == h2.errors.ErrorCodes.REFUSED_STREAM
                stream.fail(
                    ConnectionFailedError(
                        f"HTTP/2 stream {event.stream_id} reset by the server "
                        f"({event.error_code!r})",
                        unprocessed=refused,
                    )
                )
            self._free_slot()
        elif isinstance(event, h2.events.WindowUpdated):
            if event.stream_id:
                stream = self.streams.get(event.stream_id)
                if stream is not None:
                    stream.window_opened()
            else:
                for stream in self.streams.values():
                    stream.window_opened()
        elif isinstance(event, h2.events.RemoteSettingsChanged):
            for stream in self.streams.values():
                stream.window_opened()
            self._free_slot()
        elif isinstance(event, h2.events.PingAckReceived):
            self._ping_sent_at = None
        elif isinstance(event, h2.events.ConnectionTerminated):
            self._goaway(event)

    def _goaway(self, event: h2.events.ConnectionTerminated) -> None:
        self.unusable = self.unusable or "the server sent GOAWAY"
        last = event.last_stream_id if event.last_stream_id is not None else 0
        for stream_id in [sid for sid in self.streams if sid > last]:
            self.streams.pop(stream_id).fail(
                ConnectionFailedError("the server went away before this request", unprocessed=True)
            )
        reason = f"{event.error_code!r}"
        if event.additional_data:
            reason += f": {event.additional_data.decode(errors='replace')}"
        if event.error_code != h2.errors.ErrorCodes.NO_ERROR:
            self._fail(ConnectionFailedError(f"the server ended the connection ({reason})"))
        for stream_id in [sid for sid, stream in self.streams.items() if stream.duplex]:
            self.streams.pop(stream_id).fail(
                ConnectionFailedError(f"the server sent GOAWAY ({reason})")
            )
        self._wake_all_slots()
        if not self.streams:
            self.close_transport()

    def _fail(self, error: ConnectionFailedError) -> None:
        self.unusable = self.unusable or str(error)
        if self.error is None:
            self.error = error
        streams, self.streams = self.streams, {}
        for stream in streams.values():
            stream.fail(error)
        self._wake_all_slots()

    # --- frames out ----------------------------------------------------------------------------

    def flush(self) -> None:
        data = self.h2.data_to_send()
        if data and self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def acknowledge(self, stream_id: int, length: int) -> None:
        with contextlib.suppress(h2.exceptions.H2Error):
            self.h2.acknowledge_received_data(length, stream_id)

    async def writable(self) -> None:
        if self._writable is not None:
            await self._writable

    # --- streams -------------------------------------------------------------------------------

    def _free_slot(self) -> None:
        while self._slots and self._has_slot():
            waiter = self._slots.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _wake_all_slots(self) -> None:
        while self._slots:
            waiter = self._slots.popleft()
            if not waiter.done():
                waiter.set_result(None)

    def _has_slot(self) -> bool:
        return self.h2.open_outbound_streams < self.h2.remote_settings.max_concurrent_streams

    async def start(
        self,
        method: bytes,
        path: bytes,
        headers: Sequence[tuple[bytes, bytes]],
        body: bytes | None,
        *,
        incremental: bool,
        duplex: bool = False,
    ) -> _Stream:
        """Send the request (a duplex one without the end of its body); its stream (the caller
        must `close_stream` it)."""
        while self.unusable is None and not self._has_slot():
            waiter = self.loop.create_future()
            self._slots.append(waiter)
            await waiter
        if self.unusable is not None:
            raise ConnectionFailedError(f"connection not usable: {self.unusable}", unprocessed=True)
        stream_id = self.h2.get_next_available_stream_id()
        stream = _Stream(self, stream_id, incremental, duplex)
        self.streams[stream_id] = stream
        request_headers = [
            (b":method", method),
            (b":scheme", b"https"),
            (b":authority", self.authority),
            # Paths (and body lengths) seldom repeat: kept out of the compression table, which
            # then holds the few headers every request repeats.
            hpack.NeverIndexedHeaderTuple(b":path", path),
            *headers,
        ]
        self.h2.send_headers(stream_id, request_headers, end_stream=not body and not duplex)
        self.flush()
        if body:
            await self.send(stream, body, end_stream=not duplex)
        return stream

    async def send(self, stream: _Stream, body: bytes, *, end_stream: bool) -> None:
        """Send (a piece of) the request body as the server's window and the socket allow."""
        view = memoryview(body)
        sent = 0
        while sent < len(body):
            if stream.error is not None:
                raise stream.error
            try:
                window = self.h2.local_flow_control_window(stream.id)
            except h2.exceptions.ProtocolError:
                raise stream.error or ConnectionFailedError(
                    "the server closed the stream"
                ) from None
            if window <= 0:
                await stream.wait_window()
                continue
            # As many frames as the window takes, then one write to the socket: a write is a
            # system call (and a TLS record), which one per 16 KiB frame made the largest cost.
            frame = self.h2.max_outbound_frame_size
            burst_end = min(len(body), sent + window)
            while sent < burst_end:
                chunk = bytes(view[sent : min(burst_end, sent + frame)])
                sent += len(chunk)
                self.h2.send_data(stream.id, chunk, end_stream=end_stream and sent == len(body))
            self.flush()
            await self.writable()

    def close_stream(self, stream: _Stream) -> None:
        """Done with the stream: reset it if the server is still sending, and give back the
        window of what was received for it but never read."""
        unread = stream.unacknowledged
        stream.unacknowledged = 0
        stream.chunks.clear()
        if self.streams.pop(stream.id, None) is not None and self.error is None:
            with contextlib.suppress(h2.exceptions.H2Error):
                self.h2.reset_stream(stream.id, h2.errors.ErrorCodes.CANCEL)
            self._free_slot()
        if unread:
            self.acknowledge(stream.id, unread)
        self.flush()
        if self.unusable is not None and not self.streams:
            self.close_transport()

    # --- the connection ------------------------------------------------------------------------

    async def _keep_alive(self, interval: float, timeout: float) -> None:
        while True:
            now = time.monotonic()
            if self._ping_sent_at is not None:
                if now - self._ping_sent_at >= timeout:
                    self._fail(
                        ConnectionFailedError(
                            f"no answer to a keepalive ping within {timeout:.0f}s"
                        )
                    )
                    if self.transport is not None:
                        self.transport.abort()
                    return
                await asyncio.sleep(self._ping_sent_at + timeout - now)
                continue
            idle = now - self._last_frame
            if idle < interval:
                await asyncio.sleep(interval - idle)
                continue
            self._ping_sent_at = now
            if self.settings.on_ping is not None:
                self.settings.on_ping()
            self.h2.ping(os.urandom(8))
            self.flush()

    def retire(self) -> None:
        """No new streams here (it may be dead); the open ones finish."""
        self.unusable = self.unusable or "retired after a read timeout"
        if not self.streams:
            self.close_transport()

    def close(self) -> None:
        """Close now: open streams end with ConnectionFailedError."""
        if self.transport is not None and not self.transport.is_closing():
            with contextlib.suppress(h2.exceptions.H2Error):
                self.h2.close_connection()
            self.flush()
        self._fail(ConnectionFailedError("the HTTP/2 connection was closed"))
        self.close_transport()

    def close_transport(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()


class Answer:
    """A response read whole."""

    __slots__ = ("content", "headers", "status")

    def __init__(self, status: int, headers: Headers, content: bytes) -> None:
        self.status = status
        self.headers = headers
        self.content = content


class StreamAnswer:
    """A response whose body is read as it comes (and, on a duplex stream, a request whose body
    is sent as it goes)."""

    def __init__(self, stream: _Stream, read_timeout: float | None) -> None:
        self._stream = stream
        self._read_timeout = read_timeout
        self.status = stream.status
        self.headers = stream.headers
        self._decoder = _decoder(stream.headers)

    async def chunks(self) -> AsyncIterator[bytes]:
        while (chunk := await self._stream.next_chunk(self._read_timeout)) is not None:
            if self._decoder is not None:
                chunk = self._decoder.decompress(chunk)
            if chunk:
                yield chunk
        if self._decoder is not None and (rest := self._decoder.flush()):
            yield rest

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])

    @property
    def trailers(self) -> Headers | None:
        """The trailers, once the body has ended with them."""
        return self._stream.trailers

    @property
    def finished(self) -> bool:
        """The stream has ended, or failed."""
        return self._stream.ended or self._stream.error is not None

    async def send(self, data: bytes) -> None:
        """Send a piece of a duplex stream's request body; returns once the connection took it
        (the server's window and the socket)."""
        await self._stream.conn.send(self._stream, data, end_stream=False)

    @property
    def send_window(self) -> int:
        """The bytes the server's flow-control window takes now (0 once the stream closed)."""
        try:
            return int(self._stream.conn.h2.local_flow_control_window(self._stream.id))
        except h2.exceptions.H2Error:
            return 0


class Http2Client:
    """HTTP/2 requests and streams to one https server (see the module docstring)."""

    def __init__(
        self,
        url: str,
        ssl_context: ssl.SSLContext,
        *,
        server_hostname: str | None = None,
        connect_timeout: float = 10.0,
        default_timeout: float | None = None,
        socket_options: Sequence[tuple[int, int, int]] = (),
        headers: Mapping[str, str] | None = None,
        proxy: str | None = None,
        authority: str | None = None,
        settings: ConnectionSettings = ConnectionSettings(),
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme != "https" or not parts.hostname:
            raise ValueError(f"HTTP/2 needs an https URL with a host, not {url!r}")
        self.host = parts.hostname
        self.port = parts.port or 443
        self.prefix = parts.path.rstrip("/").encode()
        self.authority = (authority or parts.netloc.rsplit("@", 1)[-1]).encode()
        self.ssl_context = ssl_context
        self.server_hostname = server_hostname or self.host
        self.connect_timeout = connect_timeout
        self.default_timeout = default_timeout
        self.socket_options = list(socket_options)
        self.headers = [
            (name.lower().encode(), value.encode()) for name, value in (headers or {}).items()
        ]
        self.settings = settings
        self.proxy = urlsplit(proxy) if proxy else None
        if self.proxy is not None and (self.proxy.scheme != "http" or not self.proxy.hostname):
            raise ValueError("HTTP/2 goes through http:// (CONNECT) proxies only")
        self._connection: _Connection | None = None
        self._connecting: asyncio.Future[_Connection] | None = None
        self._closed = False

    # --- connections ---------------------------------------------------------------------------

    async def _usable_connection(self) -> _Connection:
        if self._closed:
            raise ConnectionFailedError("the client is closed")
        conn = self._connection
        if conn is not None and conn.unusable is None:
            return conn
        if self._connecting is None:
            self._connecting = background(self._connect())
        connecting = self._connecting
        try:
            return await asyncio.shield(connecting)
        finally:
            if connecting.done() and self._connecting is connecting:
                self._connecting = None

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout):
                if self.proxy is None:
                    transport, conn = await loop.create_connection(
                        lambda: _Connection(self.authority, loop, self.settings),
                        self.host,
                        self.port,
                        ssl=self.ssl_context,
                        server_hostname=self.server_hostname,
                        ssl_handshake_timeout=self.connect_timeout,
                    )
                else:
                    transport, conn = await self._through_proxy(loop)
        except TimeoutError:
            raise ConnectionFailedError(
                f"connecting to {self.host}:{self.port} timed out", timeout=True
            ) from None
        except (OSError, ssl.SSLError) as exc:
            raise ConnectionFailedError(
                f"connecting to {self.host}:{self.port}: {type(exc).__name__}: {exc}"
            ) from exc
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is None or ssl_object.selected_alpn_protocol() != "h2":
            transport.close()
            raise NotHttp2Error(f"{self.host}:{self.port} does not speak HTTP/2")
        sock = transport.get_extra_info("socket")
        if sock is not None:
            for level, option, value in self.socket_options:
                with contextlib.suppress(OSError):
                    sock.setsockopt(level, option, value)
        if self._closed:
            conn.close()
            raise ConnectionFailedError("the client is closed")
        previous, self._connection = self._connection, conn
        if previous is not None and not previous.streams:
            previous.close_transport()
        return conn

    async def _through_proxy(
        self, loop: asyncio.AbstractEventLoop
    ) -> tuple[asyncio.Transport, _Connection]:
        """A tunnel through the proxy (HTTP CONNECT, basic credentials from its URL), then TLS
        to the server inside it."""
        assert self.proxy is not None
        reader, writer = await asyncio.open_connection(self.proxy.hostname, self.proxy.port or 80)
        target = (
            f"{self.host}:{self.port}" if ":" not in self.host else f"[{self.host}]:{self.port}"
        )
        request = f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n"
        if self.proxy.username is not None:
            credentials = f"{unquote(self.proxy.username)}:{unquote(self.proxy.password or '')}"
            token = base64.b64encode(credentials.encode()).decode()
            request += f"Proxy-Authorization: Basic {token}\r\n"
        writer.write(request.encode() + b"\r\n")
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            writer.close()
            raise ConnectionFailedError(f"the proxy did not answer CONNECT: {exc}") from exc
        status = head.split(b"\r\n", 1)[0].decode("latin-1")
        if status.split(" ")[1:2] != ["200"]:
            writer.close()
            raise ConnectionFailedError(f"the proxy refused CONNECT {target}: {status}")
        conn = _Connection(self.authority, loop, self.settings)
        # The writer closes the tunnel's socket once garbage-collected: the connection keeps it.
        conn.tunnel = writer
        transport = await loop.start_tls(
            writer.transport,
            conn,
            self.ssl_context,
            server_hostname=self.server_hostname,
            ssl_handshake_timeout=self.connect_timeout,
        )
        if transport is None:
            raise ConnectionFailedError("TLS through the proxy failed")
        assert isinstance(transport, asyncio.Transport)
        conn.connection_made(transport)  # start_tls leaves that to its caller
        return transport, conn

    async def aclose(self) -> None:
        self._closed = True
        if self._connecting is not None:
            self._connecting.cancel()
            with contextlib.suppress(BaseException):
                await self._connecting
        if self._connection is not None:
            self._connection.close()

    # --- requests ------------------------------------------------------------------------------

    def _path(self, path: str, query: str) -> bytes:
        full = self.prefix + path.encode()
        return full + b"?" + query.encode() if query else full

    def _headers(self, headers: Mapping[str, str], body: bytes | None) -> list[tuple[bytes, bytes]]:
        sent = list(self.headers)
        sent.extend((name.lower().encode(), value.encode()) for name, value in headers.items())
        if body:
            sent.append(hpack.NeverIndexedHeaderTuple(b"content-length", str(len(body)).encode()))
        return sent

    async def _start(
        self,
        method: str,
        path: str,
        query: str,
        headers: Mapping[str, str],
        body: bytes | None,
        incremental: bool,
        duplex: bool = False,
    ) -> _Stream:
        wire_headers = self._headers(headers, body)
        full_path = self._path(path, query)
        for attempt in range(UNPROCESSED_RETRIES + 1):
            conn = await self._usable_connection()
            try:
                return await conn.start(
                    method.encode(),
                    full_path,
                    wire_headers,
                    body,
                    incremental=incremental,
                    duplex=duplex,
                )
            except ConnectionFailedError as exc:
                if not exc.unprocessed or attempt == UNPROCESSED_RETRIES:
                    raise
        raise AssertionError("unreachable")

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: str = "",
        headers: Mapping[str, str],
        body: bytes | None = None,
        timeout: float | None = None,
    ) -> Answer:
        """Send a request and read its answer whole."""
        timeout = self.default_timeout if timeout is None else timeout
        for attempt in range(UNPROCESSED_RETRIES + 1):
            stream = await self._start(method, path, query, headers, body, incremental=False)
            try:
                await stream.response_headers(timeout)
                content = await stream.read_all(timeout)
            except ConnectionFailedError as exc:
                if exc.unprocessed and attempt < UNPROCESSED_RETRIES:
                    continue
                raise
            finally:
                stream.conn.close_stream(stream)
            decoder = _decoder(stream.headers)
            if decoder is not None:
                try:
                    content = decoder.decompress(content) + decoder.flush()
                except zlib.error as exc:
                    raise ConnectionFailedError(f"undecodable gzip answer: {exc}") from exc
            return Answer(stream.status, stream.headers, content)
        raise AssertionError("unreachable")

    @contextlib.asynccontextmanager
    async def stream(
        self,
        method: str,
        path: str,
        *,
        query: str = "",
        headers: Mapping[str, str],
        read_timeout: float | None = None,
        duplex: bool = False,
    ) -> AsyncIterator[StreamAnswer]:
        """Send a request (a duplex one without its body: `send` it) and read its answer as it
        comes; leaving the block before its end resets the stream."""
        for attempt in range(UNPROCESSED_RETRIES + 1):
            stream = await self._start(
                method, path, query, headers, None, incremental=True, duplex=duplex
            )
            try:
                await stream.response_headers(self.default_timeout)
            except ConnectionFailedError as exc:
                stream.conn.close_stream(stream)
                if exc.unprocessed and attempt < UNPROCESSED_RETRIES:
                    continue
                raise
            except BaseException:
                stream.conn.close_stream(stream)
                raise
            try:
                yield StreamAnswer(stream, read_timeout)
            finally:
                stream.conn.close_stream(stream)
            return
