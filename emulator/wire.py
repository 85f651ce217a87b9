"""Framework-neutral request and response types of the emulator's request chain.

Both fronts (the aiohttp HTTPS server and the in-process httpx transport) translate
to and from these, so that authentication, authorization, faults, accounting and
the REST handlers are written once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import parse_qs


@dataclass(frozen=True)
class UserInfo:
    """An authenticated identity, as kube-apiserver's user.Info."""

    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"username": self.name, "groups": list(self.groups)}
        if self.uid:
            out["uid"] = self.uid
        if self.extra:
            out["extra"] = {k: list(v) for k, v in self.extra.items()}
        return out


SYSTEM_ADMIN = UserInfo("system:apiserver", ("system:masters", "system:authenticated"))


@dataclass
class ApiRequest:
    method: str
    path: str
    query: dict[str, list[str]] = field(default_factory=dict)
    # Header names are lower-case.
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    # DER of the TLS client certificate, when one was presented and verified against the CA.
    peer_cert_der: bytes | None = None
    remote: str = ""
    # Filled in by the authentication step.
    user: UserInfo | None = None
    # Filled in by the request-info step (an emulator.requestinfo.RequestAttributes).
    attributes: Any = None

    @classmethod
    def from_target(cls, method: str, target: str, **kw: Any) -> ApiRequest:
        path, _, qs = target.partition("?")
        return cls(
            method=method.upper(), path=path, query=parse_qs(qs, keep_blank_values=True), **kw
        )

    def param(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[-1] if values else default

    def flag(self, name: str) -> bool:
        value = self.param(name)
        return value is not None and value.lower() in ("true", "1", "")

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";", 1)[0].strip().lower()


class RawConnection(Protocol):
    """A client connection after 101 Switching Protocols: bytes both ways."""

    async def read(self) -> bytes:
        """The next bytes the client sent; b"" once it closed."""
        ...

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None:
        """Wait until the client takes what was written (backpressure)."""
        ...

    def close(self) -> None: ...


@dataclass
class ApiResponse:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    # A streaming body (watch): each chunk is written and flushed as it comes.
    stream: AsyncIterator[bytes] | None = None
    # A 101 answer to an upgrade request (exec, attach, port-forward): after the head, this
    # owns the connection until it returns. HTTP/1.1 only, as upgrades are.
    upgraded: Callable[[RawConnection], Awaitable[None]] | None = None

    def replace_body(self, body: bytes) -> None:
        """A new body in place of the old: a Content-Length the old one carried (an answer
        proxied from an aggregated API server) goes, and each front writes the new length."""
        self.body = body
        for name in [k for k in self.headers if k.lower() == "content-length"]:
            del self.headers[name]
