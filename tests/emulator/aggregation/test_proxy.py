"""Requests for an aggregated group version, carried to the backend as kube-aggregator carries
them: after the front's own authentication and authorization, with the front proxy's identity
headers and certificate, the backend verified against the caBundle; watches stream, upgrades
pass through byte for byte."""

from __future__ import annotations

import asyncio
import base64
import gzip
import hashlib
import json
import ssl
from pathlib import Path
from typing import Any

import httpx
import pytest

from emulator.apiserver import ApiServer
from emulator.registry import ResourceType
from emulator.requestinfo import RequestAttributes
from emulator.wire import ApiRequest, ApiResponse, RawConnection
from tests import polling
from tests.e2e.cluster_proxy import grant
from tests.e2e.support import kubectl, kubectl_process

from .harness import (
    APISERVICES,
    GROUP,
    NAMESPACE,
    SERVICE,
    VERSION,
    WIDGETS,
    Bed,
    aggregated,
    apiservice,
    available,
    create_service,
    register,
)


def widget(name: str, **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Widget",
        "metadata": {"name": name},
        **fields,
    }


def record(bed: Bed) -> list[ApiRequest]:
    """Every widget request as the backend's request chain sees it (after authentication)."""
    seen: list[ApiRequest] = []

    async def hook(req: ApiRequest, attrs: RequestAttributes) -> None:
        if attrs.resource == "widgets":
            seen.append(req)

    bed.backend.api.hooks.append(hook)
    return seen


async def grant_widgets(client: httpx.AsyncClient, user: str) -> None:
    """`user` may do anything with widgets (on the server `client` talks to)."""
    rules = [{"apiGroups": [GROUP], "resources": ["widgets"], "verbs": ["*"]}]
    await grant(client, f"widgets-{user}", rules, [user])


async def test_the_backend_gets_the_user_the_front_authenticated_and_no_credentials() -> None:
    async with aggregated() as bed:
        await register(bed)
        async with bed.front.client() as admin, bed.backend.client() as backend_admin:
            await grant_widgets(admin, "alice")
            await grant_widgets(backend_admin, "alice")
        seen = record(bed)
        async with bed.front.https_client(user="alice", groups=["dev"]) as alice:
            created = await alice.post(
                WIDGETS, json=widget("w1"), headers={"X-Remote-User": "root"}
            )
        assert created.status_code == 201, created.text
        stored = bed.backend.api.storage.get((GROUP, "widgets"), "default", "w1")
        assert stored is not None
        assert bed.front.api.storage.get((GROUP, "widgets"), "default", "w1") is None
        request = next(r for r in seen if r.method == "POST")
        assert request.user is not None
        assert request.user.name == "alice"
        assert request.user.groups == ("dev", "system:authenticated")
        credential = request.user.extra["authentication.kubernetes.io/credential-id"]
        assert credential[0].startswith("X509SHA256=")
        assert "authorization" not in request.headers
        assert request.headers["x-forwarded-for"] == "127.0.0.1"
        # The front decides first: bob may not list widgets on the front, so no request leaves.
        async with bed.front.https_client(user="bob") as bob:
            before = len(seen)
            denied = await bob.get(WIDGETS)
        assert denied.status_code == 403
        assert 'User "bob" cannot list resource "widgets"' in denied.json()["message"]
        assert len(seen) == before
        # Impersonation is resolved at the front: the backend sees the impersonated user only.
        async with bed.front.https_client(headers={"Impersonate-User": "alice"}) as acting:
            assert (await acting.get(f"{WIDGETS}/w1")).status_code == 200
        assert seen[-1].user is not None
        assert seen[-1].user.name == "alice"
        assert not [h for h in seen[-1].headers if h.startswith("impersonate-")]


