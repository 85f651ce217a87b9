"""One bidirectional-streaming gRPC call on a connection of its own, on the `h2` state machine.

gRPC over HTTP/2 (grpc/grpc doc/PROTOCOL-HTTP2.md): a POST to `/<Service>/<Method>` with
`content-type: application/grpc` and `te: trailers`, metadata as further headers; each message is
framed as one flag byte (0: not compressed), a big-endian uint32 length and the message; the
server answers with headers (its metadata), messages, and trailers carrying `grpc-status` and
`grpc-message` (a call refused at once gets one HEADERS frame holding both: "Trailers-Only").

Flow control is the backpressure: received bytes are acknowledged (WINDOW_UPDATE) only when the
caller takes the message (`recv`), so a caller that stops taking stops the sender; `send` waits
for the peer's window and for the socket to drain. Keepalive: after `keepalive_interval` seconds
without a frame from the server a PING goes out, and the connection is given up when its ACK
does not arrive within `keepalive_timeout` (dead NAT mappings are found without waiting for TCP).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
import struct
import time
from collections import deque
from collections.abc import Callable, Sequence
from urllib.parse import unquote

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

# gRPC's default receive limit; a konnectivity DATA packet carries at most 32 KiB.
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
# Receive window of the stream and the connection: what may be in flight towards the agent.
RECEIVE_WINDOW = 1024 * 1024
READ_CHUNK = 64 * 1024
_PREFIX = struct.Struct(">BI")
_STATUS_OK = "0"


class GrpcError(Exception):
    """The call ended with an error: a gRPC status other than OK, or a broken connection."""

    def __init__(self, message: str, *, status: str | None = None) -> None:
        super().__init__(message)
        self.status = status


class GrpcStream:
    """Use `await GrpcStream.open(...)`; then `metadata` holds the server's response headers."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        keepalive_interval: float,
        keepalive_timeout: float,
        on_ping: Callable[[], None] | None = None,
    ) -> None:
        self._on_ping = on_ping
        self._reader = reader
        self._writer = writer
        self._h2 = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        )
        self._stream_id = 0
        self.metadata: dict[str, list[str]] = {}
        self._headers = asyncio.get_running_loop().create_future()
        self._messages: deque[bytes] = deque()
        self._buffer = bytearray()
        self._arrived = asyncio.Event()
        self._window = asyncio.Event()
        self._send_lock = asyncio.Lock()
        self._ended = False
        self._error: GrpcError | None = None
        self._status: str | None = None
        self._status_message = ""
        self._last_frame = time.monotonic()
        self._ping_sent_at: float | None = None
        self._keepalive_interval = keepalive_interval
        self._keepalive_timeout = keepalive_timeout
        self.pings_sent = 0
        self._tasks: list[asyncio.Task[None]] = []

    @classmethod
    async def open(
        cls,
        *,
        host: str,
        port: int,
        ssl_context: ssl.SSLContext,
        server_hostname: str,
        path: str,
        metadata: Sequence[tuple[str, str]],
        user_agent: str,
        connect_timeout: float = 10.0,
        keepalive_interval: float = 40.0,
        keepalive_timeout: float = 20.0,
        on_ping: Callable[[], None] | None = None,
    ) -> GrpcStream:
        """Connect, start the call and wait for the server's response headers."""
        ssl_context.set_alpn_protocols(["h2"])
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(
                    host, port, ssl=ssl_context, server_hostname=server_hostname
                ),
                connect_timeout,
            )
        except (OSError, TimeoutError, ssl.SSLError) as exc:
            raise GrpcError(f"cannot connect to {host}:{port}: {_describe(exc)}") from exc
        stream = cls(
            reader,
            writer,
            keepalive_interval=keepalive_interval,
            keepalive_timeout=keepalive_timeout,
            on_ping=on_ping,
        )
        try:
            if writer.get_extra_info("ssl_object").selected_alpn_protocol() != "h2":
                raise GrpcError(f"{host}:{port} does not speak HTTP/2 (ALPN h2)")
            authority = f"{server_hostname}:{port}"
            await stream._start(authority, path, metadata, user_agent)
            await asyncio.wait_for(asyncio.shield(stream._headers), connect_timeout)
        except TimeoutError as exc:
            await stream.close()
            raise GrpcError(f"{host}:{port} sent no response headers in time") from exc
        except BaseException:
            await stream.close()
            raise
        return stream

    # --- set-up ----------------------------------------------------------------------------

    async def _start(
        self, authority: str, path: str, metadata: Sequence[tuple[str, str]], user_agent: str
    ) -> None:
        self._h2.local_settings = h2.settings.Settings(
            client=True,
            initial_values={
                h2.settings.SettingCodes.ENABLE_PUSH: 0,
                h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: RECEIVE_WINDOW,
                h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: 64 * 1024,
            },
        )
        self._h2.initiate_connection()
        # The connection window starts at 64 KiB whatever the settings say: open it as wide.
        self._h2.increment_flow_control_window(RECEIVE_WINDOW - 65535)
        self._stream_id = self._h2.get_next_available_stream_id()
        headers = [
            (":method", "POST"),
            (":scheme", "https"),
            (":path", path),
            (":authority", authority),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            ("grpc-accept-encoding", "identity"),
            ("user-agent", user_agent),
            *((name.lower(), value) for name, value in metadata),
        ]
        self._h2.send_headers(self._stream_id, headers)
        await self._flush()
        self._tasks = [
            asyncio.create_task(self._read_loop(), name="grpc-read"),
            asyncio.create_task(self._keepalive_loop(), name="grpc-keepalive"),
        ]

    # --- the caller's side -----------------------------------------------------------------

    async def recv(self) -> bytes | None:
        """The next message; None once the server ended the call with status OK."""
        while not self._messages:
            if self._error is not None:
                raise self._error
            if self._ended:
                self._raise_unless_ok()
                return None
            self._arrived.clear()
            await self._arrived.wait()
        message = self._messages.popleft()
        if not self._ended and self._error is None:
            with contextlib.suppress(h2.exceptions.ProtocolError):
                self._h2.acknowledge_received_data(len(message) + _PREFIX.size, self._stream_id)
                self._write_pending()
        return message

    def _raise_unless_ok(self) -> None:
        if self._status in (None, _STATUS_OK):
            return
        raise GrpcError(
            f"call ended with gRPC status {self._status}: {self._status_message}",
            status=self._status,
        )

    async def send(self, message: bytes) -> None:
        """Send one message; returns once the connection took it (peer window and socket)."""
        framed = _PREFIX.pack(0, len(message)) + message
        async with self._send_lock:
            view = memoryview(framed)
            while view:
                if self._error is not None:
                    raise self._error
                try:
                    window = min(
                        self._h2.local_flow_control_window(self._stream_id),
                        self._h2.max_outbound_frame_size,
                    )
                except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError) as exc:
                    raise GrpcError(f"the call is closed: {exc}") from exc
                if window <= 0:
                    self._window.clear()
                    await self._window.wait()
                    continue
                chunk, view = view[:window], view[window:]
                self._h2.send_data(self._stream_id, chunk.tobytes())
                await self._flush()

    async def close(self) -> None:
        """End the call and the connection (at once; in-flight messages are dropped)."""
        for task in self._tasks:
            task.cancel()
        if self._error is None:
            self._error = GrpcError("the call was closed")
        with contextlib.suppress(Exception):
            self._h2.close_connection()
            self._writer.write(self._h2.data_to_send())
        self._writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._writer.wait_closed(), 1.0)
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._arrived.set()
        self._window.set()

    @property
    def closed(self) -> bool:
        return self._error is not None or self._ended

    # --- the connection --------------------------------------------------------------------

    def _write_pending(self) -> None:
        data = self._h2.data_to_send()
        if data:
            self._writer.write(data)

    async def _flush(self) -> None:
        self._write_pending()
        try:
            await self._writer.drain()
        except (OSError, RuntimeError) as exc:
            self._fail(f"connection lost: {_describe(exc)}")
            assert self._error is not None
            raise self._error from exc

    def _fail(self, why: str, status: str | None = None) -> None:
        if self._error is None:
            self._error = GrpcError(why, status=status)
        if not self._headers.done():
            self._headers.set_exception(self._error)
            self._headers.exception()  # retrieved: open() raises it, nobody else waits
        self._arrived.set()
        self._window.set()

    async def _read_loop(self) -> None:
        try:
            while True:
                data = await self._reader.read(READ_CHUNK)
                if not data:
                    self._fail("the server closed the connection")
                    return
                self._last_frame = time.monotonic()
                try:
                    events = self._h2.receive_data(data)
                except h2.exceptions.ProtocolError as exc:
                    self._fail(f"HTTP/2 protocol error: {exc}")
                    return
                for event in events:
                    self._on_event(event)
                self._write_pending()
                if self._error is not None:
                    return
        except (OSError, ssl.SSLError) as exc:
            self._fail(f"connection lost: {_describe(exc)}")
        finally:
            if self._error is not None:
                self._writer.transport.abort()

    def _on_event(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.ResponseReceived):
            self._on_headers(_text_headers(event.headers))
        elif isinstance(event, h2.events.DataReceived):
            self._on_data(event)
        elif isinstance(event, h2.events.TrailersReceived):
            self._on_trailers(_text_headers(event.headers))
        elif isinstance(event, h2.events.StreamEnded):
            self._ended = True
            self._arrived.set()
        elif isinstance(event, h2.events.StreamReset):
            self._fail(f"the server reset the call (HTTP/2 error {event.error_code!r})")
        elif isinstance(event, h2.events.WindowUpdated | h2.events.RemoteSettingsChanged):
            self._window.set()
        elif isinstance(event, h2.events.PingAckReceived):
            self._ping_sent_at = None
        elif isinstance(event, h2.events.ConnectionTerminated):
            # GOAWAY: the server stops (restart, or too many pings). The call may be cut any
            # time now; give it up so that the owner reconnects at once.
            reason = f"error {event.error_code!r}"
            if event.additional_data:
                reason += f" ({event.additional_data.decode(errors='replace')})"
            self._fail(f"the server sent GOAWAY, {reason}")

    def _on_headers(self, headers: list[tuple[str, str]]) -> None:
        metadata: dict[str, list[str]] = {}
        for name, value in headers:
            metadata.setdefault(name, []).append(value)
        status = metadata.get(":status", [""])[0]
        if status != "200":
            self._fail(f"the server answered HTTP {status}, not a gRPC call")
            return
        if "grpc-status" in metadata:  # Trailers-Only: refused before any message
            self._on_trailers(headers)
            self._fail(
                f"the server refused the call: gRPC status {self._status}: {self._status_message}",
                status=self._status,
            )
            return
        content_type = metadata.get("content-type", [""])[0]
        if not content_type.startswith("application/grpc"):
            self._fail(f"the server answered with content-type {content_type!r}")
            return
        self.metadata = metadata
        if not self._headers.done():
            self._headers.set_result(None)

    def _on_trailers(self, headers: list[tuple[str, str]]) -> None:
        for name, value in headers:
            if name == "grpc-status":
                self._status = value
            elif name == "grpc-message":
                self._status_message = unquote(value)

    def _on_data(self, event: h2.events.DataReceived) -> None:
        padding = event.flow_controlled_length - len(event.data)
        if padding:
            self._h2.acknowledge_received_data(padding, event.stream_id)
        self._buffer += event.data
        while len(self._buffer) >= _PREFIX.size:
            compressed, length = _PREFIX.unpack_from(self._buffer)
            if compressed:
                self._fail("the server sent a compressed message; none was offered")
                return
            if length > MAX_MESSAGE_BYTES:
                self._fail(f"a message of {length} bytes exceeds the {MAX_MESSAGE_BYTES} limit")
                return
            if len(self._buffer) < _PREFIX.size + length:
                break
            self._messages.append(bytes(self._buffer[_PREFIX.size : _PREFIX.size + length]))
            del self._buffer[: _PREFIX.size + length]
        self._arrived.set()

    async def _keepalive_loop(self) -> None:
        while self._error is None:
            now = time.monotonic()
            if self._ping_sent_at is not None:
                if now - self._ping_sent_at >= self._keepalive_timeout:
                    self._fail(
                        f"no answer to a keepalive ping within {self._keepalive_timeout:.0f}s"
                    )
                    self._writer.transport.abort()
                    return
                await asyncio.sleep(self._ping_sent_at + self._keepalive_timeout - now)
                continue
            idle = now - self._last_frame
            if idle < self._keepalive_interval:
                await asyncio.sleep(self._keepalive_interval - idle)
                continue
            self._ping_sent_at = now
            self.pings_sent += 1
            if self._on_ping is not None:
                self._on_ping()
            self._h2.ping(os.urandom(8))
            with contextlib.suppress(GrpcError):
                await self._flush()


def _text_headers(headers: Sequence[tuple[bytes | str, bytes | str]]) -> list[tuple[str, str]]:
    return [
        (
            name.decode() if isinstance(name, bytes) else name,
            value.decode() if isinstance(value, bytes) else value,
        )
        for name, value in headers
    ]


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
