"""Make httpcore's HTTP/2 connections fit for watches: one reader per connection, and streams
reset when abandoned.

The agent multiplexes every request and watch to one API server over one HTTP/2 connection,
as client-go does. httpcore (under httpx) has two flaws that only long-lived streams expose:

- **Starved requests.** httpcore reads the connection from whichever request task holds its
  read lock, one network read per turn, and a task queued for the lock must wait its turn
  even when another task's read has already delivered its response. When the turn goes to a
  watch whose stream is quiet, that watch blocks in a read that returns only when the server
  sends something, so a request whose answer has arrived waits until some watch gets an event
  or a bookmark: seconds to minutes. `install()` replaces the turn-taking with one reader task
  per connection that reads as data comes and wakes the streams it delivered to, as Go's
  HTTP/2 transport does. A stream's read timeout applies to that stream; it also stops new
  requests from using the connection (it may be dead), where httpcore failed every stream on it.
- **Abandoned streams.** A response closed before its end (a watch the agent stops, a read
  timeout, a cancelled request) is forgotten without a word to the server: no RST_STREAM
  (encode/httpcore#943, closed as wontfix). The server goes on streaming into it until its own
  timeout, and the data it sends is never acknowledged: httpcore grants every stream a 16 MiB
  window, as large as the whole connection's, so one abandoned busy watch can stall every
  request on the connection for good. `install()` resets such a stream with CANCEL and
  acknowledges what was received for it but never read.

Both are patches of httpcore's AsyncHTTP2Connection internals (`_receive_events`,
`_response_closed`, `aclose`), applied once per process; httpcore is pinned to 1.0.x for
that, and tests/agent/kube/test_http2_streams.py proves the behaviour against the emulator's HTTP/2
front, so an httpcore release that changes them fails there rather than in a member cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable
from typing import Any

import h2.errors
import h2.events
import h2.exceptions
from httpcore import ConnectionNotAvailable, ReadError, ReadTimeout, RemoteProtocolError
from httpcore._async.http2 import AsyncHTTP2Connection

_INSTALLED = "_karmada_agent_http2_patched"
_READER = "_karmada_agent_reader"
_STREAM_EVENTS = (
    h2.events.ResponseReceived,
    h2.events.DataReceived,
    h2.events.StreamEnded,
    h2.events.StreamReset,
)


class _NoTimeouts:
    """Stands in for the request httpcore takes its write timeout from."""

    extensions: dict[str, Any] = {}


def install() -> None:
    """Patch httpcore's HTTP/2 connections of this process (idempotent)."""
    if getattr(AsyncHTTP2Connection, _INSTALLED, False):
        return
    original_closed = AsyncHTTP2Connection._response_closed
    original_aclose = AsyncHTTP2Connection.aclose

    @functools.wraps(original_closed)
    async def response_closed(self: AsyncHTTP2Connection, stream_id: int) -> None:
        await _cancel_if_open(self, stream_id)
        await original_closed(self, stream_id)

    @functools.wraps(original_aclose)
    async def aclose(self: AsyncHTTP2Connection) -> None:
        reader: _Reader | None = getattr(self, _READER, None)
        if reader is not None:
            reader.stop()
        await original_aclose(self)

    AsyncHTTP2Connection._receive_events = _receive_events  # type: ignore[method-assign]
    AsyncHTTP2Connection._response_closed = response_closed  # type: ignore[method-assign]
    AsyncHTTP2Connection.aclose = aclose  # type: ignore[method-assign]
    setattr(AsyncHTTP2Connection, _INSTALLED, True)


# --- one reader per connection ---------------------------------------------------------------


