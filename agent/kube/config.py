"""Client configuration: kubeconfig, exec plugins and in-cluster config -> our `ClientConfig`.

All parsing is delegated to the `kubernetes` package (contexts, KUBECONFIG merging, exec plugins,
tokens, client certificates, insecure-skip-tls-verify, tls-server-name, proxy-url). Its calls are
blocking and untyped, so they are confined to this module and run in `asyncio.to_thread`.
"""
# mypy: disallow-untyped-calls=False

from __future__ import annotations

import asyncio
import dataclasses
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agent.kube.errors import KubeError

DEFAULT_USER_AGENT = "karmada-agent/python"
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ConfigError(KubeError):
    """No usable configuration (missing file, unknown context, broken credentials)."""


class TokenSource(Protocol):
    """Supplies the Authorization header value; `refresh` forces new credentials after a 401."""

    async def authorization(self) -> str | None: ...

    async def refresh(self) -> None: ...


class StaticToken:
    def __init__(self, token: str) -> None:
        self._value = _normalize_authorization(token)

    async def authorization(self) -> str | None:
        return self._value

    async def refresh(self) -> None:
        pass

    def __repr__(self) -> str:
        return "StaticToken(<redacted>)"


@dataclass(frozen=True)
class ClientConfig:
    """Everything the transport needs to talk to one API server. Secrets never appear in repr."""

    host: str
    ca_pem: bytes | None = field(default=None, repr=False)
    client_cert_pem: bytes | None = field(default=None, repr=False)
    client_key_pem: bytes | None = field(default=None, repr=False)
    token_source: TokenSource | None = field(default=None, repr=False)
    verify: bool = True
    tls_server_name: str | None = None
    proxy_url: str | None = None
    # Read HTTPS_PROXY/HTTP_PROXY/NO_PROXY when the kubeconfig names no proxy.
    trust_env: bool = True
    user_agent: str = DEFAULT_USER_AGENT
    # client-go's rest.Config defaults; qps <= 0 disables client-side throttling.
    qps: float = 5.0
    burst: int = 10
    http2: bool = False
    timeout: float = 60.0
    source: str = ""

    def with_client_certificate(self, cert_pem: bytes, key_pem: bytes) -> ClientConfig:
        return dataclasses.replace(self, client_cert_pem=cert_pem, client_key_pem=key_pem)

    def with_rate_limits(self, qps: float, burst: int) -> ClientConfig:
        return dataclasses.replace(self, qps=qps, burst=burst)

    def with_user_agent(self, user_agent: str) -> ClientConfig:
        return dataclasses.replace(self, user_agent=user_agent)

    @property
    def uses_client_certificate(self) -> bool:
        return self.client_cert_pem is not None and self.client_key_pem is not None


def _normalize_authorization(value: str) -> str:
    value = value.strip()
    scheme, _, rest = value.partition(" ")
    if not rest:
        return f"Bearer {value}"
    if scheme.lower() == "bearer":
        return f"Bearer {rest.strip()}"
    return value


class _KubernetesTokenSource:
    """Token from a `kubernetes.client.Configuration`.

    Its refresh hook re-reads the in-cluster token file every minute and re-runs an exec plugin
    when the credential expires; we ask it at most every `cache_seconds`. `refresh` reloads the
    whole configuration, which re-runs the exec plugin even before the stated expiry.
    """

    def __init__(
        self,
        configuration: Any,
        reload: Callable[[], Any],
        *,
        cache_seconds: float = 10.0,
    ) -> None:
        self._configuration = configuration
        self._reload = reload
        self._cache_seconds = cache_seconds
        self._cached: str | None = None
        self._cached_at = float("-inf")
        self._lock = asyncio.Lock()

    async def authorization(self) -> str | None:
        if time.monotonic() - self._cached_at < self._cache_seconds:
            return self._cached
        async with self._lock:
            if time.monotonic() - self._cached_at >= self._cache_seconds:
                value = await asyncio.to_thread(_authorization_of, self._configuration)
                self._cached, self._cached_at = value, time.monotonic()
        return self._cached

    async def refresh(self) -> None:
        async with self._lock:
            self._configuration = await asyncio.to_thread(self._reload)
            value = _authorization_of(self._configuration)
            self._cached, self._cached_at = value, time.monotonic()

    def __repr__(self) -> str:
        return "KubernetesTokenSource(<redacted>)"


def _authorization_of(configuration: Any) -> str | None:
    settings = configuration.auth_settings()
    bearer = settings.get("BearerToken")
    if not bearer or not bearer.get("value"):
        return None
    return _normalize_authorization(str(bearer["value"]))


_private_dir: str | None = None


def private_temp_dir() -> str:
    """A 0700 directory for the temp files `kubernetes.config` writes for inline *-data."""
    global _private_dir
    if _private_dir is None or not os.path.isdir(_private_dir):
        _private_dir = tempfile.mkdtemp(prefix="karmada-agent-kube-")
    return _private_dir


def _read(path: Any) -> bytes | None:
    if not path:
        return None
    return Path(str(path)).read_bytes()


