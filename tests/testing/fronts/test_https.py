from __future__ import annotations

import asyncio
import hashlib
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from agent.testing.https import HttpsServer, ResponseWithFollowUp
from agent.testing.pki import CertificateAuthority
from agent.testing.wire import ApiRequest, ApiResponse

from .fakes import FakeApi, client_ssl_context, der_of, eventually, loads


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    return CertificateAuthority.generate("test-ca")


@pytest.fixture(scope="module")
def serving(ca: CertificateAuthority) -> tuple[bytes, bytes]:
    return ca.issue("kube-apiserver", dns_names=("localhost",), ips=("127.0.0.1",), usage="server")


@pytest.fixture
async def api() -> FakeApi:
    return FakeApi()


@pytest.fixture
async def server(
    api: FakeApi, ca: CertificateAuthority, serving: tuple[bytes, bytes]
) -> AsyncIterator[HttpsServer]:
    async with HttpsServer(api, serving[0], serving[1], ca.cert_pem) as srv:
        yield srv


@pytest.fixture
def verify(ca: CertificateAuthority, tmp_path: Path) -> ssl.SSLContext:
    return client_ssl_context(ca.cert_pem, tmp_path)


async def test_serves_https_on_loopback_without_client_cert(
    server: HttpsServer, verify: ssl.SSLContext
) -> None:
    assert server.url.startswith("https://127.0.0.1:")
    assert server.port > 0
    async with httpx.AsyncClient(verify=verify, base_url=server.url) as client:
        r = await client.get(
            "/echo", params=[("a", "1"), ("a", "2"), ("empty", "")], headers={"X-Thing": "v"}
        )
    assert r.status_code == 200
    assert r.http_version == "HTTP/1.1"
    seen = r.json()
    assert seen["method"] == "GET"
    assert seen["path"] == "/echo"
    assert seen["query"] == {"a": ["1", "2"], "empty": [""]}
    assert seen["headers"]["x-thing"] == "v"
    assert seen["peerCN"] is None
    assert seen["user"] == "system:anonymous"


async def test_serving_certificate_valid_for_localhost(
    server: HttpsServer, verify: ssl.SSLContext
) -> None:
    async with httpx.AsyncClient(verify=verify) as client:
        r = await client.get(f"https://localhost:{server.port}/echo")
    assert r.status_code == 200


async def test_client_certificate_reaches_the_request(
    server: HttpsServer, api: FakeApi, ca: CertificateAuthority, tmp_path: Path
) -> None:
    cert_key = ca.issue("system:node:member1", ("system:nodes",))
    ctx = client_ssl_context(ca.cert_pem, tmp_path, cert_key)
    async with httpx.AsyncClient(verify=ctx, base_url=server.url) as client:
        r = await client.get("/echo")
    assert r.status_code == 200
    assert r.json()["peerCN"] == "system:node:member1"
    assert api.seen[-1].peer_cert_der == der_of(cert_key[0])


async def test_client_certificate_of_another_ca_is_refused_at_handshake(
    server: HttpsServer, ca: CertificateAuthority, tmp_path: Path
) -> None:
    other = CertificateAuthority.generate("other-ca")
    ctx = client_ssl_context(ca.cert_pem, tmp_path, other.issue("mallory"))
    async with httpx.AsyncClient(verify=ctx, base_url=server.url) as client:
        with pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)):
            await client.get("/echo")


async def test_h2_clients_fall_back_to_http11(server: HttpsServer, verify: ssl.SSLContext) -> None:
    async with httpx.AsyncClient(verify=verify, base_url=server.url, http2=True) as client:
        r = await client.get("/echo")
    assert r.status_code == 200
    assert r.http_version == "HTTP/1.1"


async def test_error_status_passes_through_unchanged(
    server: HttpsServer, verify: ssl.SSLContext
) -> None:
    async with httpx.AsyncClient(verify=verify, base_url=server.url) as client:
        r = await client.get("/unauthorized")
    assert r.status_code == 401
    assert r.headers["content-type"] == "application/json"
    assert r.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }


async def test_large_request_body(server: HttpsServer, verify: ssl.SSLContext) -> None:
    body = bytes(range(256)) * (12 * 4096)  # 12 MiB
    async with httpx.AsyncClient(verify=verify, base_url=server.url, timeout=30) as client:
        r = await client.put("/echo", content=body)
    assert r.status_code == 200
    assert r.json()["bodyLength"] == len(body)
    assert r.json()["bodySha256"] == hashlib.sha256(body).hexdigest()


async def test_watch_chunks_arrive_as_produced(
    server: HttpsServer, api: FakeApi, verify: ssl.SSLContext
) -> None:
    async with (
        httpx.AsyncClient(verify=verify, base_url=server.url) as client,
        client.stream("GET", "/api/v1/pods", params={"watch": "true"}) as r,
    ):
        assert r.status_code == 200
        assert r.headers.get("transfer-encoding") == "chunked"
        lines = r.aiter_lines()
        api.release(b'{"type":"ADDED"}\n')
        # The second event is only produced after the client saw the first one.
        assert json.loads(await anext(lines)) == {"type": "ADDED"}
        api.release(b'{"type":"MODIFIED"}\n')
        assert json.loads(await anext(lines)) == {"type": "MODIFIED"}
        api.finish()
        assert [line async for line in lines] == []
    await eventually(lambda: api.streams_closed == 1)


