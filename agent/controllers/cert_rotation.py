"""certRotation: renew the agent's Karmada client certificate before it expires, without a restart.

Every --cert-rotation-checking-interval the certificate in use is checked; when the remaining
fraction of its lifetime, (notAfter - now) / (notAfter - notBefore), is at or under
--cert-rotation-remaining-time-threshold, the agent:

1. generates a new ECDSA P-256 key in memory and submits a CSR under its own identity (subject
   copied from the current certificate, signer kubernetes.io/kube-apiserver-client, the old
   certificate's lifetime as expirationSeconds, name `<kubeconfig user>-<5 random>` as upstream),
   which Karmada's approver accepts through its "self" rule;
2. waits for the certificate with a watch on that CSR (agent.certificates);
3. switches the control-plane transport to the new certificate: new requests use it at once,
   streams already open finish on the old connection, which is cut after a drain period well
   inside the old certificate's remaining life; reflectors then resume from their last
   resourceVersion on the new connection, so no watch event is lost;
4. writes the new certificate and key into the member Secret the kubeconfig is mounted from
   (agent.controllers.kubeconfig_secret: flags, else the agent's own Pod's volume, as Karmada's
   Helm chart lays it out, else `<--karmada-kubeconfig-namespace>/karmada-kubeconfig` as
   `karmadactl register` does; the current context's user), so that a restarted agent starts
   with it. Until it is written (the Secret deleted, the agent's RBAC on it taken away, or the
   agent started from a plain file) it lives only in memory: it is written again at every check
   until it is saved, with a warning and a RotatedCertificateUnsaved Warning Event on the Cluster
   each time it could not be.

Upstream's controller is off by default and only updates the Secret; the running Go agent keeps
its old certificate until restarted. This one is on by default and does nothing (one log line)
unless the Karmada credential is a client certificate.

Used CSRs are not deleted, as upstream: the agent identity is not granted delete on CSRs (that
would let one cluster delete every other cluster's requests) and kube-controller-manager's
csrcleaner, which Karmada's control planes run, removes issued CSRs after an hour.
"""

from __future__ import annotations

import base64
import copy
import logging
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import yaml

from agent.cert_validity import validity_problem
from agent.certificates import (
    CertificateError,
    CertificateRequestError,
    Lifetime,
    certificate_lifetime,
    expiration_seconds_for,
    new_private_key,
    public_key_matches,
    random_suffix,
    request_certificate,
    serial_number,
    subject_of,
)
from agent.context import AgentContext, Runnable
from agent.controllers.kubeconfig_secret import SecretLocation, find_kubeconfig_secret
from agent.karmada import names
from agent.kube.config import ClientConfig
from agent.kube.errors import ConflictError, KubeError, NotFoundError
from agent.kube.resources import SECRETS
from agent.logs import get_logger
from agent.periodic import AsController, Periodic
from agent.resources import CLUSTERS

log = get_logger(__name__)

JsonDict = dict[str, Any]
CONTROLLER_NAME = "certRotation"
# Upstream polls up to five minutes for the certificate.
CSR_TIMEOUT = 300.0
# Old connections are cut after this share of the old certificate's remaining life, at most
# DRAIN_MAX seconds: long enough for in-flight requests, far from the certificate's expiry.
DRAIN_FRACTION = 0.25
DRAIN_MAX = 60.0
SECRET_UPDATE_ATTEMPTS = 5
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class KubeconfigError(ValueError):
    """A kubeconfig without a usable current context or user entry."""


# --- pure helpers ------------------------------------------------------------------------------


def should_rotate(lifetime: Lifetime, threshold: float, now: datetime | None = None) -> bool:
    """Upstream's rule: rotate when the remaining fraction is at or under the threshold."""
    return lifetime.remaining_fraction(now) <= threshold


def drain_timeout_for(old: Lifetime, now: datetime | None = None) -> float:
    """Seconds the old connections may keep running after a switch to a new certificate."""
    remaining = old.remaining(now).total_seconds()
    return max(0.0, min(DRAIN_MAX, remaining * DRAIN_FRACTION))


