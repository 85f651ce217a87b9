"""One relayed connection: the control plane's TLS session for the route, ended here, carried
on to the member API server over a TLS connection of its own.

Bytes from the proxy-server (DATA packets) queue up to `QUEUE_PACKETS`; a full queue makes the
session stop reading its stream, so HTTP/2 flow control slows the proxy-server and, behind it,
the control plane's client (the konnectivity agent blocks the same way). Towards the control
plane, DATA packets are handed to the stream without waiting for each to be written, up to
`WINDOW_BYTES` in flight (agent.tunnel.window): the member is read on while they go out, and
what one connection holds stays bounded; all connections of one call together hold at most
`CALL_WINDOW_BYTES`, so the stream cap's memory bound holds too. If the control plane's side
goes first, what of it has not been written is withdrawn. When
either side ends, the other is closed, the control plane gets our close_notify, and CLOSE_RSP
tells the proxy-server the connection is gone (as the konnectivity agent does on both ends).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Callable

from agent.logs import get_logger
from agent.tunnel import packets
from agent.tunnel.member import MEMBER_READ, MemberDialError, MemberEndpoint
from agent.tunnel.packets import Packet
from agent.tunnel.terminator import TlsClosed, TlsTerminator
from agent.tunnel.window import SendWindow

# DATA packets waiting for the member (the konnectivity agent's --xfr-channel-size is 150).
QUEUE_PACKETS = 150
# The proxy-server reads 32 KiB at a time; DATA packets towards it are no larger.
PACKET_BYTES = 32 * 1024
# DATA of one connection handed to the stream and not yet written (see the module docstring).
WINDOW_BYTES = 256 * 1024
# The same for all connections of one gRPC call together (500 streams at 256 KiB would be 125 MiB).
CALL_WINDOW_BYTES = 8 * 1024 * 1024

log = get_logger(__name__)

# Hands a packet to the stream; the future is done once it was written (see GrpcCall.submit).
Submit = Callable[[Packet], asyncio.Future[None]]


class PacketTls:
    """The control plane's TLS session for the route, over the DATA packets of one connection."""

    def __init__(
        self,
        connect_id: int,
        *,
        server_context: ssl.SSLContext,
        submit: Submit,
        call_window: SendWindow,
    ) -> None:
        """`call_window` is shared by every connection of the call (see `CALL_WINDOW_BYTES`)."""
        self.connect_id = connect_id
        self._tls = TlsTerminator(server_context)
        self._submit = submit
        self._window = SendWindow(WINDOW_BYTES)
        self._call_window = call_window
        self._incoming: asyncio.Queue[bytes | None] = asyncio.Queue(QUEUE_PACKETS)
        self.bytes_in = 0
        self.bytes_out = 0

    async def deliver(self, data: bytes) -> None:
        """Bytes from the proxy-server; waits while the queue is full (backpressure)."""
        await self._incoming.put(data)

    def end_of_input(self) -> None:
        """The proxy-server closed its side (CLOSE_REQ); what is queued still goes out."""
        with contextlib.suppress(asyncio.QueueFull):
            self._incoming.put_nowait(None)

    async def _send(self, packet: Packet) -> None:
        await self._submit(packet)

    async def _flush(self) -> None:
        """What the TLS session has for the control plane, as DATA, once the window has room.
        Taken and handed over with no wait in between, so two tasks flushing keep the order."""
        if not self._tls.has_outgoing:
            return
        await self._window.admit()
        await self._call_window.admit()
        out = self._tls.outgoing()
        if not out:
            return  # the other direction's flush took it while this one waited
        # In packets of equal size: no small remainder costing a packet of its own.
        count = -(-len(out) // PACKET_BYTES)
        size = -(-len(out) // count)
        for start in range(0, len(out), size):
            chunk = out[start : start + size]
            self.bytes_out += len(chunk)
            written = self._submit(packets.data(self.connect_id, chunk))
            self._window.track(written, len(chunk))
            self._call_window.track(written, len(chunk))

    async def _handshake(self) -> bool:
        while not self._tls.handshake():
            await self._flush()
            chunk = await self._incoming.get()
            if chunk is None:
                return False
            self.bytes_in += len(chunk)
            self._tls.feed(chunk)
        await self._flush()
        return True


class Relay(PacketTls):
    def __init__(
        self,
        connect_id: int,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        member: MemberEndpoint,
        server_context: ssl.SSLContext,
        submit: Submit,
        call_window: SendWindow,
    ) -> None:
        super().__init__(
            connect_id, server_context=server_context, submit=submit, call_window=call_window
        )
        self._reader = reader
        self._writer = writer
        self._member = member
        self._member_tls: TlsTerminator | None = None

    async def run(self) -> None:
        """Relay until either side ends; then close both and send CLOSE_RSP."""
        error = ""
        try:
            if await self._handshake():
                self._member_tls = await self._member.secure(
                    self._reader, self._writer, self._tls.alpn_protocol or "http/1.1"
                )
                await self._pump()
        except MemberDialError as exc:
            error = str(exc)
            log.warning("tunnel connection failed", connect_id=self.connect_id, error=error)
        except ssl.SSLError as exc:
            error = f"TLS with the control plane failed: {exc.reason or exc}"
            log.info("tunnel connection refused at TLS", connect_id=self.connect_id, error=error)
        except (ConnectionError, OSError) as exc:
            error = str(exc)
        finally:
            self._writer.transport.abort()
            with contextlib.suppress(Exception):
                await self._send(packets.close_response(self.connect_id, error))

    async def _pump(self) -> None:
        towards_member = asyncio.create_task(self._to_member())
        towards_control_plane = asyncio.create_task(self._to_control_plane())
        try:
            await asyncio.wait(
                {towards_member, towards_control_plane}, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            if not towards_control_plane.done():
                self._window.withdraw()  # the control plane's side has gone
            for task in (towards_member, towards_control_plane):
                task.cancel()
            for task in (towards_member, towards_control_plane):
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        # Surface a failure of either direction (the other was only cancelled).
        for task in (towards_member, towards_control_plane):
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]

    async def _to_member(self) -> None:
        while True:
            # First what is buffered already: the request often arrives in the same packet as
            # the client's last handshake message.
            try:
                plaintext = self._tls.read()
            except TlsClosed:
                return
            finally:
                await self._flush()  # key updates, alerts
            if plaintext:
                assert self._member_tls is not None
                self._member_tls.write(plaintext)
                self._writer.write(self._member_tls.outgoing())
                await self._writer.drain()
            chunk = await self._incoming.get()
            if chunk is None:
                return
            self.bytes_in += len(chunk)
            self._tls.feed(chunk)

    async def _to_control_plane(self) -> None:
        member = self._member_tls
        assert member is not None
        while ciphertext := await self._reader.read(MEMBER_READ):
            member.feed(ciphertext)
            try:
                plaintext = member.read()
            except TlsClosed:
                break
            finally:
                if reply := member.outgoing():  # key updates, alerts
                    self._writer.write(reply)
            if plaintext:
                self._tls.write(plaintext)
                await self._flush()
        self._tls.close()
        await self._flush()
