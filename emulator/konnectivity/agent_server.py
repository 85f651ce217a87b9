"""The server side of `AgentService.Connect` (gRPC over HTTP/2), as the stock proxy-server serves
its agent port: TLS (mTLS when a cluster CA is given, as `--cluster-ca-cert`), the agent's
`agentid`/`agentidentifiers` metadata, an optional bearer-token check (the token-review mode),
then response headers `serverid` and `servercount` and the Packet stream both ways. A refused
call gets a Trailers-Only answer with a gRPC status, as grpc-go sends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import struct
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import h2.config
import h2.connection
import h2.events
import h2.exceptions

from . import packets
from .packets import Pkt

_PREFIX = struct.Struct(">BI")
CONNECT_PATH = "/AgentService/Connect"
UNAUTHENTICATED = "16"
UNKNOWN = "2"

Authenticate = Callable[[dict[str, list[str]]], Awaitable[str | None]]
"""Metadata -> None to accept, or the error message to refuse the call with."""


@dataclass
class AgentCall:
    agent_id: str
    identifiers: dict[str, list[str]]
    metadata: dict[str, list[str]]
    _conn: _Connection
    _stream_id: int
    _messages: deque[bytes] = field(default_factory=deque)
    _buffer: bytearray = field(default_factory=bytearray)
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)
    ended: bool = False

    async def recv(self) -> Pkt | None:
        while not self._messages:
            if self.ended or self._conn.closed:
                return None
            self._arrived.clear()
            await self._arrived.wait()
        raw = self._messages.popleft()
        self._conn.acknowledge(self._stream_id, len(raw) + _PREFIX.size)
        return packets.decode(raw)

    async def send(self, pkt: Pkt) -> None:
        raw = packets.encode(pkt)
        await self._conn.send_data(self._stream_id, _PREFIX.pack(0, len(raw)) + raw)

    def _on_data(self, data: bytes) -> None:
        self._buffer += data
        while len(self._buffer) >= _PREFIX.size:
            _, length = _PREFIX.unpack_from(self._buffer)
            if len(self._buffer) < _PREFIX.size + length:
                break
            self._messages.append(bytes(self._buffer[_PREFIX.size : _PREFIX.size + length]))
            del self._buffer[: _PREFIX.size + length]
        self._arrived.set()


class _Connection:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        server: AgentServer,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.server = server
        self.h2 = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        )
        self.calls: dict[int, AgentCall] = {}
        self.window = asyncio.Event()
        self.send_lock = asyncio.Lock()
        self.closed = False
        self.tasks: set[asyncio.Task[None]] = set()
        self.pings_received = 0

    def flush(self) -> None:
        data = self.h2.data_to_send()
        if data and not self.closed:
            self.writer.write(data)

    def acknowledge(self, stream_id: int, size: int) -> None:
        with contextlib.suppress(h2.exceptions.ProtocolError, KeyError):
            self.h2.acknowledge_received_data(size, stream_id)
            self.flush()

    async def send_data(self, stream_id: int, data: bytes) -> None:
        async with self.send_lock:
            view = memoryview(data)
            while view:
                if self.closed:
                    raise ConnectionError("the agent connection is closed")
                window = min(
                    self.h2.local_flow_control_window(stream_id), self.h2.max_outbound_frame_size
                )
                if window <= 0:
                    self.window.clear()
                    await self.window.wait()
                    continue
                chunk, view = view[:window], view[window:]
                self.h2.send_data(stream_id, chunk.tobytes())
                self.flush()
                await self.writer.drain()

    async def serve(self) -> None:
        self.h2.initiate_connection()
        self.flush()
        try:
            while data := await self.reader.read(65536):
                try:
                    events = self.h2.receive_data(data)
                except h2.exceptions.ProtocolError:
                    break
                for event in events:
                    await self._on_event(event)
                self.flush()
        except (OSError, ssl.SSLError):
            pass
        finally:
            self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for call in self.calls.values():
            call.ended = True
            call._arrived.set()
        self.window.set()
        self.writer.transport.abort()

    async def goaway(self) -> None:
        with contextlib.suppress(Exception):
            self.h2.close_connection()
            self.flush()
            await self.writer.drain()
        self.close()

    async def _on_event(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.RequestReceived):
            await self._on_request(event.stream_id, event.headers)
        elif isinstance(event, h2.events.DataReceived):
            padding = event.flow_controlled_length - len(event.data)
            if padding:
                self.acknowledge(event.stream_id, padding)
            call = self.calls.get(event.stream_id)
            if call is not None:
                call._on_data(event.data)
        elif isinstance(event, h2.events.StreamEnded | h2.events.StreamReset):
            call = self.calls.get(event.stream_id)
            if call is not None:
                call.ended = True
                call._arrived.set()
        elif isinstance(event, h2.events.WindowUpdated | h2.events.RemoteSettingsChanged):
            self.window.set()
        elif isinstance(event, h2.events.PingReceived):
            self.pings_received += 1
            self.server.pings_received += 1

    def _trailers_only(self, stream_id: int, status: str, message: str) -> None:
        self.h2.send_headers(
            stream_id,
            [
                (":status", "200"),
                ("content-type", "application/grpc"),
                ("grpc-status", status),
                ("grpc-message", message),
            ],
            end_stream=True,
        )
        self.flush()

    async def _on_request(self, stream_id: int, headers: Sequence[tuple[Any, Any]]) -> None:
        metadata: dict[str, list[str]] = {}
        for name, value in headers:
            metadata.setdefault(str(name), []).append(str(value))
        path = metadata.get(":path", [""])[0]
        if path != CONNECT_PATH:
            self._trailers_only(stream_id, "12", f"unknown method {path}")
            return
        agent_ids = metadata.get("agentid", [])
        if len(agent_ids) != 1:
            self._trailers_only(stream_id, UNKNOWN, f"expected one agent ID, got {agent_ids}")
            return
        refusal = await self.server.authenticate(metadata) if self.server.authenticate else None
        if refusal is not None:
            self.server.refused_calls += 1
            self._trailers_only(stream_id, UNKNOWN, refusal)
            return
        identifiers: dict[str, list[str]] = {}
        for raw in metadata.get("agentidentifiers", []):
            for key, values in parse_qs(raw).items():
                identifiers.setdefault(key, []).extend(values)
        call = AgentCall(agent_ids[0], identifiers, metadata, self, stream_id)
        self.calls[stream_id] = call
        self.h2.send_headers(
            stream_id,
            [
                (":status", "200"),
                ("content-type", "application/grpc"),
                ("serverid", self.server.server_id),
                ("servercount", str(self.server.server_count)),
            ],
        )
        self.flush()
        task = asyncio.create_task(self._run_call(call))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _run_call(self, call: AgentCall) -> None:
        try:
            await self.server.on_call(call)
        finally:
            if not self.closed:
                with contextlib.suppress(h2.exceptions.ProtocolError, KeyError):
                    self.h2.send_headers(call._stream_id, [("grpc-status", "0")], end_stream=True)
                    self.flush()


class AgentServer:
    def __init__(
        self,
        *,
        server_id: str,
        server_count: int,
        ssl_context: ssl.SSLContext,
        on_call: Callable[[AgentCall], Awaitable[None]],
        authenticate: Authenticate | None = None,
    ) -> None:
        self.server_id = server_id
        self.server_count = server_count
        self.ssl_context = ssl_context
        self.on_call = on_call
        self.authenticate = authenticate
        self.connections: set[_Connection] = set()
        self.refused_calls = 0
        self.pings_received = 0
        self._server: asyncio.Server | None = None

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.ssl_context.set_alpn_protocols(["h2"])
        self._server = await asyncio.start_server(
            self._accept, host, port, ssl=self.ssl_context, reuse_address=True
        )

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _Connection(reader, writer, self)
        self.connections.add(conn)
        try:
            await conn.serve()
        finally:
            self.connections.discard(conn)

    async def stop(self) -> None:
        """As a server shutting down: GOAWAY to every agent, then close."""
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            await conn.goaway()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)


TokenReview = Callable[[str, str], Awaitable[dict[str, Any]]]
"""(token, audience) -> the TokenReview status from the API server."""


def token_review_authenticator(
    review: TokenReview, *, namespace: str, service_account: str, audience: str
) -> Authenticate:
    """The stock server's agent token check (`--agent-namespace`, `--agent-service-account`,
    `--authentication-audience`): one `Authorization: Bearer` value, reviewed for the audience,
    and the user must be that ServiceAccount."""

    async def authenticate(metadata: dict[str, list[str]]) -> str | None:
        values = metadata.get("authorization", [])
        if not values:
            return "Authentication context was not found in metadata"
        if len(values) > 1:
            return f"too many ({len(values)}) tokens are received"
        if not values[0].startswith("Bearer "):
            return 'received token does not have "Bearer " prefix'
        status = await review(values[0].removeprefix("Bearer "), audience)
        if status.get("error"):
            return f"lookup failed: {status['error']}"
        if not status.get("authenticated"):
            return "lookup failed: service account jwt not valid"
        parts = str((status.get("user") or {}).get("username", "")).split(":")
        if len(parts) != 4 or parts[:2] != ["system", "serviceaccount"]:
            return "lookup failed: username returned is not a service account"
        if parts[2] != namespace or parts[3] != service_account:
            return f"lookup failed: incoming request from {parts[2]}/{parts[3]}"
        return None

    return authenticate
