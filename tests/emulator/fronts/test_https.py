from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import h2.errors
import httpx
import pytest

from emulator.compression import GZIP_THRESHOLD_BYTES
from emulator.faults import ControlRouter, Faults
from emulator.https import HttpsServer
from emulator.pki import CertificateAuthority
from emulator.wire import ApiRequest, ApiResponse
from tests.emulator.auth.helpers import UNAUTHORIZED

from .core import (
    ADMIN_TOKEN,
    Core,
    client_ssl_context,
    core_ca,
    der_of,
    eventually,
    loads,
    user_of,
)
from .h2client import RawH2Client


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    return core_ca()


@pytest.fixture(scope="module")
def serving(ca: CertificateAuthority) -> tuple[bytes, bytes]:
    return ca.issue("kube-apiserver", dns_names=("localhost",), ips=("127.0.0.1",), usage="server")


@pytest.fixture
async def api() -> Core:
    return Core()


@pytest.fixture
async def server(
    api: Core, ca: CertificateAuthority, serving: tuple[bytes, bytes]
) -> AsyncIterator[HttpsServer]:
    async with HttpsServer(api.server, serving[0], serving[1], ca.cert_pem) as srv:
        yield srv


@pytest.fixture
def verify(ca: CertificateAuthority, tmp_path: Path) -> ssl.SSLContext:
    return client_ssl_context(ca.cert_pem, tmp_path)


@pytest.fixture(params=["HTTP/1.1", "HTTP/2"])
def protocol(request: pytest.FixtureRequest) -> str:
    """The HTTP version the client speaks: kube-apiserver's clients use both."""
    return str(request.param)


def https_client(
    verify: ssl.SSLContext, base_url: str, protocol: str, **kwargs: Any
) -> httpx.AsyncClient:
    http2 = protocol == "HTTP/2"
    return httpx.AsyncClient(
        verify=verify, base_url=base_url, http1=not http2, http2=http2, **kwargs
    )


async def test_serves_https_on_loopback_without_client_cert(
    server: HttpsServer, api: Core, verify: ssl.SSLContext, protocol: str
) -> None:
    assert server.url.startswith("https://127.0.0.1:")
    assert server.port > 0
    async with https_client(verify, server.url, protocol) as client:
        r = await client.get(
            "/api/v1/namespaces",
            params=[("a", "1"), ("a", "2"), ("empty", "")],
            headers={"X-Thing": "v"},
        )
        seen = api.seen[-1]
        escaped = await client.get("/api/v1/namespaces/ns/secrets/system%3Aa%20b")
    assert r.status_code == 200
    assert r.http_version == protocol
    assert r.json()["kind"] == "NamespaceList"
    assert seen.method == "GET"
    assert seen.path == "/api/v1/namespaces"
    assert seen.query == {"a": ["1", "2"], "empty": [""]}
    assert seen.headers["x-thing"] == "v"
    assert seen.peer_cert_der is None
    assert user_of(seen) == "system:anonymous"
    assert escaped.status_code == 404
    assert api.seen[-1].path == "/api/v1/namespaces/ns/secrets/system:a b"


async def test_serving_certificate_valid_for_localhost(
    server: HttpsServer, verify: ssl.SSLContext
) -> None:
    async with httpx.AsyncClient(verify=verify) as client:
        r = await client.get(f"https://localhost:{server.port}/version")
    assert r.status_code == 200


async def test_client_certificate_reaches_the_request(
    server: HttpsServer, api: Core, ca: CertificateAuthority, tmp_path: Path, protocol: str
) -> None:
    cert_key = ca.issue("system:node:member1", ("system:nodes",))
    ctx = client_ssl_context(ca.cert_pem, tmp_path, cert_key)
    async with https_client(ctx, server.url, protocol) as client:
        r = await client.get("/version")
    assert r.status_code == 200
    assert user_of(api.seen[-1]) == "system:node:member1"
    assert api.seen[-1].peer_cert_der == der_of(cert_key[0])


async def test_client_certificate_of_another_ca_is_refused_at_handshake(
    server: HttpsServer, ca: CertificateAuthority, tmp_path: Path
) -> None:
    other = CertificateAuthority.generate("other-ca")
    ctx = client_ssl_context(ca.cert_pem, tmp_path, other.issue("mallory"))
    async with httpx.AsyncClient(verify=ctx, base_url=server.url) as client:
        with pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)):
            await client.get("/version")


async def test_alpn_offers_h2_then_http11(server: HttpsServer, verify: ssl.SSLContext) -> None:
    """As kube-apiserver: a client offering both gets HTTP/2, an HTTP/1.1-only client is
    served too, and the connection log says which each connection speaks."""
    async with httpx.AsyncClient(verify=verify, base_url=server.url, http2=True) as both:
        assert (await both.get("/version")).http_version == "HTTP/2"
    async with httpx.AsyncClient(verify=verify, base_url=server.url) as http1_only:
        assert (await http1_only.get("/version")).http_version == "HTTP/1.1"
    assert [r.protocol for r in server.connection_log.records] == ["h2", "http/1.1"]


