from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Any

import httpx
import pytest

from agent.kube import errors
from agent.kube.config import ClientConfig, StaticToken
from agent.kube.ratelimit import TokenBucket
from agent.kube.transport import (
    RetryPolicy,
    Transport,
    build_ssl_context,
    no_proxy_matches,
    select_proxy,
)

HOST = "https://api.example:6443"


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


def transport(handler: Any, cfg: ClientConfig | None = None, **kw: Any) -> Transport:
    return Transport(
        cfg or ClientConfig(host=HOST, qps=0),
        transport_factory=lambda _c: httpx.MockTransport(handler),
        **kw,
    )


def status_response(
    code: int, reason: str, headers: dict[str, str] | None = None
) -> httpx.Response:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": reason,
        "code": code,
        "message": reason,
        "metadata": {},
    }
    return httpx.Response(code, json=body, headers=headers)


async def test_retry_after_is_honoured_for_any_verb_and_capped() -> None:
    answers = [
        status_response(429, "TooManyRequests", {"Retry-After": "120"}),
        status_response(503, "ServiceUnavailable", {"Retry-After": "2"}),
        httpx.Response(201, json={"ok": True}),
    ]
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.method)
        return answers.pop(0)

    clock = RecordingClock()
    t = transport(handler, clock=clock, retry=RetryPolicy(max_retry_after=30.0))
    response = await t.request("POST", "/api/v1/namespaces/a/configmaps", body=b"{}")
    assert response.status == 201
    assert seen == ["POST", "POST", "POST"]
    assert clock.sleeps == [30.0, 2.0]


async def test_5xx_without_retry_after_is_not_retried() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return status_response(500, "InternalError")

    with pytest.raises(errors.ServerError) as info:
        await transport(handler).request("GET", "/api/v1/pods")
    assert calls == 1
    assert info.value.status["reason"] == "InternalError"
    assert info.value.code == 500


async def test_retry_after_gives_up_after_max_retries() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return status_response(429, "TooManyRequests", {"Retry-After": "1"})

    clock = RecordingClock()
    t = transport(handler, clock=clock, retry=RetryPolicy(max_retries=3))
    with pytest.raises(errors.TooManyRequestsError) as info:
        await t.request("GET", "/api/v1/pods")
    assert calls == 4
    assert info.value.retry_after == 1.0


