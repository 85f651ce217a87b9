"""HTTP endpoints: /healthz and /readyz on --health-probe-bind-address, /metrics on
--metrics-bind-address. "0" disables an address; ":8080" listens on every interface.

/healthz answers ok while the process runs (controller-runtime's ping check). /readyz answers ok
once `ready()` says so (registration finished and the leader's caches synced); until then 500
with the reason, as controller-runtime's readyz handler does for a failing check.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from http import HTTPStatus
from typing import cast

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import Metric

from agent.logs import get_logger
from agent.options.bind_address import BindAddress

log = get_logger(__name__)

# (ok, reason when not ok)
ReadyCheck = Callable[[], tuple[bool, str]]
# (status, content type, body)
Answer = tuple[int, str, bytes]
Route = Callable[[], Answer]

TEXT = "text/plain; charset=utf-8"
# A probe or scrape request is a request line and a few headers; anything longer, or slower
# than this, is not one of them.
MAX_REQUEST_HEAD = 16 * 1024
REQUEST_TIMEOUT = 10.0


class Endpoint:
    """One HTTP/1.1 server on one address, for GET (and HEAD) of a few fixed paths.

    Probes and scrapes are one small GET each, so this is a plain asyncio server: it answers
    one request per connection (`Connection: close`), which kubelet and Prometheus handle, and
    keeps an HTTP framework out of the agent process."""

    def __init__(self, name: str, routes: dict[str, Route], address: BindAddress) -> None:
        self.name = name
        self._routes = routes
        self.address = address
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        host = self.address.host or None  # None: every interface, as Go's ":port"
        self._server = await asyncio.start_server(
            self._serve, host, self.address.port, reuse_address=True
        )
        log.info("serving %s on %s", self.name, self.url)

    @property
    def port(self) -> int:
        """The bound port (useful when the configured port was 0)."""
        if self._server is None or not self._server.sockets:
            return self.address.port
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        host = self.address.host or "0.0.0.0"
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_TIMEOUT)
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
                return
            if len(head) > MAX_REQUEST_HEAD:
                return
            method, path = _request_line(head)
            status, content_type, body = self._answer(method, path)
            reason = HTTPStatus(status).phrase
            headers = (
                f"HTTP/1.1 {status} {reason}\r\n"
                f"Content-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n"
            )
            writer.write(headers.encode("latin-1") + (b"" if method == "HEAD" else body))
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    def _answer(self, method: str, path: str) -> Answer:
        if not method:
            return 400, TEXT, b"400 bad request\n"
        route = self._routes.get(path.split("?", 1)[0])
        if route is None:
            return 404, TEXT, b"404 page not found\n"
        if method not in ("GET", "HEAD"):
            return 405, TEXT, b"405 method not allowed\n"
        try:
            return route()
        except Exception:
            log.exception("%s: handler for %s failed", self.name, path)
            return 500, TEXT, b"internal error\n"


def _request_line(head: bytes) -> tuple[str, str]:
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        return "", ""
    return parts[0], parts[1]


def health_routes(ready: ReadyCheck) -> dict[str, Route]:
    def healthz() -> Answer:
        return 200, TEXT, b"ok"

    def readyz() -> Answer:
        ok, reason = ready()
        if ok:
            return 200, TEXT, b"ok"
        return 500, TEXT, f"[-]ready failed: {reason}\nreadyz check failed\n".encode()

    return {"/healthz": healthz, "/healthz/ping": healthz, "/readyz": readyz}


class _WithSamples:
    """The registry's families that have samples: a labelled metric nobody has set yet is left
    out, as Go's Prometheus client leaves out a vector without children (prometheus_client
    would print its HELP and TYPE alone)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        return (family for family in self.registry.collect() if family.samples)


def metrics_routes(registry: CollectorRegistry) -> dict[str, Route]:
    # The classic text format's content type: every Prometheus version parses it (newer
    # prometheus_client defaults to version=1.0.0, which older scrapers do not know).
    def metrics() -> Answer:
        exposed = cast(CollectorRegistry, _WithSamples(registry))
        return 200, CONTENT_TYPE_PLAIN_0_0_4, generate_latest(exposed)

    return {"/metrics": metrics}


class Serving:
    """Both endpoints; either may be disabled (None address)."""

    def __init__(
        self,
        *,
        health_address: BindAddress | None,
        metrics_address: BindAddress | None,
        registry: CollectorRegistry,
        ready: ReadyCheck,
    ) -> None:
        self.health: Endpoint | None = (
            Endpoint("health probes", health_routes(ready), health_address)
            if health_address is not None
            else None
        )
        self.metrics: Endpoint | None = (
            Endpoint("metrics", metrics_routes(registry), metrics_address)
            if metrics_address is not None
            else None
        )

    async def start(self) -> None:
        started: list[Endpoint] = []
        try:
            for endpoint in (self.health, self.metrics):
                if endpoint is not None:
                    await endpoint.start()
                    started.append(endpoint)
        except OSError:
            for endpoint in started:
                await endpoint.stop()
            raise

    async def stop(self) -> None:
        for endpoint in (self.metrics, self.health):
            if endpoint is not None:
                await endpoint.stop()
