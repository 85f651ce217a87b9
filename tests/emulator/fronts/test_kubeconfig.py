from __future__ import annotations

import base64
import ssl
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from emulator.https import HttpsServer
from emulator.kubeconfig import build_kubeconfig, dump_kubeconfig, write_kubeconfig
from emulator.pki import CertificateAuthority

from .core import ADMIN_TOKEN, Core, core_ca, user_of

SERVER = "https://127.0.0.1:6443"


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    return core_ca()


def test_token_kubeconfig_content(ca: CertificateAuthority) -> None:
    cfg = build_kubeconfig(SERVER, ca.cert_pem, cluster="member1", token="tok", namespace="ns")
    assert cfg["current-context"] == "admin@member1"
    assert cfg["clusters"] == [
        {
            "name": "member1",
            "cluster": {
                "server": SERVER,
                "certificate-authority-data": base64.b64encode(ca.cert_pem).decode(),
            },
        }
    ]
    assert cfg["users"] == [{"name": "admin", "user": {"token": "tok"}}]
    assert cfg["contexts"] == [
        {
            "name": "admin@member1",
            "context": {"cluster": "member1", "user": "admin", "namespace": "ns"},
        }
    ]
    assert yaml.safe_load(dump_kubeconfig(cfg)) == cfg


def test_client_certificate_kubeconfig_embeds_both(ca: CertificateAuthority) -> None:
    cert, key = ca.issue("alice", ("dev",))
    cfg = build_kubeconfig(
        SERVER, ca.cert_pem, user="alice", client_cert_pem=cert, client_key_pem=key
    )
    creds = cfg["users"][0]["user"]
    assert base64.b64decode(creds["client-certificate-data"]) == cert
    assert base64.b64decode(creds["client-key-data"]) == key
    assert "token" not in creds


def test_credentials_are_required(ca: CertificateAuthority) -> None:
    with pytest.raises(ValueError, match="token or a client certificate"):
        build_kubeconfig(SERVER, ca.cert_pem)
    with pytest.raises(ValueError, match="needs its key"):
        build_kubeconfig(SERVER, ca.cert_pem, client_cert_pem=b"x")


def test_written_with_mode_0600_even_over_an_existing_file(
    ca: CertificateAuthority, tmp_path: Path
) -> None:
    path = tmp_path / "sub" / "kubeconfig"
    path.parent.mkdir()
    path.write_text("old")
    path.chmod(0o644)
    cfg = build_kubeconfig(SERVER, ca.cert_pem, token="tok")
    assert write_kubeconfig(path, cfg) == path
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert yaml.safe_load(path.read_text()) == cfg
    # No temporary file left behind.
    assert sorted(p.name for p in path.parent.iterdir()) == ["kubeconfig"]


@pytest.fixture
async def server(ca: CertificateAuthority) -> AsyncIterator[tuple[HttpsServer, Core]]:
    api = Core()
    cert, key = ca.issue("apiserver", dns_names=("localhost",), ips=("127.0.0.1",), usage="server")
    async with HttpsServer(api.server, cert, key, ca.cert_pem) as srv:
        yield srv, api


async def test_official_client_loads_it_and_reaches_the_server(
    ca: CertificateAuthority, tmp_path: Path, server: tuple[HttpsServer, Core]
) -> None:
    srv, api = server
    path = write_kubeconfig(
        tmp_path / "kc", build_kubeconfig(srv.url, ca.cert_pem, token=ADMIN_TOKEN)
    )
    configuration = k8s_client.Configuration()
    k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
        config_file=str(path), client_configuration=configuration, persist_config=False
    )
    assert configuration.host == srv.url
    assert configuration.api_key == {"BearerToken": f"Bearer {ADMIN_TOKEN}"}
    # The embedded CA verifies the server, and the token reaches it.
    ctx = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    async with httpx.AsyncClient(verify=ctx, base_url=configuration.host) as client:
        r = await client.get(
            "/version", headers={"Authorization": configuration.api_key["BearerToken"]}
        )
    assert r.status_code == 200
    assert user_of(api.seen[-1]) == "admin"


async def test_client_cert_kubeconfig_authenticates_by_certificate(
    ca: CertificateAuthority, tmp_path: Path, server: tuple[HttpsServer, Core]
) -> None:
    srv, api = server
    cert, key = ca.issue("system:node:n1", ("system:nodes",))
    path = write_kubeconfig(
        tmp_path / "kc",
        build_kubeconfig(srv.url, ca.cert_pem, user="n1", client_cert_pem=cert, client_key_pem=key),
    )
    configuration = k8s_client.Configuration()
    k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
        config_file=str(path), client_configuration=configuration, persist_config=False
    )
    ctx = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    assert configuration.cert_file is not None
    ctx.load_cert_chain(configuration.cert_file, configuration.key_file)
    async with httpx.AsyncClient(verify=ctx, base_url=configuration.host) as client:
        r = await client.get("/version")
    assert r.status_code == 200
    assert user_of(api.seen[-1]) == "system:node:n1"
