"""The facade and the CLI over the real core."""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import ssl
import stat
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from pathlib import Path

import httpx
import pytest
import yaml

from emulator.emulator import Emulator, run_emulator
from tests.emulator.auth.helpers import UNAUTHORIZED

from .core import eventually

REPO = Path(__file__).resolve().parents[3]
ADMIN = "kubernetes-admin"


@pytest.fixture
async def emu() -> AsyncIterator[Emulator]:
    async with run_emulator("member", name="member1") as e:
        yield e


async def test_in_process_and_https_clients_reach_the_same_state(emu: Emulator) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1"}, "data": {"a": "1"}}
    async with emu.client() as inproc:
        r = await inproc.post("/api/v1/namespaces/default/configmaps", json=cm)
        assert r.status_code == 201
    async with emu.https_client() as https:
        r = await https.get("/api/v1/namespaces/default/configmaps/c1")
    assert r.status_code == 200
    assert r.json()["data"] == {"a": "1"}
    assert emu.url.startswith("https://127.0.0.1:")


async def test_client_certificate_users_are_authorized_by_rbac(emu: Emulator) -> None:
    async with emu.https_client(user="alice", groups=["dev"]) as alice:
        r = await alice.get("/api/v1/namespaces/default/pods")
    assert r.status_code == 403
    assert r.json()["reason"] == "Forbidden"
    assert r.json()["message"] == (
        'pods is forbidden: User "alice" cannot list resource "pods" in API group "" '
        'in the namespace "default"'
    )
    async with emu.client(user="alice", groups=["dev"]) as alice_inproc:
        r2 = await alice_inproc.get("/api/v1/namespaces/default/pods")
    assert r2.status_code == 403
    assert r2.json()["message"] == r.json()["message"]


async def test_faults_and_accounting_are_wired(emu: Emulator) -> None:
    emu.faults.fail_next(1, 503, verb="list", resource="configmaps", user=ADMIN)
    emu.accounting.reset()
    async with emu.client() as client:
        first = await client.get("/api/v1/namespaces/default/configmaps")
        second = await client.get("/api/v1/namespaces/default/configmaps")
        state = (await client.get("/_emulator/requests", params={"user": ADMIN})).json()
    assert first.status_code == 503
    assert first.json()["reason"] == "ServiceUnavailable"
    assert second.status_code == 200
    assert emu.accounting.counts(verb="list", resource="configmaps", user=ADMIN) == 2
    assert state["total"] == 2


async def test_offline_and_back_keeps_state(emu: Emulator) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kept"}}
    url = emu.url
    async with emu.https_client() as client:
        assert (
            await client.post("/api/v1/namespaces/default/configmaps", json=cm)
        ).status_code == 201
        await emu.faults.go_offline()
        with pytest.raises(httpx.ConnectError):
            await client.get("/api/v1/namespaces/default/configmaps/kept")
        await emu.faults.come_back()
        r = await client.get("/api/v1/namespaces/default/configmaps/kept")
    assert r.status_code == 200
    assert emu.url == url


async def test_kubeconfigs(emu: Emulator, tmp_path: Path) -> None:
    path = emu.write_kubeconfig(tmp_path / "admin")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    cfg = yaml.safe_load(path.read_text())
    assert cfg["clusters"][0]["cluster"]["server"] == emu.url
    assert (
        base64.b64decode(cfg["clusters"][0]["cluster"]["certificate-authority-data"]) == emu.ca_pem
    )
    assert cfg["users"][0]["user"] == {"token": emu.admin_token}
    by_cert = emu.kubeconfig(user="bob", groups=["system:masters"])
    assert "client-certificate-data" in by_cert["users"][0]["user"]


async def test_cli_writes_kubeconfig_once_accepting_and_exits_0_on_sigterm(tmp_path: Path) -> None:
    out = tmp_path / "kubeconfig"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "emulator",
        "--profile",
        "member",
        "--port",
        "0",
        "--kubeconfig-out",
        str(out),
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        await eventually(lambda: out.exists() or proc.returncode is not None, timeout=60)
        assert proc.returncode is None
        assert stat.S_IMODE(out.stat().st_mode) == 0o600
        cfg = yaml.safe_load(out.read_text())
        cluster = cfg["clusters"][0]["cluster"]
        ctx = ssl.create_default_context(
            cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
        )
        token = cfg["users"][0]["user"]["token"]
        # The file appears only once the server accepts requests: no retry needed.
        async with httpx.AsyncClient(verify=ctx, base_url=cluster["server"]) as client:
            r = await client.get("/api/v1/namespaces", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
        assert proc.stdout is not None
        printed = (await proc.stdout.read()).decode()
        assert cluster["server"] in printed
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_expired_client_certificate_gets_401_not_a_handshake_failure(emu: Emulator) -> None:
    # kube-apiserver completes the TLS handshake and its x509 authenticator answers 401.
    expired = emu.ca.issue(
        "alice",
        ("devs",),
        usage="client",
        lifetime=timedelta(minutes=1),
        now=datetime.now(UTC) - timedelta(hours=1),
    )
    async with httpx.AsyncClient(verify=emu.ssl_context(expired), base_url=emu.url) as client:
        r = await client.get("/api/v1/namespaces")
    assert r.status_code == 401
    assert r.json() == UNAUTHORIZED


@pytest.mark.parametrize("http2", [False, True], ids=["HTTP/1.1", "HTTP/2"])
async def test_every_answer_is_dated_by_the_servers_clock(emu: Emulator, http2: bool) -> None:
    """As Go's HTTP server dates every answer (errors and watches too), by the server's clock:
    one set 10 minutes behind this host's dates its answers so, and stamps objects so."""
    emu.set_clock_offset(-600)
    async with emu.https_client(http2=http2) as client:
        ok = await client.get("/api/v1/namespaces/default/configmaps")
        missing = await client.get("/api/v1/namespaces/default/configmaps/nothing")
        created = await client.post(
            "/api/v1/namespaces/default/configmaps", json={"metadata": {"generateName": "d-"}}
        )
        async with client.stream(
            "GET", "/api/v1/namespaces/default/configmaps", params={"watch": "1"}
        ) as watch:
            watch_date = watch.headers.get("date")
    assert ok.http_version == ("HTTP/2" if http2 else "HTTP/1.1")
    behind = datetime.now(UTC) - timedelta(seconds=600)
    for answer_date in (ok.headers["date"], missing.headers["date"], watch_date):
        assert answer_date is not None
        assert abs((parsedate_to_datetime(answer_date) - behind).total_seconds()) < 5
    assert missing.status_code == 404
    stamped = datetime.fromisoformat(created.json()["metadata"]["creationTimestamp"])
    assert abs((stamped - behind).total_seconds()) < 5
