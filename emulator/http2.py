"""HTTP/2 for the emulator's HTTPS front, on the `h2` protocol state machine.

One `Http2Connection` per TLS connection that negotiated `h2` through ALPN. Each request
stream is served by its own task through the same request chain as HTTP/1.1; a watch is a
long-lived stream whose events go out as DATA frames as they come. Outgoing data respects
the peer's flow-control windows and the transport's backpressure. A stream the client
resets cancels its task; `goaway` tells the client that no new streams will be served (as
kube-apiserver does on shutdown) before the connection closes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import parse_qs, unquote

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

from .wire import ApiRequest, ApiResponse

# kube-apiserver's --http2-max-streams-per-connection default.
MAX_CONCURRENT_STREAMS = 1000
# Headers that HTTP/2 forbids (RFC 9113 8.2.2); the request chain may set them for HTTP/1.1.
_CONNECTION_HEADERS = frozenset(
    {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"}
)

Serve = Callable[[ApiRequest], Awaitable[ApiResponse]]
"""Serves one request through the request chain (shielded from the client going away)."""


class StreamTracker(Protocol):
    """Where a connection reports its streaming (watch) responses, so they can be cut."""

    def streaming(self, task: asyncio.Task[None], cut: Callable[[], None]) -> None: ...

    def done(self, task: asyncio.Task[None]) -> None: ...


@dataclass
class _Stream:
    id: int
    headers: list[tuple[str, str]]
    body: bytearray = field(default_factory=bytearray)
    too_large: bool = False
    task: asyncio.Task[None] | None = None
    # Set whenever the peer may have opened its flow-control window for this stream.
    window: asyncio.Event = field(default_factory=asyncio.Event)


class Http2Connection(asyncio.Protocol):
    def __init__(
        self,
        serve: Serve,
        *,
        peer_cert_der: bytes | None,
        remote: str,
        max_body_bytes: int,
        tracker: StreamTracker,
        after: Callable[[ApiResponse], None],
    ) -> None:
        self._serve = serve
        self._after = after
        self._peer_cert_der = peer_cert_der
        self._remote = remote
        self._max_body_bytes = max_body_bytes
        self._tracker = tracker
        self._h2 = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        )
        self._transport: asyncio.Transport | None = None
        self._streams: dict[int, _Stream] = {}
        self._writable = asyncio.Event()
        self._writable.set()
        self._closed = False

    # --- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._h2.local_settings = h2.settings.Settings(
            client=False,
            initial_values={
                h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: MAX_CONCURRENT_STREAMS,
                h2.settings.SettingCodes.ENABLE_PUSH: 0,
            },
        )
        self._h2.initiate_connection()
        self._flush()

    def data_received(self, data: bytes) -> None:
        try:
            events = self._h2.receive_data(data)
        except h2.exceptions.ProtocolError:
            # h2 has queued the GOAWAY that names the error.
            self._flush()
            self._close_transport()
            return
        for event in events:
            self._on_event(event)
        self._flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._writable.set()
        for stream in self._streams.values():
            stream.window.set()
            if stream.task is not None:
                stream.task.cancel()

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    # --- control ---------------------------------------------------------------------------

    def goaway(self) -> None:
        """Announce that no new streams will be served (GOAWAY, NO_ERROR)."""
        if self._closed:
            return
        self._h2.close_connection()
        self._flush()

    def reset_stream(self, stream_id: int) -> None:
        if self._closed:
            return
        with contextlib.suppress(h2.exceptions.H2Error):
            self._h2.reset_stream(stream_id, h2.errors.ErrorCodes.INTERNAL_ERROR)
        self._flush()

    async def close(self) -> None:
        """End every stream, send GOAWAY and close the connection."""
        tasks = [s.task for s in self._streams.values() if s.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.goaway()
        self._close_transport()

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    # --- events ----------------------------------------------------------------------------

    def _on_event(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.RequestReceived):
            headers = [(str(k), str(v)) for k, v in event.headers or ()]
            self._streams[event.stream_id] = _Stream(event.stream_id, headers)
            if ("expect", "100-continue") in headers:
                # The client waits for this before it sends the body (curl does).
                self._h2.send_headers(event.stream_id, [(":status", "100")])
        elif isinstance(event, h2.events.DataReceived):
            self._h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            stream = self._streams.get(event.stream_id)
            if stream is not None and event.data:
                if len(stream.body) + len(event.data) > self._max_body_bytes:
                    stream.too_large = True
                    stream.body.clear()
                elif not stream.too_large:
                    stream.body += event.data
        elif isinstance(event, h2.events.StreamEnded):
            stream = self._streams.get(event.stream_id)
            if stream is not None and stream.task is None:
                stream.task = asyncio.create_task(self._respond(stream))
        elif isinstance(event, h2.events.StreamReset):
            stream = self._streams.pop(event.stream_id, None)
            if stream is not None and stream.task is not None:
                stream.task.cancel()
        elif isinstance(event, h2.events.WindowUpdated):
            if event.stream_id == 0:
                self._open_windows()
            elif (stream := self._streams.get(event.stream_id)) is not None:
                stream.window.set()
        elif isinstance(event, h2.events.RemoteSettingsChanged):
            self._open_windows()
        elif isinstance(event, h2.events.ConnectionTerminated):
            self._close_transport()

    def _open_windows(self) -> None:
        for stream in self._streams.values():
            stream.window.set()

    # --- responding ------------------------------------------------------------------------

    async def _respond(self, stream: _Stream) -> None:
        try:
            resp = (
                _too_large(self._max_body_bytes)
                if stream.too_large
                else await self._serve(self._request(stream))
            )
            await self._send_response(stream, resp)
            self._after(resp)
        except (ConnectionError, h2.exceptions.H2Error):
            pass  # the client or the connection went away
        finally:
            self._streams.pop(stream.id, None)

    def _request(self, stream: _Stream) -> ApiRequest:
        pseudo: dict[str, str] = {}
        headers: dict[str, str] = {}
        for name, value in stream.headers:
            if name.startswith(":"):
                pseudo[name] = value
            elif name in headers:
                headers[name] += ("; " if name == "cookie" else ", ") + value
            else:
                headers[name] = value
        if ":authority" in pseudo:
            headers.setdefault("host", pseudo[":authority"])
        path, _, query = pseudo.get(":path", "/").partition("?")
        return ApiRequest(
            method=pseudo.get(":method", "GET"),
            # Decoded, as the HTTP/1.1 front's (and kube-apiserver's) request path.
            path=unquote(path),
            query=parse_qs(query, keep_blank_values=True),
            headers=headers,
            body=bytes(stream.body),
            peer_cert_der=self._peer_cert_der,
            remote=self._remote,
        )

    async def _send_response(self, stream: _Stream, resp: ApiResponse) -> None:
        headers = [(":status", str(resp.status))]
        headers += [
            (k.lower(), v) for k, v in resp.headers.items() if k.lower() not in _CONNECTION_HEADERS
        ]
        if resp.stream is None:
            if not any(k == "content-length" for k, _ in headers):
                headers.append(("content-length", str(len(resp.body))))
            self._h2.send_headers(stream.id, headers, end_stream=not resp.body)
            self._flush()
            if resp.body:
                await self._send_data(stream, resp.body, end_stream=True)
            return
        task = asyncio.current_task()
        assert task is not None
        self._tracker.streaming(task, lambda: self.reset_stream(stream.id))
        try:
            self._h2.send_headers(stream.id, headers)
            self._flush()
            async for chunk in resp.stream:
                await self._send_data(stream, chunk)
            await self._send_data(stream, b"", end_stream=True)
        except asyncio.CancelledError:
            # Ended by the server (shutdown): end the stream cleanly if the client still
            # listens, as kube-apiserver ends its watches.
            self._end_quietly(stream.id)
            raise
        finally:
            self._tracker.done(task)
            aclose = getattr(resp.stream, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()

    async def _send_data(self, stream: _Stream, data: bytes, *, end_stream: bool = False) -> None:
        view = memoryview(data)
        while view:
            await self._writable.wait()
            if self._closed:
                raise ConnectionResetError("connection closed")
            window = self._h2.local_flow_control_window(stream.id)
            if window <= 0:
                stream.window.clear()
                await stream.window.wait()
                continue
            size = min(window, len(view), self._h2.max_outbound_frame_size)
            self._h2.send_data(stream.id, bytes(view[:size]))
            view = view[size:]
            self._flush()
        if end_stream:
            if self._closed:
                raise ConnectionResetError("connection closed")
            self._h2.end_stream(stream.id)
            self._flush()

    def _end_quietly(self, stream_id: int) -> None:
        if self._closed:
            return
        with contextlib.suppress(h2.exceptions.H2Error):
            self._h2.end_stream(stream_id)
            self._flush()

    def _flush(self) -> None:
        data = self._h2.data_to_send()
        if data and self._transport is not None and not self._transport.is_closing():
            self._transport.write(data)

    def _close_transport(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()


def _too_large(limit: int) -> ApiResponse:
    message = f"request body too large: limit is {limit} bytes"
    return ApiResponse(413, message.encode(), {"Content-Type": "text/plain; charset=utf-8"})
