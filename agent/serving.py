"""HTTP endpoints: /healthz and /readyz on --health-probe-bind-address, /metrics on
--metrics-bind-address. "0" disables an address; ":8080" listens on every interface.

/healthz answers ok while the process runs (controller-runtime's ping check). /readyz answers ok
once `ready()` says so (registration finished and the leader's caches synced); until then 500
with the reason, as controller-runtime's readyz handler does for a failing check.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from agent.options import BindAddress

log = logging.getLogger(__name__)

# (ok, reason when not ok)
ReadyCheck = Callable[[], tuple[bool, str]]


class Endpoint:
    """One aiohttp server on one address."""

    def __init__(self, name: str, app: web.Application, address: BindAddress) -> None:
        self.name = name
        self._app = app
        self.address = address
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None

    async def start(self) -> None:
        runner = web.AppRunner(self._app, access_log=None, handle_signals=False)
        await runner.setup()
        host = self.address.host or None  # None: every interface, as Go's ":port"
        site = web.TCPSite(runner, host, self.address.port, reuse_address=True)
        try:
            await site.start()
        except OSError:
            await runner.cleanup()
            raise
        self._runner, self._site = runner, site
        log.info("serving %s on %s", self.name, self.url)

    @property
    def port(self) -> int:
        """The bound port (useful when the configured port was 0)."""
        if self._runner is None:
            return self.address.port
        for address in self._runner.addresses:
            if isinstance(address, tuple) and len(address) >= 2:
                return int(address[1])
        return self.address.port

    @property
    def url(self) -> str:
        host = self.address.host or "0.0.0.0"
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()


def health_app(ready: ReadyCheck) -> web.Application:
    async def healthz(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_request: web.Request) -> web.Response:
        ok, reason = ready()
        if ok:
            return web.Response(text="ok")
        return web.Response(status=500, text=f"[-]ready failed: {reason}\nreadyz check failed\n")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/healthz/ping", healthz)
    app.router.add_get("/readyz", readyz)
    return app


def metrics_app(registry: CollectorRegistry) -> web.Application:
    # The classic text format's content type: every Prometheus version parses it (newer
    # prometheus_client defaults to version=1.0.0, which older scrapers do not know).
    async def metrics(_request: web.Request) -> web.Response:
        body = generate_latest(registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_PLAIN_0_0_4})

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    return app


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
            Endpoint("health probes", health_app(ready), health_address)
            if health_address is not None
            else None
        )
        self.metrics: Endpoint | None = (
            Endpoint("metrics", metrics_app(registry), metrics_address)
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
