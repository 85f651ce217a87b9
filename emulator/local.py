"""LocalClient: the Loopback protocol over `ApiServer.handle`, without a socket."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from .errors import ApiError
from .wire import SYSTEM_ADMIN, ApiRequest, ApiResponse, UserInfo

if TYPE_CHECKING:
    from .apiserver import ApiServer

JSON = dict[str, Any]


def error_from(resp: ApiResponse) -> ApiError:
    try:
        body = json.loads(resp.body)
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    return ApiError(
        resp.status,
        str(body.get("reason", "")),
        str(body.get("message", resp.body.decode(errors="replace"))),
        body.get("details"),
        dict(resp.headers),
    )


class LocalClient:
    def __init__(self, api: ApiServer, user: UserInfo = SYSTEM_ADMIN, user_agent: str = "") -> None:
        self.api = api
        self.user = user
        self.user_agent = user_agent

    def _request(
        self, method: str, path: str, query: dict[str, str], body: Any = None, ct: str = ""
    ) -> ApiRequest:
        headers = {"accept": "application/json"}
        if self.user_agent:
            headers["user-agent"] = self.user_agent
        raw = b""
        if body is not None:
            raw = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers["content-type"] = ct or "application/json"
        return ApiRequest(
            method=method,
            path=path,
            query={k: [v] for k, v in query.items()},
            headers=headers,
            body=raw,
            user=self.user,
            remote="loopback",
        )

    async def _call(self, req: ApiRequest) -> JSON:
        resp = await self.api.handle(req)
        if resp.stream is not None:
            # An answer streamed by an aggregated API server (no length known ahead).
            body = b"".join([chunk async for chunk in resp.stream])
            resp = ApiResponse(resp.status, body, resp.headers)
        if resp.status >= 400:
            raise error_from(resp)
        result: JSON = json.loads(resp.body)
        return result

    async def get(self, path: str, **query: str) -> JSON:
        return await self._call(self._request("GET", path, query))

    async def list(self, path: str, **query: str) -> JSON:
        return await self._call(self._request("GET", path, query))

    async def create(self, path: str, body: JSON, **query: str) -> JSON:
        return await self._call(self._request("POST", path, query, body))

    async def update(self, path: str, body: JSON, **query: str) -> JSON:
        return await self._call(self._request("PUT", path, query, body))

    async def patch(self, path: str, body: Any, patch_type: str, **query: str) -> JSON:
        return await self._call(self._request("PATCH", path, query, body, patch_type))

    async def delete(self, path: str, body: JSON | None = None, **query: str) -> JSON:
        return await self._call(self._request("DELETE", path, query, body))

    async def watch(self, path: str, **query: str) -> AsyncIterator[JSON]:
        query = {**query, "watch": "true"}
        resp = await self.api.handle(self._request("GET", path, query))
        if resp.status >= 400:
            raise error_from(resp)
        if resp.stream is None:
            return
        buf = b""
        stream = resp.stream
        try:
            async for chunk in stream:
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
