"""The agent's two connections: loading their configuration, and following credential changes.

The control-plane credential usually comes from a Secret mounted as a file, which kubelet
refreshes when the Secret changes. KubeconfigReloader follows that file on every replica, so
a standby replica picks up the certificate the leader rotated (only the leader runs the
rotation controller), and credentials rotated by other means are used without a restart.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

from agent.kube.config import ClientConfig, ConfigError, load_client_config, load_kubeconfig
from agent.kube.transport import Transport
from agent.logs import get_logger
from agent.options import Options
from agent.periodic import Periodic
from agent.version import VERSION

USER_AGENT = f"karmada-agent/v{VERSION} (python)"
# How often the mounted kubeconfig is compared with the credential in use; kubelet itself
# refreshes Secret volumes about once a minute.
RELOAD_CHECK_INTERVAL = 15.0
# Old connections are cut this long after a reload at the latest; watches resume from
# their last resourceVersion on the new credential.
RELOAD_DRAIN_SECONDS = 30.0

log = get_logger("karmada-agent.connections")


async def load_karmada_config(options: Options) -> ClientConfig:
    """--karmada-kubeconfig/--karmada-context, else KUBECONFIG or ~/.kube/config.

    Never the in-cluster config: inside the member's pod that is the member itself, and
    registering the member with itself would be worse than failing.
    """
    try:
        config = await load_kubeconfig(
            options.karmada_kubeconfig or None,
            options.karmada_context or None,
            user_agent=USER_AGENT,
        )
    except ConfigError as exc:
        raise ConfigError(
            f"cannot load the Karmada control plane's kubeconfig: {exc} "
            "(set --karmada-kubeconfig, and --karmada-context if needed)"
        ) from exc
    return config.with_rate_limits(options.kube_api_qps, options.kube_api_burst)


async def load_member_config(options: Options) -> ClientConfig:
    """--kubeconfig, else the pod's in-cluster config, else KUBECONFIG / ~/.kube/config."""
    try:
        config = await load_client_config(options.kubeconfig or None, user_agent=USER_AGENT)
    except ConfigError as exc:
        raise ConfigError(
            f"cannot load the member cluster's configuration: {exc} "
            "(set --kubeconfig, or run in a pod with a ServiceAccount)"
        ) from exc
    return config.with_rate_limits(options.cluster_api_qps, options.cluster_api_burst)


async def _credential(config: ClientConfig) -> tuple[object, ...]:
    token = await config.token_source.authorization() if config.token_source else None
    return (config.host, config.ca_pem, config.client_cert_pem, config.client_key_pem, token)


class KubeconfigReloader:
    """Switches the control-plane transport to the credential in --karmada-kubeconfig when
    that file changes (a local file check; the control plane is not polled)."""

    name = "kubeconfigReloader"

    def __init__(
        self, options: Options, transport: Transport, *, interval: float = RELOAD_CHECK_INTERVAL
    ) -> None:
        self.options = options
        self.transport = transport
        self.path = Path(options.karmada_kubeconfig)
        self._digest = self._read_digest()
        self.reloads = 0
        self._periodic = Periodic(self.name, self._check, interval, run_at_start=False)

    def _read_digest(self) -> str | None:
        try:
            return hashlib.sha256(self.path.read_bytes()).hexdigest()
        except OSError:
            return None

    async def check_once(self) -> bool:
        """Reload when the file's credential differs from the one in use; True if it did."""
        digest = await asyncio.to_thread(self._read_digest)
        if digest is None or digest == self._digest:
            return False
        self._digest = digest
        try:
            config = await load_karmada_config(self.options)
        except ConfigError as exc:
            log.warning("the control-plane kubeconfig changed but cannot be loaded", error=str(exc))
            return False
        if await _credential(config) == await _credential(self.transport.config):
            return False  # e.g. the Secret this agent itself just wrote after a rotation
        await self.transport.reload(config, drain_timeout=RELOAD_DRAIN_SECONDS)
        self.reloads += 1
        log.info("switched to the control-plane credential from the updated kubeconfig",
                 path=str(self.path))  # fmt: skip
        return True

    async def _check(self) -> None:
        await self.check_once()

    async def start(self) -> None:
        await self._periodic.start()

    async def stop(self) -> None:
        await self._periodic.stop()
