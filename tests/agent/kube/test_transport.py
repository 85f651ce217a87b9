from __future__ import annotations

import asyncio
import json
import logging
import ssl
from typing import Any

import httpx
import pytest

from agent.kube import errors
from agent.kube.clock import FakeClock
from agent.kube.config import ClientConfig, StaticToken
from agent.kube.ratelimit import TokenBucket
from agent.kube.transport import (
    RetryPolicy,
    Transport,
    TransportFactory,
    build_ssl_context,
    no_proxy_matches,
    select_proxy,
)
from tests.agent.kube.wire import Call, Emulated, Wire, emulated, status

HOST = "https://api.example:6443"
CONFIGMAPS = "/api/v1/namespaces/a/configmaps"


class RecordingClock:
    """Real loop time, but sleeps are recorded and return at once."""

    def __init__(self) -> None:
        self.sleeps: list[float] = []
        self._now = 0.0

    def now(self) -> float:
        return self._now

    def call_later(self, delay: float, callback: Any) -> Any:
        return asyncio.get_running_loop().call_later(delay, callback)

    async def sleep(self, delay: float) -> None:
        self.sleeps.append(round(delay, 6))


def configmap(name: str) -> bytes:
    return json.dumps(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
    ).encode()


async def test_retry_after_is_honoured_for_any_verb_and_capped() -> None:
    api = emulated()
    await api.namespace("a")
    api.faults.fail_next(1, 429, verb="create", retry_after=120)
    api.faults.fail_next(1, 503, verb="create", retry_after=2)
    clock = RecordingClock()
    t = api.transport(clock=clock, retry=RetryPolicy(max_retry_after=30.0))
    response = await t.request("POST", CONFIGMAPS, body=configmap("c"))
    assert response.status == 201
    assert [c.method for c in api.wire.calls] == ["POST", "POST", "POST"]
    assert clock.sleeps == [30.0, 2.0]


async def test_5xx_without_retry_after_is_not_retried() -> None:
    api = emulated()
    api.faults.add_error(500)
    with pytest.raises(errors.ServerError) as info:
        await api.transport().request("GET", "/api/v1/pods")
    assert len(api.wire.calls) == 1
    assert info.value.status["reason"] == "InternalError"
    assert info.value.code == 500


async def test_retry_after_gives_up_after_max_retries() -> None:
    api = emulated()
    api.faults.add_error(429, retry_after=1)
    clock = RecordingClock()
    t = api.transport(clock=clock, retry=RetryPolicy(max_retries=3))
    with pytest.raises(errors.TooManyRequestsError) as info:
        await t.request("GET", "/api/v1/pods")
    assert len(api.wire.calls) == 4
    assert info.value.retry_after == 1.0


async def test_connection_errors_retried_for_get_only() -> None:
    api = emulated()
    await api.namespace("a")

    def refused_twice(call: Call) -> None:
        if len(api.wire.calls) < 3:
            raise httpx.ConnectError("refused")

    api.wire.answers.append(refused_twice)
    clock = RecordingClock()
    t = api.transport(clock=clock, retry=RetryPolicy(connection_backoff=0.1))
    assert (await t.request("GET", "/version")).status == 200
    assert clock.sleeps == [0.1, 0.2]

    def reset(call: Call) -> None:
        raise httpx.ReadError("reset")

    api.wire.answers[:] = [reset]
    api.wire.calls.clear()
    with pytest.raises(errors.TransportError) as info:
        await api.transport(clock=clock).request("POST", CONFIGMAPS, body=configmap("c"))
    assert [c.method for c in api.wire.calls] == ["POST"]
    assert not isinstance(info.value, httpx.HTTPError)
    assert info.value.method == "POST"
    # Not retried: nothing was written.
    assert api.server.storage.get(("", "configmaps"), "a", "c") is None


class RotatingToken:
    def __init__(self) -> None:
        self.value = "Bearer old"
        self.refreshes = 0

    async def authorization(self) -> str | None:
        return self.value

    async def refresh(self) -> None:
        self.refreshes += 1
        self.value = "Bearer new"