class _Reader:
    """Reads one connection until it ends, and tells waiting streams that frames came."""

    def __init__(self, connection: AsyncHTTP2Connection) -> None:
        self._connection = connection
        self.frames_read = asyncio.Event()
        self.reads = 0
        self._task = asyncio.create_task(self._run(), name="http2-reader")
        self._background: set[asyncio.Task[None]] = set()

    def stop(self) -> None:
        self._task.cancel()
        for task in self._background:
            task.cancel()

    def _wake(self) -> None:
        self.reads += 1
        woken, self.frames_read = self.frames_read, asyncio.Event()
        woken.set()

    async def _run(self) -> None:
        connection = self._connection
        try:
            while True:
                data = await connection._network_stream.read(connection.READ_NUM_BYTES, None)
                if data == b"":
                    raise RemoteProtocolError("Server disconnected")
                for event in connection._h2_state.receive_data(data):
                    self._dispatch(event)
                # Acknowledgements h2 queued (SETTINGS, PING, flow control).
                await _flush(connection)
                self._wake()
        except asyncio.CancelledError:
            # Closed by httpcore (aclose): streams still waiting end as on a dropped connection.
            self._fail(ReadError("the HTTP/2 connection was closed"))
            raise
        except Exception as exc:
            self._fail(exc)

    def _fail(self, exc: Exception) -> None:
        connection = self._connection
        if connection._read_exception is None:
            connection._read_exception = exc
        connection._connection_error = True
        self._wake()

    def _dispatch(self, event: h2.events.Event) -> None:
        connection = self._connection
        if isinstance(event, h2.events.RemoteSettingsChanged):
            # It may wait for stream slots that only this reader can free: not inline.
            task = asyncio.create_task(connection._receive_remote_settings_change(event))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        elif isinstance(event, _STREAM_EVENTS):
            pending = connection._events.get(event.stream_id)
            if pending is not None:
                pending.append(event)
        elif isinstance(event, h2.events.ConnectionTerminated):
            connection._connection_terminated = event


async def _receive_events(
    self: AsyncHTTP2Connection, request: Any, stream_id: int | None = None
) -> None:
    """httpcore's contract: return once `stream_id` has events (any stream: once more frames
    were read), raising what ended the connection."""
    reader: _Reader | None = getattr(self, _READER, None)
    if reader is None:
        reader = _Reader(self)
        setattr(self, _READER, reader)
    timeout = request.extensions.get("timeout", {}).get("read")
    reads_before = reader.reads
    try:
        async with asyncio.timeout(timeout):
            while True:
                if stream_id is not None and self._events.get(stream_id):
                    return
                if stream_id is None and reader.reads != reads_before:
                    return
                _raise_if_ended(self, stream_id)
                await reader.frames_read.wait()
    except TimeoutError:
        # A connection silent this long may be dead: no new requests on it.
        self._connection_error = True
        raise ReadTimeout(f"no data for {timeout} s on HTTP/2 stream {stream_id}") from None


def _raise_if_ended(connection: AsyncHTTP2Connection, stream_id: int | None) -> None:
    terminated = connection._connection_terminated
    if terminated is not None:
        last_stream_id = terminated.last_stream_id
        if stream_id and last_stream_id and stream_id > last_stream_id:
            connection._request_count -= 1
            raise ConnectionNotAvailable()
        raise RemoteProtocolError(terminated)
    if connection._read_exception is not None:
        raise connection._read_exception


# --- abandoned streams --------------------------------------------------------------------


async def _cancel_if_open(connection: AsyncHTTP2Connection, stream_id: int) -> None:
    state = connection._h2_state
    pending = connection._events.get(stream_id, [])
    unread = sum(
        event.flow_controlled_length or 0
        for event in pending
        if isinstance(event, h2.events.DataReceived)
    )
    stream = state.streams.get(stream_id)
    reset = stream is not None and not stream.closed
    if not reset and not unread:
        return
    with contextlib.suppress(h2.exceptions.H2Error):
        if reset:
            state.reset_stream(stream_id, h2.errors.ErrorCodes.CANCEL)
        if unread:
            state.acknowledge_received_data(unread, stream_id)
    # A broken connection is httpcore's to report on its next use, not here.
    with contextlib.suppress(Exception):
        await _flush(connection)


async def _flush(connection: AsyncHTTP2Connection) -> None:
    """Write what h2 has queued, with no write timeout (the request's is for its own data)."""
    write: Callable[[Any], Awaitable[None]] = connection._write_outgoing_data
    await write(_NoTimeouts())
