from __future__ import annotations

import json

import httpx
import pytest

from emulator.faults import ControlRouter, Faults
from emulator.transport import EmulatorTransport

from .core import ADMIN_TOKEN, USER_TOKEN, Core, core_ca, der_of, eventually, user_of

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def added(line: str) -> str:
    """The name of the object an ADDED event line carries."""
    event = json.loads(line)
    assert event["type"] == "ADDED", event
    return str(event["object"]["metadata"]["name"])


async def test_request_is_translated_like_the_https_front() -> None:
    api = Core()
    await api.event("default")
    transport = EmulatorTransport(api.server, headers=ADMIN)
    body = b'{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c"}}'
    async with httpx.AsyncClient(transport=transport, base_url="https://emulator") as client:
        r = await client.post(
            "/api/v1/namespaces/default/configmaps",
            params={"fieldManager": "kubectl", "dryRun": "All"},
            content=body,
            headers={"Content-Type": "application/json"},
        )
    assert r.status_code == 201
    seen = api.seen[-1]
    assert seen.method == "POST"
    assert seen.path == "/api/v1/namespaces/default/configmaps"
    assert seen.query == {"fieldManager": ["kubectl"], "dryRun": ["All"]}
    assert seen.headers["content-type"] == "application/json"
    assert seen.body == body
    assert user_of(seen) == "admin"
    assert r.headers["content-length"] == str(len(r.content))


async def test_request_headers_override_transport_defaults() -> None:
    api = Core()
    transport = EmulatorTransport(api.server, headers=ADMIN)
    async with httpx.AsyncClient(transport=transport, base_url="https://emulator") as client:
        r = await client.get("/version", headers={"Authorization": f"Bearer {USER_TOKEN}"})
    assert r.status_code == 200
    assert user_of(api.seen[-1]) == "alice"


async def test_peer_certificate_is_passed_as_der() -> None:
    cert, _ = core_ca().issue("system:node:n1", ("system:nodes",))
    api = Core()
    transport = EmulatorTransport(api.server, peer_cert_der=der_of(cert))
    async with httpx.AsyncClient(transport=transport, base_url="https://emulator") as client:
        r = await client.get("/version")
    assert r.status_code == 200
    assert user_of(api.seen[-1]) == "system:node:n1"
    assert api.seen[-1].peer_cert_der == der_of(cert)


async def test_error_status_and_headers_pass_through() -> None:
    api = Core()
    async with httpx.AsyncClient(
        transport=EmulatorTransport(api.server, headers={"Authorization": "Bearer nope"}),
        base_url="https://emulator",
    ) as client:
        r = await client.get("/version")
    assert r.status_code == 401
    assert r.json()["reason"] == "Unauthorized"
    assert r.json()["code"] == 401


async def test_watch_streams_chunk_by_chunk_and_closing_releases_it() -> None:
    api = Core()
    async with (
        httpx.AsyncClient(transport=EmulatorTransport(api.server), base_url="https://e") as client,
        client.stream("GET", api.watch_path()) as r,
    ):
        assert r.status_code == 200
        lines = r.aiter_lines()
        await api.event("a")
        assert added(await anext(lines)) == "a"
        await api.event("b")
        assert added(await anext(lines)) == "b"
        assert api.watchers() == 1
    await eventually(lambda: api.watchers() == 0)


async def test_watch_ends_cleanly_when_the_server_ends_it() -> None:
    api = Core()
    async with (
        httpx.AsyncClient(transport=EmulatorTransport(api.server), base_url="https://e") as client,
        client.stream("GET", api.watch_path()) as r,
    ):
        await api.event("a")
        api.finish()
        assert [added(line) async for line in r.aiter_lines()] == ["a"]


async def test_drop_streams_breaks_open_watches() -> None:
    api = Core()
    transport = EmulatorTransport(api.server)
    async with (
        httpx.AsyncClient(transport=transport, base_url="https://e") as client,
        client.stream("GET", api.watch_path()) as r,
    ):
        lines = r.aiter_lines()
        await api.event("a")
        assert added(await anext(lines)) == "a"
        assert await transport.drop_streams() == 1
        with pytest.raises(httpx.RemoteProtocolError):
            await anext(lines)
        await eventually(lambda: api.watchers() == 0)
        assert (await client.get("/version")).status_code == 200


async def test_offline_refuses_then_comes_back() -> None:
    api = Core()
    transport = EmulatorTransport(api.server)
    async with httpx.AsyncClient(transport=transport, base_url="https://e") as client:
        assert (await client.get("/version")).status_code == 200
        before = len(api.seen)
        await transport.go_offline()
        with pytest.raises(httpx.ConnectError):
            await client.get("/version")
        await transport.come_back()
        assert (await client.get("/version")).status_code == 200
    # The refused request never reached the server.
    assert len(api.seen) == before + 1


async def test_follow_up_runs_after_the_response() -> None:
    """The control route that takes the server offline answers first, then goes offline."""
    api = Core()
    faults = Faults(api.storage)
    transport = EmulatorTransport(
        ControlRouter(api.server, api.authenticate, {"faults": faults.http}), headers=ADMIN
    )
    faults.attach(transport)
    async with httpx.AsyncClient(transport=transport, base_url="https://e") as client:
        r = await client.post("/_emulator/faults/offline", json={"seconds": 60})
        assert r.status_code == 202
        await eventually(lambda: transport.offline)
    await faults.close()
