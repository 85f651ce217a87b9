"""The in-process front: an httpx transport that calls the emulator's handler directly.

`httpx.AsyncClient(transport=EmulatorTransport(api), base_url="https://emulator")`
talks to the same request chain as the HTTPS server, without TLS or sockets, so
unit tests are fast. Streaming responses (watch) stay streams: each chunk reaches
the client as the server produces it.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator
from urllib.parse import parse_qs

import httpx

from .https import Handler, ResponseWithFollowUp
from .wire import ApiRequest

# Bounded like a socket buffer: a client that stops reading stalls the producer.
_STREAM_BUFFER = 256


class _Dropped:
    pass


_DROPPED = _Dropped()
_END = object()


class _PumpedStream(httpx.AsyncByteStream):
    """Reads the server's stream in its own task, so that the "connection" can be cut
    (drop, offline) while the client waits for the next chunk."""

    def __init__(self, source: AsyncIterator[bytes]) -> None:
        self._source = source
        self._queue: asyncio.Queue[object] = asyncio.Queue(_STREAM_BUFFER)
        self._pump = asyncio.create_task(self._run())

    async def _run(self) -> None:
        try:
            async for chunk in self._source:
                await self._queue.put(chunk)
        except Exception as exc:
            await self._queue.put(exc)
            return
        finally:
            aclose = getattr(self._source, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()
        await self._queue.put(_END)

    @property
    def finished(self) -> bool:
        return self._pump.done()

    def drop(self) -> None:
        self._pump.cancel()
        # Make room so the marker always fits; the client loses unread data, as on a reset.
        while not self._queue.empty():
            self._queue.get_nowait()
        self._queue.put_nowait(_DROPPED)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            item = await self._queue.get()
            if isinstance(item, bytes):
                yield item
            elif item is _END:
                return
            elif isinstance(item, _Dropped):
                raise httpx.RemoteProtocolError(
                    "peer closed connection without sending complete message body"
                )
            else:
                raise httpx.ReadError(f"stream failed: {item!r}")

    async def aclose(self) -> None:
        self._pump.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._pump


class EmulatorTransport(httpx.AsyncBaseTransport):
    """An httpx transport over `handler.handle` (an ApiServer or the control router).

    `peer_cert_der` plays the TLS client certificate (already "verified"); `headers`
    are added to every request unless the request sets them (e.g. Authorization).
    """

    def __init__(
        self,
        api: Handler,
        *,
        peer_cert_der: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self._api = api
        self._peer_cert_der = peer_cert_der
        self._headers = {k.lower(): v for k, v in (headers or {}).items()}
        self._streams: weakref.WeakSet[_PumpedStream] = weakref.WeakSet()
        self._follow_ups: set[asyncio.Task[None]] = set()
        self.offline = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.offline:
            raise httpx.ConnectError("[Errno 111] Connect call failed", request=request)
        body = await request.aread()
        headers = dict(self._headers)
        for key, value in request.headers.multi_items():
            name = key.lower()
            if name in headers and name not in self._headers:
                headers[name] += ", " + value
            else:
                headers[name] = value
        url = request.url
        req = ApiRequest(
            method=request.method,
            path=url.path,
            query=parse_qs(url.query.decode("ascii"), keep_blank_values=True),
            headers=headers,
            body=body,
            peer_cert_der=self._peer_cert_der,
            remote="127.0.0.1:0",
        )
        resp = await self._api.handle(req)
        if resp.upgraded is not None:
            raise httpx.UnsupportedProtocol(
                "an upgraded connection (101) needs a socket: use the emulator's HTTPS front"
            )
        out_headers = [(k, v) for k, v in resp.headers.items() if k.lower() != "content-length"]
        if resp.stream is not None:
            stream = _PumpedStream(resp.stream)
            self._streams.add(stream)
            out_headers.append(("Transfer-Encoding", "chunked"))
            return httpx.Response(resp.status, headers=out_headers, stream=stream, request=request)
        out_headers.append(("Content-Length", str(len(resp.body))))
        response = httpx.Response(
            resp.status, headers=out_headers, content=resp.body, request=request
        )
        if isinstance(resp, ResponseWithFollowUp) and resp.then is not None:
            task = asyncio.create_task(resp.then())
            self._follow_ups.add(task)
            task.add_done_callback(self._follow_ups.discard)
        return response

    # The same fault surface as the HTTPS server (see faults.Front).

    async def go_offline(self) -> None:
        self.offline = True
        await self.drop_streams()

    async def come_back(self) -> None:
        self.offline = False

    async def drop_streams(self) -> int:
        streams = [s for s in self._streams if not s.finished]
        for stream in streams:
            stream.drop()
        self._streams = weakref.WeakSet()
        return len(streams)

    async def aclose(self) -> None:
        for stream in list(self._streams):
            await stream.aclose()
        for task in list(self._follow_ups):
            task.cancel()
        await asyncio.gather(*self._follow_ups, return_exceptions=True)
