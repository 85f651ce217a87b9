"""What listens on an emulated pod's declared container ports: a small HTTP server per port, on
127.0.0.1, started when port-forward first reaches it, so that a forwarded port has something
real at its end.

    GET  /bytes/<n>   n bytes of `pattern` (deterministic, so a client can check them)
    POST|PUT <any>    the request body back, as it came
    GET  <any other>  one line naming the pod, container and port
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Iterator

from aiohttp import web

from ..registry import JSON

# The most /bytes/<n> serves (a forwarding test moves tens of MiB).
MAX_BYTES = 1024 * 1024 * 1024
_BLOCK = b"".join(hashlib.sha256(i.to_bytes(4, "big")).digest() for i in range(2048))


def pattern(size: int) -> Iterator[bytes]:
    """The bytes /bytes/<size> answers, in blocks of 64 KiB."""
    left = size
    while left > 0:
        chunk = _BLOCK[: min(left, len(_BLOCK))]
        left -= len(chunk)
        yield chunk


def declared_ports(pod: JSON) -> dict[int, str]:
    """Each TCP containerPort the pod declares, and the container that declares it."""
    ports: dict[int, str] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            number = port.get("containerPort")
            if isinstance(number, int) and port.get("protocol", "TCP") == "TCP":
                ports.setdefault(number, str(container.get("name", "")))
    return ports


class PortServers:
    """The servers behind the pods' ports, by (pod uid, port); each started on first use."""

    def __init__(self) -> None:
        self._servers: dict[tuple[str, int], tuple[web.AppRunner, int]] = {}
        self._lock = asyncio.Lock()

    async def address(self, pod: JSON, port: int) -> tuple[str, int] | None:
        """Where the pod's `port` is served; None when nothing in the pod listens on it."""
        container = declared_ports(pod).get(port)
        if container is None:
            return None
        meta = pod["metadata"]
        key = (str(meta.get("uid", "")), port)
        async with self._lock:
            if key not in self._servers:
                name = f"{meta.get('namespace', '')}/{meta['name']}"
                self._servers[key] = await _start(name, container, port)
            return "127.0.0.1", self._servers[key][1]

    def uids(self) -> set[str]:
        return {uid for uid, _ in self._servers}

    async def forget(self, uid: str) -> None:
        """Stop the servers of a pod that is gone."""
        for key in [k for k in self._servers if k[0] == uid]:
            runner, _ = self._servers.pop(key)
            await runner.cleanup()

    async def aclose(self) -> None:
        servers, self._servers = list(self._servers.values()), {}
        for runner, _ in servers:
            with contextlib.suppress(Exception):
                await runner.cleanup()


async def _start(pod: str, container: str, port: int) -> tuple[web.AppRunner, int]:
    async def serve(request: web.Request) -> web.StreamResponse:
        if request.method in ("POST", "PUT"):
            body = await request.read()
            return web.Response(body=body, content_type="application/octet-stream")
        path = request.path.strip("/").split("/")
        if request.method == "GET" and len(path) == 2 and path[0] == "bytes":
            try:
                size = int(path[1])
            except ValueError:
                raise web.HTTPBadRequest(text="size is not a number\n") from None
            if not 0 <= size <= MAX_BYTES:
                raise web.HTTPBadRequest(text=f"size must be 0 to {MAX_BYTES}\n")
            out = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
            out.content_length = size
            await out.prepare(request)
            for chunk in pattern(size):
                await out.write(chunk)
            await out.write_eof()
            return out
        return web.Response(text=f"pod {pod} container {container} port {port}\n")

    app = web.Application(client_max_size=MAX_BYTES)
    app.router.add_route("*", "/{tail:.*}", serve)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert isinstance(server, asyncio.Server)
    return runner, server.sockets[0].getsockname()[1]