async def test_kubectl_gets_and_watches_through_the_front(tmp_path: Path) -> None:
    async with aggregated() as bed:
        await register(bed)
        config = bed.front.write_kubeconfig(tmp_path / "admin")
        manifest = tmp_path / "w.json"
        manifest.write_text(json.dumps(widget("first", spec={"size": 1})))
        await kubectl(config, "create", "-f", str(manifest))
        assert (await kubectl(config, "get", "widgets", "-o", "name")).split() == [
            "widget.samples.example.io/first"
        ]
        resources = await kubectl(config, "api-resources", "--api-group", GROUP)
        assert resources.splitlines()[1].split() == [
            "widgets", "wd", "samples.example.io/v1", "true", "Widget"
        ]  # fmt: skip
        raw = json.loads(await kubectl(config, "get", "--raw", f"/apis/{GROUP}/{VERSION}"))
        assert raw["groupVersion"] == f"{GROUP}/{VERSION}"
        async with kubectl_process(config, "get", "widgets", "-w", "-o", "name") as watch:
            assert watch.stdout is not None
            first = await asyncio.wait_for(watch.stdout.readline(), 15)
            assert first.decode().strip() == "widget.samples.example.io/first"
            async with bed.backend.client() as backend:
                (await backend.post(WIDGETS, json=widget("second"))).raise_for_status()
            second = await asyncio.wait_for(watch.stdout.readline(), 15)
            assert second.decode().strip() == "widget.samples.example.io/second"


async def test_discovery_lists_the_remote_group_in_apiservice_order() -> None:
    async with aggregated() as bed:
        await register(bed)
        async with bed.front.client() as front:
            groups = [g["name"] for g in (await front.get("/apis")).json()["groups"]]
            assert groups[0] == "apiregistration.k8s.io"
            # Priority 2000: after every built-in group (discovery.k8s.io the last one here),
            # before the CRD groups at 1000, sorted by name, and metrics-server's group (100).
            assert groups.index(GROUP) == groups.index("discovery.k8s.io") + 1
            assert groups[-1] == "metrics.k8s.io"
            crd_groups = groups[groups.index(GROUP) + 1 : -1]
            assert crd_groups == sorted(crd_groups)
            group = (await front.get(f"/apis/{GROUP}")).json()
            assert group == {
                "kind": "APIGroup",
                "apiVersion": "v1",
                "name": GROUP,
                "versions": [{"groupVersion": f"{GROUP}/{VERSION}", "version": VERSION}],
                "preferredVersion": {"groupVersion": f"{GROUP}/{VERSION}", "version": VERSION},
            }
            accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

            async def remote_entry() -> dict[str, Any]:
                document = (await front.get("/apis", headers={"Accept": accept})).json()
                entry = next(i for i in document["items"] if i["metadata"]["name"] == GROUP)
                return dict(entry["versions"][0])

            # Fetched from the backend once the APIService is Available.
            version = await polling.eventually(
                remote_entry, until=lambda v: v["freshness"] == "Current", what="fetched"
            )
            assert [r["resource"] for r in version["resources"]] == ["widgets"]
            assert version["resources"][0]["shortNames"] == ["wd"]
            # The backend goes away: its group version turns Stale, requests get 503.
            await bed.backend.faults.go_offline()
            await available(front, f"{VERSION}.{GROUP}", "False")
            assert (await remote_entry())["freshness"] == "Stale"
            unavailable = await front.get(WIDGETS)
            assert (unavailable.status_code, unavailable.text) == (503, "service unavailable\n")
            assert unavailable.headers["content-type"] == "text/plain; charset=utf-8"


async def test_the_backend_must_prove_itself_with_the_ca_bundle() -> None:
    async with aggregated() as bed:
        bed.front.api.services[f"{NAMESPACE}/{SERVICE}"] = bed.backend_address
        name = f"{VERSION}.{GROUP}"
        async with bed.front.client() as front:
            await create_service(front)
            # The availability check does not verify the server (kube's does not either)...
            wrong = apiservice(ca_pem=bed.front.ca_pem)
            (await front.post(APISERVICES, json=wrong)).raise_for_status()
            await available(front, name)
            # ...but requests do.
            refused = await front.get(WIDGETS)
            assert refused.status_code == 503
            assert refused.text == (
                "tls: failed to verify certificate: x509: certificate signed by unknown authority\n"
            )
            current = (await front.get(f"{APISERVICES}/{name}")).json()
            current["spec"].pop("caBundle")
            current["spec"]["insecureSkipTLSVerify"] = True
            (await front.put(f"{APISERVICES}/{name}", json=current)).raise_for_status()
            await polling.eventually(
                lambda: front.get(WIDGETS), until=lambda r: r.status_code == 200, what="insecure"
            )


