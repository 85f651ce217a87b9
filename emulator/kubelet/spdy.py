"""The server end of a SPDY/3.1 connection, as the kubelet (and kube-apiserver in front of it)
speaks it to client-go's spdy round tripper (moby/spdystream underneath).

Only what that peer uses: the client opens every stream (SYN_STREAM with its headers, answered
by an empty SYN_REPLY), data both ways in DATA frames, a half-close as an empty DATA frame with
FIN, RST_STREAM, PING (answered with the same id) and GOAWAY. Header blocks are zlib-compressed
against the SPDY/3 dictionary, one compression context per direction for the whole connection,
each block ending in a sync flush. spdystream does no flow control: WINDOW_UPDATE and SETTINGS
from the client are read and ignored, and none is sent.

The connection is any byte stream with `read`/`write`/`drain`/`close` (`wire.RawConnection`):
the upgraded TLS connection, or the bytes a WebSocket carries (port-forward tunneled over
WebSocket, `SPDY/3.1+portforward.k8s.io`).
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import zlib
from collections import deque

from ..wire import RawConnection

VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = (
    1, 2, 3, 4, 6, 7, 8, 9,
)  # fmt: skip
FLAG_FIN = 0x01
# RST_STREAM status codes.
PROTOCOL_ERROR, CANCEL = 1, 5
# What a DATA frame carries at most from this side (the kubelet copies in 32 KiB buffers).
DATA_CHUNK = 32 * 1024
# Bytes a stream buffers from the client before reading the connection waits for its reader.
STREAM_BUFFER = 1024 * 1024

# The dictionary's header names and values, each written with its length before it.
_WORDS = (
    "options head post put delete trace accept accept-charset accept-encoding accept-language "
    "accept-ranges age allow authorization cache-control connection content-base content-encoding "
    "content-language content-length content-location content-md5 content-range content-type date "
    "etag expect expires from host if-match if-modified-since if-none-match if-range "
    "if-unmodified-since last-modified location max-forwards pragma proxy-authenticate "
    "proxy-authorization range referer retry-after server te trailer transfer-encoding upgrade "
    "user-agent vary via warning www-authenticate method get status"
)
_MORE_WORDS = "version HTTP/1.1 url public set-cookie keep-alive origin"
_HEADER_NAMES = [*_WORDS.split(), "200 OK", *_MORE_WORDS.split()]
_DICTIONARY_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request"
    "401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented"
    "503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, "
    "Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,application/xml,"
    "application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age=gzip,deflate,sdch"
    "charset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)
# The SPDY/3 header compression dictionary (1423 bytes; its SHA-256 is pinned by a test).
DICTIONARY = (
    b"".join(struct.pack(">I", len(n)) + n.encode() for n in _HEADER_NAMES)
    + _DICTIONARY_TAIL.encode()
)


class ProtocolError(Exception):
    """The client sent something that is not SPDY/3.1."""


def encode_headers(headers: dict[str, str]) -> bytes:
    """An uncompressed header block: the count, then each name and value with its length."""
    out = [struct.pack(">I", len(headers))]
    for name, value in headers.items():
        raw_name, raw_value = name.lower().encode(), value.encode()
        out += [struct.pack(">I", len(raw_name)), raw_name, struct.pack(">I", len(raw_value))]
        out.append(raw_value)
    return b"".join(out)


def decode_headers(block: bytes) -> dict[str, str]:
    """A header block's pairs (several values of one name, NUL-separated, are kept joined)."""
    try:
        (count,) = struct.unpack_from(">I", block, 0)
        at, headers = 4, {}
        for _ in range(count):
            (length,) = struct.unpack_from(">I", block, at)
            name = block[at + 4 : at + 4 + length].decode()
            at += 4 + length
            (length,) = struct.unpack_from(">I", block, at)
            headers[name.lower()] = block[at + 4 : at + 4 + length].decode()
            at += 4 + length
    except (struct.error, UnicodeDecodeError) as exc:
        raise ProtocolError(f"malformed header block: {exc}") from None
    return headers


