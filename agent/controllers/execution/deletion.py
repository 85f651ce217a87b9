"""Deleting a Work: its member objects removed (or, with preserveResourcesOnDeletion, stripped of
Karmada's labels and annotations), then the `karmada.io/execution-controller` finalizer dropped,
and the Work's record with it. Only objects labelled `karmada.io/managed=true` that point back at
the Work are touched.

The agent never deletes what it did not create: an object the Work adopted (it existed before,
taken over with overwrite; marked `karmada-agent.io/adopted` in the adopting write) is released
instead, unless --delete-adopted-resources restores upstream's deletion; and the cluster's own
namespaces (default, kube-system, kube-public, kube-node-lease) and the agent's are released in
any case. A deletion the member refuses is reported on the Work (the condition Deleted=False,
DeletionFailed, and a CleanupWorkFailed Warning Event) and retried with backoff; the finalizer
stays until the objects are gone, so the Work does not vanish while they remain.

Deletions right after a long control-plane outage may be held (deletion_guard.py). A Work
deleted without our cleanup (someone removed our finalizer) leaves its member objects in place:
that is reported with a Warning Event and a log line, never passed over in silence, whether this
process saw the Work go (also while it was being applied: the controller reports what that apply
wrote once it has stopped, controller.py) or finds its record at start.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from typing import Any

from agent.context import AgentContext
from agent.karmada import names
from agent.karmada.conditions import new_condition, set_condition
from agent.karmada.status import copy_conditions
from agent.karmada.work import (
    PROTECTED_NAMESPACES,
    Manifest,
    ManifestError,
    belongs_to,
    is_adopted,
    is_managed,
    manifests_of,
    preserves_resources,
    release_patch,
)
from agent.kube.client import GVR
from agent.kube.controller import Result, RetryableError
from agent.kube.discovery import NoKindMatchError
from agent.kube.errors import ConflictError, InvalidNameError, KubeError, NotFoundError
from agent.kube.resources import NAMESPACES
from agent.logs import bound_contextvars, get_logger
from agent.resources import WORKS
from agent.sources.cluster import ClusterInformer
from agent.sources.works import WorkInformer

from .deletion_guard import DeletionGuard
from .drift import ObjectKey, OwnWrites

log = get_logger(__name__)

JsonDict = dict[str, Any]
# (manifest, resource, namespace, live object) of a member object of the Work.
Owned = tuple[Manifest, GVR, str, JsonDict]

FINALIZER_UPDATE_ATTEMPTS = 5
EVENT_WORK_ORPHANED = names.EVENT_WORK_ORPHANED
EVENT_CLEANUP_WORK_FAILED = names.EVENT_CLEANUP_WORK_FAILED
# Ours: on a Work being deleted whose member objects could not be deleted.
CONDITION_DELETED = "Deleted"
REASON_DELETION_FAILED = "DeletionFailed"


class DeletionFailedError(RetryableError):
    """Member objects of a Work being deleted could not be deleted; retried with backoff."""


class ClusterNotReadyError(RetryableError):
    """The member cluster is not Ready, so a Work being deleted cannot clean up yet."""


class FinalizerNotRemovedError(RetryableError):
    """The Work kept changing while our finalizer was being removed; the Work is retried."""


def _name(obj: JsonDict) -> str:
    return str((obj.get("metadata") or {}).get("name"))


class Deletion:
    def __init__(
        self,
        ctx: AgentContext,
        works: WorkInformer,
        cluster: ClusterInformer,
        writes: OwnWrites,
        forget: Callable[[str], None],
    ) -> None:
        self.ctx = ctx
        self.works = works
        self.namespace = works.namespace
        self.cluster = cluster
        self.writes = writes
        self.forget = forget
        self.records = ctx.sources.records
        self.guard = DeletionGuard(ctx, works, cluster)
        options = ctx.options
        self.delete_adopted = options.delete_adopted_resources
        self.protected = PROTECTED_NAMESPACES | {
            options.karmada_kubeconfig_namespace,
            options.leader_elect_resource_namespace,
        }
        # Works whose finalizer this process removes (or is removing): their deletion is ours.
        self._finalized: set[str] = set()
        # The cluster's removal leaves every Work's objects in place: told once, not per Work.
        self._told_left_in_place = False

    async def reconcile(self, work: JsonDict) -> Result | None:
        """Clean up after a Work being deleted."""
        name = _name(work)
        if names.EXECUTION_CONTROLLER_FINALIZER not in (
            (work.get("metadata") or {}).get("finalizers") or []
        ):
            objects = self.writes.objects_of(name)
            if name not in self._finalized and objects:
                self.report_orphaned(work, sorted(objects))
            self.forget(name)
            return None
        if preserves_resources(work):
            await self._release_objects(work)
        elif self.cluster.ready:
            wait = await self.guard.hold(work)
            if wait is not None:
                return Result(requeue_after=wait)
            await self._delete_objects(work)
        elif self.cluster.terminating:
            if not self._told_left_in_place:
                self._told_left_in_place = True
                log.info("cluster is being removed and not Ready; member objects left as they are")
            log.debug("cluster is being removed; the Work's member objects left as they are")
        else:
            raise ClusterNotReadyError(
                f"cluster {self.ctx.cluster_name} is not Ready; deletion of Work "
                f"{self.namespace}/{name} waits for it"
            )
        self._finalized.add(name)
        try:
            await self._remove_finalizer(work)
        except BaseException:
            self._finalized.discard(name)
            raise
        self.forget(name)
        await self.drop_record(name)
        return None

    async def drop_record(self, name: str) -> None:
        try:
            await self.records.delete(name)
        except KubeError as exc:
            log.warning("Work record not deleted", error=str(exc))

    # --- Works deleted without our cleanup ------------------------------------------------------

    def work_gone(self, work: JsonDict) -> None:
        """The Work is gone from the control plane: orphaned, unless we removed its finalizer."""
        name = _name(work)
        if name in self._finalized:
            self._finalized.discard(name)
            return
        objects = self.writes.objects_of(name)
        if objects or name in self.guard.held:
            self.report_orphaned(work, sorted(objects))

    async def settle_records(self, recorded: list[JsonDict] | None = None) -> None:
        """Records of Works that went while no agent watched (deleted behind our back, their
        finalizer removed by someone else): the member objects still there are reported
        orphaned, and the record goes. `recorded`: the record as loaded already."""
        if recorded is None:
            try:
                recorded = await self.records.load()
            except KubeError as exc:
                log.warning("cannot read the Work records on the member", error=str(exc))
                return
        present = set(self.works.names())
        for work in recorded:
            name = _name(work)
            if name in present:
                continue
            with bound_contextvars(work=f"{self.namespace}/{name}"):
                try:
                    left = await self._owned_objects(work)
                except KubeError as exc:
                    log.warning("cannot check the objects of a vanished Work", error=str(exc))
                    continue
                if left:
                    self.report_orphaned(work, sorted((gvr, ns, m.name) for m, gvr, ns, _ in left))
                await self.drop_record(name)

    def report_orphaned(self, work: JsonDict, objects: list[ObjectKey]) -> None:
        described = ", ".join(
            f"{gvr.resource} {namespace}/{name}" if namespace else f"{gvr.resource} {name}"
            for gvr, namespace, name in objects
        )
        message = (
            f"Work {self.namespace}/{_name(work)} was deleted without the agent's "
            f"cleanup (finalizer {names.EXECUTION_CONTROLLER_FINALIZER} removed by someone "
            f"else); its objects are left in the member cluster with Karmada's labels: "
            f"{described or 'none known to this agent'}"
        )
        log.warning("Work deleted without cleanup; member objects orphaned", objects=described)
        self.ctx.events.emit(work, "Warning", EVENT_WORK_ORPHANED, message)
        with contextlib.suppress(AttributeError):
            self.ctx.metrics.works_orphaned.inc()

    # --- the member objects and the finalizer ----------------------------------------------------

    async def _owned_objects(self, work: JsonDict) -> list[Owned]:
        """(manifest, resource, namespace, live object) for each manifest whose member object
        exists, is Karmada's, and points back at this Work."""
        meta = work.get("metadata") or {}
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
                live = await self._live(info.gvr, namespace, item.name, work_name)
            except (NotFoundError, InvalidNameError):
                continue  # no such object, or a name no object can have
            if live is None:
                continue
            if not is_managed(live) or not belongs_to(live, work_namespace, work_name):
                log.info("member object is not this Work's; left alone", object=item.description)
                continue
            found.append((item, info.gvr, namespace, live))
        return found

    async def _live(self, gvr: GVR, namespace: str, name: str, work_name: str) -> JsonDict | None:
        """The member object, if it may be Karmada's, without a request where the caches know:
        from the cache of Karmada's objects once it has synced, and the metadata of what this
        process applied for the Work when the watch event of that write is still on its way (a
        Work deleted right after it was applied: a deletion reads only metadata); else a GET."""
        objects = self.ctx.sources.member_objects
        cached, synced = objects.get(gvr, namespace, name)
        if cached is not None:
            return cached
        written = self.writes.last_written((gvr, namespace, name))
        if written is not None and written[0] == work_name:
            return written[1]
        if synced:
            return None  # not there, or not Karmada's: nothing to delete either way
        return await self.ctx.member.get(gvr, name, namespace=namespace or None)

    async def _delete_objects(self, work: JsonDict) -> None:
        failures: list[str] = []
        for manifest, gvr, namespace, live in await self._owned_objects(work):
            kept = self._kept(gvr, manifest, live)
            try:
                if kept is not None:
                    await self._release(gvr, manifest, namespace, live, why=kept)
                    continue
                uid = str((live.get("metadata") or {}).get("uid") or "")
                # Its watch event is ours, not a change to put back.
                self.writes.deleting((gvr, namespace, manifest.name))
                await self.ctx.member.delete(
                    gvr,
                    manifest.name,
                    namespace=namespace or None,
                    propagation_policy="Background",
                    preconditions={"uid": uid} if uid else None,
                )
                log.info("deleted member object", object=manifest.description)
            except NotFoundError:
                pass
            except KubeError as exc:
                failures.append(f"{manifest.description}: {exc}")
        if failures:
            await self._report_failures(work, failures)

    def _kept(self, gvr: GVR, manifest: Manifest, live: JsonDict) -> str | None:
        """Why the object is released rather than deleted with its Work; None: deleted."""
        if gvr == NAMESPACES and manifest.name in self.protected:
            return "a namespace of the cluster's own or of the agent's, never deleted"
        if is_adopted(live) and not self.delete_adopted:
            return "it existed before the Work adopted it (overwrite)"
        return None

    async def _report_failures(self, work: JsonDict, failures: list[str]) -> None:
        """The member refused (or failed) some deletions: the Work says so (Deleted=False, a
        Warning Event), and the deletion is retried with backoff, the finalizer kept."""
        message = (
            f"member objects of this Work could not be deleted; retried with backoff, the "
            f"finalizer {names.EXECUTION_CONTROLLER_FINALIZER} kept meanwhile: "
            + "; ".join(failures)
        )
        log.warning("member objects not deleted", failures=failures)
        self.ctx.events.emit(work, "Warning", EVENT_CLEANUP_WORK_FAILED, message)
        conditions = copy_conditions(work)
        condition = new_condition(CONDITION_DELETED, "False", REASON_DELETION_FAILED, message)
        if set_condition(conditions, condition):
            try:
                await self.works.patch_status(work, {"conditions": conditions}, precondition=True)
            except KubeError as exc:
                log.info("Deleted condition not written", error=str(exc))
        raise DeletionFailedError(f"Work {self.namespace}/{_name(work)}: {message}")

    async def _release_objects(self, work: JsonDict) -> None:
        for manifest, gvr, namespace, live in await self._owned_objects(work):
            await self._release(gvr, manifest, namespace, live)

    async def _release(
        self,
        gvr: GVR,
        manifest: Manifest,
        namespace: str,
        live: JsonDict,
        *,
        why: str = "preserveResourcesOnDeletion",
    ) -> None:
        patch = release_patch(live)
        if patch is None:
            return
        try:
            await self.ctx.member.patch(
                gvr, manifest.name, patch, patch_type="merge", namespace=namespace or None
            )
            log.info("released member object", object=manifest.description, why=why)
        except NotFoundError:
            pass

    async def _remove_finalizer(self, work: JsonDict) -> None:
        """Update the Work without our finalizer; on a conflict read it again and retry.
        (The agent's RBAC allows update on works, not patch.)"""
        current = work
        for _ in range(FINALIZER_UPDATE_ATTEMPTS):
            meta = current.get("metadata") or {}
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
                log.info("removed finalizer", finalizer=names.EXECUTION_CONTROLLER_FINALIZER)
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
        raise FinalizerNotRemovedError("finalizer not removed: the Work kept changing")
