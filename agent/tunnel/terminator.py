"""TLS over bytes the caller moves: `ssl.MemoryBIO` pairs hold the ciphertext on both sides:
`feed` what came in, take `outgoing()` to send back, `read()` the plaintext, `write()` plaintext
out.

Server side, it ends the control plane's TLS session for the route name, whose bytes arrive in
konnectivity DATA packets (the certificate comes from the cluster's tunnel CA,
agent.tunnel.route_ca). Client side, it is the second hop to the member API server, over a
plain TCP connection: asyncio's own TLS transport keeps a 256 KiB read buffer per connection,
which a thousand idle watches through the tunnel would hold for nothing.
"""

from __future__ import annotations

import contextlib
import ssl

# The largest plaintext taken out of the TLS session at once.
READ_SIZE = 64 * 1024


class TlsClosed(Exception):  # noqa: N818 - an end, not a failure
    """The peer ended its TLS session (close_notify)."""


class TlsTerminator:
    def __init__(self, context: ssl.SSLContext, *, server_hostname: str | None = None) -> None:
        """Server side; client side (verifying `server_hostname`) when one is given."""
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(
            self._incoming,
            self._outgoing,
            server_side=server_hostname is None,
            server_hostname=server_hostname,
        )
        self.handshake_done = False

    def feed(self, ciphertext: bytes) -> None:
        self._incoming.write(ciphertext)

    def feed_eof(self) -> None:
        self._incoming.write_eof()

    @property
    def has_outgoing(self) -> bool:
        return self._outgoing.pending > 0

    def outgoing(self) -> bytes:
        """Ciphertext to send to the peer (handshake messages, records, alerts)."""
        return self._outgoing.read()

    def handshake(self) -> bool:
        """Advance the handshake with what was fed; True once it is complete. Raises
        ssl.SSLError when the peer's hello or certificate is refused (or, client side, the
        server's certificate)."""
        if self.handshake_done:
            return True
        try:
            self._tls.do_handshake()
        except ssl.SSLWantReadError:
            return False
        self.handshake_done = True
        return True

    @property
    def alpn_protocol(self) -> str | None:
        return self._tls.selected_alpn_protocol()

    def read(self) -> bytes:
        """All the plaintext the fed records hold (b"" when a record is still incomplete).
        Raises TlsClosed after the peer's close_notify."""
        chunks: list[bytes] = []
        while True:
            try:
                chunk = self._tls.read(READ_SIZE)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                if chunks:
                    break  # the plaintext first; the next read reports the end
                raise TlsClosed from None
            if not chunk:
                if chunks:
                    break
                raise TlsClosed
            chunks.append(chunk)
        return b"".join(chunks)

    def write(self, plaintext: bytes) -> None:
        view = memoryview(plaintext)
        while view:
            written = self._tls.write(view)
            view = view[written:]

    def close(self) -> None:
        """Queue our close_notify (take it with `outgoing()`)."""
        # Our alert is written whether or not the peer's has arrived; it is not awaited.
        with contextlib.suppress(ssl.SSLError):
            self._tls.unwrap()