async def test_401_refreshes_token_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    api = emulated(tokens=["new"])
    token = RotatingToken()
    t = api.transport(ClientConfig(host=HOST, qps=0, token_source=token))
    assert (await t.request("GET", "/api")).status == 200
    assert [c.headers["authorization"] for c in api.wire.calls] == ["Bearer old", "Bearer new"]

    # A server that takes neither token.
    api = emulated(tokens=[])
    t2 = api.transport(ClientConfig(host=HOST, qps=0, token_source=RotatingToken()))
    with pytest.raises(errors.UnauthorizedError):
        await t2.request("GET", "/api")
    assert len(api.wire.calls) == 2
    assert "old" not in caplog.text
    assert "new" not in caplog.text


async def test_qps_throttling_spaces_requests() -> None:
    clock = RecordingClock()
    t = emulated().transport(ClientConfig(host=HOST, qps=2.0, burst=1), clock=clock)
    for _ in range(3):
        await t.request("GET", "/version")
    assert clock.sleeps == [0.5, 1.0]


def wires_per_config(api: Emulated) -> tuple[dict[str, Wire], TransportFactory]:
    """A transport factory building a new wire to the emulator for each client config,
    named "old" or "new" by whether the config carries a client certificate."""
    built: dict[str, Wire] = {}

    def factory(cfg: ClientConfig) -> Wire:
        built["new" if cfg.client_cert_pem else "old"] = Wire(api.server)
        return built["new" if cfg.client_cert_pem else "old"]

    return built, factory


async def test_background_sibling_shares_connections_budget_and_reloads() -> None:
    built, factory = wires_per_config(emulated())
    clock = FakeClock()
    main = Transport(
        ClientConfig(host=HOST, qps=2.0, burst=1), transport_factory=factory, clock=clock
    )
    background = main.background()
    await main.request("GET", "/version")  # the one burst token
    # One budget: the background request waits for a token to refill.
    waiting = asyncio.create_task(background.request("GET", "/version"))
    await settle()
    assert not waiting.done()
    clock.advance(0.5)
    await settle()
    assert (await waiting).status == 200
    # One connection pool: a reload of the main transport is what the sibling uses too.
    await main.reload(main.config.with_client_certificate(b"cert", b"key"))
    clock.advance(0.5)
    assert (await background.request("GET", "/version")).status == 200
    assert list(built) == ["old", "new"]
    assert len(built["old"].calls) == 2
    assert len(built["new"].calls) == 1
    # Closing the sibling leaves the shared connections to their owner.
    await background.close()
    clock.advance(0.5)
    assert (await main.request("GET", "/version")).status == 200
    assert len(built["new"].calls) == 2
    await main.close()


async def test_background_takes_only_spare_tokens() -> None:
    """A reservation made while a background caller waits is served first: the background
    caller gets a token only once nobody is owed one."""
    clock = FakeClock()
    bucket = TokenBucket(10.0, 1, clock=clock)
    assert bucket.try_take()
    spare = asyncio.create_task(bucket.wait_spare())
    await settle()
    assert bucket.reserve() == pytest.approx(0.1)  # a foreground request, in debt
    clock.advance(0.1)
    await settle()
    assert not spare.done()  # the refilled token was the foreground request's
    clock.advance(0.1)
    await settle()
    assert spare.done()


async def settle() -> None:
    """Let the tasks woken so far run (no time passes on the fake clock)."""
    for _ in range(20):
        await asyncio.sleep(0)


async def test_token_bucket_burst_then_rate() -> None:
    clock = RecordingClock()
    bucket = TokenBucket(10.0, 3, clock=clock)
    delays = [bucket.reserve() for _ in range(5)]
    assert delays[:3] == [0.0, 0.0, 0.0]
    assert delays[3:] == pytest.approx([0.1, 0.2])