async def test_error_status_passes_through_unchanged(
    server: HttpsServer, verify: ssl.SSLContext
) -> None:
    async with httpx.AsyncClient(verify=verify, base_url=server.url) as client:
        r = await client.get("/api/v1/namespaces", headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401
    assert r.headers["content-type"] == "application/json"
    assert r.json() == UNAUTHORIZED


async def test_large_request_body(
    server: HttpsServer, api: Core, verify: ssl.SSLContext, protocol: str
) -> None:
    body = bytes(range(256)) * (12 * 4096)  # 12 MiB
    async with https_client(verify, server.url, protocol, timeout=30) as client:
        r = await client.put("/nowhere", content=body)
    # The whole body reached the server, which has nothing at that path.
    assert r.status_code == 404
    assert len(api.seen[-1].body) == len(body)
    assert hashlib.sha256(api.seen[-1].body).hexdigest() == hashlib.sha256(body).hexdigest()


def added(line: str) -> str:
    """The name of the object an ADDED event line carries."""
    event = json.loads(line)
    assert event["type"] == "ADDED", event
    return str(event["object"]["metadata"]["name"])


async def test_watch_chunks_arrive_as_produced(
    server: HttpsServer, api: Core, verify: ssl.SSLContext, protocol: str
) -> None:
    async with (
        https_client(verify, server.url, protocol) as client,
        client.stream("GET", api.watch_path()) as r,
    ):
        assert r.status_code == 200
        if protocol == "HTTP/1.1":
            assert r.headers.get("transfer-encoding") == "chunked"
        else:
            assert "transfer-encoding" not in r.headers
        lines = r.aiter_lines()
        await api.event("first")
        # The second event is only produced after the client saw the first one.
        assert added(await anext(lines)) == "first"
        await api.event("second")
        assert added(await anext(lines)) == "second"
        api.finish()
        assert [line async for line in lines] == []
    await eventually(lambda: api.watchers() == 0)


async def test_client_disconnect_releases_the_watch(
    server: HttpsServer, api: Core, verify: ssl.SSLContext
) -> None:
    async with httpx.AsyncClient(verify=verify, base_url=server.url) as client:
        async with client.stream("GET", api.watch_path()) as r:
            await api.event("one")
            assert added(await anext(r.aiter_lines())) == "one"
            assert api.watchers() == 1
        # Leaving the stream early closes the connection; the server's watch ends.
        await eventually(lambda: api.watchers() == 0)
        # The server still serves new requests.
        assert (await client.get("/version")).status_code == 200


async def test_http2_stream_reset_releases_only_that_watch(
    server: HttpsServer, api: Core, verify: ssl.SSLContext
) -> None:
    client = await RawH2Client.connect(server.port, verify)
    try:
        watch = api.watch_path()
        first = await client.request("GET", watch)
        second = await client.request("GET", watch)
        await eventually(lambda: api.watchers() == 2)
        await client.reset(first)
        await eventually(lambda: api.watchers() == 1)
        # The other watch on the same connection still gets its events.
        await api.event("one")
        await client.read_until(lambda: bytes(client.streams[second].body).endswith(b"\n"))
        assert added(bytes(client.streams[second].body).decode()) == "one"
        assert client.streams[second].status == 200
        version = await client.request("GET", "/version")
        await client.read_until(lambda: client.streams[version].ended)
        assert "gitVersion" in loads(bytes(client.streams[version].body))
    finally:
        await client.close()
    assert server.connection_log.count() == 1


class _HeldWatches:
    """The core behind a gate: a watch's answer (its watcher already open on the storage)
    waits in the request chain until the test lets it out."""

    def __init__(self, api: Core) -> None:
        self._api = api
        self.gate = asyncio.Event()

    async def handle(self, req: ApiRequest) -> ApiResponse:
        resp = await self._api.server.handle(req)
        if resp.stream is not None:
            await self.gate.wait()
        return resp


async def test_http2_stream_reset_before_the_answer_releases_its_watch(
    api: Core, ca: CertificateAuthority, serving: tuple[bytes, bytes], verify: ssl.SSLContext
) -> None:
    # The race behind a flaky reset: the RST_STREAM arrives after the core opened the watch
    # but before the front began to send its answer. Nobody will read that watch; its
    # watcher must still go.
    held = _HeldWatches(api)
    async with HttpsServer(held, serving[0], serving[1], ca.cert_pem) as server:
        client = await RawH2Client.connect(server.port, verify)
        try:
            watch = await client.request("GET", api.watch_path())
            await eventually(lambda: api.watchers() == 1)
            await client.reset(watch)
            # Frames are handled in order: once this is answered, the reset has been too.
            version = await client.request("GET", "/version")
            await client.read_until(lambda: client.streams[version].ended)
            assert client.streams[watch].status is None
            held.gate.set()
            await eventually(lambda: api.watchers() == 0)
        finally:
            await client.close()


async def test_http2_multiplexes_watches_and_requests_on_one_connection(
    server: HttpsServer, api: Core, verify: ssl.SSLContext
) -> None:
    async with (
        httpx.AsyncClient(verify=verify, base_url=server.url, http2=True) as client,
        contextlib.AsyncExitStack() as stack,
    ):
        watch = api.watch_path()
        watches = [await stack.enter_async_context(client.stream("GET", watch)) for _ in range(5)]
        gets = await asyncio.gather(*(client.get("/version") for _ in range(20)))
        assert {r.status_code for r in gets} == {200}
        assert all(w.http_version == "HTTP/2" for w in watches)
        assert api.watchers() == 5
        for n in range(5):
            await api.event(f"event-{n}")
        api.finish()
        # Every watch sees every event, in order.
        lines = [[added(line) async for line in w.aiter_lines()] for w in watches]
        assert lines == [[f"event-{n}" for n in range(5)]] * 5
        await eventually(lambda: api.watchers() == 0)
    records = server.connection_log.records
    assert [(r.protocol, r.requests) for r in records] == [("h2", 25)]
    assert records[0].users == {"system:anonymous"}


async def test_http2_respects_the_clients_flow_control_window(
    server: HttpsServer, api: Core, verify: ssl.SSLContext
) -> None:
    """A client that grants 1 KiB per stream gets 1 KiB until it acknowledges more; h2
    would raise FlowControlError if the server sent beyond the window."""
    size = 64 * 1024
    path, answer = await api.sized(size)
    client = await RawH2Client.connect(server.port, verify, initial_window=1024)
    client.auto_acknowledge = False
    try:
        stream_id = await client.request("GET", path)
        state = client.streams[stream_id]
        await client.read_until(lambda: len(state.body) == 1024)
        assert not state.ended
        while not state.ended:
            received = len(state.body)
            await client.acknowledge(stream_id)
            await client.read_until(lambda n=received: len(state.body) > n or state.ended)
            assert len(state.body) - received <= 1024
        assert bytes(state.body) == answer
    finally:
        await client.close()


async def test_http2_stop_ends_watches_then_sends_goaway(
    api: Core, ca: CertificateAuthority, serving: tuple[bytes, bytes], verify: ssl.SSLContext
) -> None:
    srv = HttpsServer(api.server, serving[0], serving[1], ca.cert_pem)
    await srv.start()
    client = await RawH2Client.connect(srv.port, verify)
    try:
        watch = await client.request("GET", api.watch_path())
        await eventually(lambda: api.watchers() == 1)
        # The watch's response begun: the core holds the watcher before its headers are sent.
        await client.read_until(lambda: client.streams[watch].status is not None)
        await srv.stop()
        await client.read_until(lambda: client.goaway is not None)
        assert client.goaway is not None
        assert client.goaway.error_code == h2.errors.ErrorCodes.NO_ERROR
        assert client.goaway.last_stream_id == watch
        assert client.streams[watch].ended
        assert api.watchers() == 0
    finally:
        await client.close()
    assert not srv.online


async def test_stop_ends_open_watches(
    api: Core,
    ca: CertificateAuthority,
    serving: tuple[bytes, bytes],
    verify: ssl.SSLContext,
    protocol: str,
) -> None:
    srv = HttpsServer(api.server, serving[0], serving[1], ca.cert_pem)
    await srv.start()
    async with (
        https_client(verify, srv.url, protocol) as client,
        client.stream("GET", api.watch_path()) as r,
    ):
        await api.event("one")
        lines = r.aiter_lines()
        assert added(await anext(lines)) == "one"
        await srv.stop()
        await eventually(lambda: api.watchers() == 0)
        with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError, StopAsyncIteration)):
            await anext(lines)
    assert not srv.online


