"""The agent's own member API server as the tunnel's only destination.

Dialled in two steps, so the proxy-server hears back (DIAL_RSP) as soon as the member answers
and the second hop's TLS can offer exactly the protocol the control plane's TLS session chose
(ALPN h2 or http/1.1): upgrades (exec, attach, port-forward) need HTTP/1.1 end to end, and a
connection must not speak h2 on one side and HTTP/1.1 on the other. The member is verified
with the CA of the agent's member configuration, and no client credential is presented: the
request's own bearer token and Impersonate-* headers decide, so member RBAC decides.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ssl
from urllib.parse import urlsplit

from agent.kube.config import ClientConfig
from agent.kube.transport import build_ssl_context
from agent.tunnel.terminator import TlsTerminator

# As ANP's agent: a member that does not accept within this many seconds is a failed dial.
DIAL_TIMEOUT = 5.0
ALPN_PROTOCOLS = ("h2", "http/1.1")
# What is read from the member's socket at once: up to four TLS records, taken out of the
# session together and so relayed in fewer, fuller packets.
MEMBER_READ = 64 * 1024


class MemberDialError(Exception):
    pass


class MemberEndpoint:
    def __init__(self, config: ClientConfig, *, dial_timeout: float = DIAL_TIMEOUT) -> None:
        parts = urlsplit(config.host)
        if parts.scheme != "https" or not parts.hostname:
            raise ValueError(
                f"the tunnel needs the member API server over https, not {config.host!r}"
            )
        self.host = parts.hostname
        self.port = parts.port or 443
        self.server_hostname = config.tls_server_name or parts.hostname
        self.dial_timeout = dial_timeout
        anonymous = dataclasses.replace(
            config, client_cert_pem=None, client_key_pem=None, token_source=None
        )
        self._contexts: dict[str, ssl.SSLContext] = {}
        for protocol in ALPN_PROTOCOLS:
            ctx = build_ssl_context(anonymous)
            ctx.set_alpn_protocols([protocol])
            self._contexts[protocol] = ctx

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def dial(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            return await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port), self.dial_timeout
            )
        except TimeoutError:
            raise MemberDialError(f"dial tcp {self.address}: i/o timeout") from None
        except OSError as exc:
            raise MemberDialError(f"dial tcp {self.address}: {exc.strerror or exc}") from exc

    async def secure(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, protocol: str
    ) -> TlsTerminator:
        """TLS on the dialled connection, offering only `protocol`: the session, whose
        ciphertext the caller moves over `reader` and `writer` (see agent.tunnel.terminator)."""
        ctx = self._contexts.get(protocol)
        if ctx is None:
            raise MemberDialError(f"the control plane chose {protocol!r}, which is not relayed")
        tls = TlsTerminator(ctx, server_hostname=self.server_hostname)
        try:
            async with asyncio.timeout(self.dial_timeout):
                while not tls.handshake():
                    writer.write(tls.outgoing())
                    await writer.drain()
                    ciphertext = await reader.read(MEMBER_READ)
                    if not ciphertext:
                        raise ConnectionResetError("the connection was closed in the handshake")
                    tls.feed(ciphertext)
                writer.write(tls.outgoing())
        except (OSError, ssl.SSLError, TimeoutError) as exc:
            raise MemberDialError(
                f"TLS to the member API server {self.address}: {exc or type(exc).__name__}"
            ) from exc
        chosen = tls.alpn_protocol
        if (chosen or "http/1.1") != protocol:
            raise MemberDialError(
                f"the member API server chose {chosen!r} where the control plane chose {protocol!r}"
            )
        return tls