async def test_user_agent_sni_and_metrics() -> None:
    api = emulated()
    observed: list[tuple[str, str, str]] = []

    class Metrics:
        def observe(self, *, method: str, host: str, code: str, seconds: float) -> None:
            observed.append((method, host, code))

    cfg = ClientConfig(host=HOST, qps=0, tls_server_name="kubernetes", user_agent="ua/1")
    t = api.transport(cfg, metrics=Metrics())
    with pytest.raises(errors.NotFoundError):
        await t.request("GET", "/api/v1/namespaces/x")
    assert api.wire.calls[0].headers["user-agent"] == "ua/1"
    assert api.wire.calls[0].sni == "kubernetes"
    assert observed == [("GET", "api.example:6443", "404")]


async def test_reload_keeps_stream_on_old_client_until_done() -> None:
    api = emulated()
    built, factory = wires_per_config(api)
    t = Transport(ClientConfig(host=HOST, qps=0), transport_factory=factory)
    since = str(api.server.storage.revision)
    names: list[str] = []
    params = {"watch": "true", "resourceVersion": since}
    async with t.stream("GET", "/api/v1/namespaces", params=params) as stream:
        it = stream.lines()
        await api.namespace("before")
        names.append(json.loads(await it.__anext__())["object"]["metadata"]["name"])
        await t.reload(t.config.with_client_certificate(b"cert", b"key"))
        assert (await t.request("GET", "/version")).status == 200
        assert [c.path for c in built["new"].calls] == ["/version"]
        old_slot = next(iter(t._retired))
        assert not old_slot.closed
        await api.namespace("after")
        names.append(json.loads(await it.__anext__())["object"]["metadata"]["name"])
        await it.aclose()
    assert names == ["before", "after"]
    assert old_slot.closed
    assert list(built) == ["old", "new"]
    await t.close()


async def test_stream_error_status_raises_typed_error() -> None:
    # An HTTP 410 to the watch request itself (servers send theirs as an ERROR event).
    api = emulated()
    api.wire.answers.append(lambda c: httpx.Response(410, json=status(410, "Expired")))
    t = api.transport()
    with pytest.raises(errors.ExpiredError):
        async with t.stream("GET", "/api/v1/pods", params={"watch": "true"}):
            pass


def test_no_proxy_rules() -> None:
    assert no_proxy_matches("10.1.2.3", 443, "example.com, 10.0.0.0/8")
    assert not no_proxy_matches("11.1.2.3", 443, "10.0.0.0/8")
    assert no_proxy_matches("api.example.com", 443, ".example.com")
    assert no_proxy_matches("api.example.com", 443, "example.com")
    assert not no_proxy_matches("badexample.com", 443, "example.com")
    assert no_proxy_matches("fd00::1", 443, "fd00::/8")
    assert no_proxy_matches("host", 6443, "host:6443")
    assert not no_proxy_matches("host", 443, "host:6443")
    assert no_proxy_matches("anything", 1, "*")


def test_select_proxy() -> None:
    env = {"HTTPS_PROXY": "proxy:3128", "NO_PROXY": "10.96.0.0/12"}
    assert select_proxy(ClientConfig(host="https://10.96.0.1:443"), env) is None
    assert select_proxy(ClientConfig(host="https://api.x:6443"), env) == "http://proxy:3128"
    assert select_proxy(ClientConfig(host="https://127.0.0.1:6443"), env) is None
    assert select_proxy(ClientConfig(host="https://api.x", trust_env=False), env) is None
    cfg = ClientConfig(host="https://10.96.0.1", proxy_url="socks5://p:1080")
    assert select_proxy(cfg, env) == "socks5://p:1080"


def test_ssl_context_defaults_to_verification(tmp_path: Any) -> None:
    from tests.agent.kube.pki import make_pki

    pki = make_pki()
    ctx = build_ssl_context(
        ClientConfig(
            host=HOST, ca_pem=pki.ca_pem, client_cert_pem=pki.cert_pem, client_key_pem=pki.key_pem
        )
    )
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    assert ctx.check_hostname
    assert len(ctx.get_ca_certs()) == 1
    insecure = build_ssl_context(ClientConfig(host=HOST, verify=False))
    assert insecure.verify_mode == ssl.CERT_NONE
    assert not insecure.check_hostname


