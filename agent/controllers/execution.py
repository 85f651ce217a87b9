"""The execution controller: applies the Works of `karmada-es-<cluster>` to the member cluster.

Works come from a list+watch of this cluster's execution namespace (never polled); a worker
pool (--concurrent-work-syncs) reconciles them by name:

- Work being deleted: remove its member objects (or, with preserveResourcesOnDeletion, strip
  Karmada's labels and annotations from them), then drop the `karmada.io/execution-controller`
  finalizer. Only objects labelled `karmada.io/managed=true` that point back at this Work are
  touched.
- Otherwise: the Dispatching condition; nothing more when dispatching is suspended; then every
  manifest (namespaces and CRDs first) is server-side applied with the field manager
  "karmada-agent", and the Applied condition says how that went.

Server-side apply with `force` instead of upstream's GET + full PUT: Karmada is the source of
truth for the fields its manifests set, and only for those. Fields that other managers own on
the member (replicas under an HPA when retain-replicas is set, a Service's clusterIP, injected
sidecars) are not in our field set, so they are never reset or fought over.

Drift: member-side watches (agent.sources.member_objects) report changes of Karmada's
objects; an object whose resourceVersion is none our applies returned, or that was deleted,
sends its Work back through reconcile, which puts it back. Applying identical content does not
change the resourceVersion, so a re-apply does not feed itself, and a write of ours is never
taken for drift, whichever manifest or Work made it.

Conflicts are refused before anything is written: manifests of one Work that name the same
object with different content (identical repetitions are applied once), and an object another
Work manages, unless this Work (or manifest) says `work.karmada.io/conflict-resolution:
overwrite`. A Work refused for another Work's object is reconciled again when that object is
deleted or changes hands.

Deletions right after a long control-plane outage may be held (agent.controllers.deletion_guard).
A Work deleted without our cleanup (someone removed our finalizer) leaves its member objects in
place: that is reported with a Warning Event and a log line, never passed over in silence.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent.context import AgentContext, Runnable
from agent.interpreter import InterpretError
from agent.karmada import conditions, names
from agent.karmada.reflect import ReflectError
from agent.karmada.status import copy_conditions, without_status
from agent.karmada.work import (
    Manifest,
    ManifestError,
    applied_message,
    apply_order,
    belongs_to,
    deduplicate,
    desired_object,
    dispatching_condition,
    is_deleting,
    is_managed,
    is_suspended,
    manifests_of,
    may_overwrite,
    preserves_resources,
    release_patch,
    work_of,
)
from agent.kube.client import GVR
from agent.kube.controller import Result, RetryableError, TerminalError
from agent.kube.discovery import NoKindMatchError, ResourceInfo
from agent.kube.errors import (
    ApiError,
    ConflictError,
    InvalidNameError,
    KubeError,
    NotFoundError,
)
from agent.kube.reflector import HandlerFuncs
from agent.logs import get_logger
from agent.resources import WORKS
from agent.sources.cluster import ClusterWatch
from agent.sources.work_records import save_quietly

from .deletion_guard import DeletionGuard
from .manifest_statuses import ManifestStatuses
from .work_controller import WorkController

log = get_logger(__name__)

JsonDict = dict[str, Any]
# (resource, namespace or "", name) of a member object.
ObjectKey = tuple[GVR, str, str]

CONTROLLER_NAME = "execution"
FIELD_MANAGER = "karmada-agent"
CRD_GROUP_KIND = ("apiextensions.k8s.io", "CustomResourceDefinition")
FINALIZER_UPDATE_ATTEMPTS = 5
EVENT_WORK_ORPHANED = "WorkOrphaned"
# Answers that refuse the object as written (bad request, too large, invalid): retrying the same
# content cannot help; a change of the Work enqueues it again.
REFUSED_AS_WRITTEN = frozenset((400, 413, 422))
# resourceVersions remembered per object as our own writes (a reconcile writes an object once;
# a few more cover takeovers between Works whose watch events arrive late).
OWN_WRITES_KEPT = 8


class OwnershipError(Exception):
    """The member object exists and Karmada may not take it over."""


class OtherWorkError(Exception):
    """The member object is managed through another Work; retrying cannot help until that
    object is deleted or changes hands (which enqueues this Work again) or this Work changes."""

    def __init__(self, message: str, key: ObjectKey, owner: tuple[str, str] | None) -> None:
        super().__init__(message)
        self.key = key
        self.owner = owner


@dataclass
class _Written:
    """What our applies returned for one member object: the resourceVersions of our recent
    writes, and the latest content without status."""

    versions: deque[str]
    content: JsonDict


class WorkSyncError(RetryableError):
    """Some manifests of a Work could not be applied; the Work is retried."""


class ClusterNotReadyError(RetryableError):
    """The member cluster is not Ready, so a Work being deleted cannot clean up yet."""


@dataclass
class _Outcome:
    total: int = 0
    succeeded: int = 0
    errors: list[tuple[int, str]] = field(default_factory=list)
    retryable: bool = False
    applied: set[ObjectKey] = field(default_factory=set)
    # manifestStatuses entries built from the apply answers, by ordinal.
    statuses: dict[int, JsonDict] = field(default_factory=dict)
    # Why a customization could not interpret a manifest's health, by ordinal.
    health_problems: dict[int, str] = field(default_factory=dict)

    def messages(self) -> list[str]:
        return [message for _, message in sorted(self.errors)]


def _meta(obj: JsonDict) -> JsonDict:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


class ExecutionController(WorkController):
    def __init__(self, ctx: AgentContext, *, stop_timeout: float = 10.0) -> None:
        super().__init__(ctx, CONTROLLER_NAME, stop_timeout=stop_timeout)
        self.cluster: ClusterWatch = ctx.sources.cluster
        self.statuses = ManifestStatuses(ctx.sources.interpreter, ctx.events)
        self._unsubscribe_ready: Callable[[], None] | None = None
        # What our applies returned per member object (see _Written): status-only changes
        # (every rollout step) and our own writes are not taken for drift.
        self._applied: dict[ObjectKey, _Written] = {}
        self._objects_of: dict[str, set[ObjectKey]] = {}
        # The Work whose reconcile last applied each object.
        self._writer: dict[ObjectKey, str] = {}
        # Works refused because another Work manages the object: (that owner, the Works).
        self._blocked: dict[ObjectKey, tuple[tuple[str, str] | None, set[str]]] = {}
        self.guard = DeletionGuard(ctx, self.works, self.cluster)
        # What was applied, kept on the member for an agent that starts while the control plane
        # is unreachable (agent.offline).
        self.records = ctx.sources.records
        # Works whose finalizer this process removes (or is removing): their deletion is ours.
        self._finalized: set[str] = set()

    # --- lifecycle -----------------------------------------------------------------------------

    def _watched(self) -> list[Any]:
        # Reconciles read the Cluster's readiness from its cache too.
        return [self.works, self.cluster]

    def _work_handler(self) -> HandlerFuncs:
        # A deleted Work is reconciled too: its bookkeeping is forgotten.
        return HandlerFuncs(add=self._new_work, update=self._work_updated, delete=self._work_gone)

    async def start(self) -> None:
        self._unsubscribe_ready = self.cluster.on_ready(self._enqueue_every_work)
        await super().start()

    async def stop(self) -> None:
        if self._unsubscribe_ready is not None:
            self._unsubscribe_ready()
            self._unsubscribe_ready = None
        await super().stop()
        await self.guard.stop()

    # --- event handlers ------------------------------------------------------------------------

    def _new_work(self, work: JsonDict) -> None:
        self._work_added(work)
        # More Works may bring the share of deletions below the hold threshold.
        for name in self.guard.held:
            self.queue.add(name)

    def _work_gone(self, work: JsonDict) -> None:
        name = str(_meta(work).get("name"))
        self._work_added(work)
        if name in self._finalized:
            self._finalized.discard(name)
            return
        objects = self._objects_of.get(name)
        if objects or name in self.guard.held:
            self._report_orphaned(work, sorted(objects or ()))

    async def _start_workers(self) -> None:
        await super()._start_workers()
        await self._settle_records()

    async def _settle_records(self) -> None:
        """Records of Works that went while no agent watched (deleted behind our back, their
        finalizer removed by someone else): the member objects still there are reported
        orphaned, and the record goes."""
        try:
            recorded = await self.records.load()
        except KubeError as exc:
            self.log.warning("cannot read the Work records on the member", error=str(exc))
            return
        present = set(self.works.names())
        for work in recorded:
            name = str(_meta(work).get("name"))
            if name in present:
                continue
            wlog = self.log.bind(work=f"{self.namespace}/{name}")
            try:
                left = await self._owned_objects(work, wlog)
            except KubeError as exc:
                wlog.warning("cannot check the objects of a vanished Work", error=str(exc))
                continue
            if left:
                self._report_orphaned(work, sorted((gvr, ns, m.name) for m, gvr, ns, _ in left))
            await self._drop_record(name, wlog)

    def _report_orphaned(self, work: JsonDict, objects: list[ObjectKey]) -> None:
        described = ", ".join(
            f"{gvr.resource} {namespace}/{name}" if namespace else f"{gvr.resource} {name}"
            for gvr, namespace, name in objects
        )
        message = (
            f"Work {self.namespace}/{_meta(work).get('name')} was deleted without the agent's "
            f"cleanup (finalizer {names.EXECUTION_CONTROLLER_FINALIZER} removed by someone "
            f"else); its objects are left in the member cluster with Karmada's labels: "
            f"{described or 'none known to this agent'}"
        )
        self.log.warning("Work deleted without cleanup; member objects orphaned", objects=described)
        self.ctx.events.record(work, "Warning", EVENT_WORK_ORPHANED, message)
        with contextlib.suppress(AttributeError):
            self.ctx.metrics.works_orphaned.inc()

    def _member_event(self, event_type: str, gvr: GVR, obj: JsonDict) -> None:
        meta = _meta(obj)
        key: ObjectKey = (gvr, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        ref = work_of(obj)
        self._release_blocked(key, None if event_type == "DELETED" else ref)
        if ref is None:
            return
        work_namespace, work_name = ref
        if work_namespace != self.namespace:
            return
        recorded = self._applied.get(key)
        if recorded is None:
            # Not applied by this process yet: the Work's own reconcile will get to it.
            return
        resource_version = str(meta.get("resourceVersion") or "")
        if event_type != "DELETED":
            if resource_version in recorded.versions:
                return  # one of our own writes
            if without_status(obj) == recorded.content:
                # Only status or write bookkeeping moved: nothing of ours to put back.
                recorded.versions.append(resource_version)
                return
        self.log.info(
            "member object changed out of band; reconciling its Work",
            work=f"{work_namespace}/{work_name}",
            change=event_type,
            resource=str(gvr),
            object=f"{key[1]}/{key[2]}" if key[1] else key[2],
        )
        self.queue.add(work_name)

    # --- reconcile -----------------------------------------------------------------------------

    async def reconcile(self, name: str) -> Result | None:
        work = self.works.get(name)
        wlog = self.log.bind(work=f"{self.namespace}/{name}")
        if work is None:
            self._forget(name)
            await self._drop_record(name, wlog)
            return None
        if is_deleting(work):
            return await self._handle_deletion(work, wlog)

        conds = copy_conditions(work)
        changed = False
        dispatching = dispatching_condition(work)
        if conditions.set_condition(conds, dispatching):
            changed = True
            self.ctx.events.record(
                work, "Normal", names.EVENT_WORK_DISPATCHING, str(dispatching["message"])
            )
        if is_suspended(work):
            if changed:
                work = await self.works.patch_status(work, {"conditions": conds})
            # Recorded too: an agent serving the record must not apply a suspended Work.
            await save_quietly(self.records, work, wlog)
            return None
        if not self.cluster.ready:
            # The Cluster turning Ready enqueues every Work again (ClusterWatch.on_ready).
            wlog.info("member cluster is not Ready; Work waits")
            if changed:
                await self.works.patch_status(work, {"conditions": conds})
            return None

        outcome = await self._apply_all(work, wlog)
        ok = not outcome.errors
        message = applied_message(outcome.succeeded, outcome.total, outcome.messages())
        applied = conditions.new_condition(
            names.WORK_APPLIED,
            "True" if ok else "False",
            names.REASON_APPLIED_SUCCESSFUL if ok else names.REASON_APPLIED_FAILED,
            message,
        )
        if conditions.set_condition(conds, applied):
            changed = True
        status: JsonDict = {"conditions": conds}
        if ok:
            # The first manifestStatuses go out with Applied (agent.controllers.manifest_statuses).
            first = self.statuses.first_report(work, outcome.statuses, outcome.health_problems)
            status.update(first)
            changed = changed or bool(first)
        if changed:
            work = await self.works.patch_status(work, status)
        if outcome.applied:
            await save_quietly(self.records, work, wlog)
        if ok:
            self.ctx.events.record(
                work,
                "Normal",
                names.EVENT_SYNC_SUCCEED,
                f"Work {self.namespace}/{name} synced to cluster {self.ctx.cluster_name}.",
            )
            return None
        failure = (
            f"Work {self.namespace}/{name} not fully synced to cluster "
            f"{self.ctx.cluster_name}: {message}"
        )
        self.ctx.events.record(work, "Warning", names.EVENT_SYNC_FAILED, failure)
        wlog.warning("work not fully applied", errors=outcome.messages())
        if outcome.retryable:
            raise WorkSyncError(failure)
        # Only malformed manifests failed: retrying cannot help until the Work changes, and a
        # change of the Work enqueues it again.
        raise TerminalError(failure)

    # --- apply ---------------------------------------------------------------------------------

    async def _apply_all(self, work: JsonDict, wlog: Any) -> _Outcome:
        name = str(_meta(work).get("name"))
        items = manifests_of(work)
        outcome = _Outcome(total=len(items))
        manifests: list[Manifest] = []
        for ordinal, item in enumerate(items):
            if isinstance(item, ManifestError):
                outcome.errors.append((ordinal, str(item)))
            else:
                manifests.append(item)
        grouped = deduplicate(manifests)
        for ordinals, message in grouped.conflicts:
            outcome.errors.append((ordinals[0], message))
        copies_of: dict[int, list[Manifest]] = {}
        for manifest in manifests:
            if manifest.ordinal in grouped.copies:
                copies_of.setdefault(grouped.copies[manifest.ordinal], []).append(manifest)
        self._unblock(name)
        for manifest in apply_order(grouped.unique):
            started = time.monotonic()
            result = "error"
            try:
                key, live = await self._apply_one(work, manifest)
                outcome.applied.add(key)
                for applied in (manifest, *copies_of.get(manifest.ordinal, [])):
                    with contextlib.suppress(ReflectError):
                        # Left to the workStatus controller, which reports the failure.
                        entry, problem = await self.statuses.entry(applied, key[0].resource, live)
                        outcome.statuses[applied.ordinal] = entry
                        if problem is not None:
                            outcome.health_problems[applied.ordinal] = problem
                    outcome.succeeded += 1
                result = "success"
                if (manifest.group, manifest.kind) == CRD_GROUP_KIND:
                    # Objects of this CRD may follow in the same Work: re-read discovery.
                    self.ctx.member_mapper.invalidate()
            except ManifestError as exc:
                outcome.errors.append((manifest.ordinal, str(exc)))
            except InvalidNameError as exc:
                # Refused before any request: the manifest has to change.
                outcome.errors.append((manifest.ordinal, f"{manifest.label}: {exc}"))
            except InterpretError as exc:
                # A failing Retain script or webhook: it may be fixed or answer later, so retry.
                outcome.errors.append((manifest.ordinal, f"{manifest.label}: {exc}"))
                outcome.retryable = True
            except OwnershipError as exc:
                outcome.errors.append((manifest.ordinal, str(exc)))
                outcome.retryable = True
            except OtherWorkError as exc:
                outcome.errors.append((manifest.ordinal, str(exc)))
                self._block(name, exc)
            except NoKindMatchError as exc:
                # Retried with backoff: a CRD installed later makes the kind known.
                outcome.errors.append(
                    (manifest.ordinal, f"{manifest.label}: {exc} in the member cluster")
                )
                outcome.retryable = True
            except ApiError as exc:
                refused = exc.code in REFUSED_AS_WRITTEN
                cause = "refused by the member cluster" if refused else "failed"
                outcome.errors.append((manifest.ordinal, f"{manifest.label}: {cause}: {exc}"))
                # The same content would be refused again: the Work has to change.
                outcome.retryable = outcome.retryable or not refused
            except KubeError as exc:
                outcome.errors.append((manifest.ordinal, f"{manifest.label}: {exc}"))
                outcome.retryable = True
            except Exception as exc:
                wlog.exception("unexpected error applying manifest", manifest=manifest.ordinal)
                outcome.errors.append((manifest.ordinal, f"{manifest.label}: {exc}"))
                outcome.retryable = True
            finally:
                self._observe(result, time.monotonic() - started)
        self._remember(name, outcome.applied)
        return outcome

    async def _apply_one(self, work: JsonDict, manifest: Manifest) -> tuple[ObjectKey, JsonDict]:
        """Apply one manifest; its member key and the object as the apply returned it."""
        # The member's RESTMapper, not the control plane's (upstream maps with the Karmada API
        # server's): the member is where the object is created and the authority on what it
        # serves, and a CRD applied earlier in the same Work exists only there.
        info = await self.ctx.member_mapper.resource_for(manifest.api_version, manifest.kind)
        namespace = self._namespace_for(manifest, info)
        gvr = info.gvr
        self.ctx.sources.member_objects.ensure(gvr, info.kind)
        key: ObjectKey = (gvr, namespace, manifest.name)
        live = await self._live(gvr, namespace, manifest.name)
        self._check_other_work(work, manifest, key, live)
        if live is not None and not is_managed(live) and not may_overwrite(manifest, work):
            raise OwnershipError(
                f"{manifest.label}: {manifest.description} already exists in the member "
                f"cluster and is not managed by Karmada (no label {names.MANAGED_LABEL}=true); it is left alone. "
                f"Annotate the Work or manifest with "
                f"{names.CONFLICT_RESOLUTION_ANNOTATION}: {names.CONFLICT_OVERWRITE} "
                f"to take it over"
            )
        desired = desired_object(manifest, work, live=live)
        if live is not None:
            # Member-owned values a Retain customization keeps (typed: list items of built-in
            # types carry no apiVersion/kind).
            observed = {**live, "apiVersion": manifest.api_version, "kind": manifest.kind}
            desired = await self.ctx.sources.interpreter.retain(desired, observed)
        if not info.namespaced:
            desired["metadata"].pop("namespace", None)
        applied = await self.ctx.member.apply(
            gvr,
            desired,
            field_manager=FIELD_MANAGER,
            force=True,
            namespace=namespace or None,
        )
        self._record_write(key, str(_meta(work).get("name")), applied)
        return key, applied

    def _check_other_work(
        self, work: JsonDict, manifest: Manifest, key: ObjectKey, live: JsonDict | None
    ) -> None:
        """Refuse an object managed through another Work (as the live object says, or as this
        process applied it last), unless this Work may overwrite."""
        this = str(_meta(work).get("name"))
        owner: tuple[str, str] | None = None
        if live is not None and is_managed(live):
            ref = work_of(live)
            if ref is not None and ref != (self.namespace, this):
                owner = ref
        writer = self._writer.get(key)
        if owner is None and writer not in (None, this) and writer in self.works.names():
            owner = (self.namespace, str(writer))
        if owner is None or may_overwrite(manifest, work):
            return
        raise OtherWorkError(
            f"{manifest.label}: {manifest.description} is already managed by Work {owner[0]}/{owner[1]} in the "
            f"member cluster; it is left alone. Annotate the Work or manifest with "
            f"{names.CONFLICT_RESOLUTION_ANNOTATION}: {names.CONFLICT_OVERWRITE} to take it over",
            key,
            owner,
        )

    def _record_write(self, key: ObjectKey, work_name: str, applied: JsonDict) -> None:
        """Remember what our apply returned: its resourceVersion joins our own writes."""
        version = str(_meta(applied).get("resourceVersion") or "")
        recorded = self._applied.get(key)
        if recorded is None:
            recorded = _Written(deque(maxlen=OWN_WRITES_KEPT), {})
            self._applied[key] = recorded
        recorded.versions.append(version)
        recorded.content = without_status(applied)
        previous = self._writer.get(key)
        self._writer[key] = work_name
        if previous not in (None, work_name):
            self._tell_previous_owner(str(previous))

    def _tell_previous_owner(self, work_name: str) -> None:
        """Another Work took over an object of `work_name`: reconcile it so that it reports the
        loss; unless it overwrites too (two overwriting Works: the last writer keeps the object
        rather than both taking it back and forth)."""
        previous = self.works.get(work_name)
        if previous is None:
            return
        annotations = _meta(previous).get("annotations") or {}
        if annotations.get(names.CONFLICT_RESOLUTION_ANNOTATION) != names.CONFLICT_OVERWRITE:
            self.queue.add(work_name)

    # --- Works waiting for another Work's object ----------------------------------------------

    def _block(self, work_name: str, exc: OtherWorkError) -> None:
        _, waiting = self._blocked.get(exc.key, (exc.owner, set()))
        waiting.add(work_name)
        self._blocked[exc.key] = (exc.owner, waiting)

    def _unblock(self, work_name: str) -> None:
        """Forget that the Work waits for anything; its reconcile finds out again."""
        for key in [k for k, (_, waiting) in self._blocked.items() if work_name in waiting]:
            _, waiting = self._blocked[key]
            waiting.discard(work_name)
            if not waiting:
                del self._blocked[key]

    def _release_blocked(self, key: ObjectKey, ref: tuple[str, str] | None) -> None:
        """The object was deleted (ref None) or now points at `ref`: the Works refused because
        another Work owned it are reconciled again if that owner let go."""
        blocked = self._blocked.get(key)
        if blocked is None or blocked[0] == ref:
            return
        del self._blocked[key]
        for name in blocked[1]:
            self.queue.add(name)

    @staticmethod
    def _namespace_for(manifest: Manifest, info: ResourceInfo) -> str:
        if not info.namespaced:
            return ""
        if not manifest.namespace:
            raise ManifestError(
                f"{manifest.label}: {manifest.kind} is namespaced but the manifest has no "
                f"metadata.namespace"
            )
        return manifest.namespace

    async def _live(self, gvr: GVR, namespace: str, name: str) -> JsonDict | None:
        """The member object: from the cache of Karmada's objects; None without a request when
        the caches know no object of that name; else a live GET (an object without
        `karmada.io/managed=true` is known by name only)."""
        cached, _ = self.ctx.sources.member_objects.get(gvr, namespace, name)
        if cached is not None:
            return cached
        if self.ctx.sources.member_objects.known_absent(gvr, namespace, name):
            return None
        try:
            return await self.ctx.member.get(gvr, name, namespace=namespace or None)
        except NotFoundError:
            return None

    def _remember(self, work_name: str, keys: set[ObjectKey]) -> None:
        """Keep what we applied for the Work's current manifests only."""
        for stale in self._objects_of.get(work_name, set()) - keys:
            self._drop(stale, work_name)
        self._objects_of[work_name] = set(keys)

    def _forget(self, work_name: str) -> None:
        self.guard.release(work_name)
        self._unblock(work_name)
        for key in self._objects_of.pop(work_name, set()):
            self._drop(key, work_name)
            # The object may be free now: Works refused for it look again.
            self._release_blocked(key, None)

    def _drop(self, key: ObjectKey, work_name: str) -> None:
        """Forget an object the Work no longer applies, unless another Work wrote it since."""
        if self._writer.get(key, work_name) == work_name:
            self._applied.pop(key, None)
            self._writer.pop(key, None)

    def _observe(self, result: str, seconds: float) -> None:
        try:
            histogram = self.ctx.metrics.work_sync_workload_duration
            histogram.labels(result=result).observe(seconds)
        except Exception:
            self.log.debug("work sync metric not recorded", exc_info=True)

    # --- deletion ------------------------------------------------------------------------------

    async def _handle_deletion(self, work: JsonDict, wlog: Any) -> Result | None:
        name = str(_meta(work).get("name"))
        if names.EXECUTION_CONTROLLER_FINALIZER not in (_meta(work).get("finalizers") or []):
            if name not in self._finalized and self._objects_of.get(name):
                self._report_orphaned(work, sorted(self._objects_of[name]))
            self._forget(name)
            return None
        if preserves_resources(work):
            await self._release_objects(work, wlog)
        elif self.cluster.ready:
            wait = await self.guard.hold(work)
            if wait is not None:
                return Result(requeue_after=wait)
            await self._delete_objects(work, wlog)
        elif self.cluster.terminating:
            wlog.info("cluster is being removed and not Ready; member objects left as they are")
        else:
            raise ClusterNotReadyError(
                f"cluster {self.ctx.cluster_name} is not Ready; deletion of Work "
                f"{self.namespace}/{name} waits for it"
            )
        self._finalized.add(name)
        try:
            await self._remove_finalizer(work, wlog)
        except BaseException:
            self._finalized.discard(name)
            raise
        self._forget(name)
        await self._drop_record(name, wlog)
        return None

    async def _drop_record(self, name: str, wlog: Any) -> None:
        try:
            await self.records.delete(name)
        except KubeError as exc:
            wlog.warning("Work record not deleted", error=str(exc))

    async def _owned_objects(
        self, work: JsonDict, wlog: Any
    ) -> list[tuple[Manifest, GVR, str, JsonDict]]:
        """(manifest, resource, namespace, live object) for each manifest whose member object
        exists, is Karmada's, and points back at this Work."""
        meta = _meta(work)
        work_namespace, work_name = str(meta.get("namespace")), str(meta.get("name"))
        found = []
        for item in manifests_of(work):
            if isinstance(item, ManifestError):
                continue
            try:
                info = await self.ctx.member_mapper.resource_for(item.api_version, item.kind)
            except NoKindMatchError:
                continue  # the member serves no such kind, so no such object exists there
            namespace = item.namespace if info.namespaced else ""
            try:
                live = await self.ctx.member.get(info.gvr, item.name, namespace=namespace or None)
            except (NotFoundError, InvalidNameError):
                continue  # no such object, or a name no object can have
            if not is_managed(live) or not belongs_to(live, work_namespace, work_name):
                wlog.info("member object is not this Work's; left alone", object=item.description)
                continue
            found.append((item, info.gvr, namespace, live))
        return found

    async def _delete_objects(self, work: JsonDict, wlog: Any) -> None:
        for manifest, gvr, namespace, live in await self._owned_objects(work, wlog):
            uid = str(_meta(live).get("uid") or "")
            try:
                await self.ctx.member.delete(
                    gvr,
                    manifest.name,
                    namespace=namespace or None,
                    propagation_policy="Background",
                    preconditions={"uid": uid} if uid else None,
                )
                wlog.info("deleted member object", object=manifest.description)
            except NotFoundError:
                pass

    async def _release_objects(self, work: JsonDict, wlog: Any) -> None:
        for manifest, gvr, namespace, live in await self._owned_objects(work, wlog):
            patch = release_patch(live)
            if patch is None:
                continue
            try:
                await self.ctx.member.patch(
                    gvr, manifest.name, patch, patch_type="merge", namespace=namespace or None
                )
                wlog.info("released member object", object=manifest.description)
            except NotFoundError:
                pass

    async def _remove_finalizer(self, work: JsonDict, wlog: Any) -> None:
        """Update the Work without our finalizer; on a conflict read it again and retry.
        (The agent's RBAC allows update on works, not patch.)"""
        current = work
        for _ in range(FINALIZER_UPDATE_ATTEMPTS):
            meta = _meta(current)
            finalizers = list(meta.get("finalizers") or [])
            if names.EXECUTION_CONTROLLER_FINALIZER not in finalizers:
                return
            body = copy.deepcopy(current)
            body["metadata"]["finalizers"] = [
                f for f in finalizers if f != names.EXECUTION_CONTROLLER_FINALIZER
            ]
            body.pop("status", None)
            try:
                await self.ctx.karmada.replace(WORKS, body, namespace=self.namespace)
                wlog.info("removed finalizer", finalizer=names.EXECUTION_CONTROLLER_FINALIZER)
                return
            except NotFoundError:
                return
            except ConflictError:
                try:
                    current = await self.ctx.karmada.get(
                        WORKS, str(meta.get("name")), namespace=self.namespace
                    )
                except NotFoundError:
                    return
        raise WorkSyncError("finalizer not removed: the Work kept changing")


def build(ctx: AgentContext) -> Runnable:
    return ExecutionController(ctx)
