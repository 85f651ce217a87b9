"""The server end of a WebSocket (RFC 6455) on an upgraded connection, framed by wsproto.

The handshake request has already been read by the HTTPS front; `handshake_headers` answers it
(101 with `Sec-WebSocket-Accept` and the chosen subprotocol), and `WebSocket` then carries whole
binary messages both ways: pings are answered, a close is answered and ends the connection.
`TunneledBytes` reads and writes the messages as one byte stream (SPDY tunneled over a
WebSocket, as kubectl >= 1.30 sends port-forward).
"""

from __future__ import annotations

import asyncio
import contextlib

from wsproto.connection import Connection, ConnectionState, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Ping, TextMessage
from wsproto.utilities import ProtocolError, generate_accept_token

from ..wire import ApiRequest, RawConnection

NORMAL_CLOSURE = 1000


def is_websocket_upgrade(req: ApiRequest) -> bool:
    return (
        "websocket" in req.headers.get("upgrade", "").lower()
        and "upgrade" in req.headers.get("connection", "").lower()
    )


def offered_protocols(req: ApiRequest) -> list[str]:
    value = req.headers.get("sec-websocket-protocol", "")
    return [p.strip() for p in value.split(",") if p.strip()]


def handshake_headers(req: ApiRequest, protocol: str) -> dict[str, str]:
    """The 101 answer's headers for a WebSocket upgrade that chose `protocol`."""
    key = req.headers.get("sec-websocket-key", "")
    return {
        "Upgrade": "websocket",
        "Connection": "Upgrade",
        "Sec-WebSocket-Accept": generate_accept_token(key.encode()).decode(),
        "Sec-WebSocket-Protocol": protocol,
    }


class WebSocket:
    """Whole messages over one upgraded connection (server side)."""

    def __init__(self, raw: RawConnection) -> None:
        self.raw = raw
        self._ws = Connection(ConnectionType.SERVER)
        self._pending: list[bytes] = []
        self._partial = bytearray()
        self._closed = False
        # Set once the client's close (or the end of the connection) has been read.
        self.peer_closed = asyncio.Event()

    async def receive(self) -> bytes | None:
        """The next binary (or text) message's bytes; None once the connection closed."""
        while not self._pending:
            if self._closed:
                self.peer_closed.set()
                return None
            data = await self.raw.read()
            try:
                self._ws.receive_data(data or None)
                await self._handle_events()
            except ProtocolError:
                self._closed = True
                return None
            if not data:
                self._closed = True
        return self._pending.pop(0)

    async def _handle_events(self) -> None:
        for event in self._ws.events():
            if isinstance(event, BytesMessage | TextMessage):
                chunk = event.data.encode() if isinstance(event.data, str) else bytes(event.data)
                self._partial += chunk
                if event.message_finished:
                    self._pending.append(bytes(self._partial))
                    self._partial.clear()
            elif isinstance(event, Ping):
                await self._write(self._ws.send(event.response()))
            elif isinstance(event, CloseConnection):
                if self._ws.state == ConnectionState.REMOTE_CLOSING:
                    await self._write(self._ws.send(event.response()))
                self._closed = True

    async def send(self, data: bytes) -> None:
        if self._ws.state != ConnectionState.OPEN:
            raise ConnectionResetError("the WebSocket is closed")
        await self._write(self._ws.send(BytesMessage(data=data)))

    async def _write(self, frame: bytes) -> None:
        self.raw.write(frame)
        await self.raw.drain()

    async def close(self, code: int = NORMAL_CLOSURE, reason: str = "") -> None:
        """Send a close frame, wait (briefly) for the client's answer, which the task reading
        the socket sees, then close the connection: closing with the client's bytes unread
        would reset the connection under its last reads."""
        with contextlib.suppress(ConnectionError):
            if self._ws.state == ConnectionState.OPEN:
                await self._write(self._ws.send(CloseConnection(code=code, reason=reason)))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.peer_closed.wait(), 5.0)
        self._closed = True
        self.raw.close()


class TunneledBytes:
    """A byte stream (wire.RawConnection) over a WebSocket's binary messages."""

    def __init__(self, socket: WebSocket) -> None:
        self.socket = socket
        self._out: list[bytes] = []

    async def read(self) -> bytes:
        while True:
            message = await self.socket.receive()
            if message is None:
                return b""
            if message:
                return message

    def write(self, data: bytes) -> None:
        self._out.append(data)

    async def drain(self) -> None:
        while self._out:
            data = self._out.pop(0)
            await self.socket.send(data)

    def close(self) -> None:
        self.socket.raw.close()