async def test_offline_refuses_and_resets_then_comes_back_on_same_port(
    server: HttpsServer, api: Core, verify: ssl.SSLContext, protocol: str
) -> None:
    port = server.port
    async with https_client(verify, server.url, protocol) as client:
        async with client.stream("GET", api.watch_path()) as r:
            await api.event("one")
            lines = r.aiter_lines()
            assert added(await anext(lines)) == "one"
            await server.go_offline()
            with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
                await anext(lines)
        await eventually(lambda: api.watchers() == 0)
        handled = len(api.seen)
        with pytest.raises(httpx.ConnectError):
            await client.get("/version")
        assert len(api.seen) == handled
        await server.come_back()
        assert server.port == port
        r2 = await client.get("/api/v1/namespaces/one")
    # Same server, state kept: what was written before is there.
    assert r2.status_code == 200
    assert r2.json()["metadata"]["name"] == "one"


async def test_drop_streams_resets_only_watch_connections(
    server: HttpsServer, api: Core, verify: ssl.SSLContext, protocol: str
) -> None:
    async with https_client(verify, server.url, protocol) as client:
        async with client.stream("GET", api.watch_path()) as r:
            await api.event("one")
            lines = r.aiter_lines()
            assert added(await anext(lines)) == "one"
            assert await server.drop_streams() == 1
            with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
                await anext(lines)
        await eventually(lambda: api.watchers() == 0)
        assert (await client.get("/version")).status_code == 200


