"""Kubeconfig documents read directly: clientcmd's loading rules and the fields a client with a
certificate, a token, a token file or a username and password needs.

The `kubernetes` package costs a process about 20 MiB (it imports every API model), so it is
used only for users that need it: an `exec` credential plugin or an `auth-provider`
(`CredentialPluginNeededError`); agent.kube.config then hands the same file to it.

Rules followed (client-go's clientcmd): KUBECONFIG lists files separated by os.pathsep; the first
file that names a cluster, user or context wins, and so does the first current-context; missing
files in that list are skipped. Relative paths in a file are relative to that file's directory.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

JsonDict = dict[str, Any]

# Path-valued fields, resolved against the directory of the file that sets them.
_CLUSTER_PATHS = ("certificate-authority",)
_USER_PATHS = ("client-certificate", "client-key", "tokenFile")


class KubeconfigError(Exception):
    """The document is not a usable kubeconfig (the message says why)."""


class CredentialPluginNeededError(Exception):
    """The user authenticates through an exec plugin or an auth-provider."""


@dataclass(frozen=True)
class Credentials:
    """What a resolved context gives the transport."""

    host: str
    ca_pem: bytes | None
    client_cert_pem: bytes | None
    client_key_pem: bytes | None
    token: str | None
    token_file: str | None
    basic: tuple[str, str] | None
    verify: bool
    tls_server_name: str | None
    proxy_url: str | None


def _yaml_loader() -> Any:
    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse(text: str) -> JsonDict:
    """One kubeconfig document; empty text is an empty kubeconfig."""
    try:
        data = yaml.load(text, Loader=_yaml_loader())
    except yaml.YAMLError as exc:
        raise KubeconfigError(f"not YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise KubeconfigError("not a kubeconfig (expected a mapping)")
    return data


def _named(doc: JsonDict, section: str, item: str) -> Iterable[tuple[str, JsonDict]]:
    entries = doc.get(section) or []
    if not isinstance(entries, list):
        raise KubeconfigError(f"{section} must be a list")
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise KubeconfigError(f"every entry of {section} needs a name")
        body = entry.get(item) or {}
        if not isinstance(body, dict):
            raise KubeconfigError(f"{section} {entry['name']}: {item} must be a mapping")
        yield entry["name"], body


def _resolved(body: JsonDict, fields: tuple[str, ...], base: Path | None) -> JsonDict:
    if base is None:
        return body
    out = dict(body)
    for key in fields:
        value = out.get(key)
        if isinstance(value, str) and value and not os.path.isabs(value):
            out[key] = str(base / value)
    return out


@dataclass
class Merged:
    clusters: dict[str, JsonDict]
    users: dict[str, JsonDict]
    contexts: dict[str, JsonDict]
    current_context: str


def merge(documents: Iterable[tuple[JsonDict, Path | None]]) -> Merged:
    """Documents in precedence order, each with the directory its relative paths start from."""
    merged = Merged({}, {}, {}, "")
    for doc, base in documents:
        for name, body in _named(doc, "clusters", "cluster"):
            merged.clusters.setdefault(name, _resolved(body, _CLUSTER_PATHS, base))
        for name, body in _named(doc, "users", "user"):
            merged.users.setdefault(name, _resolved(body, _USER_PATHS, base))
        for name, body in _named(doc, "contexts", "context"):
            merged.contexts.setdefault(name, body)
        current = doc.get("current-context")
        if not merged.current_context and isinstance(current, str):
            merged.current_context = current
    return merged


def _bytes(
    entry: JsonDict, data_key: str, path_key: str, read: Callable[[str], bytes]
) -> bytes | None:
    data = entry.get(data_key)
    if data:
        try:
            return base64.b64decode(str(data), validate=True)
        except ValueError as exc:
            raise KubeconfigError(f"{data_key} is not base64") from exc
    path = entry.get(path_key)
    if path:
        try:
            return read(str(path))
        except OSError as exc:
            raise KubeconfigError(f"{path_key} {path}: {exc.strerror or exc}") from exc
    return None


def _read_file(path: str) -> bytes:
    return Path(path).read_bytes()


def credentials(
    merged: Merged, context: str | None, *, read: Callable[[str], bytes] = _read_file
) -> Credentials:
    name = context or merged.current_context
    if not name:
        raise KubeconfigError("no context chosen and no current-context set")
    ctx = merged.contexts.get(name)
    if ctx is None:
        raise KubeconfigError(f"context {name!r} not found")
    cluster = merged.clusters.get(str(ctx.get("cluster") or ""))
    if cluster is None:
        raise KubeconfigError(f"context {name!r}: cluster {ctx.get('cluster')!r} not found")
    user = merged.users.get(str(ctx.get("user") or ""), {})
    if user.get("exec") or user.get("auth-provider"):
        raise CredentialPluginNeededError(name)
    server = str(cluster.get("server") or "").rstrip("/")
    if not server:
        raise KubeconfigError(f"context {name!r}: the cluster has no server address")
    username, password = user.get("username"), user.get("password")
    return Credentials(
        host=server,
        ca_pem=_bytes(cluster, "certificate-authority-data", "certificate-authority", read),
        client_cert_pem=_bytes(user, "client-certificate-data", "client-certificate", read),
        client_key_pem=_bytes(user, "client-key-data", "client-key", read),
        token=str(user["token"]) if user.get("token") else None,
        token_file=str(user["tokenFile"]) if user.get("tokenFile") else None,
        basic=(str(username), str(password or "")) if username else None,
        verify=not bool(cluster.get("insecure-skip-tls-verify")),
        tls_server_name=str(cluster["tls-server-name"]) if cluster.get("tls-server-name") else None,
        proxy_url=str(cluster["proxy-url"]) if cluster.get("proxy-url") else None,
    )


def basic_authorization(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
