from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from emulator.accounting import Accounting
from emulator.faults import ControlRouter, Faults
from emulator.https import HttpsServer
from emulator.pki import CertificateAuthority
from emulator.transport import EmulatorTransport

from .core import ADMIN_TOKEN, USER_TOKEN, Core, client_ssl_context, eventually

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def deployment(name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]},
            },
        },
    }


class Rig:
    def __init__(self, seed: int | None = 7) -> None:
        self.api = Core()
        self.faults = Faults(self.api.storage, seed=seed)
        self.accounting = Accounting()
        self.api.server.hooks += [self.accounting.hook, self.faults.hook]
        self.router = ControlRouter(
            self.api.server,
            self.api.authenticate,
            {"faults": self.faults.http, "requests": self.accounting.http},
        )
        self.transport = EmulatorTransport(self.router, headers=ADMIN)
        self.faults.attach(self.transport)

    def client(self, headers: dict[str, str] | None = None) -> httpx.AsyncClient:
        transport = (
            self.transport if headers is None else EmulatorTransport(self.router, headers=headers)
        )
        return httpx.AsyncClient(transport=transport, base_url="https://emulator")


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    r = Rig()
    yield r
    await r.faults.close()


async def test_429_with_retry_after_for_the_next_n_matching_requests(rig: Rig) -> None:
    await rig.api.pod("default", "p1")
    rig.faults.fail_next(2, 429, verb="list", resource="pods", retry_after=5)
    async with rig.client() as client:
        first = await client.get("/api/v1/namespaces/default/pods")
        second = await client.get("/api/v1/pods")
        # Another verb, another resource: untouched.
        get = await client.get("/api/v1/namespaces/default/pods/p1")
        other = await client.get("/api/v1/configmaps")
        third = await client.get("/api/v1/pods")
    for r in (first, second):
        assert r.status_code == 429
        assert r.headers["retry-after"] == "5"
        assert r.json() == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "Too many requests, please try again later.",
            "reason": "TooManyRequests",
            "details": {"retryAfterSeconds": 5},
            "code": 429,
        }
    assert get.status_code == 200
    assert other.status_code == 200
    assert third.status_code == 200
    assert rig.faults.rules == []


async def test_500_and_503_bodies(rig: Rig) -> None:
    rig.faults.add_error(500, verb="create")
    rig.faults.add_error(503, verb="update", retry_after=2)
    async with rig.client() as client:
        r500 = await client.post("/api/v1/namespaces/a/configmaps", content=b"{}")
        r503 = await client.put("/api/v1/namespaces/a/configmaps/x", content=b"{}")
    assert r500.status_code == 500
    assert r500.json()["reason"] == "InternalError"
    assert r500.json()["message"] == "Internal error occurred: fault injected by the emulator"
    assert r503.status_code == 503
    assert r503.json()["reason"] == "ServiceUnavailable"
    assert r503.json()["message"] == "the server is currently unable to handle the request"
    assert r503.headers["retry-after"] == "2"


async def test_resource_specs_follow_rbac_naming(rig: Rig) -> None:
    await rig.api.pod("a", "p")
    await rig.api.admin.create("/apis/apps/v1/namespaces/a/deployments", deployment("d"))
    rig.faults.add_error(503, resource="deployments.apps")
    rig.faults.add_error(500, resource="pods/status")
    async with rig.client() as client:
        dep = await client.get("/apis/apps/v1/namespaces/a/deployments/d")
        dep_scale = await client.get("/apis/apps/v1/namespaces/a/deployments/d/scale")
        other_group = await client.get("/apis/example.io/v1/namespaces/a/deployments/d")
        pod = await client.get("/api/v1/namespaces/a/pods/p")
        pod_status = await client.put("/api/v1/namespaces/a/pods/p/status", content=b"{}")
        discovery = await client.get("/apis")
    assert dep.status_code == 503
    assert dep_scale.status_code == 200
    # Not faulted: the server's own answer (it serves no such group).
    assert other_group.status_code == 404
    assert pod.status_code == 200
    assert pod_status.status_code == 500
    assert discovery.status_code == 200


