"""One bidirectional-streaming gRPC call, as a duplex stream of an HTTP/2 client of its own
(agent.kube.http2: one connection, flow control, keepalive pings).

gRPC over HTTP/2 (grpc/grpc doc/PROTOCOL-HTTP2.md): a POST to `/<Service>/<Method>` with
`content-type: application/grpc` and `te: trailers`, metadata as further headers; each message is
framed as one flag byte (0: not compressed), a big-endian uint32 length and the message; the
server answers with headers (its metadata), messages, and trailers carrying `grpc-status` and
`grpc-message` (a call refused at once gets one HEADERS frame holding both: "Trailers-Only").

Flow control is the backpressure: the stream's received bytes are acknowledged only as `recv`
takes them, so a caller that stops taking stops the sender; `send` waits for the server's window
and for the socket.

Every connection relayed through the tunnel shares this one stream, and a message goes out in
window-sized DATA frames: a message cut off part way would leave the server reading the next
message's bytes as the rest of it (a hung stream, or garbage taken for a length). So one writer
task writes the messages, whole, in the order they were submitted; what has queued up meanwhile
goes out together (up to `BATCH_BYTES`), in one write to the connection. A message whose sender
cancels it is withdrawn if the writer has not started on it (or on the batch it joined).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import struct
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from urllib.parse import unquote

from agent.kube.http2 import (
    ConnectionFailedError,
    ConnectionSettings,
    Http2Client,
    NotHttp2Error,
    StreamAnswer,
)

# gRPC's default receive limit; a konnectivity DATA packet carries at most 32 KiB.
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
# Receive window of the stream and the connection: what may be in flight towards the agent.
RECEIVE_WINDOW = 1024 * 1024
# What the writer takes from the queue for one write (more when one message is larger).
BATCH_BYTES = 256 * 1024
_PREFIX = struct.Struct(">BI")
# A message waiting for the writer, with the future its sender waits on.
_Queued = tuple[bytes, asyncio.Future[None]]
_STATUS_OK = "0"


class GrpcError(Exception):
    """The call ended with an error: a gRPC status other than OK, or a broken connection."""

    def __init__(self, message: str, *, status: str | None = None) -> None:
        super().__init__(message)
        self.status = status


class GrpcCall:
    """Use `await GrpcCall.open(...)`; then `metadata` holds the server's response headers."""

    def __init__(
        self, client: Http2Client, call: contextlib.AsyncExitStack, answer: StreamAnswer
    ) -> None:
        self._client = client
        self._call = call
        self._answer = answer
        self._chunks = answer.chunks()
        self.metadata: Mapping[str, str] = answer.headers
        self._buffer = bytearray()
        self._error: GrpcError | None = None
        # Messages waiting for the writer, each with the future its sender waits on.
        self._outbox: deque[_Queued] = deque()
        # The batch being written: failed with the rest if the call ends meanwhile.
        self._writing: list[_Queued] = []
        self._queued = asyncio.Event()
        self._send_error: GrpcError | None = None
        self._writer = asyncio.create_task(self._write_messages(), name="grpc-writer")

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
    ) -> GrpcCall:
        """Connect, start the call and wait for the server's response headers."""
        ssl_context.set_alpn_protocols(["h2"])
        client = Http2Client(
            f"https://{host}:{port}" if ":" not in host else f"https://[{host}]:{port}",
            ssl_context,
            server_hostname=server_hostname,
            authority=f"{server_hostname}:{port}",
            connect_timeout=connect_timeout,
            default_timeout=connect_timeout,
            settings=ConnectionSettings(
                stream_window=RECEIVE_WINDOW,
                connection_window=RECEIVE_WINDOW,
                keepalive_interval=keepalive_interval,
                keepalive_timeout=keepalive_timeout,
                on_ping=on_ping,
            ),
        )
        headers = {
            "content-type": "application/grpc",
            "te": "trailers",
            "grpc-accept-encoding": "identity",
            "user-agent": user_agent,
        }
        headers.update((name.lower(), value) for name, value in metadata)
        call = contextlib.AsyncExitStack()
        try:
            answer = await call.enter_async_context(
                client.stream("POST", path, headers=headers, duplex=True)
            )
            _check_headers(answer)
        except BaseException as exc:
            await call.aclose()
            await client.aclose()
            if isinstance(exc, ConnectionFailedError | NotHttp2Error):
                raise GrpcError(str(exc)) from exc
            raise
        return cls(client, call, answer)

    async def recv(self) -> bytes | None:
        """The next message; None once the server ended the call with status OK."""
        if self._error is not None:
            raise self._error
        try:
            return await self._next_message()
        except GrpcError as exc:
            self._error = exc
            raise

    async def _next_message(self) -> bytes | None:
        while True:
            if len(self._buffer) >= _PREFIX.size:
                compressed, length = _PREFIX.unpack_from(self._buffer)
                if compressed:
                    raise GrpcError("the server sent a compressed message; none was offered")
                if length > MAX_MESSAGE_BYTES:
                    raise GrpcError(
                        f"a message of {length} bytes exceeds the {MAX_MESSAGE_BYTES} limit"
                    )
                if len(self._buffer) >= _PREFIX.size + length:
                    message = bytes(self._buffer[_PREFIX.size : _PREFIX.size + length])
                    del self._buffer[: _PREFIX.size + length]
                    return message
            try:
                chunk = await anext(self._chunks, None)
            except ConnectionFailedError as exc:
                raise GrpcError(str(exc)) from exc
            if chunk is None:
                _raise_unless_ok(self._answer.trailers or {})
                return None
            self._buffer += chunk

    def submit(self, message: bytes) -> asyncio.Future[None]:
        """Queue one message; the future is done once the connection took it (server window
        and socket), and cancelling it withdraws the message if its writing has not begun (it
        otherwise still goes out whole: see the module docstring)."""
        if self._send_error is not None:
            raise self._send_error
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (message, done)
        self._outbox.append(entry)
        done.add_done_callback(lambda _: self._withdraw(entry))
        self._queued.set()
        return done

    async def send(self, message: bytes) -> None:
        """Send one message; returns once the connection took it. Cancelled while it waits,
        the message is withdrawn as by cancelling `submit`'s future."""
        await self.submit(message)

    def _withdraw(self, entry: _Queued) -> None:
        # A withdrawn message leaves the queue at once: a relay that went away must not keep
        # its bytes held behind a stalled stream.
        if entry[1].cancelled():
            for index, queued in enumerate(self._outbox):
                if queued is entry:
                    del self._outbox[index]
                    return

    def _next_batch(self) -> list[_Queued]:
        batch: list[_Queued] = []
        size = 0
        while self._outbox and size < BATCH_BYTES:
            message, done = entry = self._outbox.popleft()
            if done.done():
                continue  # withdrawn before a byte of it was written
            batch.append(entry)
            size += len(message)
        return batch

    async def _write_messages(self) -> None:
        while True:
            while not self._outbox:
                self._queued.clear()
                await self._queued.wait()
            self._writing = batch = self._next_batch()
            if not batch:
                continue
            framed: list[bytes] = []
            for message, _ in batch:
                framed += (_PREFIX.pack(0, len(message)), message)
            try:
                await self._answer.send(b"".join(framed))
            except Exception as exc:  # ConnectionFailedError; anything else ends the call too
                self._fail_sends(GrpcError(f"the call is closed: {exc}"))
                return
            self._writing = []
            for _, done in batch:
                if not done.done():
                    done.set_result(None)

    def _fail_sends(self, error: GrpcError) -> None:
        self._send_error = self._send_error or error
        for _, done in [*self._writing, *self._outbox]:
            if not done.done():
                done.set_exception(self._send_error)
        self._writing = []
        self._outbox.clear()

    async def close(self) -> None:
        """End the call and the connection (at once; in-flight messages are dropped)."""
        # The connection first: that fails the stream, and so wakes a `recv` waiting on it.
        await self._client.aclose()
        await self._call.aclose()
        self._writer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._writer
        self._fail_sends(GrpcError("the call is closed"))

    @property
    def send_window(self) -> int:
        """What the server's flow-control window takes now: 0 while a send waits for it."""
        return self._answer.send_window

    @property
    def closed(self) -> bool:
        return self._answer.finished


def _check_headers(answer: StreamAnswer) -> None:
    if answer.status != 200:
        raise GrpcError(f"the server answered HTTP {answer.status}, not a gRPC call")
    if "grpc-status" in answer.headers:  # Trailers-Only: refused before any message
        status, message = _status(answer.headers)
        raise GrpcError(
            f"the server refused the call: gRPC status {status}: {message}", status=status
        )
    content_type = answer.headers.get("content-type", "")
    if not content_type.startswith("application/grpc"):
        raise GrpcError(f"the server answered with content-type {content_type!r}")


def _status(fields: Mapping[str, str]) -> tuple[str | None, str]:
    return fields.get("grpc-status"), unquote(fields.get("grpc-message", ""))


def _raise_unless_ok(trailers: Mapping[str, str]) -> None:
    status, message = _status(trailers)
    if status not in (None, _STATUS_OK):
        raise GrpcError(f"call ended with gRPC status {status}: {message}", status=status)
