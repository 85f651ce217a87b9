"""A bare HTTP/2 client on the `h2` state machine, for what httpx does not expose: stream
resets, the flow-control windows a client grants, and the GOAWAY a server sends."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings


@dataclass
class StreamState:
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytearray = field(default_factory=bytearray)
    ended: bool = False
    reset: int | None = None


class RawH2Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self.conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        )
        self.streams: dict[int, StreamState] = {}
        self.goaway: h2.events.ConnectionTerminated | None = None
        self.eof = False
        # Received but not yet acknowledged, per stream: the client's flow-control debt.
        self.unacknowledged: dict[int, int] = {}
        self.auto_acknowledge = True

    @classmethod
    async def connect(
        cls, port: int, ctx: ssl.SSLContext, *, initial_window: int | None = None
    ) -> RawH2Client:
        ctx.set_alpn_protocols(["h2"])
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
        ssl_object = writer.get_extra_info("ssl_object")
        assert ssl_object.selected_alpn_protocol() == "h2"
        client = cls(reader, writer)
        if initial_window is not None:
            client.conn.local_settings = h2.settings.Settings(
                client=True,
                initial_values={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: initial_window},
            )
        client.conn.initiate_connection()
        await client.flush()
        return client

    async def flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            self._writer.write(data)
            await self._writer.drain()

    async def request(self, method: str, path: str, headers: Sequence[tuple[str, str]] = ()) -> int:
        stream_id = self.conn.get_next_available_stream_id()
        self.streams[stream_id] = StreamState()
        self.conn.send_headers(
            stream_id,
            [
                (":method", method),
                (":path", path),
                (":scheme", "https"),
                (":authority", "x"),
                *headers,
            ],
            end_stream=True,
        )
        await self.flush()
        return stream_id

    async def reset(self, stream_id: int) -> None:
        self.conn.reset_stream(stream_id, h2.errors.ErrorCodes.CANCEL)
        await self.flush()

    async def acknowledge(self, stream_id: int) -> None:
        amount = self.unacknowledged.pop(stream_id, 0)
        if amount:
            self.conn.acknowledge_received_data(amount, stream_id)
            await self.flush()

    async def read_until(self, done: Any, timeout: float = 5.0) -> None:
        """Read frames until `done()` holds (or the connection ends)."""
        async with asyncio.timeout(timeout):
            while not done():
                data = await self._reader.read(65536)
                if not data:
                    self.eof = True
                    return
                for event in self.conn.receive_data(data):
                    self._on(event)
                await self.flush()

    def _on(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.ResponseReceived):
            state = self.streams[event.stream_id]
            for name, value in event.headers or ():
                if name == ":status":
                    state.status = int(value)
                else:
                    state.headers[str(name)] = str(value)
        elif isinstance(event, h2.events.DataReceived):
            assert event.stream_id is not None
            assert event.data is not None
            self.streams[event.stream_id].body += event.data
            length = event.flow_controlled_length or 0
            if self.auto_acknowledge:
                self.conn.acknowledge_received_data(length, event.stream_id)
            else:
                self.unacknowledged[event.stream_id] = (
                    self.unacknowledged.get(event.stream_id, 0) + length
                )
        elif isinstance(event, h2.events.StreamEnded):
            assert event.stream_id is not None
            self.streams[event.stream_id].ended = True
        elif isinstance(event, h2.events.StreamReset):
            assert event.stream_id is not None
            self.streams[event.stream_id].reset = int(event.error_code or 0)
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.goaway = event

    async def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await self._writer.wait_closed()