async def test_user_and_namespace_filters(rig: Rig) -> None:
    rig.faults.add_error(503, user="alice", namespace="team")
    async with (
        rig.client() as admin,
        rig.client({"Authorization": f"Bearer {USER_TOKEN}"}) as alice,
    ):
        assert (await admin.get("/api/v1/namespaces/team/pods")).status_code == 200
        assert (await alice.get("/api/v1/namespaces/other/pods")).status_code == 200
        assert (await alice.get("/api/v1/namespaces/team/pods")).status_code == 503


async def test_probability_is_deterministic_with_a_seed() -> None:
    outcomes = []
    for _ in range(2):
        rig = Rig(seed=42)
        rig.faults.add_error(500, probability=0.5)
        async with rig.client() as client:
            outcomes.append([(await client.get("/api/v1/pods")).status_code for _ in range(40)])
    assert outcomes[0] == outcomes[1]
    assert 5 < outcomes[0].count(500) < 35
    assert set(outcomes[0]) == {200, 500}


async def test_latency_applies_to_matching_requests_only(rig: Rig) -> None:
    await rig.api.pod("a", "p")
    rig.faults.add_latency(0.2, verb="get")
    loop = asyncio.get_running_loop()
    async with rig.client() as client:
        start = loop.time()
        assert (await client.get("/api/v1/namespaces/a/pods/p")).status_code == 200
        slow = loop.time() - start
        start = loop.time()
        assert (await client.get("/api/v1/pods")).status_code == 200
        fast = loop.time() - start
    assert slow >= 0.2
    assert fast < 0.1


async def test_rules_validate_their_input() -> None:
    faults = Faults()
    with pytest.raises(ValueError, match="unsupported fault code"):
        faults.add_error(404)
    with pytest.raises(ValueError, match="probability"):
        faults.add_error(500, probability=2)
    with pytest.raises(ValueError, match="unknown verbs"):
        faults.add_error(500, verb="fetch")
    with pytest.raises(ValueError, match="latency or an error"):
        faults.add_rule(verb="get")


async def test_http_control_adds_lists_and_removes_rules(rig: Rig) -> None:
    await rig.api.ensure_namespace("a")
    await rig.api.admin.create("/api/v1/namespaces/a/secrets", {"metadata": {"name": "s"}})
    rig.accounting.reset()
    async with rig.client() as client:
        r = await client.post(
            "/_emulator/faults/rules",
            json={"verb": "get", "resource": "secrets", "code": 503, "count": 1},
        )
        assert r.status_code == 201
        rule = r.json()
        assert rule["id"].startswith("rule-")
        assert rule["verbs"] == ["get"]
        assert rule["resource"] == "secrets"
        assert rule["remaining"] == 1
        state = (await client.get("/_emulator/faults")).json()
        assert state["rules"] == [rule]
        assert state["offline"] is False
        # Control requests are neither faulted nor counted.
        assert rig.accounting.total() == 0
        assert (await client.get("/api/v1/namespaces/a/secrets/s")).status_code == 503
        assert (await client.get("/api/v1/namespaces/a/secrets/s")).status_code == 200
        r2 = await client.post("/_emulator/faults/rules", json={"latencySeconds": 0.01})
        assert (await client.delete(f"/_emulator/faults/rules/{r2.json()['id']}")).json() == {
            "removed": 1
        }
        missing = await client.delete("/_emulator/faults/rules/rule-99")
        assert missing.status_code == 404
        assert missing.json()["reason"] == "NotFound"
        assert missing.json()["details"] == {"name": "rule-99", "kind": "faultrules"}


async def test_http_control_rejects_bad_input(rig: Rig) -> None:
    async with rig.client() as client:
        bad_code = await client.post("/_emulator/faults/rules", json={"code": 404})
        unknown = await client.post("/_emulator/faults/rules", json={"cdoe": 500})
        not_json = await client.post("/_emulator/faults/rules", content=b"{nope")
        no_seconds = await client.post("/_emulator/faults/offline", json={})
        wrong_method = await client.put("/_emulator/faults/compact")
        nowhere = await client.get("/_emulator/nothing")
    for r in (bad_code, unknown, not_json, no_seconds):
        assert r.status_code == 400
        assert r.json()["reason"] == "BadRequest"
    assert unknown.json()["message"] == "unknown fields in fault rule: cdoe"
    assert wrong_method.status_code == 405
    assert wrong_method.json()["reason"] == "MethodNotAllowed"
    assert nowhere.status_code == 404
    assert nowhere.json()["message"] == "the server could not find the requested resource"


