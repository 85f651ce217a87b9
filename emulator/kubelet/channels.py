"""The streams of one exec or attach, over either wire the API server offers for them.

- WebSocket, `v5.channel.k8s.io` / `v4.channel.k8s.io`: every binary message starts with its
  channel (0 stdin, 1 stdout, 2 stderr, 3 error: the final Status as JSON, 4 resize: a JSON
  `{"Width": w, "Height": h}`); v5 adds 255, the close signal (`[255, channel]`: the client
  is done sending on that channel, i.e. stdin's end of file).
- SPDY/3.1, `v4.channel.k8s.io` in `X-Stream-Protocol-Version`: the client opens one stream per
  channel, named by its `streamtype` header (error, stdin, stdout, stderr, resize); each
  closes as a stream closes.

Either way the Status goes out last, after all output, and then the connection closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from typing import Any, Protocol

from .spdy import SpdySession, SpdyStream
from .websocket import WebSocket

STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
V5, V4 = "v5.channel.k8s.io", "v4.channel.k8s.io"
# The kubelet's streamCreationTimeout: how long the client has to open its SPDY streams.
STREAM_CREATION_TIMEOUT = 30.0


@dataclass(frozen=True)
class Wanted:
    """Which streams the request asked for (its stdin/stdout/stderr/tty query flags)."""

    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool


class Streams(Protocol):
    resizes: asyncio.Queue[tuple[int, int]]
    # Set once the client's connection is gone.
    gone: asyncio.Event

    async def read_stdin(self) -> bytes:
        """What the client typed next; b"" at its end."""
        ...

    async def write(self, channel: int, data: bytes) -> None: ...

    async def finish(self, status: dict[str, Any]) -> None:
        """The final Status on the error channel, after everything else; then close."""
        ...


def _size(raw: bytes) -> tuple[int, int] | None:
    try:
        size = json.loads(raw)
        return int(size.get("Width", 0)), int(size.get("Height", 0))
    except (ValueError, TypeError, AttributeError):
        return None


def status_json(status: dict[str, Any]) -> bytes:
    return json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, **status}).encode()


class WebSocketStreams:
    def __init__(self, socket: WebSocket, protocol: str) -> None:
        self.socket = socket
        self.protocol = protocol
        self.resizes: asyncio.Queue[tuple[int, int]] = asyncio.Queue()
        self._stdin: asyncio.Queue[bytes] = asyncio.Queue()
        self.gone = asyncio.Event()
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        try:
            while (message := await self.socket.receive()) is not None:
                if not message:
                    continue
                channel, data = message[0], message[1:]
                if channel == STDIN and data:
                    self._stdin.put_nowait(data)
                elif channel == RESIZE:
                    size = _size(data)
                    if size is not None:
                        self.resizes.put_nowait(size)
                elif channel == CLOSE and self.protocol == V5 and data[:1] == bytes([STDIN]):
                    self._stdin.put_nowait(b"")
        except ConnectionError:
            pass
        finally:
            self._stdin.put_nowait(b"")
            self.gone.set()

    async def read_stdin(self) -> bytes:
        data = await self._stdin.get()
        if not data:
            self._stdin.put_nowait(b"")  # the end stays the end
        return data

    async def write(self, channel: int, data: bytes) -> None:
        await self.socket.send(bytes([channel]) + data)

    async def finish(self, status: dict[str, Any]) -> None:
        with contextlib.suppress(ConnectionError):
            await self.socket.send(bytes([ERROR]) + status_json(status))
        await self.socket.close()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


class SpdyStreams:
    """The streams of an exec over SPDY, once the client has opened all it asked for."""

    def __init__(self, session: SpdySession, streams: dict[str, SpdyStream]) -> None:
        self.session = session
        self.streams = streams
        self.resizes: asyncio.Queue[tuple[int, int]] = asyncio.Queue()
        self.gone = session.closed
        self._resize_reader = None
        if "resize" in streams:
            self._resize_reader = asyncio.ensure_future(self._read_resizes(streams["resize"]))

    @classmethod
    async def open(cls, session: SpdySession, wanted: Wanted) -> SpdyStreams:
        """Accept the streams the request named (the error stream always; resize with a TTY)."""
        names = {"error"}
        names |= {n for n, on in (("stdin", wanted.stdin), ("stdout", wanted.stdout)) if on}
        if wanted.stderr and not wanted.tty:
            names.add("stderr")
        if wanted.tty:
            names.add("resize")
        streams: dict[str, SpdyStream] = {}
        async with asyncio.timeout(STREAM_CREATION_TIMEOUT):
            while not names <= streams.keys():
                stream = await session.accept()
                if stream is None:
                    raise ConnectionResetError("the client went away before opening its streams")
                streams[stream.headers.get("streamtype", "")] = stream
        for name, stream in streams.items():
            if name not in ("stdin", "resize"):
                stream.stop_reading()
        return cls(session, streams)

    async def _read_resizes(self, stream: SpdyStream) -> None:
        decoder, buffered = json.JSONDecoder(), ""
        while data := await stream.read():
            buffered += data.decode(errors="replace")
            while buffered.strip():
                try:
                    size, end = decoder.raw_decode(buffered.lstrip())
                except ValueError:
                    break
                buffered = buffered.lstrip()[end:]
                if isinstance(size, dict):
                    found = _size(json.dumps(size).encode())
                    if found is not None:
                        self.resizes.put_nowait(found)

    async def read_stdin(self) -> bytes:
        stream = self.streams.get("stdin")
        return await stream.read() if stream is not None else b""

    async def write(self, channel: int, data: bytes) -> None:
        name = "stdout" if channel == STDOUT else "stderr"
        stream = self.streams.get(name)
        if stream is not None:
            await stream.write(data)

    async def finish(self, status: dict[str, Any]) -> None:
        with contextlib.suppress(ConnectionError):
            for name in ("stdout", "stderr"):
                if name in self.streams:
                    await self.streams[name].close()
            error = self.streams["error"]
            await error.write(status_json(status))
            await error.close()
        if self._resize_reader is not None:
            self._resize_reader.cancel()
        await self.session.close()
