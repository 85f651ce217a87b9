"""The agent's two connections: loading their configuration, and following credential changes.

The control-plane credential usually comes from a Secret mounted as a file, which kubelet
refreshes when the Secret changes. KubeconfigReloader follows that file on every replica, so
a standby replica picks up the certificate the leader rotated (only the leader runs the
rotation controller), and credentials rotated by other means are used without a restart.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from agent.cert_validity import CertificateError, certificate_lifetime, validity_problem
from agent.certificates import serial_number, subject_of
from agent.kube.config import ClientConfig, ConfigError, load_client_config, load_kubeconfig
from agent.kube.transport import Transport
from agent.logs import get_logger
from agent.metrics import AgentMetrics
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


def _older_certificate(candidate: ClientConfig, in_use: ClientConfig) -> bool:
    """`candidate` holds a client certificate of the same identity, for the same server, as
    the one in use, but one that expires earlier."""
    if candidate.client_cert_pem is None or in_use.client_cert_pem is None:
        return False
    if (candidate.host, candidate.ca_pem) != (in_use.host, in_use.ca_pem):
        return False
    try:
        if subject_of(candidate.client_cert_pem) != subject_of(in_use.client_cert_pem):
            return False
        older = certificate_lifetime(candidate.client_cert_pem).not_after
        return older < certificate_lifetime(in_use.client_cert_pem).not_after
    except (CertificateError, ValueError):
        return False


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
        if _older_certificate(config, self.transport.config):
            # The Secret recreated from an old copy while certRotation's newer certificate is
            # not saved yet: switching back could mean an expired one; certRotation writes
            # the one in use into the Secret at its next check.
            log.warning(
                "the control-plane kubeconfig changed to an older certificate of the identity "
                "in use; keeping the newer one",
                path=str(self.path),
            )
            return False
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


class RefusedCertificates:
    """A Transport's 401 listener (Transport.on_unauthorized) for the control plane: at the first
    401 for a client certificate, one error line naming the certificate and why it was refused,
    with its notAfter (expired or not yet valid by the control plane's clock, from the Date of
    its answers, else the agent's), and the certificate expiry metric set."""

    def __init__(
        self,
        metrics: AgentMetrics,
        cluster_name: str,
        *,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.metrics = metrics
        self.cluster_name = cluster_name
        self._wall_clock = wall_clock
        self._told: set[int] = set()

    def __call__(self, config: ClientConfig, server_now: float | None) -> None:
        cert_pem = config.client_cert_pem
        if cert_pem is None:
            return
        try:
            serial = serial_number(cert_pem)
            lifetime = certificate_lifetime(cert_pem)
            subject = subject_of(cert_pem)
        except (CertificateError, ValueError):
            return
        if serial in self._told:
            return
        self._told.add(serial)
        # (The families exist from here on: an agent with a token has none.)
        self.metrics.certificates.observe(self.cluster_name, lifetime.not_after.timestamp())
        if server_now is not None:
            now, clock = server_now, "the control plane's clock"
        else:
            now, clock = self._wall_clock(), "the agent's clock"
        problem = validity_problem(lifetime, datetime.fromtimestamp(now, UTC), clock)
        named = f"the client certificate for {subject.common_name} (serial {serial:x})"
        if problem is None:
            why = (
                f"it is within its validity period (until {lifetime.not_after.isoformat()}), so "
                "the control plane does not trust its signer or this identity"
            )
        else:
            why = (
                f"{problem[1]}. certRotation cannot renew a certificate the control plane "
                "refuses: register the cluster again, or put a valid certificate into the "
                "agent's kubeconfig"
            )
        log.error(
            f"the Karmada control plane refused {named} (401 Unauthorized): {why}",
            not_after=lifetime.not_after.isoformat(),
        )
