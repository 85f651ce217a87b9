from __future__ import annotations

import json

import httpx
import pytest

from emulator.https import ResponseWithFollowUp
from emulator.pki import CertificateAuthority
from emulator.transport import EmulatorTransport
from emulator.wire import ApiRequest, ApiResponse

from .fakes import FakeApi, der_of, eventually


async def test_request_is_translated_like_the_https_front() -> None:
    api = FakeApi()
    transport = EmulatorTransport(api, headers={"Authorization": "Bearer admin-token"})
    async with httpx.AsyncClient(transport=transport, base_url="https://emulator") as client:
        r = await client.post(
            "/api/v1/namespaces/default/configmaps",
            params={"fieldManager": "kubectl", "dryRun": "All"},
            content=b'{"kind":"ConfigMap"}',
            headers={"Content-Type": "application/json"},
        )
    assert r.status_code == 200
    seen = r.json()
    assert seen["method"] == "POST"
    assert seen["path"] == "/api/v1/namespaces/default/configmaps"
    assert seen["query"] == {"fieldManager": ["kubectl"], "dryRun": ["All"]}
    assert seen["headers"]["content-type"] == "application/json"
    assert seen["bodyLength"] == len(b'{"kind":"ConfigMap"}')
    assert seen["user"] == "admin"
    assert r.headers["content-length"] == str(len(r.content))


async def test_request_headers_override_transport_defaults() -> None:
    api = FakeApi()
    transport = EmulatorTransport(api, headers={"Authorization": "Bearer admin-token"})
    async with httpx.AsyncClient(transport=transport, base_url="https://emulator") as client:
        r = await client.get("/echo", headers={"Authorization": "Bearer user-token"})
    assert r.json()["user"] == "alice"


async def test_peer_certificate_is_passed_as_der() -> None:
    ca = CertificateAuthority.generate("test-ca")
    cert, _ = ca.issue("system:node:n1", ("system:nodes",))
    api = FakeApi()
    transport = EmulatorTransport(api, peer_cert_der=der_of(cert))
    async with httpx.AsyncClient(transport=transport, base_url="https://emulator") as client:
        r = await client.get("/echo")
    assert r.json()["peerCN"] == "system:node:n1"
    assert r.json()["user"] == "system:node:n1"
    assert api.seen[-1].peer_cert_der == der_of(cert)


async def test_error_status_and_headers_pass_through() -> None:
    api = FakeApi()
    async with httpx.AsyncClient(
        transport=EmulatorTransport(api, headers={"Authorization": "Bearer nope"}),
        base_url="https://emulator",
    ) as client:
        r = await client.get("/echo")
    assert r.status_code == 401
    assert r.json()["reason"] == "Unauthorized"
    assert r.json()["code"] == 401


async def test_watch_streams_chunk_by_chunk_and_closing_releases_it() -> None:
    api = FakeApi()
    async with (
        httpx.AsyncClient(transport=EmulatorTransport(api), base_url="https://e") as client,
        client.stream("GET", "/api/v1/pods", params={"watch": "true"}) as r,
    ):
        assert r.status_code == 200
        lines = r.aiter_lines()
        api.release(b'{"type":"ADDED"}\n')
        assert json.loads(await anext(lines)) == {"type": "ADDED"}
        api.release(b'{"type":"DELETED"}\n')
        assert json.loads(await anext(lines)) == {"type": "DELETED"}
        assert api.streams_closed == 0
    await eventually(lambda: api.streams_closed == 1)


async def test_watch_ends_cleanly_when_the_server_ends_it() -> None:
    api = FakeApi()
    async with (
        httpx.AsyncClient(transport=EmulatorTransport(api), base_url="https://e") as client,
        client.stream("GET", "/api/v1/pods?watch=1") as r,
    ):
        api.release(b"a\n")
        api.finish()
        assert [line async for line in r.aiter_lines()] == ["a"]


async def test_drop_streams_breaks_open_watches() -> None:
    api = FakeApi()
    transport = EmulatorTransport(api)
    async with (
        httpx.AsyncClient(transport=transport, base_url="https://e") as client,
        client.stream("GET", "/api/v1/pods?watch=1") as r,
    ):
        lines = r.aiter_lines()
        api.release(b"a\n")
        assert await anext(lines) == "a"
        assert await transport.drop_streams() == 1
        with pytest.raises(httpx.RemoteProtocolError):
            await anext(lines)
        await eventually(lambda: api.streams_closed == 1)
        assert (await client.get("/echo")).status_code == 200


async def test_offline_refuses_then_comes_back() -> None:
    api = FakeApi()
    transport = EmulatorTransport(api)
    async with httpx.AsyncClient(transport=transport, base_url="https://e") as client:
        before = (await client.get("/echo")).json()["handled"]
        await transport.go_offline()
        with pytest.raises(httpx.ConnectError):
            await client.get("/echo")
        await transport.come_back()
        after = (await client.get("/echo")).json()["handled"]
    assert after == before + 1


class _FollowUp:
    def __init__(self) -> None:
        self.done = False

    async def handle(self, req: ApiRequest) -> ApiResponse:
        async def then() -> None:
            self.done = True

        return ResponseWithFollowUp(202, b"{}", {}, then=then)


async def test_follow_up_runs_after_the_response() -> None:
    handler = _FollowUp()
    async with httpx.AsyncClient(
        transport=EmulatorTransport(handler), base_url="https://e"
    ) as client:
        r = await client.post("/x")
        assert r.status_code == 202
        await eventually(lambda: handler.done)
