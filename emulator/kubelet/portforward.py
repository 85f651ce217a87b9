"""pods/portforward over SPDY (`portforward.k8s.io`), as the kubelet serves it: for each
connection the client forwards it opens two streams sharing a `requestid` and naming the
`port` (`streamtype: error` and `streamtype: data`); the data stream is joined to a connection
to that port in the pod, a failure is written on the error stream, and both close when the
forwarded connection ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib

from ..registry import JSON
from .ports import PortServers
from .spdy import SpdySession, SpdyStream

PROTOCOL = "portforward.k8s.io"
READ_SIZE = 32 * 1024


async def serve(session: SpdySession, pod: JSON, servers: PortServers) -> None:
    """Forward every connection the client opens until it closes the session."""
    pending: dict[str, dict[str, SpdyStream]] = {}
    forwards: set[asyncio.Task[None]] = set()
    try:
        while (stream := await session.accept()) is not None:
            request = stream.headers.get("requestid", "")
            kind = stream.headers.get("streamtype", "")
            if kind not in ("error", "data"):
                await stream.reset()
                continue
            pair = pending.setdefault(request, {})
            pair[kind] = stream
            if len(pair) == 2:
                del pending[request]
                task = asyncio.ensure_future(_forward(pair["error"], pair["data"], pod, servers))
                forwards.add(task)
                task.add_done_callback(forwards.discard)
    finally:
        for task in list(forwards):
            task.cancel()
        await asyncio.gather(*forwards, return_exceptions=True)
        await session.close()


def _sandbox_id(pod: JSON) -> str:
    return hashlib.sha256(str(pod["metadata"].get("uid", "")).encode()).hexdigest()


async def _forward(error: SpdyStream, data: SpdyStream, pod: JSON, servers: PortServers) -> None:
    error.stop_reading()
    port_text = data.headers.get("port", "")
    sandbox = _sandbox_id(pod)
    meta = pod["metadata"]
    where = f"pod {sandbox}, uid {meta.get('uid', '')}"
    try:
        port = int(port_text)
        if not 0 < port < 65536:
            raise ValueError
    except ValueError:
        await _fail(error, data, f'invalid port "{port_text}"')
        return
    address = await servers.address(pod, port)
    refused = (
        f"error forwarding port {port} to {where}: failed to connect to localhost:{port} "
        f'inside namespace "{sandbox}", IPv4: dial tcp4 127.0.0.1:{port}: connect: '
        "connection refused "
    )
    if address is None:
        await _fail(error, data, refused)
        return
    try:
        reader, writer = await asyncio.open_connection(*address)
    except OSError:
        await _fail(error, data, refused)
        return

    async def upstream() -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while chunk := await data.read():
                writer.write(chunk)
                await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()

    async def downstream() -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while chunk := await reader.read(READ_SIZE):
                await data.write(chunk)
        await data.close()

    # The pod's side closing ends the forward, as the kubelet's copy does: the client waits for
    # the error stream to close before it lets the connection go.
    sending = asyncio.ensure_future(upstream())
    try:
        await downstream()
        await error.close()
        await sending
    finally:
        sending.cancel()
        writer.close()
        data.stop_reading()
        await error.close()


async def _fail(error: SpdyStream, data: SpdyStream, message: str) -> None:
    with contextlib.suppress(ConnectionError):
        await error.write(message.encode())
        await error.close()
        await data.close()
    data.stop_reading()
