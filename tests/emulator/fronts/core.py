"""The emulator's core API server behind the fronts under test, and what a test reads of it.

The fronts (the HTTPS server, the in-process transport, fault injection, accounting and the
control router) are tested in front of the real core: `Core()` is the ApiServer the emulator
builds, authenticating two bearer tokens and client certificates, without RBAC (the fronts
are under test here, not authorization). `seen` holds every request as it reached the
server's request chain; `event` makes every open watch of `watch_path()` stream a line;
`sized` gives a GET whose answer has an exact size.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import NameOID

from emulator.pki import CertificateAuthority, ServiceAccountTokenIssuer
from emulator.requestinfo import RequestAttributes
from emulator.wire import ApiRequest, UserInfo
from emulator.wiring import build_api_server
from tests import polling

NAMESPACES = "/api/v1/namespaces"
ADMIN_TOKEN = "admin-token"
USER_TOKEN = "user-token"
ADMIN = UserInfo("admin", ("system:masters", "system:authenticated"))
ALICE = UserInfo("alice", ("dev", "system:authenticated"))
# The largest ConfigMap `sized` stores: well under etcd's request limit.
_CHUNK = 1024 * 1024

_CREDENTIALS: tuple[CertificateAuthority, ServiceAccountTokenIssuer] | None = None


def core_ca() -> CertificateAuthority:
    """The CA the core trusts for client certificates (the fronts' TLS must use it too)."""
    return _credentials()[0]


def _credentials() -> tuple[CertificateAuthority, ServiceAccountTokenIssuer]:
    global _CREDENTIALS
    if _CREDENTIALS is None:
        _CREDENTIALS = (
            CertificateAuthority.generate("core-ca"),
            ServiceAccountTokenIssuer.generate(),
        )
    return _CREDENTIALS


class Core:
    def __init__(self) -> None:
        ca, tokens = _credentials()
        self.server = build_api_server(
            ca=ca,
            sa_tokens=tokens,
            static_tokens={ADMIN_TOKEN: ADMIN, USER_TOKEN: ALICE},
            authorization=False,
        )
        self.authenticate = self.server.authenticator.authenticate
        self.storage = self.server.storage
        self.admin = self.server.loopback()
        self.seen: list[ApiRequest] = []
        self.server.hooks.append(self._record)

    async def _record(self, req: ApiRequest, attrs: RequestAttributes) -> None:
        self.seen.append(req)

    def watchers(self) -> int:
        """Watches open on the server."""
        return self.storage.watcher_count()

    def watch_query(self) -> dict[str, str]:
        """A watch of NAMESPACES from now on: `event` makes it stream one line."""
        return {"watch": "1", "resourceVersion": str(self.storage.revision)}

    def watch_path(self) -> str:
        return f"{NAMESPACES}?{urlencode(self.watch_query())}"

    async def event(self, name: str) -> None:
        """An ADDED event, for the Namespace `name`, on every watch of `watch_path()`."""
        await self.admin.create(NAMESPACES, {"metadata": {"name": name}})

    async def ensure_namespace(self, name: str) -> None:
        if self.storage.get(("", "namespaces"), "", name) is None:
            await self.event(name)

    async def pod(self, namespace: str, name: str) -> None:
        await self.ensure_namespace(namespace)
        spec = {"containers": [{"name": "c", "image": "nginx:1.27"}]}
        await self.admin.create(
            f"{NAMESPACES}/{namespace}/pods", {"metadata": {"name": name}, "spec": spec}
        )

    def finish(self) -> None:
        """The server ends every watch."""
        self.server.close()

    async def answer(self, path: str) -> bytes:
        """What the server answers to GET `path`, as bytes."""
        resp = await self.server.handle(ApiRequest.from_target("GET", path))
        assert resp.status == 200, resp.body
        return resp.body

    async def sized(self, size: int) -> tuple[str, bytes]:
        """A GET path whose JSON answer is exactly `size` bytes (a list of ConfigMaps in a
        namespace of their own), and that answer."""
        namespace = f"sized-{size}"
        await self.event(namespace)
        path = f"{NAMESPACES}/{namespace}/configmaps"
        lengths = [0] * (size // _CHUNK + 1)
        for index in range(len(lengths)):
            await self.admin.create(path, _configmap(f"c{index}", 0))
        # Resource versions grow a digit now and then: measure until it fits.
        for _ in range(5):
            body = await self.answer(path)
            missing = size - len(body)
            if missing == 0:
                return path, body
            total = sum(lengths) + missing
            wanted = [
                total // len(lengths) + (i < total % len(lengths)) for i in range(len(lengths))
            ]
            for index, (old, new) in enumerate(zip(lengths, wanted, strict=True)):
                if old != new:
                    await self.admin.update(f"{path}/c{index}", _configmap(f"c{index}", new))
            lengths = wanted
        raise AssertionError(f"no answer of {size} bytes at {path}")

    async def bulk(self, total: int) -> str:
        """A collection whose watch (from no resourceVersion) sends at least `total` bytes
        of initial events."""
        namespace = f"bulk-{total}"
        await self.event(namespace)
        path = f"{NAMESPACES}/{namespace}/configmaps"
        for index in range(total // _CHUNK + 1):
            await self.admin.create(path, _configmap(f"c{index}", _CHUNK))
        return path


def _configmap(name: str, length: int) -> dict[str, Any]:
    return {"metadata": {"name": name}, "data": {"x": "x" * length}}


def user_of(req: ApiRequest) -> str:
    assert req.user is not None
    return req.user.name


# --- certificates ---------------------------------------------------------------------


def client_ssl_context(
    ca_pem: bytes, tmp: Path, cert_key: tuple[bytes, bytes] | None = None
) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cadata=ca_pem.decode())
    if cert_key is not None:
        cert_file, key_file = tmp / "client.crt", tmp / "client.key"
        cert_file.write_bytes(cert_key[0])
        key_file.write_bytes(cert_key[1])
        ctx.load_cert_chain(cert_file, key_file)
    return ctx


def der_of(cert_pem: bytes) -> bytes:
    return x509.load_pem_x509_certificate(cert_pem).public_bytes(serialization.Encoding.DER)


def cn_of(der: bytes) -> str:
    cert = x509.load_der_x509_certificate(der)
    value = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
    return value if isinstance(value, str) else value.decode()


async def eventually(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    """Wait until `cond()` holds."""
    await polling.eventually(cond, timeout=timeout, interval=0.005)


def loads(data: bytes) -> Any:
    return json.loads(data)
