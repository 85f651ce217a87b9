"""Lease-based leader election (coordination.k8s.io/v1), as client-go's leaderelection package.

A candidate acquires the Lease when it is missing, released (empty holder) or not renewed for
leaseDurationSeconds *as observed on our own clock* (clocks of different hosts are never compared).
The leader renews every retry period; if it cannot renew within the renew deadline it stops leading
at once. On shutdown a leader releases the Lease (client-go's ReleaseOnCancel) so a successor need
not wait for expiry.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import inspect
import random
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

from agent.kube.client import KubeClient
from agent.kube.clock import REAL_CLOCK, Clock
from agent.kube.errors import ConflictError, ForbiddenError, KubeError, NotFoundError
from agent.kube.resources import LEASES
from agent.logs import get_logger
from agent.timefmt import micro_time

log = get_logger(__name__)

# client-go's leader election: retries wait retryPeriod times up to this factor, so the renew
# deadline must exceed retryPeriod * JITTER_FACTOR (checked here and by the flag validation).
JITTER_FACTOR = 1.2
JsonDict = dict[str, Any]


@dataclass(frozen=True)
class LeaderElectionConfig:
    namespace: str
    name: str
    identity: str
    # karmada-agent's --leader-elect-lease-duration / -renew-deadline / -retry-period.
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = True

    def __post_init__(self) -> None:
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("lease duration must be greater than the renew deadline")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError(f"renew deadline must exceed retry period * {JITTER_FACTOR}")
        if not self.identity:
            raise ValueError("identity must not be empty")


OnStarted = Callable[[], Coroutine[Any, Any, None]]
OnStopped = Callable[[], Awaitable[None] | None]


class LeaderMetrics(Protocol):
    """client-go's leader metric (leader_election_master_status{name}): 1 while leading."""

    def leader_on(self, name: str) -> None: ...

    def leader_off(self, name: str) -> None: ...


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        config: LeaderElectionConfig,
        *,
        on_started_leading: OnStarted,
        on_stopped_leading: OnStopped | None = None,
        on_new_leader: Callable[[str], None] | None = None,
        clock: Clock = REAL_CLOCK,
        wall_clock: Callable[[], datetime.datetime] | None = None,
        metrics: LeaderMetrics | None = None,
    ) -> None:
        self.client = client
        self.config = config
        self._metrics = metrics
        if metrics is not None:
            metrics.leader_off(config.name)
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._on_new_leader = on_new_leader
        self._clock = clock
        self._wall = wall_clock or (lambda: datetime.datetime.now(datetime.UTC))
        self._observed_record: JsonDict | None = None
        self._observed_at = 0.0
        self._observed_rv = ""
        self._leader = ""
        self._is_leader = False
        # The lease as our last successful write returned it (the optimistic renewal's base).
        self._latest: JsonDict | None = None

    @property
    def is_leader(self) -> bool:
        return self._is_leader

    @property
    def leader(self) -> str:
        """The last holder we observed ("" if none)."""
        return self._leader

    async def run(self) -> None:
        """Campaign until leading, lead until the lease is lost, then return. Cancelling it
        stops leading (and releases the lease when configured)."""
        leading: asyncio.Task[None] | None = None
        renew: asyncio.Task[None] | None = None
        try:
            await self._acquire()
            if self._metrics is not None:
                self._metrics.leader_on(self.config.name)
            leading = asyncio.create_task(self._on_started(), name="leading")
            renew = asyncio.create_task(self._renew_loop(), name="lease-renew")
            done, _ = await asyncio.wait({leading, renew}, return_when=asyncio.FIRST_COMPLETED)
            if leading in done and not leading.cancelled() and leading.exception() is not None:
                log.error("leader callback failed: %s", leading.exception())
        finally:
            # Renewals end first, also when run() itself is cancelled: a renewal after the
            # release below would take the Lease again for a leader that has stopped.
            if renew is not None and not renew.done():
                renew.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await renew
            was_leader = self._is_leader
            self._is_leader = False
            if self._metrics is not None:
                self._metrics.leader_off(self.config.name)
            if leading is not None and not leading.done():
                leading.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await leading
            if was_leader and self.config.release_on_cancel:
                await asyncio.shield(self._release())
            if leading is not None and self._on_stopped is not None:
                outcome = self._on_stopped()
                if inspect.isawaitable(outcome):
                    await outcome

    async def wait_until_free(self) -> None:
        """Wait, without writing, until the Lease is missing, released, ours, or not renewed
        for its leaseDurationSeconds on our clock: the moment a candidate could acquire it.
        Used to honour a Lease that another program's candidates hold (upstream's agent) before
        leading on a different Lease. A Lease we may not read is not waited for."""
        cfg = self.config
        while True:
            try:
                lease = await self.client.get(LEASES, cfg.name, namespace=cfg.namespace)
            except NotFoundError:
                return
            except ForbiddenError as exc:
                log.warning(
                    "may not read lease %s/%s, so cannot wait for its holder: %s",
                    cfg.namespace,
                    cfg.name,
                    exc,
                )
                return
            except KubeError as exc:
                log.debug("reading lease failed: %s", exc)
            else:
                self._observe(lease)
                if self._acquirable():
                    return
            await self._clock.sleep(cfg.retry_period)

    def _acquirable(self) -> bool:
        """Whether the observed record lets us acquire: no live holder other than us."""
        record = self._observed_record or {}
        holder = str(record.get("holderIdentity") or "")
        duration = float(record.get("leaseDurationSeconds") or self.config.lease_duration)
        valid = self._observed_at + duration > self._clock.now()
        return not (holder and holder != self.config.identity and valid)

    async def _acquire(self) -> None:
        while True:
            if await self._try_acquire_or_renew():
                log.info("acquired lease %s/%s", self.config.namespace, self.config.name)
                return
            await self._clock.sleep(
                self.config.retry_period * (1 + random.random() * (JITTER_FACTOR - 1))
            )

    async def _renew_loop(self) -> None:
        while True:
            deadline = self._clock.now() + self.config.renew_deadline
            renewed = False
            while self._clock.now() < deadline:
                remaining = deadline - self._clock.now()
                # asyncio.timeout, not wait_for: on Python 3.11, wait_for loses a cancellation
                # that arrives as the renewal completes, and the loop would go on renewing
                # through a shutdown until cancelled a second time.
                try:
                    async with asyncio.timeout(remaining):
                        renewed = await self._try_acquire_or_renew()
                except TimeoutError:
                    renewed = False
                if renewed:
                    break
                await self._clock.sleep(min(self.config.retry_period, remaining))
            if not renewed:
                log.warning("failed to renew lease %s/%s", self.config.namespace, self.config.name)
                self._is_leader = False
                return
            await self._clock.sleep(self.config.retry_period)

    def _record(self, lease: JsonDict) -> JsonDict:
        spec = lease.get("spec") or {}
        return {
            k: spec.get(k)
            for k in (
                "holderIdentity",
                "leaseDurationSeconds",
                "acquireTime",
                "renewTime",
                "leaseTransitions",
            )
        }

    def _observe(self, lease: JsonDict) -> None:
        record = self._record(lease)
        if record != self._observed_record:
            self._observed_record = record
            self._observed_at = self._clock.now()
        self._observed_rv = str((lease.get("metadata") or {}).get("resourceVersion") or "")
        holder = str(record.get("holderIdentity") or "")
        if holder != self._leader:
            self._leader = holder
            if holder and self._on_new_leader is not None:
                self._on_new_leader(holder)

    def _spec(self, transitions: int, acquire_time: str | None) -> JsonDict:
        now = micro_time(self._wall())
        return {
            "holderIdentity": self.config.identity,
            "leaseDurationSeconds": max(1, round(self.config.lease_duration)),
            "acquireTime": acquire_time or now,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    async def _try_acquire_or_renew(self) -> bool:
        if await self._renew_optimistically():
            return True
        cfg = self.config
        try:
            lease = await self.client.get(LEASES, cfg.name, namespace=cfg.namespace)
        except NotFoundError:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": cfg.name, "namespace": cfg.namespace},
                "spec": self._spec(0, None),
            }
            try:
                created = await self.client.create(LEASES, body, namespace=cfg.namespace)
            except KubeError as exc:
                log.debug("creating lease failed: %s", exc)
                return False
            self._observe(created)
            self._latest = created
            self._is_leader = True
            return True
        except KubeError as exc:
            log.debug("reading lease failed: %s", exc)
            return False
        self._observe(lease)
        record = self._observed_record or {}
        holder = str(record.get("holderIdentity") or "")
        if not self._acquirable():
            self._is_leader = False
            return False
        transitions = int(record.get("leaseTransitions") or 0)
        if holder == cfg.identity:
            spec = self._spec(transitions, record.get("acquireTime"))
        else:
            spec = self._spec(transitions + 1, None)
        updated = {**lease, "spec": {**(lease.get("spec") or {}), **spec}}
        try:
            result = await self.client.replace(LEASES, updated, namespace=cfg.namespace)
        except ConflictError:
            return False
        except KubeError as exc:
            log.debug("updating lease failed: %s", exc)
            return False
        self._observe(result)
        self._latest = result
        self._is_leader = True
        return True

    async def _renew_optimistically(self) -> bool:
        """client-go's fast path: a leader whose lease is still valid renews with one update
        built from the lease its last write returned (no GET). Any failure (a conflict: someone
        else wrote the lease) falls back to reading it."""
        latest, self._latest = self._latest, None
        record = self._observed_record or {}
        duration = float(record.get("leaseDurationSeconds") or self.config.lease_duration)
        if (
            latest is None
            or not self._is_leader
            or self._observed_at + duration <= self._clock.now()
        ):
            return False
        spec = self._spec(int(record.get("leaseTransitions") or 0), record.get("acquireTime"))
        updated = {**latest, "spec": {**(latest.get("spec") or {}), **spec}}
        try:
            result = await self.client.replace(LEASES, updated, namespace=self.config.namespace)
        except KubeError as exc:
            log.debug("optimistic lease update failed (%s); reading the lease", exc)
            return False
        self._observe(result)
        self._latest = result
        return True

    async def _release(self) -> None:
        """Give the lease up: empty holder, 1 s duration, as client-go's release()."""
        cfg = self.config
        try:
            lease = await self.client.get(LEASES, cfg.name, namespace=cfg.namespace)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != cfg.identity:
                return
            now = micro_time(self._wall())
            lease["spec"] = {
                **spec,
                "holderIdentity": None,
                "leaseDurationSeconds": 1,
                "acquireTime": now,
                "renewTime": now,
            }
            await self.client.replace(LEASES, lease, namespace=cfg.namespace)
            log.info("released lease %s/%s", cfg.namespace, cfg.name)
        except KubeError as exc:
            log.warning("releasing lease failed: %s", exc)
