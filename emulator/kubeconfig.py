"""Kubeconfig files for the emulator: server URL, CA data embedded, and a credential
(a bearer token or an embedded client certificate and key)."""

from __future__ import annotations

import base64
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml


def _b64(data: bytes | str) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return base64.b64encode(raw).decode("ascii")


def build_kubeconfig(
    server: str,
    ca_pem: bytes | str,
    *,
    cluster: str = "emulator",
    user: str = "admin",
    token: str | None = None,
    client_cert_pem: bytes | str | None = None,
    client_key_pem: bytes | str | None = None,
    namespace: str | None = None,
) -> dict[str, Any]:
    """A single-context kubeconfig. Give either `token` or both client cert and key."""
    if (client_cert_pem is None) != (client_key_pem is None):
        raise ValueError("a client certificate needs its key, and the other way round")
    if token is None and client_cert_pem is None:
        raise ValueError("a kubeconfig needs a token or a client certificate")
    credentials: dict[str, Any] = {}
    if token is not None:
        credentials["token"] = token
    if client_cert_pem is not None and client_key_pem is not None:
        credentials["client-certificate-data"] = _b64(client_cert_pem)
        credentials["client-key-data"] = _b64(client_key_pem)
    context_name = f"{user}@{cluster}"
    context: dict[str, Any] = {"cluster": cluster, "user": user}
    if namespace:
        context["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [
            {
                "name": cluster,
                "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)},
            }
        ],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": context_name, "context": context}],
        "current-context": context_name,
    }


def dump_kubeconfig(config: dict[str, Any]) -> str:
    return yaml.safe_dump(config, default_flow_style=False, sort_keys=False)


def write_kubeconfig(path: str | os.PathLike[str], config: dict[str, Any]) -> Path:
    """Write `config` as YAML with mode 0600, atomically: a reader polling for the file
    never sees it half written."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(dump_kubeconfig(config))
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
