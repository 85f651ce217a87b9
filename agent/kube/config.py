"""Client configuration: kubeconfig, exec plugins and in-cluster config -> our `ClientConfig`.

Kubeconfigs whose user has a certificate, a token, a token file or a password, and the pod's
in-cluster config, are read directly (agent.kube.kubeconfig): the `kubernetes` package imports
every API model, about 20 MiB that an agent on a small node should not carry for that. Users
with an exec plugin or an auth-provider are loaded by the `kubernetes` package (contexts,
KUBECONFIG merging, plugins, tokens, certificates, insecure-skip-tls-verify, tls-server-name,
proxy-url), imported only then; its calls are blocking and untyped, so they are confined to this
module and run in `asyncio.to_thread`. That package is an optional extra (EXEC_AUTH_EXTRA; the
image's `EXTRAS=exec-auth` variant): without it such a kubeconfig is a ConfigError naming it.
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
from agent.kube.kubeconfig import (
    CredentialPluginNeededError,
    Credentials,
    KubeconfigError,
    basic_authorization,
    credentials,
    merge,
    parse,
)

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
    # As client-go: offer HTTP/2 by ALPN, so that every request and watch to one API server
    # shares one TLS connection (servers that only speak HTTP/1.1 get HTTP/1.1).
    http2: bool = True
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


class FileToken:
    """A bearer token from a file, read again at most every `reread_seconds` (client-go's
    cached token file source: one minute) and at once after a 401, so a rotated ServiceAccount
    token or a rewritten tokenFile is used without a restart."""

    def __init__(self, path: str, *, reread_seconds: float = 60.0) -> None:
        self.path = path
        self._reread_seconds = reread_seconds
        self._value: str | None = None
        self._read_at = float("-inf")

    def read_now(self) -> str | None:
        """Read the file now (blocking); the Authorization value, or None for an empty file."""
        self._read()
        return self._value

    def _read(self) -> None:
        try:
            token = Path(self.path).read_text().strip()
        except OSError as exc:
            if self._value is None:
                raise ConfigError(f"token file {self.path}: {exc.strerror or exc}") from exc
            return  # keep the last good token, as client-go does
        self._value = _normalize_authorization(token) if token else None
        self._read_at = time.monotonic()

    async def authorization(self) -> str | None:
        if time.monotonic() - self._read_at >= self._reread_seconds:
            await asyncio.to_thread(self._read)
        return self._value

    async def refresh(self) -> None:
        await asyncio.to_thread(self._read)

    def __repr__(self) -> str:
        return f"FileToken({self.path!r})"


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


def _from_credentials(creds: Credentials, *, user_agent: str, source: str) -> ClientConfig:
    token_source: TokenSource | None = None
    if creds.token_file:
        token_source = FileToken(creds.token_file)
    elif creds.token:
        token_source = StaticToken(creds.token)
    elif creds.basic is not None:
        token_source = StaticToken(basic_authorization(*creds.basic))
    return ClientConfig(
        host=creds.host,
        ca_pem=creds.ca_pem,
        client_cert_pem=creds.client_cert_pem,
        client_key_pem=creds.client_key_pem,
        token_source=token_source,
        verify=creds.verify,
        tls_server_name=creds.tls_server_name,
        proxy_url=creds.proxy_url,
        user_agent=user_agent,
        source=source,
    )


def _kubeconfig_files(path: str | None) -> list[str]:
    """clientcmd's loading rules: the given file (which must exist), else the existing files
    of KUBECONFIG, else ~/.kube/config."""
    if path:
        return [path]
    listed = os.environ.get("KUBECONFIG", "")
    if listed:
        files = [f for f in listed.split(os.pathsep) if f and os.path.exists(f)]
        if files:
            return files
    return [os.path.expanduser("~/.kube/config")]


def _read_kubeconfig_sync(path: str | None, context: str | None) -> Credentials:
    documents = []
    for file in _kubeconfig_files(path):
        try:
            text = Path(file).read_text()
        except OSError as exc:
            raise ConfigError(f"kubeconfig {file}: {exc.strerror or exc}") from exc
        try:
            documents.append((parse(text), Path(file).resolve().parent))
        except KubeconfigError as exc:
            raise ConfigError(f"kubeconfig {file}: {exc}") from exc
    where = path or os.environ.get("KUBECONFIG") or "~/.kube/config"
    try:
        return credentials(merge(documents), context)
    except KubeconfigError as exc:
        raise ConfigError(f"kubeconfig {where}: {exc}") from exc


def _read_kubeconfig_dict_sync(data: dict[str, Any], context: str | None) -> Credentials:
    if not isinstance(data, dict):
        raise ConfigError("kubeconfig: not a kubeconfig (expected a mapping)")
    try:
        return credentials(merge([(data, None)]), context)
    except KubeconfigError as exc:
        raise ConfigError(f"kubeconfig: {exc}") from exc


EXEC_AUTH_EXTRA = "karmada-pull-agent[exec-auth]"


def _kubernetes(where: str) -> tuple[Any, Any]:
    """The `kubernetes` package's client and config modules, which only exec-plugin and
    auth-provider users need: an optional extra, named in the error when it is missing."""
    try:
        from kubernetes import client, config
    except ImportError as exc:
        raise ConfigError(
            f"{where}: the user authenticates with an exec plugin or an auth-provider, which "
            f"needs the optional `kubernetes` package: install {EXEC_AUTH_EXTRA} (or use the "
            f"image built with --build-arg EXTRAS=exec-auth)"
        ) from exc
    return client, config


def _kubeconfig_errors(config: Any) -> tuple[type[BaseException], ...]:
    """What kubernetes.config raises for a kubeconfig that is unreadable, not YAML, or not
    shaped like a kubeconfig; each becomes a ConfigError naming the file."""
    import yaml

    return (config.ConfigException, OSError, KeyError, ValueError, TypeError, AttributeError,
            yaml.YAMLError)  # fmt: skip


def _load_kubeconfig_sync(path: str | None, context: str | None) -> Any:
    config_file = path or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    client, config = _kubernetes(f"kubeconfig {config_file}")
    configuration = client.Configuration()
    try:
        config.load_kube_config(
            config_file=config_file,
            context=context,
            client_configuration=configuration,
            persist_config=False,
            temp_file_path=private_temp_dir(),
        )
    except _kubeconfig_errors(config) as exc:
        raise ConfigError(f"kubeconfig {config_file}: {exc}") from exc
    return configuration


def _load_kubeconfig_dict_sync(data: dict[str, Any], context: str | None) -> Any:
    client, config = _kubernetes("kubeconfig (inline)")
    configuration = client.Configuration()
    try:
        config.load_kube_config_from_dict(
            data,
            context=context,
            client_configuration=configuration,
            persist_config=False,
            temp_file_path=private_temp_dir(),
        )
    except _kubeconfig_errors(config) as exc:
        raise ConfigError(f"kubeconfig: {exc}") from exc
    return configuration


async def load_kubeconfig(
    path: str | None = None,
    context: str | None = None,
    *,
    user_agent: str = DEFAULT_USER_AGENT,
) -> ClientConfig:
    """A kubeconfig file (or the KUBECONFIG list, or ~/.kube/config when path is None)."""
    where = path or os.environ.get("KUBECONFIG") or "~/.kube/config"
    source = f"kubeconfig {where}" + (f" context {context}" if context else "")
    try:
        creds = await asyncio.to_thread(_read_kubeconfig_sync, path, context)
    except CredentialPluginNeededError:
        pass
    else:
        return _from_credentials(creds, user_agent=user_agent, source=source)
    configuration = await asyncio.to_thread(_load_kubeconfig_sync, path, context)
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
    try:
        creds = await asyncio.to_thread(_read_kubeconfig_dict_sync, data, context)
    except CredentialPluginNeededError:
        pass
    else:
        return _from_credentials(creds, user_agent=user_agent, source="kubeconfig (inline)")
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


def _incluster_sync(directory: Path) -> tuple[str, bytes, FileToken]:
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise ConfigError(
            "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT not set"
        )
    if ":" in host:
        host = f"[{host}]"
    try:
        ca_pem = (directory / "ca.crt").read_bytes()
    except OSError as exc:
        raise ConfigError(f"in-cluster config: {exc.strerror or exc}: ca.crt") from exc
    token = FileToken(str(directory / "token"))
    try:
        value = token.read_now()
    except ConfigError as exc:
        raise ConfigError(f"in-cluster config: {exc}") from exc
    if value is None:
        raise ConfigError("in-cluster config: the ServiceAccount token file is empty")
    return f"https://{host}:{port}", ca_pem, token


async def load_incluster(
    *, user_agent: str = DEFAULT_USER_AGENT, directory: Path = SERVICE_ACCOUNT_DIR
) -> ClientConfig:
    """The pod's ServiceAccount; the token file is re-read so bound-token rotation works."""
    host, ca_pem, token = await asyncio.to_thread(_incluster_sync, directory)
    return ClientConfig(
        host=host, ca_pem=ca_pem, token_source=token, user_agent=user_agent, source="in-cluster"
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
    """No Nagle, and client-go's dialer keepalive: Go folds its 30 s keepalive into the idle
    time and keeps its defaults of 15 s between probes and 9 probes."""
    import socket

    options = [
        (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),
        (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1),
    ]
    if hasattr(socket, "TCP_KEEPIDLE"):
        options.append((socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 30))
    elif hasattr(socket, "TCP_KEEPALIVE"):  # macOS spells the idle time this way
        options.append((socket.IPPROTO_TCP, socket.TCP_KEEPALIVE, 30))
    if hasattr(socket, "TCP_KEEPINTVL"):
        options.append((socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 15))
    if hasattr(socket, "TCP_KEEPCNT"):
        options.append((socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 9))
    return options
