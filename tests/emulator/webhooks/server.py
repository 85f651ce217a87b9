"""A small HTTPS admission webhook server for the emulator's webhook tests.

Each path answers with the function registered for it: it gets the AdmissionReview's
`request` and returns the `response` (uid, apiVersion and kind are filled in), or
`{"http_status": N, "text": ...}` to answer with a bare HTTP error. Every review received is
kept, per path.
"""

from __future__ import annotations

import base64
import json
import ssl
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from aiohttp import web

from emulator.pki import CertificateAuthority

JSON = dict[str, Any]
Answer = Callable[[JSON], Awaitable[JSON] | JSON]


def allow(_request: JSON) -> JSON:
    return {"allowed": True}


def json_patch(ops: Sequence[JSON], **extra: Any) -> JSON:
    """An allowing response carrying an RFC 6902 patch, base64-encoded as the API wants it."""
    patch = base64.b64encode(json.dumps(list(ops)).encode()).decode()
    return {"allowed": True, "patchType": "JSONPatch", "patch": patch, **extra}


async def serve_https(
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
    ca: CertificateAuthority,
    dns_names: Sequence[str] = (),
) -> tuple[web.AppRunner, int]:
    """Serve POST /{path} with `handler` over HTTPS on 127.0.0.1 (a certificate from `ca` for
    127.0.0.1 and `dns_names`); the runner (to clean up) and the port."""
    cert_pem, key_pem = ca.issue("webhook", dns_names=dns_names, ips=("127.0.0.1",), usage="server")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    with tempfile.TemporaryDirectory() as tmp:
        cert, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        cert.write_bytes(cert_pem)
        key.write_bytes(key_pem)
        ctx.load_cert_chain(cert, key)
    app = web.Application()
    app.router.add_post("/{path}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
    await site.start()
    server = site._server
    assert server is not None
    return runner, server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]


class WebhookServer:
    def __init__(self, ca: CertificateAuthority, dns_names: Sequence[str] = ("localhost",)) -> None:
        self.ca = ca
        self.dns_names = tuple(dns_names)
        self.answers: dict[str, Answer] = {}
        self.reviews: dict[str, list[JSON]] = {}
        self.review_versions: dict[str, list[str]] = {}
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.ca.cert_pem).decode()

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}/{path}"

    def answer(self, path: str, fn: Answer) -> None:
        self.answers[path] = fn
        self.reviews[path] = []

    def calls(self, path: str) -> list[JSON]:
        return self.reviews.get(path, [])

    def versions(self, path: str) -> list[str]:
        """The AdmissionReview apiVersion of each review received."""
        return self.review_versions.get(path, [])

    async def _handle(self, request: web.Request) -> web.Response:
        path = request.match_info["path"]
        review = await request.json()
        self.reviews.setdefault(path, []).append(review["request"])
        self.review_versions.setdefault(path, []).append(review["apiVersion"])
        fn = self.answers.get(path, allow)
        response = fn(review["request"])
        if not isinstance(response, dict):
            response = await response
        if "http_status" in response:  # answer with a bare HTTP error instead of a review
            return web.Response(status=response["http_status"], text=response.get("text", ""))
        body = {
            "apiVersion": review["apiVersion"],
            "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], **response},
        }
        return web.json_response(body)

    async def start(self) -> None:
        self._runner, self.port = await serve_https(self._handle, self.ca, self.dns_names)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