async def test_http_control_is_for_system_masters_only(rig: Rig) -> None:
    async with (
        rig.client({"Authorization": f"Bearer {USER_TOKEN}"}) as alice,
        rig.client({}) as anonymous,
        rig.client({"Authorization": "Bearer wrong"}) as wrong,
    ):
        r_alice = await alice.post("/_emulator/faults/rules", json={"code": 500})
        r_anon = await anonymous.get("/_emulator/requests")
        r_wrong = await wrong.get("/_emulator/faults")
    assert r_alice.status_code == 403
    assert r_alice.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'forbidden: User "alice" cannot post path "/_emulator/faults/rules"',
        "reason": "Forbidden",
        "details": {},
        "code": 403,
    }
    assert r_anon.status_code == 403
    assert r_anon.json()["message"] == (
        'forbidden: User "system:anonymous" cannot get path "/_emulator/requests"'
    )
    assert r_wrong.status_code == 401
    assert r_wrong.json()["reason"] == "Unauthorized"
    assert rig.faults.rules == []


async def test_http_compact_and_drop_watches(rig: Rig) -> None:
    core = rig.api
    await core.event("before")
    old = core.storage.revision - 1
    async with rig.client() as client:
        assert (await client.post("/_emulator/faults/compact")).json() == {"compacted": True}
        # What came before the compaction is gone from the history.
        expired = await client.get(
            "/api/v1/namespaces",
            params={"resourceVersion": str(old), "resourceVersionMatch": "Exact"},
        )
        assert expired.status_code == 410
        # A watch of an in-process (loopback) client, beside the front's.
        loopback = asyncio.create_task(
            _drain(
                core.admin.watch("/api/v1/namespaces", resourceVersion=str(core.storage.revision))
            )
        )
        await eventually(lambda: core.watchers() == 1)
        async with client.stream("GET", core.watch_path()) as w:
            lines = w.aiter_lines()
            await core.event("x")
            assert json.loads(await anext(lines))["object"]["metadata"]["name"] == "x"
            r = await client.post("/_emulator/faults/drop-watches")
            assert r.json() == {"dropped": 1}
            with pytest.raises(httpx.RemoteProtocolError):
                await anext(lines)
        await eventually(lambda: core.watchers() == 1)
        assert not loopback.done()
        r = await client.post("/_emulator/faults/drop-watches", json={"includeLoopback": True})
        assert r.json() == {"dropped": 0}
        await asyncio.wait_for(loopback, 5)
        assert core.watchers() == 0


async def _drain(events: AsyncIterator[Any]) -> None:
    async for _ in events:
        pass


async def test_python_offline_with_timed_return(rig: Rig) -> None:
    async with rig.client() as client:
        await rig.faults.go_offline(seconds=0.1)
        assert rig.faults.offline
        with pytest.raises(httpx.ConnectError):
            await client.get("/api/v1/pods")
        await eventually(lambda: not rig.faults.offline)
        assert (await client.get("/api/v1/pods")).status_code == 200


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    return CertificateAuthority.generate("test-ca")


async def test_http_offline_over_https_answers_then_goes_away_and_returns(
    ca: CertificateAuthority, tmp_path: Path
) -> None:
    rig = Rig()
    cert, key = ca.issue("apiserver", dns_names=("localhost",), ips=("127.0.0.1",), usage="server")
    verify: ssl.SSLContext = client_ssl_context(ca.cert_pem, tmp_path)
    async with HttpsServer(rig.router, cert, key, ca.cert_pem) as srv:
        rig.faults.attach(srv)
        async with httpx.AsyncClient(verify=verify, base_url=srv.url, headers=ADMIN) as client:
            r = await client.post("/_emulator/faults/offline", json={"seconds": 0.5})
            assert r.status_code == 202
            assert r.json() == {"offline": True, "seconds": 0.5}
            await eventually(lambda: not srv.online)
            with pytest.raises(httpx.ConnectError):
                await client.get("/api/v1/pods")
            await eventually(lambda: srv.online)
            assert (await client.get("/api/v1/pods")).status_code == 200
    await rig.faults.close()
