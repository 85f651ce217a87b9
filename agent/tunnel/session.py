"""One `AgentService.Connect` call to one proxy-server instance: the packets of every relayed
connection multiplexed on it.

DIAL_REQ -> the dial policy, then a TCP dial of the member API server -> DIAL_RSP{random,
connectID} (or DIAL_RSP{random, error}); DATA -> the connection's relay; CLOSE_REQ -> the relay
ends (CLOSE_RSP follows from it; an unknown connectID gets CLOSE_RSP with an error at once, as
the konnectivity agent answers); DIAL_CLS -> a dial still pending is abandoned. When the call
ends, every connection on it is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import Callable

from agent.logs import get_logger
from agent.tunnel import packets
from agent.tunnel.grpc_call import GrpcCall, GrpcError
from agent.tunnel.member import MemberDialError, MemberEndpoint
from agent.tunnel.metrics import SEGMENT_FROM_AGENT, SEGMENT_TO_AGENT, TunnelMetrics
from agent.tunnel.packets import Packet, PacketError, PacketType
from agent.tunnel.relay import Relay
from agent.tunnel.route import DialPolicy

log = get_logger(__name__)


class Session:
    def __init__(
        self,
        stream: GrpcCall,
        *,
        server_id: str,
        policy: DialPolicy,
        member: MemberEndpoint,
        server_context: Callable[[], ssl.SSLContext],
        metrics: TunnelMetrics,
    ) -> None:
        self.stream = stream
        self.server_id = server_id
        self._policy = policy
        self._member = member
        self._server_context = server_context
        self._metrics = metrics
        self._next_connect_id = 0
        self.relays: dict[int, Relay] = {}
        self._dials: dict[int, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.idle = asyncio.Event()
        self.idle.set()

    async def send(self, packet: Packet) -> None:
        await self.stream.send(packets.encode(packet))
        self._metrics.packet(SEGMENT_FROM_AGENT, packet.type)

    async def drain(self) -> None:
        """Ask the proxy-server to route no new dials here (the agent is going away)."""
        with contextlib.suppress(GrpcError):
            await self.send(packets.DRAIN)

    async def run(self) -> str:
        """Serve the call until it ends; the reason it ended."""
        try:
            while True:
                message = await self.stream.recv()
                if message is None:
                    return "the proxy-server ended the call"
                try:
                    packet = packets.decode(message)
                except PacketError as exc:
                    log.warning(
                        "ignored a malformed packet", server_id=self.server_id, error=str(exc)
                    )
                    continue
                self._metrics.packet(SEGMENT_TO_AGENT, packet.type)
                await self._dispatch(packet)
        except GrpcError as exc:
            return str(exc)
        finally:
            await self._close_all()
            await self.stream.close()

    async def _dispatch(self, packet: Packet) -> None:
        kind = packet.type
        if kind is PacketType.DIAL_REQ:
            self._on_dial(packet)
        elif kind is PacketType.DATA:
            relay = self.relays.get(packet.connect_id)
            if relay is not None:
                await relay.deliver(packet.data)
            elif packet.connect_id:
                await self.send(packets.close_response(packet.connect_id, "unrecognized connectID"))
        elif kind is PacketType.CLOSE_REQ:
            relay = self.relays.get(packet.connect_id)
            if relay is not None:
                relay.end_of_input()
            else:
                await self.send(packets.close_response(packet.connect_id, "Unknown connectID"))
        elif kind is PacketType.DIAL_CLS:
            dial = self._dials.pop(packet.random, None)
            if dial is not None:
                dial.cancel()

    def _spawn(self, coroutine: object, name: str) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.create_task(coroutine, name=name)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _on_dial(self, request: Packet) -> None:
        refusal = self._policy.refusal(request.protocol, request.address)
        if refusal is not None:
            self._spawn(self.send(packets.dial_response(request.random, error=refusal)), "refuse")
            return
        self._dials[request.random] = self._spawn(self._dial(request), f"dial-{request.random}")

    async def _dial(self, request: Packet) -> None:
        started = time.monotonic()
        try:
            reader, writer = await self._member.dial()
        except MemberDialError as exc:
            self._dials.pop(request.random, None)
            reason = "timeout" if "timeout" in str(exc) else "unknown"
            self._metrics.dial_failures.labels(reason).inc()
            log.info("member API server dial failed", address=self._member.address, error=str(exc))
            with contextlib.suppress(GrpcError):
                await self.send(packets.dial_response(request.random, error=str(exc)))
            return
        except asyncio.CancelledError:
            return  # DIAL_CLS, or the call ended
        self._dials.pop(request.random, None)
        self._metrics.dial_duration.observe(time.monotonic() - started)
        self._next_connect_id += 1
        connect_id = self._next_connect_id
        relay = Relay(
            connect_id,
            reader,
            writer,
            member=self._member,
            server_context=self._server_context(),
            send=self.send,
        )
        self.relays[connect_id] = relay
        self.idle.clear()
        self._metrics.open_endpoint_connections.inc()
        try:
            await self.send(packets.dial_response(request.random, connect_id=connect_id))
            await relay.run()
        except GrpcError:
            writer.transport.abort()
        finally:
            self.relays.pop(connect_id, None)
            self._metrics.open_endpoint_connections.dec()
            if not self.relays:
                self.idle.set()

    async def _close_all(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._dials.clear()
