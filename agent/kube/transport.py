"""HTTP transport to one API server: the only module that imports httpx.

It owns TLS (SSLContext from `ClientConfig`, verification on unless the kubeconfig says
insecure-skip-tls-verify), proxies (kubeconfig proxy-url, else HTTPS_PROXY/HTTP_PROXY with our own
NO_PROXY matching, CIDRs included, since httpx does not match CIDRs), TCP keepalive, timeouts,
client-side QPS/burst throttling, retries and bearer auth with one refresh after a 401.

Retry rules follow client-go's rest.Request: a 429 or 5xx answer that carries Retry-After is retried
for every verb (the server asked us to come back; the body is resent as is) up to `max_retries`,
waiting Retry-After seconds, capped. Connection failures are retried only for GET/HEAD (client-go
retries GET on connection reset and EOF), with a short exponential backoff.

`reload(config)` swaps in a new client (certificate rotation): requests and streams already running
finish on the old client, which is closed when the last of them ends (or after a drain timeout).
Headers and tokens are never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import ipaddress
import math
import os
import ssl
import tempfile
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote, urlencode, urlsplit

import httpx

from agent.kube.backoff import Backoff
from agent.kube.clock import REAL_CLOCK, Clock, ServerClock
from agent.kube.config import ClientConfig, private_temp_dir, tcp_keepalive_socket_options
from agent.kube.errors import TransportError, WatchTimeoutError, from_response
from agent.kube.http2 import Answer, ConnectionFailedError, Http2Client, NotHttp2Error
from agent.kube.ratelimit import TokenBucket
from agent.kube.reachability import Reachability
from agent.kube.tasks import background
from agent.logs import get_logger

log = get_logger(__name__)

IDEMPOTENT_READS = frozenset({"GET", "HEAD"})
CONNECT_TIMEOUT = 10.0
# Other requests answered before a waiting background request goes anyway (see _Priority).
BACKGROUND_SHARE = 2


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 10  # client-go's default for Retry-After answers
    max_retry_after: float = 30.0
    connection_retries: int = 3  # GET/HEAD only
    connection_backoff: float = 0.2

    def connection_delay(self, failures: int) -> float:
        """The wait before retrying a read whose connection failed `failures` times before."""
        return Backoff(initial=self.connection_backoff, cap=math.inf, jitter=0.0).step(failures)


class RequestMetrics(Protocol):
    """client-go's rest_client_requests_total{code,method,host} and request latency.

    `code` is the HTTP status as a string, or "<error>" when no response came back.
    """

    def observe(self, *, method: str, host: str, code: str, seconds: float) -> None: ...


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]  # lower-case names
    content: bytes
    method: str = ""
    url: str = ""

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        import json

        return json.loads(self.content) if self.content else None

    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


class StreamResponse:
    """A 2xx response whose body is read incrementally (watch)."""

    def __init__(
        self,
        status: int,
        headers: Mapping[str, str],
        chunks: AsyncIterator[bytes],
        url: str,
    ) -> None:
        self.status = status
        self.headers = headers
        self._chunks = chunks
        self.url = url

    async def lines(self) -> AsyncGenerator[bytes, None]:
        """Newline-delimited frames; non-empty, without the newline."""
        buffer = b""
        try:
            async for chunk in self._chunks:
                buffer += chunk
                while True:
                    idx = buffer.find(b"\n")
                    if idx < 0:
                        break
                    line, buffer = buffer[:idx], buffer[idx + 1 :]
                    if line.strip():
                        yield line
        except ConnectionFailedError as exc:
            if exc.timeout:
                raise WatchTimeoutError(f"stream idle too long: {self.url}", url=self.url) from exc
            raise TransportError(f"stream broken: {exc}", url=self.url) from exc
        if buffer.strip():
            yield buffer


def _headers(headers: httpx.Headers) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in headers.multi_items():
        k = key.lower()
        out[k] = f"{out[k]}, {value}" if k in out else value
    return out


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"


# --- proxies -----------------------------------------------------------------------------------


def _host_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return host, port


def _is_loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def no_proxy_matches(host: str, port: int, no_proxy: str) -> bool:
    """Go's httpproxy NO_PROXY rules: "*", IPs, CIDRs, domains (with or without a leading dot,
    matching subdomains) and host:port entries."""
    host = host.strip("[]").lower()
    try:
        ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    for raw in no_proxy.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return True
        if "/" in entry:
            try:
                network = ipaddress.ip_network(entry, strict=False)
            except ValueError:
                continue
            if ip is not None and ip in network:
                return True
            continue
        entry_port: int | None = None
        if entry.startswith("["):
            bracket_end = entry.find("]")
            rest = entry[bracket_end + 1 :]
            entry_host = entry[1:bracket_end]
            if rest.startswith(":") and rest[1:].isdigit():
                entry_port = int(rest[1:])
        elif entry.count(":") == 1:
            entry_host, _, port_text = entry.partition(":")
            if port_text.isdigit():
                entry_port = int(port_text)
        else:
            entry_host = entry
        if entry_port is not None and entry_port != port:
            continue
        try:
            entry_ip = ipaddress.ip_address(entry_host)
        except ValueError:
            entry_ip = None
        if entry_ip is not None:
            if ip is not None and ip == entry_ip:
                return True
            continue
        domain = entry_host.lstrip(".").lstrip("*.")
        if domain and (host == domain or host.endswith("." + domain)):
            return True
    return False


def select_proxy(config: ClientConfig, environ: Mapping[str, str] | None = None) -> str | None:
    """The proxy for this API server: kubeconfig proxy-url wins; else the environment, as Go's
    http.ProxyFromEnvironment reads it (loopback hosts are never proxied)."""
    if config.proxy_url:
        return config.proxy_url
    if not config.trust_env:
        return None
    env = os.environ if environ is None else environ
    scheme = urlsplit(config.host).scheme
    names = ("HTTPS_PROXY", "https_proxy") if scheme == "https" else ("HTTP_PROXY", "http_proxy")
    proxy = next((env[n] for n in names if env.get(n)), None)
    if not proxy:
        return None
    host, port = _host_port(config.host)
    if _is_loopback(host):
        return None
    no_proxy = env.get("NO_PROXY") or env.get("no_proxy") or ""
    if no_proxy_matches(host, port, no_proxy):
        return None
    if "://" not in proxy:
        proxy = "http://" + proxy
    return proxy


# --- TLS ---------------------------------------------------------------------------------------


def build_ssl_context(config: ClientConfig) -> ssl.SSLContext:
    if config.ca_pem:
        ctx = ssl.create_default_context(cadata=config.ca_pem.decode("ascii", "replace"))
    else:
        ctx = ssl.create_default_context()
    if config.client_cert_pem and config.client_key_pem:
        load_cert_chain_pem(ctx, config.client_cert_pem, config.client_key_pem)
    if not config.verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def load_cert_chain_pem(ctx: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """`ctx.load_cert_chain` from memory. The ssl module only loads from files: write them
    privately (0600, in a private directory), load, remove at once."""
    directory = tempfile.mkdtemp(dir=private_temp_dir())
    cert_path = os.path.join(directory, "client.crt")
    key_path = os.path.join(directory, "client.key")
    try:
        for path, data in ((cert_path, cert_pem), (key_path, key_pem)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        ctx.load_cert_chain(cert_path, key_path)
    finally:
        for path in (cert_path, key_path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        with contextlib.suppress(OSError):
            os.rmdir(directory)


TransportFactory = Callable[[ClientConfig], Any]
"""Builds an httpx transport for a config. Tests and the emulator pass their own, and then every
request goes through httpx."""

# Told about every 401 answer (after any token refresh): the config whose credentials were
# refused, and the server's time (seconds since the epoch) when its answers tell it.
UnauthorizedListener = Callable[[ClientConfig, float | None], None]


def default_transport_factory(config: ClientConfig) -> httpx.AsyncBaseTransport:
    """httpx's transport for what agent.kube.http2 does not carry: plain http, a SOCKS or https
    proxy, a server that speaks HTTP/1.1 only."""
    return httpx.AsyncHTTPTransport(
        verify=build_ssl_context(config) if config.host.startswith("https") else True,
        http2=False,
        proxy=select_proxy(config),
        trust_env=False,
        limits=httpx.Limits(max_connections=500, max_keepalive_connections=50),
        socket_options=tcp_keepalive_socket_options(),
    )


class _Httpx:
    """Requests through an httpx client."""

    def __init__(self, config: ClientConfig, factory: TransportFactory) -> None:
        self.config = config
        self.client = httpx.AsyncClient(
            base_url=config.host,
            transport=factory(config),
            timeout=httpx.Timeout(config.timeout, connect=CONNECT_TIMEOUT),
            trust_env=False,
            follow_redirects=False,
            headers={"User-Agent": config.user_agent},
        )
        name = config.tls_server_name
        self._extensions: dict[str, Any] = {"sni_hostname": name} if name else {}

    def _timeout(self, seconds: float | None, read: float | None = None) -> httpx.Timeout:
        total = self.config.timeout if seconds is None else seconds
        return httpx.Timeout(total, connect=CONNECT_TIMEOUT, read=read if read else total)

    async def request(
        self,
        method: str,
        path: str,
        query: str,
        headers: Mapping[str, str],
        body: bytes | None,
        timeout: float | None,
    ) -> Answer:
        try:
            response = await self.client.request(
                method,
                f"{path}?{query}" if query else path,
                content=body,
                headers=headers,
                timeout=self._timeout(timeout),
                extensions=self._extensions,
            )
        except httpx.TransportError as exc:
            raise ConnectionFailedError(
                _describe(exc), timeout=isinstance(exc, httpx.TimeoutException)
            ) from exc
        return Answer(response.status_code, _headers(response.headers), response.content)

    @contextlib.asynccontextmanager
    async def stream(
        self,
        method: str,
        path: str,
        query: str,
        headers: Mapping[str, str],
        read_timeout: float | None,
    ) -> AsyncIterator[_Streamed]:
        request = self.client.build_request(
            method,
            f"{path}?{query}" if query else path,
            headers=headers,
            timeout=httpx.Timeout(self.config.timeout, connect=CONNECT_TIMEOUT, read=read_timeout),
            extensions=self._extensions,
        )
        try:
            response = await self.client.send(request, stream=True)
        except httpx.TransportError as exc:
            raise ConnectionFailedError(
                _describe(exc), timeout=isinstance(exc, httpx.TimeoutException)
            ) from exc
        try:
            yield _HttpxStreamed(response)
        finally:
            await response.aclose()

    async def aclose(self) -> None:
        await self.client.aclose()


class _HttpxStreamed:
    def __init__(self, response: httpx.Response) -> None:
        self.status = response.status_code
        self.headers: Mapping[str, str] = _headers(response.headers)
        self._response = response

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.aiter_bytes():
                yield chunk
        except (httpx.TransportError, httpx.StreamError) as exc:
            raise ConnectionFailedError(
                _describe(exc), timeout=isinstance(exc, httpx.TimeoutException)
            ) from exc

    async def read(self) -> bytes:
        try:
            return await self._response.aread()
        except httpx.TransportError as exc:
            raise ConnectionFailedError(_describe(exc)) from exc


class _Streamed(Protocol):
    @property
    def status(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    def chunks(self) -> AsyncIterator[bytes]: ...

    async def read(self) -> bytes: ...


class _Engine(Protocol):
    async def request(
        self,
        method: str,
        path: str,
        query: str,
        headers: Mapping[str, str],
        body: bytes | None,
        timeout: float | None,
    ) -> Answer: ...

    def stream(
        self,
        method: str,
        path: str,
        query: str,
        headers: Mapping[str, str],
        read_timeout: float | None,
    ) -> contextlib.AbstractAsyncContextManager[_Streamed]: ...

    async def aclose(self) -> None: ...


class _Http2:
    """Requests through agent.kube.http2, or through httpx (HTTP/1.1) once the server turned out
    to speak HTTP/1.1 only."""

    def __init__(self, config: ClientConfig, proxy: str | None) -> None:
        self.config = config
        context = build_ssl_context(config)
        context.set_alpn_protocols(["h2", "http/1.1"])
        self.client = Http2Client(
            config.host,
            context,
            server_hostname=config.tls_server_name,
            connect_timeout=CONNECT_TIMEOUT,
            default_timeout=config.timeout,
            socket_options=tcp_keepalive_socket_options(),
            headers={"user-agent": config.user_agent, "accept-encoding": "gzip"},
            proxy=proxy,
        )
        self.fallback: _Httpx | None = None

    def _http1(self) -> _Httpx:
        if self.fallback is None:
            log.info("the API server speaks HTTP/1.1 only; using it", host=self.config.host)
            self.fallback = _Httpx(self.config, default_transport_factory)
        return self.fallback

    async def request(
        self,
        method: str,
        path: str,
        query: str,
        headers: Mapping[str, str],
        body: bytes | None,
        timeout: float | None,
    ) -> Answer:
        if self.fallback is None:
            try:
                return await self.client.request(
                    method, path, query=query, headers=headers, body=body, timeout=timeout
                )
            except NotHttp2Error:
                pass
        return await self._http1().request(method, path, query, headers, body, timeout)

    @contextlib.asynccontextmanager
    async def stream(
        self,
        method: str,
        path: str,
        query: str,
        headers: Mapping[str, str],
        read_timeout: float | None,
    ) -> AsyncIterator[_Streamed]:
        if self.fallback is None:
            try:
                async with self.client.stream(
                    method, path, query=query, headers=headers, read_timeout=read_timeout
                ) as answer:
                    yield answer
                return
            except NotHttp2Error:
                pass
        async with self._http1().stream(method, path, query, headers, read_timeout) as answer:
            yield answer

    async def aclose(self) -> None:
        await self.client.aclose()
        if self.fallback is not None:
            await self.fallback.aclose()


def _engine(config: ClientConfig, factory: TransportFactory | None) -> _Engine:
    """agent.kube.http2 for an https server reached directly or through an http:// proxy, as
    every kube-apiserver speaks HTTP/2; httpx for the rest and for a given factory."""
    if factory is None:
        proxy = select_proxy(config)
        direct_or_connect = proxy is None or proxy.startswith("http://")
        if config.http2 and config.host.startswith("https://") and direct_or_connect:
            return _Http2(config, proxy)
        factory = default_transport_factory
    return _Httpx(config, factory)


class _Slot:
    """One engine (its connections) and the number of requests or streams still using it."""

    def __init__(self, engine: _Engine) -> None:
        self.engine = engine
        self.inflight = 0
        self.retired = False
        self.closed = False

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            await self.engine.aclose()


# When background requests stop yielding to the others (see `yielding_until`).
_PRESSING: contextvars.ContextVar[Callable[[], bool] | None] = contextvars.ContextVar(
    "background_pressing", default=None
)


@contextlib.contextmanager
def yielding_until(pressing: Callable[[], bool]) -> Iterator[None]:
    """Background requests made within yield to the others (_Priority) only while `pressing()`
    is false, asked again whenever one of the others is answered: for a backlog of background
    writes that would otherwise have to be dropped."""
    token = _PRESSING.set(pressing)
    try:
        yield
    finally:
        _PRESSING.reset(token)


class _Priority:
    """Background requests (Events, the Work record) yield to the others on the same
    connections: one is sent while no other request is in flight, or once `share` of the
    others were answered since it began to wait, whichever comes first. A status write is thus
    not queued at the API server behind Events emitted before it (client-go's event broadcaster
    writes from a queue of its own too), and a steady stream of other requests slows the
    background writes down without stopping them. Streams (watches) do not count: they stay
    open."""

    def __init__(self, share: int) -> None:
        self.share = max(share, 1)
        self.in_flight = 0
        self.answered = 0
        self._waiters: list[asyncio.Future[None]] = []

    def started(self) -> None:
        self.in_flight += 1

    def finished(self) -> None:
        self.in_flight -= 1
        self.answered += 1
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def turn(self) -> None:
        """Wait until a background request may be sent."""
        since = self.answered
        pressing = _PRESSING.get() or (lambda: False)
        while self.in_flight and self.answered - since < self.share and not pressing():
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter


class _Connections:
    """The connections to one API server, the config they were built from and the client-side
    QPS budget. Shared by a Transport and its `background()` sibling, so a reload (certificate
    rotation) reaches both and they share one connection and one budget."""

    def __init__(
        self, config: ClientConfig, factory: TransportFactory | None, clock: Clock
    ) -> None:
        self.factory = factory
        self.config = config
        self.clock = clock
        self.bucket = self._make_bucket(config)
        self.priority = _Priority(BACKGROUND_SHARE)
        self.slot = self._make_slot(config)
        self.retired: set[_Slot] = set()
        self.background: set[asyncio.Task[None]] = set()
        self.host = urlsplit(config.host).netloc
        # The server's clock, from the Date headers of its answers.
        self.server_clock = ServerClock()
        self.unauthorized_listeners: list[UnauthorizedListener] = []

    def _make_slot(self, config: ClientConfig) -> _Slot:
        return _Slot(_engine(config, self.factory))

    def _make_bucket(self, config: ClientConfig) -> TokenBucket | None:
        if config.qps <= 0:
            return None
        return TokenBucket(config.qps, max(config.burst, 1), clock=self.clock)

    async def reload(self, config: ClientConfig, drain_timeout: float | None) -> None:
        if (config.qps, config.burst) != (self.config.qps, self.config.burst):
            self.bucket = self._make_bucket(config)
        old = self.slot
        self.slot = self._make_slot(config)
        self.config = config
        self.host = urlsplit(config.host).netloc
        old.retired = True
        if old.inflight == 0:
            await old.close()
            return
        self.retired.add(old)
        if drain_timeout is not None:
            task = background(self._close_after(old, drain_timeout))
            self.background.add(task)
            task.add_done_callback(self.background.discard)

    async def _close_after(self, slot: _Slot, delay: float) -> None:
        await asyncio.sleep(delay)
        self.retired.discard(slot)
        await slot.close()

    async def close(self) -> None:
        for task in list(self.background):
            task.cancel()
        for slot in [self.slot, *self.retired]:
            await slot.close()
        self.retired.clear()

    def acquire(self) -> _Slot:
        slot = self.slot
        slot.inflight += 1
        return slot

    async def release(self, slot: _Slot) -> None:
        slot.inflight -= 1
        if slot.retired and slot.inflight == 0 and slot in self.retired:
            self.retired.discard(slot)
            await slot.close()


class Transport:
    """Requests and streams against one API server, with the policies described above."""

    def __init__(
        self,
        config: ClientConfig,
        *,
        retry: RetryPolicy | None = None,
        metrics: RequestMetrics | None = None,
        transport_factory: TransportFactory | None = None,
        clock: Clock = REAL_CLOCK,
        reachability: Reachability | None = None,
        _connections: _Connections | None = None,
        _background: bool = False,
    ) -> None:
        self.retry = retry or RetryPolicy()
        self.metrics = metrics
        # Told about every answer and every request that got none (shared with background()).
        self.reachability = reachability or Reachability("API server")
        self._clock = clock
        self._connections = _connections or _Connections(config, transport_factory, clock)
        # Only the Transport that built the connections closes them.
        self._owns_connections = _connections is None
        self._background = _background

    def background(self) -> Transport:
        """A Transport on the same connections, credentials, reloads and QPS budget whose
        requests take only the budget's spare tokens and yield to the others in flight
        (_Priority): writes that must never delay the others (Events, the Work record) go out
        once no other request waits for a token or an answer. Upstream's
        agent spends one budget per API server on everything, Events included (its event client
        shares the rest config's rate limiter); so does this one, with the rest first. Closing
        the sibling leaves the shared connections open."""
        return Transport(
            self.config,
            retry=self.retry,
            metrics=self.metrics,
            clock=self._clock,
            reachability=self.reachability,
            _connections=self._connections,
            _background=True,
        )

    @property
    def config(self) -> ClientConfig:
        return self._connections.config

    @property
    def server_clock(self) -> ServerClock:
        """The API server's clock as its answers tell (agent.kube.clock)."""
        return self._connections.server_clock

    @property
    def _config(self) -> ClientConfig:
        return self._connections.config

    @property
    def _retired(self) -> set[_Slot]:
        return self._connections.retired

    @property
    def _host(self) -> str:
        return self._connections.host

    @property
    def host(self) -> str:
        return self._connections.config.host

    # --- lifecycle -----------------------------------------------------------------------------

    async def reload(self, config: ClientConfig, *, drain_timeout: float | None = None) -> None:
        """Use `config` (e.g. a rotated client certificate) for every new request. The old
        client closes when its in-flight work ends, or after `drain_timeout` seconds at most
        (streams cut then end with TransportError, which reflectors resume from)."""
        await self._connections.reload(config, drain_timeout)

    async def close(self) -> None:
        if self._owns_connections:
            await self._connections.close()

    def _acquire(self) -> _Slot:
        return self._connections.acquire()

    async def _release(self, slot: _Slot) -> None:
        await self._connections.release(slot)

    def on_unauthorized(self, listener: UnauthorizedListener) -> None:
        """Call `listener` at every 401 answer, of this Transport and its background sibling
        (e.g. to say why a client certificate was refused)."""
        self._connections.unauthorized_listeners.append(listener)

    def _refused(self) -> None:
        for listener in self._connections.unauthorized_listeners:
            listener(self._config, self.server_clock.now())

    # --- requests ------------------------------------------------------------------------------

    async def _throttle(self) -> None:
        bucket = self._connections.bucket
        if bucket is None:
            return
        if self._background:
            await bucket.wait_spare()
        else:
            await bucket.wait()

    async def _auth_headers(self, headers: dict[str, str]) -> None:
        source = self._config.token_source
        if source is not None:
            value = await source.authorization()
            if value:
                headers["Authorization"] = value

    def _observe(self, method: str, code: str, started: float) -> None:
        if self.metrics is not None:
            self.metrics.observe(
                method=method, host=self._host, code=code, seconds=time.monotonic() - started
            )

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
        accept: str = "application/json",
        timeout: float | None = None,
        raise_for_status: bool = True,
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        """Send one request with throttling, auth and retries. Error statuses raise the typed
        ApiError unless `raise_for_status` is false; no response at all raises TransportError."""
        method = method.upper()
        query = urlencode(params, quote_via=quote) if params else ""
        refreshed = False
        retries = 0
        connection_failures = 0
        while True:
            self._admit(method, path)
            await self._throttle()
            priority = self._connections.priority
            if self._background:
                await priority.turn()
            sent = {"Accept": accept, **(headers or {})}
            if content_type:
                sent["Content-Type"] = content_type
            await self._auth_headers(sent)
            slot = self._acquire()
            started = time.monotonic()
            foreground = not self._background
            if foreground:
                priority.started()
            try:
                answer = await slot.engine.request(method, path, query, sent, body, timeout)
            except ConnectionFailedError as exc:
                self._observe(method, "<error>", started)
                await self._release(slot)
                if (
                    method in IDEMPOTENT_READS
                    and not exc.timeout
                    and connection_failures < self.retry.connection_retries
                ):
                    delay = self.retry.connection_delay(connection_failures)
                    connection_failures += 1
                    log.debug("retrying %s %s after %s", method, path, exc)
                    await self._clock.sleep(delay)
                    continue
                self.reachability.failed(str(exc))
                raise TransportError(f"{method} {path}: {exc}", method=method, url=path) from exc
            finally:
                if foreground:
                    priority.finished()
            await self._release(slot)
            self.reachability.answered()
            self._observe(method, str(answer.status), started)
            self.server_clock.observe(answer.headers.get("date"), started, time.monotonic())
            result = Response(
                status=answer.status,
                headers=answer.headers,
                content=answer.content,
                method=method,
                url=path,
            )
            if result.status == 401 and not refreshed and self._config.token_source is not None:
                refreshed = True
                await self._config.token_source.refresh()
                continue
            wait = self._retry_after(result)
            if wait is not None and retries < self.retry.max_retries:
                retries += 1
                log.debug(
                    "server asked to retry %s %s (code %d, retry %d) in %.1fs",
                    method,
                    path,
                    result.status,
                    retries,
                    wait,
                )
                await self._clock.sleep(wait)
                continue
            if result.status == 401:
                self._refused()
            if raise_for_status and not result.ok:
                raise from_response(result.status, result.content, result.headers)
            return result

    def _admit(self, method: str, path: str) -> None:
        """Fail at once, without dialling, while the server is unreachable and another request
        has this reconnect slot (see Reachability.admit)."""
        wait = self.reachability.admit()
        if wait is not None:
            raise TransportError(
                f"{method} {path}: not sent, {self.reachability.name} did not answer the last "
                f"attempt; the next one in {wait:.1f}s",
                method=method,
                url=path,
            )

    def _retry_after(self, response: Response) -> float | None:
        if response.status != 429 and response.status < 500:
            return None
        value = response.headers.get("retry-after")
        if value is None:
            return None
        try:
            seconds = float(int(value.strip()))
        except ValueError:
            return None
        return min(max(seconds, 0.0), self.retry.max_retry_after)

    @contextlib.asynccontextmanager
    async def stream(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        accept: str = "application/json",
        read_timeout: float | None = None,
    ) -> AsyncIterator[StreamResponse]:
        """A long response read line by line (watch). `read_timeout` bounds the silence between
        chunks; error statuses raise ApiError before anything is yielded."""
        method = method.upper()
        query = urlencode(params, quote_via=quote) if params else ""
        refreshed = False
        while True:
            self._admit(method, path)
            await self._throttle()
            headers = {"Accept": accept}
            await self._auth_headers(headers)
            slot = self._acquire()
            started = time.monotonic()
            answered = False
            try:
                async with slot.engine.stream(method, path, query, headers, read_timeout) as answer:
                    answered = True
                    self.reachability.answered()
                    self._observe(method, str(answer.status), started)
                    self.server_clock.observe(answer.headers.get("date"), started, time.monotonic())
                    if answer.status < 400:
                        yield StreamResponse(answer.status, answer.headers, answer.chunks(), path)
                        return
                    content = await answer.read()
            except ConnectionFailedError as exc:
                if not answered:
                    self._observe(method, "<error>", started)
                    self.reachability.failed(str(exc))
                raise TransportError(f"{method} {path}: {exc}", method=method, url=path) from exc
            finally:
                await self._release(slot)
            if answer.status == 401 and not refreshed and self._config.token_source is not None:
                refreshed = True
                await self._config.token_source.refresh()
                continue
            if answer.status == 401:
                self._refused()
            raise from_response(answer.status, content, answer.headers)