async def test_client_disconnect_releases_the_watch(
    server: HttpsServer, api: FakeApi, verify: ssl.SSLContext
) -> None:
    async with httpx.AsyncClient(verify=verify, base_url=server.url) as client:
        async with client.stream("GET", "/api/v1/pods?watch=1") as r:
            api.release(b"one\n")
            assert await anext(r.aiter_lines()) == "one"
            assert api.streams_closed == 0
        # Leaving the stream early closes the connection; the server's watch ends.
        await eventually(lambda: api.streams_closed == 1)
        # The server still serves new requests.
        assert (await client.get("/echo")).status_code == 200


async def test_stop_ends_open_watches(
    api: FakeApi, ca: CertificateAuthority, serving: tuple[bytes, bytes], verify: ssl.SSLContext
) -> None:
    srv = HttpsServer(api, serving[0], serving[1], ca.cert_pem)
    await srv.start()
    async with (
        httpx.AsyncClient(verify=verify, base_url=srv.url) as client,
        client.stream("GET", "/api/v1/pods?watch=1") as r,
    ):
        api.release(b"one\n")
        lines = r.aiter_lines()
        assert await anext(lines) == "one"
        await srv.stop()
        await eventually(lambda: api.streams_closed == 1)
        with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError, StopAsyncIteration)):
            await anext(lines)
    assert not srv.online


async def test_offline_refuses_and_resets_then_comes_back_on_same_port(
    server: HttpsServer, api: FakeApi, verify: ssl.SSLContext
) -> None:
    port = server.port
    async with httpx.AsyncClient(verify=verify, base_url=server.url) as client:
        first = (await client.get("/echo")).json()["handled"]
        async with client.stream("GET", "/api/v1/pods?watch=1") as r:
            api.release(b"one\n")
            lines = r.aiter_lines()
            assert await anext(lines) == "one"
            await server.go_offline()
            with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
                await anext(lines)
        await eventually(lambda: api.streams_closed == 1)
        with pytest.raises(httpx.ConnectError):
            await client.get("/echo")
        await server.come_back()
        assert server.port == port
        r2 = await client.get("/echo")
    assert r2.status_code == 200
    # Same handler, state kept: the request counter continued.
    assert r2.json()["handled"] > first


async def test_drop_streams_resets_only_watch_connections(
    server: HttpsServer, api: FakeApi, verify: ssl.SSLContext
) -> None:
    async with httpx.AsyncClient(verify=verify, base_url=server.url) as client:
        async with client.stream("GET", "/api/v1/pods?watch=1") as r:
            api.release(b"one\n")
            lines = r.aiter_lines()
            assert await anext(lines) == "one"
            assert await server.drop_streams() == 1
            with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
                await anext(lines)
        await eventually(lambda: api.streams_closed == 1)
        assert (await client.get("/echo")).status_code == 200


class _FollowUp:
    def __init__(self) -> None:
        self.done = False

    async def handle(self, req: ApiRequest) -> ApiResponse:
        async def then() -> None:
            self.done = True

        return ResponseWithFollowUp(
            202, b'{"ok":true}', {"Content-Type": "application/json"}, then=then
        )


async def test_follow_up_runs_after_the_response(
    ca: CertificateAuthority, serving: tuple[bytes, bytes], verify: ssl.SSLContext
) -> None:
    handler = _FollowUp()
    async with (
        HttpsServer(handler, serving[0], serving[1], ca.cert_pem) as srv,
        httpx.AsyncClient(verify=verify, base_url=srv.url) as client,
    ):
        r = await client.post("/x")
        assert r.status_code == 202
        assert loads(r.content) == {"ok": True}
        await eventually(lambda: handler.done)


async def test_curl_style_expect_continue_and_head(
    server: HttpsServer, ca: CertificateAuthority, tmp_path: Path
) -> None:
    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(ca.cert_pem)
    body_file = tmp_path / "body"
    body_file.write_bytes(b"x" * 3_000_000)
    proc = await asyncio.create_subprocess_exec(
        "curl",
        "-sS",
        "--cacert",
        str(ca_file),
        "-X",
        "PUT",
        "--data-binary",
        f"@{body_file}",
        "-H",
        "Expect: 100-continue",
        "--expect100-timeout",
        "30",
        "--max-time",
        "20",
        f"{server.url}/echo",
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await proc.communicate()
    assert proc.returncode == 0
    assert loads(out)["bodyLength"] == 3_000_000
    ctx = client_ssl_context(ca.cert_pem, tmp_path)
    async with httpx.AsyncClient(verify=ctx, base_url=server.url) as client:
        head = await client.head("/echo")
    assert head.status_code == 200
    assert head.content == b""