async def test_static_token_is_normalized_and_redacted() -> None:
    token = StaticToken("abc")
    assert await token.authorization() == "Bearer abc"
    assert "abc" not in repr(ClientConfig(host=HOST, token_source=token, client_key_pem=b"KEY"))


def test_http2_by_default_httpx_for_the_rest() -> None:
    """agent.kube.http2 for an https server reached directly or through an http:// proxy;
    httpx (HTTP/1.1) for plain http, SOCKS proxies, or with http2 off."""
    from agent.kube.transport import _engine, _Http2, _Httpx

    config = ClientConfig(host=HOST, trust_env=False)
    assert config.http2
    assert isinstance(_engine(config, None), _Http2)
    proxied = ClientConfig(host=HOST, proxy_url="http://proxy:3128")
    assert isinstance(_engine(proxied, None), _Http2)
    assert isinstance(_engine(ClientConfig(host="http://api:8080"), None), _Httpx)
    socks = ClientConfig(host=HOST, proxy_url="socks5://p:1080")
    assert isinstance(_engine(socks, None), _Httpx)
    assert isinstance(_engine(ClientConfig(host=HOST, http2=False), None), _Httpx)


class HeldWire(httpx.AsyncBaseTransport):
    """Answers 200 to every request, in the order sent; requests whose path is in `held` are
    answered only once released."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.held: dict[str, asyncio.Future[None]] = {}

    def hold(self, path: str) -> None:
        self.held[path] = asyncio.get_running_loop().create_future()

    def release(self, path: str) -> None:
        self.held.pop(path).set_result(None)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.sent.append(path)
        if path in self.held:
            await self.held[path]
        return httpx.Response(200, json={})


async def test_background_requests_wait_for_the_others_in_flight() -> None:
    """An Event emitted while a status write is on its way goes after it is answered, not
    beside it (the API server would serve them in the order they came)."""
    wire = HeldWire()
    main = Transport(ClientConfig(host=HOST, qps=0), transport_factory=lambda _c: wire)
    events = main.background()
    wire.hold("/status")
    status = asyncio.create_task(main.request("PATCH", "/status"))
    await settle()
    event = asyncio.create_task(events.request("POST", "/event"))
    await settle()
    assert wire.sent == ["/status"]
    wire.release("/status")
    await status
    await event
    assert wire.sent == ["/status", "/event"]
    # With nothing else in flight, a background request goes at once.
    await events.request("POST", "/event2")
    assert wire.sent[-1] == "/event2"
    await main.close()


async def test_background_requests_are_slowed_never_stopped_by_the_others() -> None:
    """While other requests keep coming, a waiting background request goes once two of them
    were answered: it never waits for a moment with nothing else in flight."""
    wire = HeldWire()
    main = Transport(ClientConfig(host=HOST, qps=0), transport_factory=lambda _c: wire)
    events = main.background()
    wire.hold("/long")  # in flight for the whole test
    long = asyncio.create_task(main.request("GET", "/long"))
    await settle()
    event = asyncio.create_task(events.request("POST", "/event"))
    await settle()
    await main.request("PATCH", "/status1")
    await settle()
    assert "/event" not in wire.sent
    await main.request("PATCH", "/status2")
    await event
    assert wire.sent == ["/long", "/status1", "/status2", "/event"]
    wire.release("/long")
    await long
    await main.close()


async def test_a_failed_request_does_not_hold_background_requests_back() -> None:
    wire = HeldWire()
    main = Transport(ClientConfig(host=HOST, qps=0), transport_factory=lambda _c: wire)
    events = main.background()
    wire.hold("/status")
    status = asyncio.create_task(main.request("PATCH", "/status"))
    await settle()
    status.cancel()
    with pytest.raises(asyncio.CancelledError):
        await status
    await asyncio.wait_for(events.request("POST", "/event"), timeout=5)
    assert wire.sent == ["/status", "/event"]
    await main.close()