def csr_name_prefix(user_name: str | None, cluster_name: str) -> str:
    """Upstream names rotation CSRs after the kubeconfig's user entry; when that is not a valid
    object name (e.g. `system:karmada:agent:x`), the cluster name is used instead."""
    if user_name and len(user_name) <= 247 and _DNS_SUBDOMAIN.match(user_name):
        return user_name
    return cluster_name


def current_user(kubeconfig: JsonDict) -> tuple[str, JsonDict]:
    """(name, credentials) of the current context's user entry."""
    current = kubeconfig.get("current-context")
    if not current:
        raise KubeconfigError("the kubeconfig has no current-context")
    context = next(
        (
            entry.get("context") or {}
            for entry in kubeconfig.get("contexts") or ()
            if isinstance(entry, dict) and entry.get("name") == current
        ),
        None,
    )
    if context is None:
        raise KubeconfigError(f"the kubeconfig has no context {current!r}")
    user_name = context.get("user")
    if not user_name:
        raise KubeconfigError(f"context {current!r} names no user")
    for entry in kubeconfig.get("users") or ():
        if isinstance(entry, dict) and entry.get("name") == user_name:
            user = entry.get("user")
            return str(user_name), user if isinstance(user, dict) else {}
    raise KubeconfigError(f"the kubeconfig has no user {user_name!r}")


def client_certificate_of(kubeconfig: JsonDict) -> bytes | None:
    """The current user's embedded client certificate (PEM), if it has one."""
    _, user = current_user(kubeconfig)
    data = user.get("client-certificate-data")
    return base64.b64decode(data) if data else None


def replace_client_certificate(kubeconfig: JsonDict, cert_pem: bytes, key_pem: bytes) -> JsonDict:
    """A copy of `kubeconfig` whose current user holds `cert_pem`/`key_pem` embedded; file
    references to an old certificate or key are dropped (client-go refuses both at once)."""
    updated = copy.deepcopy(kubeconfig)
    user_name, _ = current_user(updated)
    for entry in updated["users"]:
        if isinstance(entry, dict) and entry.get("name") == user_name:
            user = entry.get("user")
            user = dict(user) if isinstance(user, dict) else {}
            user.pop("client-certificate", None)
            user.pop("client-key", None)
            user["client-certificate-data"] = base64.b64encode(cert_pem).decode("ascii")
            user["client-key-data"] = base64.b64encode(key_pem).decode("ascii")
            entry["user"] = user
            break
    return updated


def _load_kubeconfig_text(data: str) -> JsonDict:
    try:
        loaded = yaml.safe_load(data)
    except yaml.YAMLError as exc:
        raise KubeconfigError(f"the kubeconfig is not valid YAML: {exc}") from exc
    if not isinstance(loaded, dict):
        raise KubeconfigError("the kubeconfig is not a mapping")
    return loaded


def _utc_now() -> datetime:
    return datetime.now(UTC)


# --- the controller ----------------------------------------------------------------------------


