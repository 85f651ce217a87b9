from __future__ import annotations

import base64
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.kube.config import (
    ConfigError,
    load_client_config,
    load_kubeconfig,
    tcp_keepalive_socket_options,
)
from tests.kube.pki import make_pki


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def kubeconfig(path: Path, user: dict[str, Any], cluster: dict[str, Any]) -> str:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "main",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": user}],
        "contexts": [
            {"name": "main", "context": {"cluster": "c", "user": "u"}},
            {"name": "other", "context": {"cluster": "c", "user": "u"}},
        ],
    }
    path.write_text(yaml.safe_dump(doc))
    return str(path)


async def test_embedded_cert_key_ca_and_cluster_options(tmp_path: Path) -> None:
    pki = make_pki()
    path = kubeconfig(
        tmp_path / "kc",
        {"client-certificate-data": b64(pki.cert_pem), "client-key-data": b64(pki.key_pem)},
        {
            "server": "https://10.0.0.1:6443/",
            "certificate-authority-data": b64(pki.ca_pem),
            "tls-server-name": "kubernetes",
            "proxy-url": "http://proxy:3128",
        },
    )
    cfg = await load_kubeconfig(path, "other", user_agent="test/1")
    assert cfg.host == "https://10.0.0.1:6443"
    assert cfg.ca_pem == pki.ca_pem
    assert cfg.client_cert_pem == pki.cert_pem
    assert cfg.client_key_pem == pki.key_pem
    assert cfg.token_source is None
    assert cfg.verify
    assert cfg.tls_server_name == "kubernetes"
    assert cfg.proxy_url == "http://proxy:3128"
    assert cfg.user_agent == "test/1"
    assert "context other" in cfg.source
    assert "PRIVATE" not in repr(cfg)


async def test_token_and_insecure(tmp_path: Path) -> None:
    path = kubeconfig(
        tmp_path / "kc",
        {"token": "abc"},
        {"server": "https://api:6443", "insecure-skip-tls-verify": True},
    )
    cfg = await load_kubeconfig(path)
    assert not cfg.verify
    assert cfg.token_source is not None
    assert await cfg.token_source.authorization() == "Bearer abc"


async def test_exec_plugin_token_is_rerun_on_refresh(tmp_path: Path) -> None:
    counter = tmp_path / "count"
    script = tmp_path / "plugin.py"
    script.write_text(
        "import json, pathlib, sys\n"
        f"p = pathlib.Path({str(counter)!r})\n"
        "n = int(p.read_text()) + 1 if p.exists() else 1\n"
        "p.write_text(str(n))\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', "
        "'kind': 'ExecCredential', 'status': {'token': f'tok{n}'}}))\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    path = kubeconfig(
        tmp_path / "kc",
        {
            "exec": {
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": sys.executable,
                "args": [str(script)],
                "interactiveMode": "Never",
            }
        },
        {"server": "https://api:6443"},
    )
    cfg = await load_kubeconfig(path)
    assert cfg.token_source is not None
    assert await cfg.token_source.authorization() == "Bearer tok1"
    await cfg.token_source.refresh()  # what the transport does after a 401
    assert await cfg.token_source.authorization() == "Bearer tok2"


async def test_load_order_and_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = kubeconfig(tmp_path / "env-kc", {"token": "t"}, {"server": "https://from-env:6443"})
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", path)
    assert (await load_client_config()).host == "https://from-env:6443"
    with pytest.raises(ConfigError):
        await load_kubeconfig(str(tmp_path / "missing"))
    with pytest.raises(ConfigError):
        await load_kubeconfig(path, "no-such-context")


def test_keepalive_options() -> None:
    import socket

    options = tcp_keepalive_socket_options()
    assert (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1) in options
    if hasattr(socket, "TCP_KEEPIDLE"):
        assert (socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 30) in options
    assert os.name  # options are plain int triples usable by httpx


@pytest.mark.parametrize(
    "content",
    [
        "clusters: [",
        "just a string",
        "clusters: 5\nusers: 7\ncontexts: 3\ncurrent-context: x\n",
        "",
    ],
)
async def test_malformed_kubeconfig_is_a_config_error_naming_the_file(
    tmp_path: Path, content: str
) -> None:
    path = tmp_path / "broken.kubeconfig"
    path.write_text(content)
    with pytest.raises(ConfigError, match=str(path)):
        await load_kubeconfig(str(path))