async def test_a_large_answer_streams_through_compressed_as_the_backend_sent_it() -> None:
    async with aggregated() as bed:
        await register(bed)
        async with bed.backend.client() as backend:
            for i in range(40):
                body = widget(f"big-{i}", spec={"data": "x" * 8000})
                (await backend.post(WIDGETS, json=body)).raise_for_status()
        async with (
            bed.front.https_client() as front,
            front.stream("GET", WIDGETS, headers={"Accept-Encoding": "gzip"}) as response,
        ):
            raw = b"".join([chunk async for chunk in response.aiter_raw()])
        assert response.headers["content-encoding"] == "gzip"
        items = json.loads(gzip.decompress(raw))["items"]
        assert len(items) == 40


# --- upgrades -------------------------------------------------------------------------------


def _echo(api: ApiServer) -> None:
    """widgets/attach on the backend: a test upgrade endpoint that echoes every byte."""

    async def attach(
        _api: ApiServer, req: ApiRequest, _attrs: RequestAttributes, _rt: ResourceType
    ) -> ApiResponse:
        upgrade = req.headers.get("upgrade", "")
        headers = {"Connection": "Upgrade", "Upgrade": upgrade}
        if upgrade.lower() == "websocket":
            key = req.headers["sec-websocket-key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
            headers["Sec-WebSocket-Accept"] = base64.b64encode(
                hashlib.sha1(key.encode()).digest()
            ).decode()
            headers["Sec-WebSocket-Protocol"] = req.headers["sec-websocket-protocol"].split(",")[0]
        else:
            headers["X-Stream-Protocol-Version"] = "v4.channel.k8s.io"

        async def echo(client: RawConnection) -> None:
            while data := await client.read():
                client.write(data)
                await client.drain()

        return ApiResponse(101, b"", headers, upgraded=echo)

    api.add_subresource(GROUP, "widgets", "attach", attach)


async def _open(
    bed: Bed, headers: list[tuple[str, str]], path: str
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]:
    context = ssl.create_default_context(cadata=bed.front.ca_pem.decode())
    host, _, port = bed.front.url.removeprefix("https://").rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port), ssl=context)
    lines = [f"GET {path} HTTP/1.1", f"Host: {host}:{port}"]
    lines += [f"{k}: {v}" for k, v in headers]
    lines.append(f"Authorization: Bearer {bed.front.admin_token}")
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 15)
    return reader, writer, head


UPGRADES = [
    pytest.param(
        [("Connection", "Upgrade"), ("Upgrade", "websocket"), ("Sec-WebSocket-Version", "13"),
         ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
         ("Sec-WebSocket-Protocol", "v5.channel.k8s.io, v4.channel.k8s.io")],
        id="websocket",
    ),
    pytest.param(
        [("Connection", "Upgrade"), ("Upgrade", "SPDY/3.1"),
         ("X-Stream-Protocol-Version", "v4.channel.k8s.io")],
        id="spdy",
    ),
]  # fmt: skip


@pytest.mark.parametrize("headers", UPGRADES)
async def test_upgrades_pass_through_byte_for_byte(headers: list[tuple[str, str]]) -> None:
    async with aggregated() as bed:
        await register(bed)
        _echo(bed.backend.api)
        async with bed.front.client() as front:
            (await front.post(WIDGETS, json=widget("w1"))).raise_for_status()
        reader, writer, head = await _open(bed, headers, f"{WIDGETS}/w1/attach?stdin=true")
        try:
            assert head.startswith(b"HTTP/1.1 101 Switching Protocols\r\n"), head
            if ("Upgrade", "websocket") in headers:
                assert b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" in head
                assert b"Sec-WebSocket-Protocol: v5.channel.k8s.io" in head
            for message in (b"\x00hello", b"\x01" + bytes(range(256)) * 512):
                writer.write(message)
                await writer.drain()
                echoed = await asyncio.wait_for(reader.readexactly(len(message)), 15)
                assert echoed == message
        finally:
            writer.close()


async def test_an_upgrade_the_backend_declines_is_answered_as_usual() -> None:
    async with aggregated() as bed:
        await register(bed)
        _echo(bed.backend.api)
        reader, writer, head = await _open(bed, UPGRADES[1].values[0], f"{WIDGETS}/absent/pods")  # type: ignore[arg-type]
        try:
            assert head.startswith(b"HTTP/1.1 404"), head
            length = int(next(
                line.split(b":")[1] for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            ))  # fmt: skip
            status = json.loads(await reader.readexactly(length))
            assert status["reason"] == "NotFound"
        finally:
            writer.close()
