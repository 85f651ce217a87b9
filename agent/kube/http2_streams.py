"""Cancel HTTP/2 streams whose responses are closed before their end.

httpcore (under httpx) forgets a stream whose response is closed early (a watch the agent
stops, a read timeout, a cancelled request) without telling the server: no RST_STREAM is
sent (encode/httpcore#943, closed as wontfix). The server then keeps the stream open and
goes on sending its events until its own timeout, each abandoned stream holds one of the
connection's concurrent-stream slots, and the data it receives is never acknowledged, so the
connection's flow-control window shrinks for good until every request on it stalls. client-go
resets such streams (RST_STREAM CANCEL); so does this agent, through `install()`.

`install()` wraps httpcore's AsyncHTTP2Connection._response_closed once per process: when
the stream is still open it is reset with CANCEL, and data received for it but never read
is acknowledged, before httpcore's own bookkeeping runs. It relies on httpcore's internals
(`_h2_state`, `_events`, `_write_outgoing_data`); tests/kube/test_http2_streams.py proves the
behaviour against the emulator's HTTP/2 front, so an httpcore release that changes them
fails there rather than in a member cluster.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Awaitable, Callable
from typing import Any

import h2.errors
import h2.events
import h2.exceptions
from httpcore._async.http2 import AsyncHTTP2Connection

_INSTALLED_MARK = "_karmada_agent_resets_streams"


class _NoTimeouts:
    """Stands in for the request httpcore takes its write timeout from."""

    extensions: dict[str, Any] = {}


def install() -> None:
    """Make every HTTP/2 connection of this process reset the streams it abandons."""
    original = AsyncHTTP2Connection._response_closed
    if getattr(original, _INSTALLED_MARK, False):
        return

    @functools.wraps(original)
    async def response_closed(self: AsyncHTTP2Connection, stream_id: int) -> None:
        await _cancel_if_open(self, stream_id)
        await original(self, stream_id)

    setattr(response_closed, _INSTALLED_MARK, True)
    AsyncHTTP2Connection._response_closed = response_closed  # type: ignore[method-assign]


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
    write: Callable[[Any], Awaitable[None]] = connection._write_outgoing_data
    # A broken connection is httpcore's to report on its next use, not here.
    with contextlib.suppress(Exception):
        await write(_NoTimeouts())
