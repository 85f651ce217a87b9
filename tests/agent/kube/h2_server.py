"""A bare HTTP/2 server on the `h2` state machine: it answers every request at once (status 200,
`answer_headers`), and the test makes every other move: send, acknowledge what it received (or
not), send trailers or GOAWAY; it records what arrived."""

from __future__ import annotations

import asyncio
import collections
import ssl
from collections.abc import Sequence

import h2.config
import h2.connection
import h2.events

from emulator.https import server_ssl_context
from emulator.pki import CertificateAuthority


class ScriptedH2Server:
    def __init__(self) -> None:
        self.ca = CertificateAuthority.generate("test-ca")
        cert, key = self.ca.issue("h2", ips=("127.0.0.1",), usage="server")
        self._ssl = server_ssl_context(cert, key, None)
        self._server: asyncio.Server | None = None
        self._transport: asyncio.Transport | None = None
        self.conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        )
        self.answer_headers: list[tuple[str, str]] = []
        self.requests: list[int] = []
        self.received: collections.Counter[int] = collections.Counter()
        self._unacknowledged: collections.Counter[int] = collections.Counter()
        self.pings = 0
        self.ping_acks = 0

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cadata=self.ca.cert_pem.decode())
        context.set_alpn_protocols(["h2"])
        return context

    async def __aenter__(self) -> ScriptedH2Server:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self._ssl)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._transport is not None:
            self._transport.abort()
        assert self._server is not None
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._transport = writer.transport  # type: ignore[assignment]
        self.conn.initiate_connection()
        self.flush()
        while data := await reader.read(65536):
            for event in self.conn.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    self.requests.append(event.stream_id)
                    self.conn.send_headers(
                        event.stream_id, [(":status", "200"), *self.answer_headers]
                    )
                elif isinstance(event, h2.events.DataReceived):
                    self.received[event.stream_id] += len(event.data)
                    self._unacknowledged[event.stream_id] += event.flow_controlled_length
                elif isinstance(event, h2.events.PingReceived):
                    self.pings += 1
                elif isinstance(event, h2.events.PingAckReceived):
                    self.ping_acks += 1
            self.flush()

    def flush(self) -> None:
        assert self._transport is not None
        self._transport.write(self.conn.data_to_send())

    # --- moves -----------------------------------------------------------------------------

    def send(self, stream_id: int, data: bytes) -> int:
        """Send what the client's windows allow of `data`; how much that was."""
        sent = 0
        while sent < len(data):
            room = min(
                self.conn.local_flow_control_window(stream_id),
                self.conn.max_outbound_frame_size,
                len(data) - sent,
            )
            if room <= 0:
                break
            self.conn.send_data(stream_id, data[sent : sent + room])
            sent += room
        self.flush()
        return sent

    def acknowledge(self, stream_id: int) -> None:
        """Give back the window of everything received on the stream so far."""
        unacknowledged, self._unacknowledged[stream_id] = self._unacknowledged[stream_id], 0
        self.conn.acknowledge_received_data(unacknowledged, stream_id)
        self.flush()

    def end_with_trailers(self, stream_id: int, trailers: Sequence[tuple[str, str]]) -> None:
        self.conn.send_headers(stream_id, list(trailers), end_stream=True)
        self.flush()

    def ping(self) -> None:
        """The ACK (`ping_acks`) says the client has processed every frame sent before."""
        self.conn.ping(b"12345678")
        self.flush()

    def goaway(self, last_stream_id: int) -> None:
        self.conn.close_connection(last_stream_id=last_stream_id)
        self.flush()
