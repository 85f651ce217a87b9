from __future__ import annotations

import base64
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.kube.config import (
    ConfigError,
    load_client_config,
    load_incluster,
    load_kubeconfig,
    load_kubeconfig_dict,
    tcp_keepalive_socket_options,
)
from tests.agent.kube.pki import make_pki


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
    path = exec_kubeconfig(tmp_path, script)
    cfg = await load_kubeconfig(path)
    assert cfg.token_source is not None
    assert await cfg.token_source.authorization() == "Bearer tok1"
    await cfg.token_source.refresh()  # what the transport does after a 401
    assert await cfg.token_source.authorization() == "Bearer tok2"


def exec_kubeconfig(tmp_path: Path, script: Path) -> str:
    """A kubeconfig whose user runs the Python `script` as its client-go exec plugin."""
    return kubeconfig(
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


def exec_plugin_kubeconfig(tmp_path: Path) -> str:
    script = tmp_path / "plugin.py"
    script.write_text(
        "import json\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', "
        "'kind': 'ExecCredential', 'status': {'token': 'from-plugin'}}))\n"
    )
    return exec_kubeconfig(tmp_path, script)


async def test_exec_plugin_works_with_the_exec_auth_extra(tmp_path: Path) -> None:
    """The dev install carries the exec-auth extra (the kubernetes package)."""
    cfg = await load_kubeconfig(exec_plugin_kubeconfig(tmp_path))
    assert cfg.token_source is not None
    assert await cfg.token_source.authorization() == "Bearer from-plugin"


@pytest.mark.parametrize("inline", [False, True])
async def test_exec_plugin_without_the_extra_is_an_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inline: bool
) -> None:
    """An install without the optional `kubernetes` package (the default image): an exec
    plugin or auth-provider kubeconfig is refused with the extra to install, not a traceback."""
    path = exec_plugin_kubeconfig(tmp_path)
    document = yaml.safe_load((tmp_path / "kc").read_text())
    for name in [m for m in sys.modules if m == "kubernetes" or m.startswith("kubernetes.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "kubernetes", None)  # what an absent package raises
    load = load_kubeconfig_dict(document) if inline else load_kubeconfig(path)
    with pytest.raises(ConfigError) as caught:
        await load
    message = str(caught.value)
    assert "karmada-pull-agent[exec-auth]" in message
    assert "exec plugin or an auth-provider" in message
    assert message.startswith("kubeconfig (inline)" if inline else f"kubeconfig {path}")
    # A certificate or token kubeconfig needs no extra.
    token = kubeconfig(tmp_path / "token-kc", {"token": "t"}, {"server": "https://api:6443"})
    assert (await load_kubeconfig(token)).host == "https://api:6443"


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


async def test_kubeconfig_list_first_definition_wins_and_paths_are_relative_to_their_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pki = make_pki()
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    (second / "ca.crt").write_bytes(pki.ca_pem)
    (second / "token").write_text("from-file\n")
    (first / "kc").write_text(
        yaml.safe_dump(
            {
                "current-context": "main",
                "contexts": [{"name": "main", "context": {"cluster": "c", "user": "u"}}],
                "users": [{"name": "u", "user": {"tokenFile": "token"}}],
            }
        )
    )
    (second / "kc").write_text(
        yaml.safe_dump(
            {
                "current-context": "ignored",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {"server": "https://b:6443", "certificate-authority": "ca.crt"},
                    }
                ],
                # Defined first in a/kc: this one is ignored, and its relative path with it.
                "users": [{"name": "u", "user": {"token": "not-this"}}],
            }
        )
    )
    missing = tmp_path / "missing"
    monkeypatch.setenv(
        "KUBECONFIG", os.pathsep.join([str(missing), str(first / "kc"), str(second / "kc")])
    )
    cfg = await load_kubeconfig()
    assert cfg.host == "https://b:6443"
    assert cfg.ca_pem == pki.ca_pem
    assert cfg.token_source is not None
    # a/kc's tokenFile is relative to a/, where no token file exists.
    with pytest.raises(ConfigError, match="token"):
        await cfg.token_source.authorization()
    (first / "token").write_text("abc\n")
    await cfg.token_source.refresh()
    assert await cfg.token_source.authorization() == "Bearer abc"
    (first / "token").write_text("rotated\n")
    await cfg.token_source.refresh()  # what the transport does after a 401
    assert await cfg.token_source.authorization() == "Bearer rotated"


async def test_basic_auth_and_inline_documents() -> None:
    cfg = await load_kubeconfig_dict(
        {
            "current-context": "x",
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "clusters": [{"name": "c", "cluster": {"server": "https://api:6443"}}],
            "users": [{"name": "u", "user": {"username": "admin", "password": "s3cret"}}],
        }
    )
    assert cfg.token_source is not None
    value = await cfg.token_source.authorization()
    assert value == "Basic " + b64(b"admin:s3cret")
    with pytest.raises(ConfigError, match="cluster"):
        await load_kubeconfig_dict(
            {"current-context": "x", "contexts": [{"name": "x", "context": {"cluster": "none"}}]}
        )


async def test_in_cluster_reads_the_service_account_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pki = make_pki()
    (tmp_path / "ca.crt").write_bytes(pki.ca_pem)
    (tmp_path / "token").write_text("sa-token")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    cfg = await load_incluster(directory=tmp_path)
    assert cfg.host == "https://[fd00::1]:443"
    assert cfg.ca_pem == pki.ca_pem
    assert cfg.token_source is not None
    assert await cfg.token_source.authorization() == "Bearer sa-token"
    (tmp_path / "token").write_text("rotated")
    await cfg.token_source.refresh()
    assert await cfg.token_source.authorization() == "Bearer rotated"
    (tmp_path / "token").unlink()
    with pytest.raises(ConfigError, match="in-cluster"):
        await load_incluster(directory=tmp_path)


def test_the_agent_process_imports_neither_kubernetes_nor_aiohttp(tmp_path: Path) -> None:
    """Memory: an agent with a certificate or token kubeconfig never imports the kubernetes
    package (every API model) nor an HTTP server framework."""
    pki = make_pki()
    path = kubeconfig(
        tmp_path / "kc",
        {"client-certificate-data": b64(pki.cert_pem), "client-key-data": b64(pki.key_pem)},
        {"server": "https://api:6443", "certificate-authority-data": b64(pki.ca_pem)},
    )
    script = (
        "import asyncio, sys\n"
        "import agent.app, agent.cli\n"
        "from agent.kube.config import load_kubeconfig\n"
        "from agent.kube.transport import Transport\n"
        f"config = asyncio.run(load_kubeconfig({path!r}))\n"
        "Transport(config)\n"
        "loaded = sorted({m.split('.')[0] for m in sys.modules} & {'kubernetes', 'aiohttp'})\n"
        "print(','.join(loaded))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == ""