def control_frame(kind: int, flags: int, payload: bytes) -> bytes:
    return struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(payload)) + payload


def data_frame(stream_id: int, flags: int, payload: bytes) -> bytes:
    return struct.pack(">II", stream_id & 0x7FFFFFFF, (flags << 24) | len(payload)) + payload


class SpdyStream:
    """One stream the client opened: its headers, what it sends, and this side's half."""

    def __init__(self, session: SpdySession, stream_id: int, headers: dict[str, str]) -> None:
        self.session = session
        self.id = stream_id
        self.headers = headers
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self._remote_done = False
        self._readable = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self.local_closed = False
        self._discard = False

    # --- from the client ------------------------------------------------------------------

    def _feed(self, data: bytes) -> None:
        if self._remote_done or self._discard or not data:
            return
        self._chunks.append(data)
        self._buffered += len(data)
        self._readable.set()
        if self._buffered >= STREAM_BUFFER:
            self._room.clear()

    def _finish_remote(self) -> None:
        self._remote_done = True
        self._readable.set()
        self._room.set()

    def stop_reading(self) -> None:
        """Nothing reads this stream any more: what the client still sends on it is dropped
        (and never holds up the connection)."""
        self._discard = True
        self._chunks.clear()
        self._buffered = 0
        self._room.set()

    async def _wait_for_room(self) -> None:
        await self._room.wait()

    async def read(self) -> bytes:
        """What the client sent next; b"" once it half-closed (or reset) the stream."""
        while not self._chunks and not self._remote_done:
            self._readable.clear()
            await self._readable.wait()
        if not self._chunks:
            return b""
        data = self._chunks.popleft()
        self._buffered -= len(data)
        if self._buffered < STREAM_BUFFER:
            self._room.set()
        return data

    # --- to the client --------------------------------------------------------------------

    async def write(self, data: bytes) -> None:
        if self.local_closed:
            raise ConnectionResetError(f"stream {self.id} is closed")
        for at in range(0, len(data), DATA_CHUNK):
            await self.session.send(data_frame(self.id, 0, data[at : at + DATA_CHUNK]))

    async def close(self) -> None:
        """Half-close this side (an empty DATA frame with FIN)."""
        if self.local_closed:
            return
        self.local_closed = True
        with contextlib.suppress(ConnectionError):
            await self.session.send(data_frame(self.id, FLAG_FIN, b""))

    async def reset(self, status: int = CANCEL) -> None:
        self.local_closed = True
        self._finish_remote()
        with contextlib.suppress(ConnectionError):
            await self.session.send(
                control_frame(RST_STREAM, 0, struct.pack(">II", self.id, status))
            )