async def test_connection_errors_retried_for_get_only() -> None:
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.method)
        if len(calls) < 3:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, json={})

    clock = RecordingClock()
    t = transport(handler, clock=clock, retry=RetryPolicy(connection_backoff=0.1))
    assert (await t.request("GET", "/version")).status == 200
    assert clock.sleeps == [0.1, 0.2]

    def failing(request: httpx.Request) -> httpx.Response:
        calls.append(request.method)
        raise httpx.ReadError("reset", request=request)

    calls.clear()
    with pytest.raises(errors.TransportError) as info:
        await transport(failing, clock=clock).request("POST", "/x", body=b"{}")
    assert calls == ["POST"]
    assert not isinstance(info.value, httpx.HTTPError)
    assert info.value.method == "POST"


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
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization", ""))
        if request.headers.get("authorization") != "Bearer new":
            return status_response(401, "Unauthorized")
        return httpx.Response(200, json={})

    token = RotatingToken()
    t = transport(handler, ClientConfig(host=HOST, qps=0, token_source=token))
    assert (await t.request("GET", "/api")).status == 200
    assert seen == ["Bearer old", "Bearer new"]

    def always_401(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization", ""))
        return status_response(401, "Unauthorized")

    seen.clear()
    t2 = transport(always_401, ClientConfig(host=HOST, qps=0, token_source=RotatingToken()))
    with pytest.raises(errors.UnauthorizedError):
        await t2.request("GET", "/api")
    assert len(seen) == 2
    assert "old" not in caplog.text
    assert "new" not in caplog.text


async def test_qps_throttling_spaces_requests() -> None:
    clock = RecordingClock()
    t = transport(
        lambda r: httpx.Response(200, json={}),
        ClientConfig(host=HOST, qps=2.0, burst=1),
        clock=clock,
    )
    for _ in range(3):
        await t.request("GET", "/version")
    assert clock.sleeps == [0.5, 1.0]


async def test_sibling_with_own_budget_shares_connections_and_reloads() -> None:
    built: list[str] = []

    def factory(cfg: ClientConfig) -> httpx.MockTransport:
        tag = "new" if cfg.client_cert_pem else "old"
        built.append(tag)
        return httpx.MockTransport(lambda r: httpx.Response(200, json={"served_by": tag}))

    clock = RecordingClock()
    main = Transport(
        ClientConfig(host=HOST, qps=2.0, burst=1), transport_factory=factory, clock=clock
    )
    events = main.with_own_budget()
    # Each spends its own single burst token first: neither waits for the other's requests.
    await main.request("GET", "/version")
    await events.request("GET", "/version")
    assert clock.sleeps == []
    await events.request("GET", "/version")
    assert clock.sleeps == [0.5]
    # One connection pool: a reload of the main transport is what the sibling uses too.
    await main.reload(main.config.with_client_certificate(b"cert", b"key"))
    assert (await events.request("GET", "/version")).json() == {"served_by": "new"}
    assert built == ["old", "new"]
    # Closing the sibling leaves the shared connections to their owner.
    await events.close()
    assert (await main.request("GET", "/version")).json() == {"served_by": "new"}
    await main.close()


async def test_token_bucket_burst_then_rate() -> None:
    clock = RecordingClock()
    bucket = TokenBucket(10.0, 3, clock=clock)
    delays = [bucket.reserve() for _ in range(5)]
    assert delays[:3] == [0.0, 0.0, 0.0]
    assert delays[3:] == pytest.approx([0.1, 0.2])


async def test_user_agent_sni_and_metrics() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(404, json={"kind": "Status", "code": 404, "reason": "NotFound"})

    observed: list[tuple[str, str, str]] = []

    class Metrics:
        def observe(self, *, method: str, host: str, code: str, seconds: float) -> None:
            observed.append((method, host, code))

    cfg = ClientConfig(host=HOST, qps=0, tls_server_name="kubernetes", user_agent="ua/1")
    t = transport(handler, cfg, metrics=Metrics())
    with pytest.raises(errors.NotFoundError):
        await t.request("GET", "/api/v1/namespaces/x")
    assert seen[0].headers["user-agent"] == "ua/1"
    assert seen[0].extensions["sni_hostname"] == "kubernetes"
    assert observed == [("GET", "api.example:6443", "404")]


async def test_reload_keeps_stream_on_old_client_until_done() -> None:
    built: list[httpx.MockTransport] = []
    release = asyncio.Event()

    class Stream(httpx.AsyncByteStream):
        async def __aiter__(self) -> Any:
            yield b'{"type":"ADDED"}\n'
            await release.wait()
            yield b'{"type":"MODIFIED"}\n'

    def factory(cfg: ClientConfig) -> httpx.MockTransport:
        tag = "new" if cfg.client_cert_pem else "old"

        def handler(request: httpx.Request) -> httpx.Response:
            if request.url.params.get("watch"):
                return httpx.Response(200, stream=Stream())
            return httpx.Response(200, json={"served_by": tag})

        built.append(httpx.MockTransport(handler))
        return built[-1]

    t = Transport(ClientConfig(host=HOST, qps=0), transport_factory=factory)
    lines: list[bytes] = []
    async with t.stream("GET", "/api/v1/pods", params={"watch": "true"}) as stream:
        it = stream.lines()
        lines.append(await it.__anext__())
        await t.reload(t.config.with_client_certificate(b"cert", b"key"))
        assert (await t.request("GET", "/version")).json() == {"served_by": "new"}
        old_slot = next(iter(t._retired))
        assert not old_slot.closed
        release.set()
        lines.append(await it.__anext__())
        await it.aclose()
    assert lines == [b'{"type":"ADDED"}', b'{"type":"MODIFIED"}']
    assert old_slot.closed
    assert len(built) == 2
    await t.close()


async def test_stream_error_status_raises_typed_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return status_response(410, "Expired")

    t = transport(handler)
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


def test_http2_is_offered_by_default() -> None:
    from agent.kube.transport import default_transport_factory

    config = ClientConfig(host=HOST)
    assert config.http2
    pool = default_transport_factory(config)._pool
    assert pool._http2  # ALPN offers h2 and http/1.1
    assert pool._http1
