"""A small HTTPS resource interpreter webhook for the tests: each path answers with the function
registered for it (given the ResourceInterpreterContext's request, returning the response
fields besides uid), and keeps every request it got."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from typing import Any

from aiohttp import web

from emulator.pki import CertificateAuthority
from tests.emulator.webhooks.server import serve_https

JSON = dict[str, Any]


class InterpreterWebhook:
    def __init__(self) -> None:
        self.ca = CertificateAuthority.generate("interpreter-webhook-ca")
        self.answers: dict[str, Callable[[JSON], JSON]] = {}
        self.requests: dict[str, list[JSON]] = {}
        # Paths that never answer (until the server stops): a webhook timing out.
        self.hang: set[str] = set()
        self._stopped = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.ca.cert_pem).decode()

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}/{path}"

    def answer(self, path: str, fn: Callable[[JSON], JSON]) -> None:
        self.answers[path] = fn

    async def _handle(self, request: web.Request) -> web.Response:
        path = request.match_info["path"]
        context = await request.json()
        self.requests.setdefault(path, []).append(context["request"])
        if path in self.hang:
            await self._stopped.wait()
        response = self.answers[path](context["request"])
        body = {
            "apiVersion": context["apiVersion"],
            "kind": "ResourceInterpreterContext",
            "response": {"uid": context["request"]["uid"], **response},
        }
        return web.json_response(body)

    async def start(self) -> None:
        self._runner, self.port = await serve_https(self._handle, self.ca)

    async def stop(self) -> None:
        self._stopped.set()
        if self._runner is not None:
            await self._runner.cleanup()


def configuration(
    name: str, url: str, ca_bundle: str, operations: list[str], *, timeout: int | None = None
) -> JSON:
    hook: JSON = {
        "name": f"{name}.example.io",
        "clientConfig": {"url": url, "caBundle": ca_bundle},
        "rules": [
            {
                "operations": operations,
                "apiGroups": ["example.io", "argoproj.io"],
                "apiVersions": ["*"],
                "kinds": ["*"],
            }
        ],
        "interpreterContextVersions": ["v1alpha1"],
    }
    if timeout is not None:
        hook["timeoutSeconds"] = timeout
    return {
        "apiVersion": "config.karmada.io/v1alpha1",
        "kind": "ResourceInterpreterWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [hook],
    }
