"""A protocol-faithful test double of ANP's proxy-server in http-connect mode, destHost strategy.

Behaves as the stock server does where a client or an agent can observe it
(pkg/server/server.go, tunnel.go, desthost_backend_manager.go):

- agents connect on the agent port (`AgentService.Connect`, see agent_server.py); each call is a
  backend registered under its `host`, `ipv4` and `ipv6` identifiers; the first backend of a host
  that is not draining is chosen (a DRAIN packet marks it);
- the HTTP CONNECT frontend (plain, as the stock server offers it on its unix socket; here on TCP
  or a unix socket) turns `CONNECT host:port` into DIAL_REQ{tcp, host:port, random} to the chosen
  agent, answers 200 after DIAL_RSP, or the stock server's error answers: 500 "currently no
  tunnels available" without an agent for the host, 502 (or 504 for timeouts) with the agent's
  dial error;
- then bytes both ways as DATA packets (at most 32 KiB each), CLOSE_REQ to the agent when the
  client closes, and the client's connection closed on CLOSE_RSP (or when the agent's call ends).

Every DIAL_REQ address and every answer is recorded for tests (`dials`, `dial_errors`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
import ssl
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..https import server_ssl_context
from ..pki import CertificateAuthority
from . import packets
from .agent_server import AgentCall, AgentServer, Authenticate
from .packets import Pkt, pkt

READ_CHUNK = 32 * 1024
_ids = itertools.count(1)


@dataclass
class Backend:
    call: AgentCall
    draining: bool = False
    established: dict[int, asyncio.StreamWriter] = field(default_factory=dict)


def _status_for(error: str) -> tuple[int, str]:
    lower = error.lower()
    if "timeout" in lower or "deadline exceeded" in lower:
        return 504, "Gateway Timeout"
    return 502, "Bad Gateway"


class ProxyServerDouble:
    def __init__(
        self,
        ca: CertificateAuthority,
        *,
        cluster_ca_pem: bytes | None = None,
        authenticate: Authenticate | None = None,
        server_id: str | None = None,
        server_count: int = 1,
        server_names: Sequence[str] = ("localhost",),
        uds_path: str | None = None,
    ) -> None:
        cert, key = ca.issue(
            "konnectivity-server", dns_names=server_names, ips=["127.0.0.1"], usage="server"
        )
        context = server_ssl_context(cert, key, cluster_ca_pem)
        if cluster_ca_pem is not None:
            context.verify_mode = ssl.CERT_REQUIRED  # as --cluster-ca-cert: mTLS required
        self.server_id = server_id or f"double-{next(_ids)}"
        self.agents = AgentServer(
            server_id=self.server_id,
            server_count=server_count,
            ssl_context=context,
            on_call=self._serve_agent,
            authenticate=authenticate,
        )
        self.uds_path = uds_path
        self.backends: dict[str, list[Backend]] = {}
        self.pending: dict[int, tuple[Backend, asyncio.Future[Pkt]]] = {}
        self.dials: list[str] = []
        self.dial_errors: list[str] = []
        self.agent_calls = 0
        self._frontend: asyncio.Server | None = None
        self._frontend_tasks: set[asyncio.Task[None]] = set()

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self, agent_port: int = 0, connect_port: int = 0) -> ProxyServerDouble:
        await self.agents.start(port=agent_port)
        if self.uds_path:
            self._frontend = await asyncio.start_unix_server(self._serve_client, self.uds_path)
        else:
            self._frontend = await asyncio.start_server(
                self._serve_client, "127.0.0.1", connect_port, reuse_address=True
            )
        return self

    async def restart(self) -> None:
        """Stop (GOAWAY to the agents, every tunnelled connection cut) and serve again on the
        same ports, as a restarted proxy-server behind its Service."""
        agent_port = self.agents.port
        connect_port = 0 if self.uds_path else self.connect_port
        await self.stop()
        self.backends.clear()
        await self.start(agent_port, connect_port)

    async def stop(self) -> None:
        if self._frontend is not None:
            self._frontend.close()
        for task in list(self._frontend_tasks):
            task.cancel()
        await self.agents.stop()
        if self._frontend is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._frontend.wait_closed(), 2.0)

    async def dial(self, host: str, address: str) -> Pkt:
        """Send DIAL_REQ{tcp, address} to the agent registered for `host`, whatever the
        address (a test hook: the stock server would route by the address's own host), and
        return its answer."""
        backend = self._backend_for(host)
        if backend is None:
            raise LookupError(f"no agent for {host}")
        random = secrets.randbits(63)
        answer: asyncio.Future[Pkt] = asyncio.get_running_loop().create_future()
        self.pending[random] = (backend, answer)
        await backend.call.send(
            pkt(packets.DIAL_REQ, protocol="tcp", address=address, random=random)
        )
        return await answer

    async def __aenter__(self) -> ProxyServerDouble:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def agent_address(self) -> str:
        return f"127.0.0.1:{self.agents.port}"

    @property
    def connect_port(self) -> int:
        assert self._frontend is not None
        return int(self._frontend.sockets[0].getsockname()[1])

    @property
    def connect_url(self) -> str:
        return f"http://127.0.0.1:{self.connect_port}"

    def hosts(self) -> list[str]:
        return sorted(self.backends)

    # --- agents ----------------------------------------------------------------------------

    def _keys(self, call: AgentCall) -> list[str]:
        return [v for kind in ("ipv4", "ipv6", "host") for v in call.identifiers.get(kind, [])]

    async def _serve_agent(self, call: AgentCall) -> None:
        self.agent_calls += 1
        backend = Backend(call)
        for key in self._keys(call):
            self.backends.setdefault(key, []).append(backend)
        try:
            while (message := await call.recv()) is not None:
                await self._on_packet(backend, message)
        finally:
            for key in self._keys(call):
                listed = self.backends.get(key, [])
                if backend in listed:
                    listed.remove(backend)
                if not listed:
                    self.backends.pop(key, None)
            for writer in backend.established.values():
                writer.transport.abort()
            for random, (owner, future) in list(self.pending.items()):
                if owner is backend and not future.done():
                    future.set_result(pkt(packets.DIAL_CLS, random=random))

    async def _on_packet(self, backend: Backend, message: Pkt) -> None:
        """As the stock server's serveRecvBackend: one packet at a time, a client that does
        not read holds up this agent's call (and so, by flow control, the agent)."""
        kind = message.type
        if kind in (packets.DIAL_RSP, packets.DIAL_CLS):
            waiting = self.pending.pop(message.get("random"), None)
            if waiting is not None and not waiting[1].done():
                waiting[1].set_result(message)
        elif kind == packets.DATA:
            writer = backend.established.get(message.get("connectID"))
            if writer is not None:
                writer.write(message.get("data"))
                with contextlib.suppress(ConnectionError):
                    await writer.drain()
        elif kind == packets.CLOSE_RSP:
            writer = backend.established.pop(message.get("connectID"), None)
            if writer is not None:
                writer.close()
        elif kind == packets.DRAIN:
            backend.draining = True

    def _backend_for(self, host: str) -> Backend | None:
        candidates = self.backends.get(host, [])
        return next(
            (b for b in candidates if not b.draining), candidates[0] if candidates else None
        )

    # --- clients (the CONNECT frontend) ----------------------------------------------------

    async def _serve_client(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._frontend_tasks.add(task)
        try:
            await self._tunnel(reader, writer)
        except (ConnectionError, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            self._frontend_tasks.discard(task)
            writer.close()

    async def _tunnel(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        method, target, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
        if method != "CONNECT":
            writer.write(
                b"HTTP/1.1 405 Method Not Allowed\r\nContent-Type: text/plain; charset=utf-8\r\n"
                b"\r\nthis proxy only supports CONNECT passthrough\n"
            )
            return
        self.dials.append(target)
        host = target.rsplit(":", 1)[0].strip("[]")
        backend = self._backend_for(host)
        if backend is None:
            writer.write(
                b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\n\r\n"
                b"currently no tunnels available: No agent available"
            )
            return
        random = secrets.randbits(63)
        answer: asyncio.Future[Pkt] = asyncio.get_running_loop().create_future()
        self.pending[random] = (backend, answer)
        await backend.call.send(
            pkt(packets.DIAL_REQ, protocol="tcp", address=target, random=random)
        )
        try:
            response = await answer
        finally:
            self.pending.pop(random, None)
        error = response.get("error") if response.type == packets.DIAL_RSP else "dial closed"
        if error:
            self.dial_errors.append(error)
            code, text = _status_for(error)
            body = error.encode()
            writer.write(
                f"HTTP/1.1 {code} {text}\r\nContent-Length: {len(body)}\r\n"
                "Content-Type: text/plain; charset=utf-8\r\n\r\n".encode()
                + body
            )
            return
        connect_id = response.get("connectID")
        backend.established[connect_id] = writer
        writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        try:
            while data := await reader.read(READ_CHUNK):
                await backend.call.send(pkt(packets.DATA, connectID=connect_id, data=data))
        finally:
            if backend.established.pop(connect_id, None) is not None:
                with contextlib.suppress(ConnectionError):
                    await backend.call.send(pkt(packets.CLOSE_REQ, connectID=connect_id))
