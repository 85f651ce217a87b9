"""Kubeconfigs and API clients for the three identities `karmada-bootstrap` uses.

- the bootstrap identity (a bootstrap token), pinned to the discovered CA;
- the agent identity (an embedded client certificate): this kubeconfig goes into the member's
  Secret `karmada-kubeconfig`, laid out as `karmadactl register` writes it;
- whatever the user's kubeconfig says (admin on the control plane, the member cluster).

Every client goes through agent.kube (the only place that speaks HTTP).
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import yaml

from agent.kube.client import KubeClient
from agent.kube.config import ClientConfig, StaticToken, load_kubeconfig, load_kubeconfig_dict
from agent.kube.transport import Transport

from .tokens import BootstrapToken

KARMADA_CLUSTER_ENTRY = "karmada-apiserver"
BOOTSTRAP_USER_ENTRY = "tls-bootstrap-token-user"
USER_AGENT = "karmada-bootstrap/python"
# client-go's timeout for the bootstrap client (register.go uses 10 s).
BOOTSTRAP_TIMEOUT = 10.0


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def server_url(endpoint: str) -> str:
    """`https://<endpoint>` unless the endpoint already names a scheme."""
    return endpoint if "://" in endpoint else f"https://{endpoint}"


def agent_kubeconfig(
    server: str, ca_pem: bytes, cluster_name: str, cert_pem: bytes, key_pem: bytes
) -> dict[str, Any]:
    """The agent's kubeconfig: cluster `karmada-apiserver`, user `<cluster>`, context
    `<cluster>@karmada-apiserver`, certificate and key embedded."""
    context = f"{cluster_name}@{KARMADA_CLUSTER_ENTRY}"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [
            {
                "name": KARMADA_CLUSTER_ENTRY,
                "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)},
            }
        ],
        "users": [
            {
                "name": cluster_name,
                "user": {
                    "client-certificate-data": _b64(cert_pem),
                    "client-key-data": _b64(key_pem),
                },
            }
        ],
        "contexts": [
            {"name": context, "context": {"cluster": KARMADA_CLUSTER_ENTRY, "user": cluster_name}}
        ],
        "current-context": context,
    }


def dump(config: dict[str, Any]) -> str:
    return yaml.safe_dump(config, sort_keys=False)


def bootstrap_client_config(
    server: str, ca_pem: bytes | None, token: BootstrapToken
) -> ClientConfig:
    """The bootstrap identity; `ca_pem=None` only with the explicit unsafe skip."""
    return ClientConfig(
        host=server,
        ca_pem=ca_pem,
        token_source=StaticToken(str(token)),
        verify=ca_pem is not None,
        trust_env=True,
        user_agent=USER_AGENT,
        timeout=BOOTSTRAP_TIMEOUT,
        qps=0,
        source="bootstrap token",
    )


def anonymous_client_config(server: str, ca_pem: bytes | None) -> ClientConfig:
    """No credentials at all. Without `ca_pem` the server is not verified: only for the first,
    deliberately untrusted read of cluster-info, whose content is checked afterwards."""
    return ClientConfig(
        host=server,
        ca_pem=ca_pem,
        verify=ca_pem is not None,
        user_agent=USER_AGENT,
        timeout=BOOTSTRAP_TIMEOUT,
        qps=0,
        source="anonymous",
    )


def certificate_client_config(
    server: str, ca_pem: bytes, cert_pem: bytes, key_pem: bytes, *, source: str
) -> ClientConfig:
    return ClientConfig(
        host=server,
        ca_pem=ca_pem,
        client_cert_pem=cert_pem,
        client_key_pem=key_pem,
        user_agent=USER_AGENT,
        qps=0,
        source=source,
    )


async def load_user_config(path: str | None, context: str | None) -> ClientConfig:
    """The user's own kubeconfig (file, KUBECONFIG, ~/.kube/config) and context."""
    config = await load_kubeconfig(path or None, context or None, user_agent=USER_AGENT)
    return config.with_rate_limits(0, 1)


async def load_inline_config(data: dict[str, Any], context: str | None = None) -> ClientConfig:
    config = await load_kubeconfig_dict(data, context or None, user_agent=USER_AGENT)
    return config.with_rate_limits(0, 1)


def current_cluster_entry(data: dict[str, Any], context: str | None) -> str:
    """The *cluster* entry's name of the chosen (or current) context."""
    name = context or str(data.get("current-context") or "")
    for entry in data.get("contexts") or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            return str((entry.get("context") or {}).get("cluster") or "")
    return ""


@asynccontextmanager
async def open_client(config: ClientConfig) -> AsyncIterator[KubeClient]:
    client = KubeClient(Transport(config))
    try:
        yield client
    finally:
        await client.close()