class SpdySession:
    """The server end of one SPDY/3.1 connection: `accept()` hands out the streams the client
    opens, in order; `run()` (started by `start()`) reads the connection."""

    def __init__(self, conn: RawConnection) -> None:
        self.conn = conn
        self._compress = zlib.compressobj(zlib.Z_BEST_COMPRESSION, zlib.DEFLATED, 15, 9,
                                          zlib.Z_DEFAULT_STRATEGY, DICTIONARY)  # fmt: skip
        self._decompress = zlib.decompressobj(zdict=DICTIONARY)
        self._streams: dict[int, SpdyStream] = {}
        self._opened: asyncio.Queue[SpdyStream | None] = asyncio.Queue()
        self._buffer = bytearray()
        self._last_stream = 0
        self._reader: asyncio.Task[None] | None = None
        self.closed = asyncio.Event()

    def start(self) -> None:
        self._reader = asyncio.ensure_future(self.run())

    async def accept(self) -> SpdyStream | None:
        """The next stream the client opened; None once the connection is gone."""
        if self.closed.is_set() and self._opened.empty():
            return None
        return await self._opened.get()

    async def send(self, frame: bytes) -> None:
        if self.closed.is_set():
            raise ConnectionResetError("the SPDY connection is closed")
        self.conn.write(frame)
        await self.conn.drain()

    async def close(self) -> None:
        """GOAWAY, then wait (briefly) for the client to close its end, then close: closing
        first with the client's bytes unread would reset the connection under its last
        reads."""
        with contextlib.suppress(ConnectionError):
            await self.send(control_frame(GOAWAY, 0, struct.pack(">II", self._last_stream, 0)))
        if self._reader is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.closed.wait()), 5.0)
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                await self._reader
        self._end()
        self.conn.close()

    # --- reading --------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            while True:
                data = await self.conn.read()
                if not data:
                    return
                self._buffer += data
                await self._frames()
        except ProtocolError:
            with contextlib.suppress(ConnectionError):
                await self.send(control_frame(GOAWAY, 0, struct.pack(">II", self._last_stream, 1)))
        except ConnectionError:
            return
        finally:
            self._end()

    def _end(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        for stream in self._streams.values():
            stream._finish_remote()
        self._opened.put_nowait(None)

    async def _frames(self) -> None:
        while len(self._buffer) >= 8:
            first, flags_length = struct.unpack_from(">II", self._buffer, 0)
            length = flags_length & 0xFFFFFF
            if len(self._buffer) < 8 + length:
                return
            payload = bytes(self._buffer[8 : 8 + length])
            del self._buffer[: 8 + length]
            flags = flags_length >> 24
            if first & 0x80000000:
                if (first >> 16) & 0x7FFF != VERSION:
                    raise ProtocolError(f"unsupported SPDY version {(first >> 16) & 0x7FFF}")
                await self._control(first & 0xFFFF, flags, payload)
            else:
                await self._data(first & 0x7FFFFFFF, flags, payload)

    async def _control(self, kind: int, flags: int, payload: bytes) -> None:
        if kind == SYN_STREAM:
            if len(payload) < 10:
                raise ProtocolError("short SYN_STREAM")
            stream_id = struct.unpack_from(">I", payload, 0)[0] & 0x7FFFFFFF
            headers = decode_headers(self._inflate(payload[10:]))
            if stream_id % 2 == 0 or stream_id <= self._last_stream:
                await self.send(
                    control_frame(RST_STREAM, 0, struct.pack(">II", stream_id, PROTOCOL_ERROR))
                )
                return
            self._last_stream = stream_id
            stream = SpdyStream(self, stream_id, headers)
            self._streams[stream_id] = stream
            await self.send(control_frame(SYN_REPLY, 0, struct.pack(">I", stream_id)
                                          + self._deflate(encode_headers({}))))  # fmt: skip
            if flags & FLAG_FIN:
                stream._finish_remote()
            self._opened.put_nowait(stream)
        elif kind == RST_STREAM and len(payload) >= 4:
            stream_id = struct.unpack_from(">I", payload, 0)[0] & 0x7FFFFFFF
            found = self._streams.pop(stream_id, None)
            if found is not None:
                found.local_closed = True
                found._finish_remote()
        elif kind == PING and len(payload) == 4:
            await self.send(control_frame(PING, 0, payload))
        elif kind == GOAWAY:
            raise ConnectionResetError("the client went away")
        elif kind == HEADERS:
            self._inflate(payload[4:])  # keeps the compression context in step
        # SETTINGS and WINDOW_UPDATE: spdystream does no flow control; nothing to do.

    async def _data(self, stream_id: int, flags: int, payload: bytes) -> None:
        stream = self._streams.get(stream_id)
        if stream is None:
            return
        stream._feed(payload)
        if flags & FLAG_FIN:
            stream._finish_remote()
        else:
            await stream._wait_for_room()

    def _inflate(self, block: bytes) -> bytes:
        try:
            return self._decompress.decompress(block)
        except zlib.error as exc:
            raise ProtocolError(f"header block does not decompress: {exc}") from None

    def _deflate(self, block: bytes) -> bytes:
        return self._compress.compress(block) + self._compress.flush(zlib.Z_SYNC_FLUSH)