def _from_configuration(
    configuration: Any, reload: Callable[[], Any], *, user_agent: str, source: str
) -> ClientConfig:
    token_source: TokenSource | None = None
    if _authorization_of(configuration) is not None:
        token_source = _KubernetesTokenSource(configuration, reload)
    host = str(configuration.host).rstrip("/")
    if not host:
        raise ConfigError(f"{source}: no server address")
    return ClientConfig(
        host=host,
        ca_pem=_read(configuration.ssl_ca_cert),
        client_cert_pem=_read(configuration.cert_file),
        client_key_pem=_read(configuration.key_file),
        token_source=token_source,
        verify=bool(configuration.verify_ssl),
        tls_server_name=configuration.tls_server_name or None,
        proxy_url=configuration.proxy or None,
        user_agent=user_agent,
        source=source,
    )


def _kubeconfig_errors() -> tuple[type[BaseException], ...]:
    """What kubernetes.config raises for a kubeconfig that is unreadable, not YAML, or not
    shaped like a kubeconfig; each becomes a ConfigError naming the file."""
    import yaml
    from kubernetes import config

    return (config.ConfigException, OSError, KeyError, ValueError, TypeError, AttributeError,
            yaml.YAMLError)  # fmt: skip


def _load_kubeconfig_sync(path: str | None, context: str | None) -> Any:
    from kubernetes import client, config

    configuration = client.Configuration()
    config_file = path or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    try:
        config.load_kube_config(
            config_file=config_file,
            context=context,
            client_configuration=configuration,
            persist_config=False,
            temp_file_path=private_temp_dir(),
        )
    except _kubeconfig_errors() as exc:
        raise ConfigError(f"kubeconfig {config_file}: {exc}") from exc
    return configuration


def _load_kubeconfig_dict_sync(data: dict[str, Any], context: str | None) -> Any:
    from kubernetes import client, config

    configuration = client.Configuration()
    try:
        config.load_kube_config_from_dict(
            data,
            context=context,
            client_configuration=configuration,
            persist_config=False,
            temp_file_path=private_temp_dir(),
        )
    except _kubeconfig_errors() as exc:
        raise ConfigError(f"kubeconfig: {exc}") from exc
    return configuration


def _load_incluster_sync() -> Any:
    from kubernetes import client, config

    configuration = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=configuration, try_refresh_token=True)
    except (config.ConfigException, OSError) as exc:
        raise ConfigError(f"in-cluster config: {exc}") from exc
    return configuration


async def load_kubeconfig(
    path: str | None = None,
    context: str | None = None,
    *,
    user_agent: str = DEFAULT_USER_AGENT,
) -> ClientConfig:
    """A kubeconfig file (or the KUBECONFIG list, or ~/.kube/config when path is None)."""
    configuration = await asyncio.to_thread(_load_kubeconfig_sync, path, context)
    where = path or os.environ.get("KUBECONFIG") or "~/.kube/config"
    source = f"kubeconfig {where}" + (f" context {context}" if context else "")
    return _from_configuration(
        configuration,
        lambda: _load_kubeconfig_sync(path, context),
        user_agent=user_agent,
        source=source,
    )


async def load_kubeconfig_dict(
    data: dict[str, Any],
    context: str | None = None,
    *,
    user_agent: str = DEFAULT_USER_AGENT,
) -> ClientConfig:
    """A kubeconfig already parsed (e.g. read from a Secret)."""
    configuration = await asyncio.to_thread(_load_kubeconfig_dict_sync, data, context)
    return _from_configuration(
        configuration,
        lambda: _load_kubeconfig_dict_sync(data, context),
        user_agent=user_agent,
        source="kubeconfig (inline)",
    )


def in_cluster_available() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and bool(
        os.environ.get("KUBERNETES_SERVICE_PORT")
    )


async def load_incluster(*, user_agent: str = DEFAULT_USER_AGENT) -> ClientConfig:
    """The pod's ServiceAccount; the token file is re-read so bound-token rotation works."""
    configuration = await asyncio.to_thread(_load_incluster_sync)
    return _from_configuration(
        configuration, _load_incluster_sync, user_agent=user_agent, source="in-cluster"
    )


async def load_client_config(
    kubeconfig: str | None = None,
    context: str | None = None,
    *,
    user_agent: str = DEFAULT_USER_AGENT,
) -> ClientConfig:
    """client-go's BuildConfigFromFlags order: the given file, else in-cluster, else the
    default loading rules (KUBECONFIG, then ~/.kube/config)."""
    if kubeconfig:
        return await load_kubeconfig(kubeconfig, context, user_agent=user_agent)
    if in_cluster_available():
        try:
            return await load_incluster(user_agent=user_agent)
        except ConfigError:
            pass
    return await load_kubeconfig(None, context, user_agent=user_agent)


def tcp_keepalive_socket_options() -> list[tuple[int, int, int]]:
    """client-go's dialer keepalive (30 s idle, 15 s interval, 9 probes), for the transport."""
    from kubernetes.utils.keepalive import tcp_keepalive_socket_options as options

    return [(int(a), int(b), int(c)) for a, b, c in options()]
