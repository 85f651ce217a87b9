"""Controllers the emulated control planes run, and the context they share.

Each controller is `async def run(ctx: ControllerContext) -> None`: it runs until
cancelled. As an in-process part of the emulated control plane it reads `ctx.storage` and
subscribes to its writes (`subscription.Subscription`), and it writes through `ctx.api` (a
Loopback) like any client, so its writes are validated, admitted and watched as a
controller-manager's are. Timings live in `Knobs` so tests can shorten them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol, TypeVar

from emulator.errors import ApiError
from emulator.loopback import Loopback
from emulator.storage import Storage

T = TypeVar("T")


class SigningAuthority(Protocol):
    """What the controllers need of the emulator's CA (AUTH's pki.CertificateAuthority)."""

    @property
    def cert_pem(self) -> bytes: ...

    def sign_csr(
        self,
        csr_pem: bytes,
        *,
        usages: Sequence[str],
        lifetime: timedelta,
        backdate: timedelta = ...,
        now: datetime | None = None,
    ) -> bytes: ...


class RemoteGroups(Protocol):
    """Which group versions the aggregation layer sends to other servers (emulator.aggregator):
    a controller whose objects may live there reads them through the API instead."""

    def served_remotely(self, group: str, version: str) -> bool: ...

    async def changed(self) -> None:
        """Return once the set of remotely served group versions changes."""
        ...


class TokenIssuer(Protocol):
    """What the token controller needs of AUTH's ServiceAccountTokenIssuer."""

    def issue(self, namespace: str, name: str, uid: str, secret_name: str) -> str: ...


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class Knobs:
    """Timings and limits; defaults are the upstream defaults, tests shorten them."""

    # kube-controller-manager csrsigning: --cluster-signing-duration (8760h) caps the
    # lifetime; 10 minutes is the floor it applies to spec.expirationSeconds.
    csr_max_duration: timedelta = timedelta(hours=8760)
    csr_min_duration: timedelta = timedelta(minutes=10)
    # csrsigning backdates NotBefore by five minutes (clock skew); tests of certificates only
    # seconds long set 0, or the backdate would dominate their lifetime.
    csr_backdate: timedelta = timedelta(minutes=5)
    # karmada-controller-manager cluster controller.
    cluster_monitor_period: float = 5.0
    cluster_monitor_grace_period: float = 40.0
    cluster_startup_grace_period: float = 60.0
    cluster_cleanup_check_interval: float = 1.0
    # Workload simulator: how long until objects look ready.
    workload_ready_delay: float = 0.5
    simulate_pods: bool = True
    # The simulated containers write a log line this often (pods/log).
    log_line_interval: float = 1.0
    # Back-off after a failed reconcile.
    retry_delay: float = 0.5
    # kube-aggregator rechecks every remote APIService's availability this often.
    apiservice_resync: float = 30.0


@dataclass
class ControllerContext:
    api: Loopback
    storage: Storage
    ca: SigningAuthority
    sa_tokens: TokenIssuer
    # The emulator's name: the member's cluster name, or the control plane's name.
    cluster_name: str
    clock: Callable[[], datetime] = utc_now
    knobs: Knobs = field(default_factory=Knobs)
    # The https URL clients use; written into kube-public/cluster-info. Set it before seeding.
    server_url: str = "https://127.0.0.1:6443"
    # What kube-system/extension-apiserver-authentication must hold (client and front-proxy
    # trust); empty: nothing to publish.
    authentication_info: dict[str, str] = field(default_factory=dict)
    # The aggregation layer, when the server has one.
    aggregation: RemoteGroups | None = None


Controller = Callable[[ControllerContext], Awaitable[None]]


async def tolerate(call: Awaitable[T], *codes: int) -> T | None:
    """The call's result, or None when the server answers with one of `codes` (an object
    already gone, already there, ...)."""
    try:
        return await call
    except ApiError as exc:
        if exc.code in codes:
            return None
        raise


async def run_all(*jobs: Awaitable[None]) -> None:
    """Run jobs until cancelled; if one fails, the others are cancelled too."""
    async with asyncio.TaskGroup() as group:
        for job in jobs:
            group.create_task(_as_coroutine(job))


async def _as_coroutine(job: Awaitable[None]) -> None:
    await job
