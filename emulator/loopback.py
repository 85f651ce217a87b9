"""The in-process client that the emulator's own controllers use.

Like kube-controller-manager talking to kube-apiserver, emulator controllers go
through the same request chain as any client (validation, admission-like
strategies, resourceVersion, watch fan-out), only without a socket. Paths are
REST paths ("/api/v1/namespaces/kube-system/secrets"). Errors are `ApiError`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

JSON = dict[str, Any]


class Loopback(Protocol):
    async def get(self, path: str, **query: str) -> JSON: ...

    async def list(self, path: str, **query: str) -> JSON: ...

    async def create(self, path: str, body: JSON, **query: str) -> JSON: ...

    async def update(self, path: str, body: JSON, **query: str) -> JSON:
        """PUT to `path` (the object path, or its /status, /approval subresource)."""
        ...

    async def patch(self, path: str, body: Any, patch_type: str, **query: str) -> JSON:
        """`patch_type` is the Content-Type, e.g. "application/merge-patch+json"."""
        ...

    async def delete(self, path: str, body: JSON | None = None, **query: str) -> JSON: ...

    def watch(self, path: str, **query: str) -> AsyncIterator[JSON]:
        """Watch events {"type": ..., "object": ...} of the collection at `path`."""
        ...
