"""Building webhook configurations for the tests, and creating them for one test."""

from __future__ import annotations

import itertools
from typing import Any

import httpx

from .server import WebhookServer

JSON = dict[str, Any]
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
_counter = itertools.count()


def webhook(name: str, client_config: JSON, rules: list[JSON], **extra: Any) -> JSON:
    return {
        "name": name,
        "clientConfig": client_config,
        "rules": rules,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        **extra,
    }


def rule(resources: list[str], operations: tuple[str, ...] = ("CREATE", "UPDATE"), group: str = "",
         version: str = "v1", **extra: Any) -> JSON:  # fmt: skip
    return {
        "operations": list(operations), "apiGroups": [group], "apiVersions": [version],
        "resources": resources, **extra,
    }  # fmt: skip


class Hooks:
    """Creates webhook configurations (and namespaces) for one test and removes them after."""

    def __init__(self, api: httpx.AsyncClient, server: WebhookServer) -> None:
        self.api = api
        self.server = server
        self.created: list[str] = []

    def url(self, path: str) -> JSON:
        return {"url": self.server.url(path), "caBundle": self.server.ca_bundle}

    async def configure(self, kind: str, name: str, hooks: list[JSON]) -> JSON:
        plural = kind.lower() + "s"
        resp = await self.api.post(
            f"{ADMISSION}/{plural}",
            json={"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
                  "metadata": {"name": name}, "webhooks": hooks},
        )  # fmt: skip
        assert resp.status_code == 201, resp.text
        self.created.append(f"{ADMISSION}/{plural}/{name}")
        result: JSON = resp.json()
        return result

    async def mutating(self, name: str, *hooks: JSON) -> JSON:
        return await self.configure("MutatingWebhookConfiguration", name, list(hooks))

    async def validating(self, name: str, *hooks: JSON) -> JSON:
        return await self.configure("ValidatingWebhookConfiguration", name, list(hooks))

    async def namespace(self, labels: dict[str, str] | None = None) -> str:
        name = f"wh{next(_counter)}"
        body = {"metadata": {"name": name, "labels": labels or {}}}
        resp = await self.api.post("/api/v1/namespaces", json=body)
        assert resp.status_code == 201, resp.text
        return name

    async def cleanup(self) -> None:
        for path in self.created:
            resp = await self.api.delete(path)
            assert resp.status_code == 200, resp.text
