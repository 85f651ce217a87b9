"""Outage-safe deletion: no mass deletion of a cluster's workloads right after a long outage.

When the control plane has not heard from this cluster for longer than its Lease lasts, it may
evict the cluster's Works (a NotReady cluster's workloads move elsewhere); the deletions then
all reach the member together when the link returns, and a cluster that was merely cut off
loses everything at once. So, after an outage longer than the lease duration (as the heartbeat
saw it, `agent.sources.link`), the deletion of a Work seen within --work-deletion-grace-period
of the link's return is held until that period ends, when the Works being deleted are at least
--work-deletion-hold-threshold of this cluster's Works. Held: the Work keeps its finalizer and
its member objects; a Warning Event on the Work and the Cluster condition WorkDeletionHeld say
what is held and until when; karmada_agent_work_deletions_held counts them. The deletions go
ahead at the end of the period, or earlier once the share drops below the threshold (Works
added meanwhile). A grace period of 0 deletes at once, as upstream.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime
from collections.abc import Callable
from typing import Any

from agent.context import AgentContext
from agent.karmada import collected, names
from agent.karmada.conditions import find, new_condition, set_condition
from agent.kube.backoff import Backoff
from agent.kube.clock import REAL_CLOCK, Clock
from agent.kube.controller import RetryableError
from agent.kube.errors import ConflictError, ForbiddenError, KubeError, NotFoundError
from agent.kube.resources import LEASES
from agent.kube.tasks import background
from agent.logs import get_logger
from agent.resources import CLUSTERS
from agent.sources.cluster import ClusterInformer
from agent.sources.link import Outage
from agent.sources.works import WorkInformer
from agent.timefmt import rfc3339

log = get_logger(__name__)

JsonDict = dict[str, Any]

CONDITION_DELETION_HELD = "WorkDeletionHeld"
REASON_HELD = "MassDeletionAfterOutage"
REASON_NONE_HELD = "NoDeletionHeld"
EVENT_DELETION_HELD = names.EVENT_WORK_DELETION_HELD
MESSAGE_NONE_HELD = "no Work deletion is held"
NAMES_IN_MESSAGE = 10
CLUSTER_WRITE_ATTEMPTS = 5
PUBLISH_RETRY_MAX = 30.0
# The Works store's index of what counts toward the share: deleting (ours to finish) or standing.
SHARE_INDEX = "deletion-share"
DELETING = "deleting"
STANDING = "standing"
# How long after the link returns a deletion below the threshold waits for the rest of a wave.
SETTLE_SECONDS = 5.0
SETTLE_RECHECK_SECONDS = 0.5


class DeletionGuard:
    def __init__(
        self,
        ctx: AgentContext,
        works: WorkInformer,
        cluster: ClusterInformer,
        *,
        clock: Clock = REAL_CLOCK,
        wall_clock: Callable[[], datetime.datetime] | None = None,
    ) -> None:
        self.ctx = ctx
        self.works = works
        self.cluster = cluster
        self.grace = ctx.options.work_deletion_grace_period.total_seconds()
        self.threshold = ctx.options.work_deletion_hold_threshold
        self.link = ctx.sources.link
        self._clock = clock
        # When held deletions go ahead, said in the control plane's time (its Date headers) so
        # that it reads right there whatever this agent's clock says.
        self._wall = wall_clock or self._control_plane_now
        # Held Works: name -> until when (agent clock).
        self._held: dict[str, float] = {}
        self._outage: Outage | None = None
        # Counted as the Works change, not by a walk per deletion: a walk made deleting n Works
        # cost n^2 (20,000 Works deleted at about 30 a second).
        works.reflector.store.add_indexer(SHARE_INDEX, share_of)
        self._dirty = False
        self._publisher: asyncio.Task[None] | None = None

    def _control_plane_now(self) -> datetime.datetime:
        server = self.ctx.karmada.transport.server_clock.now()
        if server is None:
            return datetime.datetime.now(datetime.UTC)
        return datetime.datetime.fromtimestamp(server, datetime.UTC)

    @property
    def held(self) -> list[str]:
        return sorted(self._held)

    async def hold(self, work: JsonDict) -> float | None:
        """Seconds to keep the deleted Work's member objects; None: delete them now."""
        name = str((work.get("metadata") or {}).get("name"))
        if self.grace <= 0:
            return None
        outage = await self._last_outage()
        now = self._clock.now()
        until = outage.back_at + self.grace if outage is not None else now
        if outage is None or now >= until:  # no outage, or its grace period is over
            self.release(name)
            return None
        deleting, total = self._share()
        if total and deleting < self.threshold * total:
            settled_at = outage.back_at + min(self.grace, SETTLE_SECONDS)
            if now < settled_at:
                # The deletions of one eviction reach the watch one by one as it catches up:
                # judge the wave as it arrives, not by its first Work alone.
                return min(settled_at - now, SETTLE_RECHECK_SECONDS)
        if total == 0 or deleting < self.threshold * total:
            self.release(name)
            return None
        self._outage = outage
        if name not in self._held:
            self._held[name] = until
            self._count(held=True)
            moment = rfc3339(self._wall() + datetime.timedelta(seconds=until - now))
            message = (
                f"Deletion of this Work's member objects is held until {moment}: "
                f"{deleting} of {total} Works of cluster {self.ctx.cluster_name} are being "
                f"deleted right after the control plane was out of reach for "
                f"{outage.seconds:.0f}s (longer than the {self.link.lease_duration:.0f}s "
                f"cluster lease)."
            )
            self.ctx.events.emit(work, "Warning", EVENT_DELETION_HELD, message)
            log.warning(
                "Work deletion held after an outage",
                work=f"{self.works.namespace}/{name}",
                until=moment,
                deleting=deleting,
                works=total,
            )
            self._publish()
        else:
            self._held[name] = until
        return until - now

    def release(self, name: str) -> None:
        """The Work's deletion goes ahead (or the Work is gone): no longer held."""
        if self._held.pop(name, None) is not None:
            self._count(held=False)
            log.info("Work deletion no longer held", work=f"{self.works.namespace}/{name}")
            self._publish()

    async def stop(self) -> None:
        task, self._publisher = self._publisher, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # --- what is held --------------------------------------------------------------------------

    async def _last_outage(self) -> Outage | None:
        if not self.link.known:
            # The heartbeat has not renewed yet (just started): the Lease says when the cluster
            # was last heard of, by any agent of this cluster.
            try:
                lease = await self.ctx.karmada.get(
                    LEASES, self.ctx.cluster_name, namespace=names.CLUSTER_LEASE_NAMESPACE
                )
            except NotFoundError:
                lease = None
            except ForbiddenError as exc:
                # Not ours to read: nothing known of an outage, deletions behave as upstream.
                log.warning(
                    "cannot read the cluster Lease; deletions are not guarded", error=str(exc)
                )
                lease = None
            except KubeError as exc:
                raise RetryableError(
                    f"cannot read the cluster Lease to tell whether this deletion follows an "
                    f"outage: {exc}"
                ) from exc
            self.link.observe_lease(lease)
        return self.link.outage()

    def _share(self) -> tuple[int, int]:
        """(Works being deleted, all Works) of this cluster, reports of our own left out."""
        store = self.works.reflector.store
        deleting = store.index_size(SHARE_INDEX, DELETING)
        return deleting, deleting + store.index_size(SHARE_INDEX, STANDING)

    def _count(self, *, held: bool) -> None:
        metrics = self.ctx.metrics
        try:
            metrics.work_deletions_held.set(len(self._held))
            if held:
                metrics.work_deletion_holds.inc()
        except AttributeError:
            log.debug("deletion-hold metrics not recorded", exc_info=True)

    # --- the Cluster condition -----------------------------------------------------------------

    def condition(self) -> JsonDict:
        """WorkDeletionHeld as it should read now."""
        if not self._held:
            return new_condition(
                CONDITION_DELETION_HELD, "False", REASON_NONE_HELD, MESSAGE_NONE_HELD
            )
        now = self._clock.now()
        until = rfc3339(self._wall() + datetime.timedelta(seconds=max(self._held.values()) - now))
        shown = self.held[:NAMES_IN_MESSAGE]
        more = len(self._held) - len(shown)
        listed = ", ".join(shown) + (f" and {more} more" if more else "")
        seconds = self._outage.seconds if self._outage is not None else 0.0
        message = (
            f"Deletion of {len(self._held)} Work(s) held until {until} after the control plane "
            f"was out of reach for {seconds:.0f}s: {listed}"
        )
        return new_condition(CONDITION_DELETION_HELD, "True", REASON_HELD, message)

    def _publish(self) -> None:
        self._dirty = True
        if self._publisher is None or self._publisher.done():
            self._publisher = background(self._publish_loop(), name="work-deletion-held condition")

    async def _publish_loop(self) -> None:
        backoff = Backoff(initial=1.0, cap=PUBLISH_RETRY_MAX, jitter=0.0)
        while self._dirty:
            self._dirty = False
            try:
                await self._write_condition()
                backoff.reset()
            except KubeError as exc:
                log.info("WorkDeletionHeld condition not written; retrying", error=str(exc))
                self._dirty = True
                await self._clock.sleep(backoff.next())

    async def _write_condition(self) -> None:
        cluster = self.cluster.cluster if self.cluster.synced else None
        if cluster is None:
            cluster = await self.ctx.karmada.get(CLUSTERS, self.ctx.cluster_name)
        for attempt in range(CLUSTER_WRITE_ATTEMPTS):
            status = copy.deepcopy(cluster.get("status") or {})
            conditions = status.setdefault("conditions", [])
            wanted = self.condition()
            if wanted["status"] == "False" and find(conditions, CONDITION_DELETION_HELD) is None:
                return  # never held anything: nothing to clear
            if not set_condition(conditions, wanted):
                return
            try:
                with self.cluster.writing() as write:
                    write.answered(
                        await self.ctx.karmada.update_status(
                            CLUSTERS, {**cluster, "status": status}
                        )
                    )
            except ConflictError:
                if attempt + 1 == CLUSTER_WRITE_ATTEMPTS:
                    raise
                cluster = await self.ctx.karmada.get(CLUSTERS, self.ctx.cluster_name)
                continue
            return


def share_of(work: JsonDict) -> list[str]:
    """Where a Work counts toward the share of Works being deleted (none: a report of ours)."""
    if collected.is_suppressed(work):
        return []
    meta = work.get("metadata") or {}
    if meta.get("deletionTimestamp") and (
        names.EXECUTION_CONTROLLER_FINALIZER in (meta.get("finalizers") or [])
    ):
        return [DELETING]
    return [STANDING]
