"""One `AgentService.Connect` call to one proxy-server instance: the packets of every relayed
connection multiplexed on it.

DIAL_REQ -> the dial policy, the stream cap, then a TCP dial of the member API server ->
DIAL_RSP{random, connectID} (or DIAL_RSP{random, error} for an address that is not the route).
Beyond the cap, or with the member API server not answering, the dial is accepted and the agent
answers the request itself with a Status saying so (agent.tunnel.refusal). DATA -> the
connection's relay; CLOSE_REQ -> the relay ends (CLOSE_RSP follows from it; an unknown
connectID gets CLOSE_RSP with an error at once, as the konnectivity agent answers); DIAL_CLS ->
a dial still pending is abandoned. When the call ends, every connection on it is closed.
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
from agent.tunnel.limits import StreamLimit
from agent.tunnel.member import MemberDialError, MemberEndpoint
from agent.tunnel.metrics import SEGMENT_FROM_AGENT, SEGMENT_TO_AGENT, TunnelMetrics
from agent.tunnel.packets import Packet, PacketError, PacketType
from agent.tunnel.refusal import Answer, Refusal, member_unreachable, stream_cap_reached
from agent.tunnel.relay import CALL_WINDOW_BYTES, PacketTls, Relay
from agent.tunnel.route import DialPolicy
from agent.tunnel.window import SendWindow

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
        http1_context: Callable[[], ssl.SSLContext],
        metrics: TunnelMetrics,
        limit: StreamLimit,
        cluster: str,
    ) -> None:
        self.stream = stream
        self.server_id = server_id
        self._policy = policy
        self._member = member
        self._server_context = server_context
        self._http1_context = http1_context
        self._metrics = metrics
        self._limit = limit
        self._cluster = cluster
        self._next_connect_id = 0
        self.relays: dict[int, PacketTls] = {}
        self._dials: dict[int, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        # DATA handed to the call by every connection, not yet written (agent.tunnel.relay).
        self._in_flight = SendWindow(CALL_WINDOW_BYTES)
        self.idle = asyncio.Event()
        self.idle.set()

    def submit(self, packet: Packet) -> asyncio.Future[None]:
        """Hand `packet` to the call; the future is done once it was written."""
        written = self.stream.submit(packets.encode(packet))
        self._metrics.packet(SEGMENT_FROM_AGENT, packet.type)
        return written

    async def send(self, packet: Packet) -> None:
        await self.submit(packet)

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
        if not self._limit.acquire():
            self._metrics.refused_streams.inc()
            answer = stream_cap_reached(self._cluster, self._limit.limit)
            if self._limit.first_refusal():
                log.warning(
                    "tunnel stream cap reached; connections beyond it are refused (429) until "
                    "one closes (karmada_agent_tunnel_refused_streams_total counts them)",
                    max_streams=self._limit.limit,
                )
            if self._limit.may_answer_refusal():
                self._spawn(self._answer(request, answer), f"answer-{request.random}")
            else:
                error = packets.dial_response(request.random, error=answer.message)
                self._spawn(self.send(error), "refuse")
            return
        self._dials[request.random] = self._spawn(self._dial(request), f"dial-{request.random}")

    def _new_connect_id(self) -> int:
        self._next_connect_id += 1
        return self._next_connect_id

    async def _dial(self, request: Packet) -> None:
        started = time.monotonic()
        try:
            reader, writer = await self._member.dial()
        except MemberDialError as exc:
            self._limit.release()
            self._dials.pop(request.random, None)
            reason = "timeout" if "timeout" in str(exc) else "unknown"
            self._metrics.dial_failures.labels(reason).inc()
            log.info("member API server dial failed", address=self._member.address, error=str(exc))
            if self._limit.may_answer_refusal():
                answer = member_unreachable(self._cluster, self._member.address, str(exc))
                await self._answer(request, answer)
            else:
                with contextlib.suppress(GrpcError):
                    await self.send(packets.dial_response(request.random, error=str(exc)))
            return
        except asyncio.CancelledError:
            self._limit.release()
            return  # DIAL_CLS, or the call ended
        self._dials.pop(request.random, None)
        self._metrics.dial_duration.observe(time.monotonic() - started)
        connect_id = self._new_connect_id()
        relay = Relay(
            connect_id,
            reader,
            writer,
            member=self._member,
            server_context=self._server_context(),
            submit=self.submit,
            call_window=self._in_flight,
        )
        try:
            await self._carry(relay, request.random)
        except GrpcError:
            writer.transport.abort()
        finally:
            self._limit.release()

    async def _answer(self, request: Packet, answer: Answer) -> None:
        """Accept the dial and answer the request ourselves (agent.tunnel.refusal)."""
        self._limit.refusing += 1
        try:
            refusal = Refusal(
                self._new_connect_id(),
                answer,
                server_context=self._http1_context(),
                submit=self.submit,
                call_window=self._in_flight,
            )
            with contextlib.suppress(GrpcError):
                await self._carry(refusal, request.random)
        finally:
            self._limit.refusing -= 1

    async def _carry(self, connection: Relay | Refusal, random: int) -> None:
        """DIAL_RSP for `connection`, then run it until it ends."""
        connect_id = connection.connect_id
        self.relays[connect_id] = connection
        self.idle.clear()
        self._metrics.open_endpoint_connections.inc()
        try:
            await self.send(packets.dial_response(random, connect_id=connect_id))
            await connection.run()
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