async def test_follow_up_runs_after_the_response(
    api: Core,
    ca: CertificateAuthority,
    serving: tuple[bytes, bytes],
    verify: ssl.SSLContext,
    protocol: str,
) -> None:
    """The control route that takes the server offline answers first, then goes offline."""
    faults = Faults(api.storage)
    router = ControlRouter(api.server, api.authenticate, {"faults": faults.http})
    async with HttpsServer(router, serving[0], serving[1], ca.cert_pem) as srv:
        faults.attach(srv)
        async with https_client(
            verify, srv.url, protocol, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
        ) as client:
            r = await client.post("/_emulator/faults/offline", json={"seconds": 60})
            assert r.status_code == 202
            assert loads(r.content) == {"offline": True, "seconds": 60}
            await eventually(lambda: not srv.online)
        await faults.close()


async def test_curl_style_expect_continue_and_head(
    server: HttpsServer, api: Core, ca: CertificateAuthority, tmp_path: Path
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
        "--write-out",
        "%{http_code}",
        "--output",
        "/dev/null",
        f"{server.url}/nowhere",
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await proc.communicate()
    assert proc.returncode == 0
    assert out == b"404"
    assert len(api.seen[-1].body) == 3_000_000
    ctx = client_ssl_context(ca.cert_pem, tmp_path)
    async with httpx.AsyncClient(verify=ctx, base_url=server.url) as client:
        head = await client.head("/version")
    assert head.status_code == 200
    assert head.content == b""


@pytest.mark.parametrize(
    ("size", "accept", "compressed"),
    [
        (GZIP_THRESHOLD_BYTES + 1, "gzip", True),
        (4 * 1024 * 1024, "deflate, gzip", True),
        (GZIP_THRESHOLD_BYTES, "gzip", False),  # kube compresses only above the threshold
        (4 * 1024 * 1024, "identity", False),
        (4 * 1024 * 1024, "gzip;q=1.0", False),  # kube matches the token "gzip" exactly
    ],
)
async def test_gzip_as_kube_apiserver_compresses(
    server: HttpsServer,
    api: Core,
    verify: ssl.SSLContext,
    protocol: str,
    size: int,
    accept: str,
    compressed: bool,
) -> None:
    path, answer = await api.sized(size)
    async with https_client(verify, server.url, protocol) as client:
        r = await client.get(path, headers={"Accept-Encoding": accept})
    assert r.status_code == 200
    assert len(r.content) == size
    assert r.content == answer
    if compressed:
        assert r.headers["content-encoding"] == "gzip"
        assert r.headers["vary"] == "Accept-Encoding"
        assert r.num_bytes_downloaded < size // 50
    else:
        assert "content-encoding" not in r.headers
        assert r.num_bytes_downloaded == size


async def test_watch_streams_are_never_compressed(
    server: HttpsServer, api: Core, verify: ssl.SSLContext, protocol: str
) -> None:
    await api.event("big")
    path = "/api/v1/namespaces/big/configmaps"
    watch = f"{path}?watch=1&resourceVersion={api.storage.revision}"
    data = {"x": "x" * (GZIP_THRESHOLD_BYTES * 2)}
    async with (
        https_client(verify, server.url, protocol) as client,
        client.stream("GET", watch, headers={"Accept-Encoding": "gzip"}) as r,
    ):
        assert "content-encoding" not in r.headers
        await api.admin.create(path, {"metadata": {"name": "large"}, "data": data})
        api.finish()
        body = b"".join([chunk async for chunk in r.aiter_raw()])
    # One event line, as the server wrote it: not compressed.
    assert body.count(b"\n") == 1
    assert r.num_bytes_downloaded == len(body) > GZIP_THRESHOLD_BYTES * 2
    event = loads(body)
    assert event["type"] == "ADDED"
    assert event["object"]["data"] == data