class CertRotation:
    """The certRotation controller; `check_once` is one check (and rotation when due)."""

    name = CONTROLLER_NAME

    def __init__(
        self,
        ctx: AgentContext,
        *,
        csr_timeout: float = CSR_TIMEOUT,
        now: Callable[[], datetime] = _utc_now,
        find_secret: Callable[[], Awaitable[SecretLocation]] | None = None,
    ) -> None:
        self.ctx = ctx
        options = ctx.options
        self.interval = options.cert_rotation_checking_interval.total_seconds()
        self.threshold = options.cert_rotation_remaining_time_threshold
        self._find_secret = find_secret or (lambda: find_kubeconfig_secret(ctx.member, ctx.options))
        self._secret: SecretLocation | None = None
        self.csr_timeout = csr_timeout
        self._now = now
        self._periodic: Periodic | None = None
        # A rotated certificate whose Secret update failed; written again on the next check.
        self._unsaved: tuple[bytes, bytes] | None = None
        self.idle = False
        self.rotations = 0
        self.last_csr_name = ""

    # --- Runnable ------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._periodic is not None and self._periodic.running

    @property
    def periodic(self) -> Periodic | None:
        return self._periodic

    async def start(self) -> None:
        if self._periodic is not None:
            return
        config = self.config
        if not config.uses_client_certificate:
            self.idle = True
            if self.ctx.options.cert_rotation_requested:
                log.warning(
                    "certRotation was enabled explicitly, but the Karmada credential (%s) is not "
                    "a client certificate; there is nothing to rotate",
                    config.source or "karmada kubeconfig",
                )
            else:
                log.info(
                    "certRotation idle: the Karmada credential (%s) is not a client certificate",
                    config.source or "karmada kubeconfig",
                )
            return
        self._record_expiry(self._lifetime(config))
        self._periodic = Periodic(
            f"cert-rotation-{self.ctx.cluster_name}",
            self._tick,
            self.interval,
            as_controller=AsController(
                self.ctx.metrics.client, names.controller_component(CONTROLLER_NAME)
            ),
        )
        await self._periodic.start()
        log.info(
            "certRotation started: checking every %gs, rotating at %g%% of the lifetime left",
            self.interval,
            self.threshold * 100,
        )

    async def stop(self) -> None:
        periodic, self._periodic = self._periodic, None
        if periodic is not None:
            await periodic.stop(timeout=5.0)

    # --- one check -----------------------------------------------------------------------------

    @property
    def config(self) -> ClientConfig:
        """The control plane's client configuration in use."""
        return self.ctx.karmada.transport.config

    @staticmethod
    def _lifetime(config: ClientConfig) -> Lifetime:
        if config.client_cert_pem is None:
            raise CertificateError("the Karmada credential is not a client certificate")
        return certificate_lifetime(config.client_cert_pem)

    def _record_expiry(self, lifetime: Lifetime) -> None:
        self.ctx.metrics.certificates.observe(self.ctx.cluster_name, lifetime.not_after.timestamp())

    async def _tick(self) -> None:
        try:
            await self.check_once()
        except (KubeError, CertificateError, CertificateRequestError, KubeconfigError) as exc:
            log.warning("certRotation: %s; trying again in %gs", exc, self.interval)

    async def check_once(self) -> bool:
        """Check the certificate in use; rotate it when due. True when it was rotated."""
        if self._unsaved is not None:
            cert_pem, key_pem = self._unsaved
            await self._persist(cert_pem, key_pem)
        config = self.config
        lifetime = self._lifetime(config)
        self._record_expiry(lifetime)
        now = self._now()
        await self._check_validity(config, lifetime, now)
        fraction = lifetime.remaining_fraction(now)
        if not should_rotate(lifetime, self.threshold, now):
            log.debug("certRotation: %.1f%% of the certificate's lifetime left", fraction * 100)
            return False
        log.info(
            "certRotation: %.1f%% of the client certificate's lifetime left (expires %s); "
            "requesting a new one",
            max(fraction, 0.0) * 100,
            lifetime.not_after.isoformat(),
        )
        counter = self.ctx.metrics.certificates.rotations
        try:
            await self._rotate(config, lifetime)
        except Exception:
            counter.labels(self.ctx.cluster_name, "error").inc()
            raise
        counter.labels(self.ctx.cluster_name, "success").inc()
        return True

    async def _check_validity(
        self, config: ClientConfig, lifetime: Lifetime, now: datetime
    ) -> None:
        """Say so (a warning, and a Warning Event on the Cluster, which lands while the control
        plane still takes the agent's requests) when the certificate in use is expired or not
        yet valid by the agent's clock."""
        problem = validity_problem(lifetime, now, "the agent's clock")
        if problem is None or config.client_cert_pem is None:
            return
        state, when = problem
        message = (
            f"the client certificate for {subject_of(config.client_cert_pem).common_name} "
            f"(serial {serial_number(config.client_cert_pem):x}) that the agent uses for the "
            f"control plane is {state}: {when}"
        )
        log.warning("certRotation: %s", message)
        reason = (
            names.EVENT_CLIENT_CERTIFICATE_EXPIRED
            if state == "expired"
            else names.EVENT_CLIENT_CERTIFICATE_NOT_YET_VALID
        )
        await self._warn_on_cluster(reason, message)

    async def _rotate(self, config: ClientConfig, old: Lifetime) -> None:
        assert config.client_cert_pem is not None
        subject = subject_of(config.client_cert_pem)
        user_name = await self._secret_user_name()
        name = f"{csr_name_prefix(user_name, self.ctx.cluster_name)}-{random_suffix()}"
        key_pem = new_private_key("ecdsa")
        self.last_csr_name = name
        cert_pem = await request_certificate(
            self.ctx.karmada,
            name,
            key_pem,
            subject,
            expiration_seconds=expiration_seconds_for(old.total),
            timeout=self.csr_timeout,
        )
        if not public_key_matches(cert_pem, key_pem):
            raise CertificateRequestError(
                f"the certificate of CertificateSigningRequest {name} is not for the key sent"
            )
        if subject_of(cert_pem) != subject:
            raise CertificateRequestError(
                f"the certificate of CertificateSigningRequest {name} names another subject"
            )
        new_lifetime = certificate_lifetime(cert_pem)
        drain = drain_timeout_for(old, self._now())
        new_config = config.with_client_certificate(cert_pem, key_pem)
        await self.ctx.karmada.transport.reload(new_config, drain_timeout=drain)
        self.rotations += 1
        self._record_expiry(new_lifetime)
        log.info(
            "certRotation: now using the certificate of CertificateSigningRequest %s (serial %x, "
            "valid until %s); old connections close within %.1fs",
            name,
            serial_number(cert_pem),
            new_lifetime.not_after.isoformat(),
            drain,
        )
        await self._persist(cert_pem, key_pem)

    # --- the member Secret ---------------------------------------------------------------------

    async def secret_location(self) -> SecretLocation:
        """Where the kubeconfig Secret is (found once, logged once)."""
        if self._secret is not None:
            return self._secret
        found = await self._find_secret()
        if found.settled:
            self._secret = found
            log.info("certRotation: the kubeconfig Secret is %s, from %s", found, found.found_by)
        return found

    async def _get_secret(self) -> tuple[SecretLocation, JsonDict | None]:
        where = await self.secret_location()
        try:
            return where, await self.ctx.member.get(SECRETS, where.name, namespace=where.namespace)
        except NotFoundError:
            return where, None

    @staticmethod
    def _secret_kubeconfig(secret: JsonDict, key: str) -> JsonDict:
        data = (secret.get("data") or {}).get(key)
        if not data:
            raise KubeconfigError(f"the Secret has no key {key!r}")
        return _load_kubeconfig_text(base64.b64decode(data).decode("utf-8"))

    async def _secret_user_name(self) -> str | None:
        """The Secret kubeconfig's user entry name, for naming the CSR as upstream does."""
        try:
            where, secret = await self._get_secret()
            if secret is None:
                return None
            name, _ = current_user(self._secret_kubeconfig(secret, where.key))
        except (KubeError, KubeconfigError, ValueError) as exc:
            log.debug("certRotation: cannot read the kubeconfig Secret: %s", exc)
            return None
        return name

    async def _persist(self, cert_pem: bytes, key_pem: bytes) -> bool:
        """Write the certificate into the member Secret (PUT, retried on conflicts). True when
        written; otherwise the credential stays unsaved and is written again at every check
        until it is (the Secret recreated, the agent's RBAC restored), with a Warning Event on
        the Cluster each time it could not be."""
        where: SecretLocation | str = "the kubeconfig Secret"
        for _ in range(SECRET_UPDATE_ATTEMPTS):
            try:
                where, secret = await self._get_secret()
                if secret is None:
                    await self._still_unsaved(
                        cert_pem,
                        key_pem,
                        f"no Secret {where} on the member cluster (deleted, or the agent was "
                        "started from a kubeconfig file)",
                    )
                    return False
                updated = self._updated_secret(secret, where, cert_pem, key_pem)
                if updated is None:
                    self._unsaved = None
                    return False
                await self.ctx.member.replace(SECRETS, updated, namespace=where.namespace)
            except ConflictError:
                continue
            except (KubeError, KubeconfigError, ValueError) as exc:
                await self._still_unsaved(
                    cert_pem, key_pem, f"cannot update Secret {where} with it: {exc}"
                )
                return False
            was_unsaved, self._unsaved = self._unsaved is not None, None
            log.info(
                "certRotation: Secret %s holds the new certificate%s",
                where,
                " (written after it was missing or could not be written)" if was_unsaved else "",
            )
            return True
        await self._still_unsaved(cert_pem, key_pem, f"Secret {where} kept changing")
        return False

    async def _still_unsaved(self, cert_pem: bytes, key_pem: bytes, why: str) -> None:
        """The rotated credential is not in the Secret: remember it for the next check, say so
        (a warning the first time for this certificate, then at debug level) and record a
        Warning Event on the Cluster while it lasts."""
        first = self._unsaved != (cert_pem, key_pem)
        self._unsaved = (cert_pem, key_pem)
        not_after = certificate_lifetime(cert_pem).not_after.isoformat()
        message = (
            f"the rotated client certificate (valid until {not_after}) is not saved: {why}; "
            f"it lives only in memory and will be lost at restart, so a restart after the old "
            f"certificate expires is refused. Writing it again every {self.interval:g}s"
        )
        log.log(logging.WARNING if first else logging.DEBUG, "certRotation: %s", message)
        await self._warn_on_cluster(names.EVENT_ROTATED_CERTIFICATE_UNSAVED, message)

    async def _warn_on_cluster(self, reason: str, message: str) -> None:
        """A Warning Event on this cluster's Cluster object (it lands only while the control
        plane takes the agent's requests)."""
        try:
            cluster = await self.ctx.karmada.get(CLUSTERS, self.ctx.cluster_name)
        except KubeError as exc:
            log.debug("certRotation: cannot read the Cluster to record %s: %s", reason, exc)
            cluster = {
                "apiVersion": names.CLUSTER_API_VERSION,
                "kind": "Cluster",
                "metadata": {"name": self.ctx.cluster_name},
            }
        self.ctx.events.emit(cluster, "Warning", reason, message)

    def _updated_secret(
        self, secret: JsonDict, where: SecretLocation, cert_pem: bytes, key_pem: bytes
    ) -> JsonDict | None:
        """The Secret with the new credentials, or None when it holds another identity (then it
        is left alone)."""
        kubeconfig = self._secret_kubeconfig(secret, where.key)
        stored = client_certificate_of(kubeconfig)
        if stored is None:
            log.warning(
                "certRotation: the kubeconfig in Secret %s holds no client certificate; "
                "not replacing its credentials",
                where,
            )
            return None
        if subject_of(stored) != subject_of(cert_pem):
            log.warning(
                "certRotation: the kubeconfig in Secret %s is for %s, not for %s; leaving it",
                where,
                subject_of(stored).common_name,
                subject_of(cert_pem).common_name,
            )
            return None
        text = yaml.safe_dump(
            replace_client_certificate(kubeconfig, cert_pem, key_pem),
            default_flow_style=False,
            sort_keys=False,
        )
        updated = copy.deepcopy(secret)
        data = dict(updated.get("data") or {})
        data[where.key] = base64.b64encode(text.encode("utf-8")).decode("ascii")
        updated["data"] = data
        return updated


def build(ctx: AgentContext) -> Runnable:
    return CertRotation(ctx)
