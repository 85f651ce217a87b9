"""The agent's own answer on a connection it will not relay: a Kubernetes Status the user's
kubectl shows as it is.

A dial refused with DIAL_RSP{error} does not reach the user: the stock proxy-server answers the
CONNECT with 502 (or 503/504) and the error as its body, and karmada-aggregated-apiserver's Go
transport keeps only the status text, so kubectl shows `Error from server: Bad Gateway`. So when
the agent cannot carry a request to the member (the stream cap is reached, the member API server
does not answer), it accepts the dial, ends the control plane's TLS session for the route as for
any request (HTTP/1.1 only offered), reads the request head and answers it with a Status saying
what happened, then closes. The aggregated apiserver passes a member's answer on unchanged, so
the user sees e.g. `Error from server (TooManyRequests): the tunnel of cluster edge-7 ...`.
No Retry-After: client-go would retry ten times before the user learns anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from dataclasses import dataclass
from http import HTTPStatus

from agent.tunnel import packets
from agent.tunnel.relay import PacketTls, Submit
from agent.tunnel.terminator import TlsClosed
from agent.tunnel.window import SendWindow

# A request head larger than this, or slower than REQUEST_TIMEOUT, is not waited for.
MAX_HEAD_BYTES = 64 * 1024
REQUEST_TIMEOUT = 10.0


@dataclass(frozen=True)
class Answer:
    code: int
    reason: str  # metav1.StatusReason
    message: str

    def http(self) -> bytes:
        status = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        body = json.dumps(status, separators=(",", ":")).encode()
        head = [
            f"HTTP/1.1 {self.code} {HTTPStatus(self.code).phrase}",
            "Content-Type: application/json",
            f"Content-Length: {len(body)}",
            "Cache-Control: no-cache, private",
            "Connection: close",
        ]
        return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def stream_cap_reached(cluster: str, limit: int) -> Answer:
    return Answer(
        429,
        "TooManyRequests",
        f"the tunnel of cluster {cluster} carries at most {limit} connections at once "
        "(--tunnel-max-streams of its karmada-agent) and all are in use; try again later",
    )


def member_unreachable(cluster: str, address: str, error: str) -> Answer:
    return Answer(
        503,
        "ServiceUnavailable",
        f"the API server of cluster {cluster} ({address}) does not answer its karmada-agent: "
        f"{error}",
    )


class Refusal(PacketTls):
    """One dialled connection answered by the agent itself (see the module docstring)."""

    def __init__(
        self,
        connect_id: int,
        answer: Answer,
        *,
        server_context: ssl.SSLContext,
        submit: Submit,
        call_window: SendWindow,
    ) -> None:
        super().__init__(
            connect_id, server_context=server_context, submit=submit, call_window=call_window
        )
        self._answer = answer

    async def run(self) -> None:
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT):
                if await self._handshake() and await self._request_head():
                    self._tls.write(self._answer.http())
                    self._tls.close()
                    await self._flush()
        except (TimeoutError, ssl.SSLError, TlsClosed, ConnectionError, OSError):
            pass  # the client went away, or never asked: nothing to tell it
        finally:
            with contextlib.suppress(Exception):
                await self._send(packets.close_response(self.connect_id))

    async def _request_head(self) -> bool:
        head = b""
        while b"\r\n\r\n" not in head and len(head) < MAX_HEAD_BYTES:
            head += self._tls.read()
            await self._flush()
            if b"\r\n\r\n" in head:
                break
            chunk = await self._incoming.get()
            if chunk is None:
                return False
            self._tls.feed(chunk)
        return True
