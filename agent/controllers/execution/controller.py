"""The execution controller: applies the Works of `karmada-es-<cluster>` to the member cluster.

Works come from the shared Works source (a list+watch of this cluster's execution namespace,
never polled); a worker pool (--concurrent-work-syncs) reconciles them by name:

- Work being deleted: clean up after it (deletion.py).
- Otherwise: the Dispatching condition; nothing more when dispatching is suspended or the
  cluster is not Ready; then every manifest is applied (apply.py), and the Applied condition says
  how that went, written together with the first manifestStatuses
  (agent.controllers.manifest_statuses). What was applied is recorded on the member for an agent
  that starts while the control plane is unreachable (agent.offline). A Work that goes while it
  is applied is applied no further once the Works watch (or its status write's 404) says so:
  what was written goes with its deletion, or is reported orphaned (deletion.py).

Member events come back here: a change of one of our objects made by someone else sends its
Work through reconcile (drift.py), and an object deleted or changing hands frees the Works that
were refused for it (ownership.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

from agent.context import AgentContext
from agent.controllers.manifest_statuses import ManifestStatuses
from agent.controllers.watches import Watches
from agent.controllers.work_controller import WorkController
from agent.karmada import conditions, names
from agent.karmada.status import copy_conditions, status_of
from agent.karmada.work import (
    applied_message,
    dispatching_condition,
    is_deleting,
    is_suspended,
    work_of,
)
from agent.kube.client import GVR
from agent.kube.controller import Result, RetryableError, TerminalError
from agent.kube.errors import NotFoundError
from agent.kube.reflector import HandlerFuncs
from agent.kube.resources import CUSTOM_RESOURCE_DEFINITIONS
from agent.sources.cluster import ClusterInformer
from agent.sources.work_records import save_quietly

from .apply import FIELD_MANAGER, Applier, Outcome
from .cluster_wait import ClusterWait
from .contention import EVENT_REAPPLY_THROTTLED, Contention, undo_cause
from .deletion import Deletion
from .drift import OwnWrites, object_key
from .ownership import Ownership
from .start_order import StartOrder
from .waiting_kinds import WaitingKinds

JsonDict = dict[str, Any]

CONTROLLER_NAME = "execution"


class WorkSyncError(RetryableError):
    """Some manifests of a Work could not be applied; the Work is retried."""


class ExecutionController(WorkController):
    def __init__(self, ctx: AgentContext, *, stop_timeout: float = 10.0) -> None:
        super().__init__(ctx, CONTROLLER_NAME, stop_timeout=stop_timeout)
        self.cluster: ClusterInformer = ctx.sources.cluster
        self.records = ctx.sources.records
        self.statuses = ManifestStatuses(ctx.sources.interpreter, ctx.events)
        self.writes = OwnWrites()
        self.ownership = Ownership(self.works, self.writes, self.queue.add)
        self.contention = Contention(metrics=ctx.metrics)
        # Works applied whose status write failed: (uid, generation, outcome) by name.
        self._unreported: dict[str, tuple[object, object, Outcome]] = {}
        # Works being applied, with the Work of a delete event seen meanwhile: what the apply
        # wrote is reported orphaned once it has stopped, not before.
        self._applying: dict[str, JsonDict | None] = {}
        self.applier = Applier(ctx, self.writes, self.ownership, self.statuses, self.contention)
        self.start_order = StartOrder(ctx, self.queue, self.applier)
        self._sorting: asyncio.Task[None] | None = None
        self._recorded: asyncio.Task[list[JsonDict] | None] | None = None
        self.deletion = Deletion(ctx, self.works, self.cluster, self.writes, self._forget)
        self.guard = self.deletion.guard
        self.cluster_wait = ClusterWait(self.log)
        self.kinds = WaitingKinds(ctx.member_mapper, ctx.sources.member_objects, self.queue.add)
        sources = ctx.sources
        self.watches = (
            Watches()
            # A deleted Work is reconciled too: its bookkeeping is forgotten.
            .for_works(
                self.works,
                HandlerFuncs(add=self._new_work, update=self._work_updated, delete=self._work_gone),
            )
            # Reconciles read the Cluster's readiness from its cache; turning Ready, every Work
            # is applied again.
            .cluster(self.cluster, on_ready=self._cluster_turned_ready)
            # A change of a member object made by someone else (drift.py, ownership.py).
            .member_objects_of_works(*self._member_objects(), self._member_event)
            .interpreter_config(sources.interpreter_config, on_change=self._interpreter_changed)
            .uses(sources.interpreter, sources.records)
        )

    # --- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        self._recorded = asyncio.get_running_loop().create_task(
            self.start_order.load_record(), name=f"{self.name} record"
        )
        await super().start()

    async def _before_workers(self) -> None:
        # Before any worker runs: a reconcile of a vanished Work drops its record, and the
        # record is what tells that the Work's objects were orphaned.
        recorded = await self._recorded if self._recorded is not None else None
        await self.deletion.settle_records(recorded)
        # Works applied as recorded wait behind the others while a pass finds which of them
        # need an apply after all; the workers start on the others at once (start_order.py).
        deferred = self.start_order.defer_applied(self.works.names())
        self.log.info(
            "Works applied before wait while their objects are looked at",
            deferred=len(deferred),
            first=len(self.queue) - len(deferred),
        )
        if deferred:
            self._sorting = asyncio.get_running_loop().create_task(
                self.start_order.run(deferred), name=f"{self.name} start order"
            )

    def _stop_tasks(self) -> list[asyncio.Task[Any]]:
        return [t for t in (self._sorting, self._recorded) if t is not None]

    async def stop(self) -> None:
        await super().stop()
        await self.guard.stop()

    # --- event handlers ------------------------------------------------------------------------

    def _new_work(self, work: JsonDict) -> None:
        self._work_added(work)
        # More Works may bring the share of deletions below the hold threshold.
        for name in self.guard.held:
            self.queue.add(name)

    def _work_gone(self, work: JsonDict) -> None:
        self._work_added(work)
        name = str((work.get("metadata") or {}).get("name"))
        if name in self._applying:
            self._applying[name] = work
        else:
            self.deletion.work_gone(work)

    def _member_event(self, event_type: str, gvr: GVR, obj: JsonDict) -> None:
        if gvr == CUSTOM_RESOURCE_DEFINITIONS:
            self.kinds.crd_changed(event_type, obj)
        key = object_key(gvr, obj)
        ref = work_of(obj)
        self.ownership.release(key, None if event_type == "DELETED" else ref)
        if ref is None or ref[0] != self.namespace:
            return
        if not self.writes.is_drift(event_type, key, obj):
            return
        self._unreported.pop(ref[1], None)
        work = self.works.get(ref[1])
        generation = ((work or {}).get("metadata") or {}).get("generation")
        delay = self.contention.undone(
            key, ref[1], generation, undo_cause(event_type, obj, FIELD_MANAGER)
        )
        self.log.info(
            "member object changed out of band; reconciling its Work",
            work=f"{ref[0]}/{ref[1]}",
            change=event_type,
            resource=str(gvr),
            object=f"{key[1]}/{key[2]}" if key[1] else key[2],
            **({"backoff": delay} if delay else {}),
        )
        if delay:
            self.queue.add_after(ref[1], delay)
        else:
            self.queue.add(ref[1])

    # --- reconcile -----------------------------------------------------------------------------

    async def reconcile(self, name: str) -> Result | None:
        """Each exit is a step below; tests/agent/controllers/execution/test_reconcile.py holds
        one row per exit."""
        work = self.works.get(name)
        if work is None:
            await self._gone(name)
            return None
        if is_deleting(work):
            return await self.deletion.reconcile(work)
        conds = copy_conditions(work)
        changed = self._dispatching(work, conds)
        if is_suspended(work):
            await self._suspended(work, conds if changed else None)
            return None
        if not self.cluster.ready:
            await self._waiting_for_cluster(work, conds if changed else None)
            return None
        outcome = await self._apply(work)
        if outcome is None:
            return None
        reported_work = await self._report(work, outcome, conds, changed)
        if reported_work is None:
            return None
        work, reported = reported_work
        if not outcome.errors:
            if reported or outcome.wrote:
                # (Objects all in place and the status as it was: nothing was synced.)
                self._synced(work)
            return None
        return self._failed(work, outcome)

    async def _gone(self, name: str) -> None:
        """The Work is gone (deleted with our cleanup, or behind our back): its bookkeeping
        and its record go."""
        self._forget(name)
        await self.deletion.drop_record(name)

    def _dispatching(self, work: JsonDict, conds: list[JsonDict]) -> bool:
        """The Dispatching condition set in `conds`; True if it changed (and an Event said so)."""
        dispatching = dispatching_condition(work)
        if not conditions.set_condition(conds, dispatching):
            return False
        self.ctx.events.emit(
            work, "Normal", names.EVENT_WORK_DISPATCHING, str(dispatching["message"])
        )
        return True

    async def _suspended(self, work: JsonDict, conds: list[JsonDict] | None) -> None:
        if conds is not None:
            work = await self._write_status(work, {"conditions": conds})
        # Recorded too: an agent serving the record must not apply a suspended Work.
        await save_quietly(self.records, work)

    async def _waiting_for_cluster(self, work: JsonDict, conds: list[JsonDict] | None) -> None:
        # The Cluster turning Ready enqueues every Work again (see `watches`).
        self.cluster_wait.waits(str((work.get("metadata") or {}).get("name")))
        if conds is not None:
            await self._write_status(work, {"conditions": conds})

    async def _apply(self, work: JsonDict) -> Outcome | None:
        """What applying the Work came to; None when it went while it was applied (then the
        rest of it was not): being deleted with our finalizer, its deletion (queued by the
        watch event) removes what was applied; gone, its finalizer removed by someone else,
        what was applied is reported orphaned, here rather than by its delete event."""
        outcome = self._unreported_outcome(work)
        if outcome is not None:
            self.log.info("status write retried; the member is not written again")
            return outcome
        name = str((work.get("metadata") or {}).get("name"))
        self._applying[name] = None
        try:
            outcome = await self.applier.apply_all(work)
        finally:
            gone = self._applying.pop(name, None)
            if gone is not None:
                self.log.info("Work is gone; the rest of its manifests not applied")
                self.deletion.work_gone(gone)
                self._forget(name)
        if gone is not None:
            return None
        if outcome.stopped:
            self.log.info("Work is being deleted; the rest of its manifests not applied")
            return None
        self.kinds.wait(name, outcome.missing_kinds)
        return outcome

    async def _report(
        self, work: JsonDict, outcome: Outcome, conds: list[JsonDict], changed: bool
    ) -> tuple[JsonDict, bool] | None:
        """Applied in the Work's status, with the first manifestStatuses when all went well;
        the Work as written, and whether the status was written; None when the write found the
        Work gone (404). A failed write keeps the outcome, so that its retry writes the status
        only. What was applied is recorded on the member."""
        ok = not outcome.errors
        applied = conditions.new_condition(
            names.WORK_APPLIED,
            "True" if ok else "False",
            names.REASON_APPLIED_SUCCESSFUL if ok else names.REASON_APPLIED_FAILED,
            self._applied_message(outcome),
        )
        changed = conditions.set_condition(conds, applied) or changed
        status: JsonDict = {"conditions": conds}
        # The first manifestStatuses go out with Applied (agent.controllers.manifest_statuses).
        first = self.statuses.first_report(work, outcome.statuses) if ok else {}
        status.update(first)
        written = bool(changed or first)
        if written:
            try:
                before, work = work, await self._write_status(work, status)
            except NotFoundError:
                self._gone_at_status_write(work)
                return None
            except Exception:
                meta = work.get("metadata") or {}
                self._unreported[str(meta.get("name"))] = (
                    meta.get("uid"),
                    meta.get("generation"),
                    outcome,
                )
                raise
            if first:
                self.statuses.emit_written(before, status_of(work), outcome.health_problems)
        if outcome.applied:
            await save_quietly(self.records, work)
        return work, written

    def _synced(self, work: JsonDict) -> None:
        name = (work.get("metadata") or {}).get("name")
        self.ctx.events.emit(
            work,
            "Normal",
            names.EVENT_SYNC_SUCCEED,
            # Upstream's wording.
            f"Sync work({self.namespace}/{name}) to cluster({self.ctx.cluster_name}) successful.",
        )

    def _failed(self, work: JsonDict, outcome: Outcome) -> Result:
        """Some manifests were not applied: a requeue when all of them wait for their backoff
        (contention.py), else an error, retried or not as retrying can help."""
        self._report_contests(work, outcome)
        if outcome.only_contested:
            # Each contested object is looked at again when its backoff ends (or its contest
            # would be over): no retry sooner, and its one Warning Event says why.
            return Result(requeue_after=outcome.requeue_after)
        name = (work.get("metadata") or {}).get("name")
        failure = (
            f"Work {self.namespace}/{name} not fully synced to cluster "
            f"{self.ctx.cluster_name}: {self._applied_message(outcome)}"
        )
        errors = outcome.messages()
        aggregate = errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]"
        self.ctx.events.emit(
            work,
            "Warning",
            names.EVENT_SYNC_FAILED,
            f"Failed to sync work({self.namespace}/{name}) to cluster({self.ctx.cluster_name}), "
            f"err: {aggregate}",
        )
        self.log.warning("work not fully applied", errors=errors)
        if outcome.retryable:
            raise WorkSyncError(failure)
        # Only malformed manifests failed: retrying cannot help until the Work changes, and a
        # change of the Work enqueues it again.
        raise TerminalError(failure)

    @staticmethod
    def _applied_message(outcome: Outcome) -> str:
        return applied_message(outcome.succeeded, outcome.total, outcome.messages())

    async def _write_status(self, work: JsonDict, status: JsonDict) -> JsonDict:
        return await self.statuses.write(self.works, work, self.statuses.fitted(work, status))

    def _gone_at_status_write(self, work: JsonDict) -> None:
        """The Work's status write found it gone (404): reported orphaned now unless its delete
        event already did; that event, when it comes, finds nothing left to report."""
        meta = work.get("metadata") or {}
        name = str(meta.get("name"))
        current = self.works.get(name)
        self.log.info("Work is gone (404 on its status write)")
        if current is not None and (current.get("metadata") or {}).get("uid") == meta.get("uid"):
            self.deletion.work_gone(work)
        self._forget(name)

    def _unreported_outcome(self, work: JsonDict) -> Outcome | None:
        """The outcome of an apply whose status write failed, while nothing has changed since:
        neither the Work (same uid and generation) nor its member objects (drift drops it)."""
        meta = work.get("metadata") or {}
        kept = self._unreported.pop(str(meta.get("name")), None)
        if kept is None or kept[:2] != (meta.get("uid"), meta.get("generation")):
            return None
        return kept[2]

    def _cluster_turned_ready(self) -> None:
        self.cluster_wait.ended()
        self._enqueue_every_work()

    def _interpreter_changed(self) -> None:
        # What an apply makes of a Work may change with the interpreter's configuration: an
        # object found in place before is compared again.
        self.applier.verified.clear()
        self._enqueue_every_work()

    def _enqueue_every_work(self) -> None:
        # The interpreter's configuration changed, or the Cluster turned Ready: apply again.
        self._unreported.clear()
        super()._enqueue_every_work()

    def _report_contests(self, work: JsonDict, outcome: Outcome) -> None:
        """One Warning Event per contest, when it starts."""
        for contest in outcome.contests:
            if contest.reported:
                continue
            contest.reported = True
            message = next(m for _, m in outcome.errors if m.endswith(contest.message()))
            self.ctx.events.emit(work, "Warning", EVENT_REAPPLY_THROTTLED, message)
            self.log.warning(
                "member object keeps being undone; re-applied with backoff",
                work=f"{self.namespace}/{contest.work}",
                problem=message,
            )

    def _forget(self, work_name: str) -> None:
        """The Work is gone or its deletion done: drop what this process kept about it."""
        self.contention.forget_work(work_name)
        self.kinds.forget(work_name)
        self._unreported.pop(work_name, None)
        self.applier.verified.forget(work_name)
        self.guard.release(work_name)
        self.ownership.unblock(work_name)
        for key in self.writes.forget(work_name):
            # The object may be free now: Works refused for it look again.
            self.ownership.release(key, None)


def build(ctx: AgentContext) -> ExecutionController:
    return ExecutionController(ctx)
