"""Applying a Work's manifests to the member cluster.

Every manifest (namespaces and CRDs first) is server-side applied with the field manager
"karmada-agent" and `force`, instead of upstream's GET + full PUT: Karmada is the source of truth
for the fields its manifests set, and only for those. Fields that other managers own on the
member (replicas under an HPA when retain-replicas is set, a Service's clusterIP, injected
sidecars) are not in our field set, so they are never reset or fought over.

Refused before anything is written: manifests of one Work that name the same object with
different content (identical repetitions are applied once), and objects the Work may not own
(ownership.py). Each manifest's failure is its own: the others are applied, and the outcome says
which failed, why, and whether retrying can help.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

from agent.context import AgentContext
from agent.controllers.manifest_statuses import ManifestStatuses
from agent.interpreter import InterpretError
from agent.karmada import names
from agent.karmada.reflect import ReflectError
from agent.karmada.work import (
    Manifest,
    ManifestError,
    apply_order,
    deduplicate,
    desired_object,
    manifests_of,
    retains_live_replicas,
)
from agent.kube.client import GVR
from agent.kube.discovery import NoKindMatchError, ResourceInfo
from agent.kube.errors import (
    ApiError,
    ConflictError,
    InvalidNameError,
    KubeError,
    NotFoundError,
)
from agent.logs import get_logger

from .contention import Contention, Contest, undo_cause
from .drift import Noted, ObjectKey, OwnWrites
from .in_place import Verified, already_applied, still_in_place
from .ownership import OtherWorkError, Ownership, OwnershipError
from .template_events import TemplateEvents

log = get_logger(__name__)

JsonDict = dict[str, Any]

FIELD_MANAGER = "karmada-agent"
CRD_GROUP_KIND = ("apiextensions.k8s.io", "CustomResourceDefinition")
# Answers that refuse the object as written (bad request, too large, invalid): retrying the same
# content cannot help; a change of the Work enqueues it again.
REFUSED_AS_WRITTEN = frozenset((400, 413, 422))
# Attempts in one reconcile at an object that is undone while each apply is in flight (each
# one a round of contention.py, which stops them sooner when they come fast).
UNDONE_ATTEMPTS = 5
# Applies of one manifest in one reconcile, each made from a newer read of the object when the
# member refused the last as made from a version the object has left behind.
STALE_ATTEMPTS = 3
# How long the first apply of a kind waits for that kind's member caches before a GET.
FIRST_SYNC_WAIT_SECONDS = 1.0


class ContestedError(Exception):
    """Something on the member keeps undoing the object: it waits for its backoff."""

    def __init__(self, key: ObjectKey, contest: Contest) -> None:
        super().__init__(contest.message())
        self.key = key
        self.contest = contest


class UndoneError(KubeError):
    """The object was undone while each apply of this reconcile was in flight."""


@dataclass
class Outcome:
    total: int = 0
    succeeded: int = 0
    errors: list[tuple[int, str]] = field(default_factory=list)
    retryable: bool = False
    applied: set[ObjectKey] = field(default_factory=set)
    # Of those, the objects found as the apply would make them: not written (in_place.py).
    in_place: set[ObjectKey] = field(default_factory=set)
    # manifestStatuses entries built from the apply answers, by ordinal.
    statuses: dict[int, JsonDict] = field(default_factory=dict)
    # Why a customization could not interpret a manifest's health, by ordinal.
    health_problems: dict[int, str] = field(default_factory=dict)
    # Objects something keeps undoing (contention.py), and when to look at them again.
    contests: list[Contest] = field(default_factory=list)
    requeue_after: float | None = None
    # The Work went (or started going) while it was applied: the rest of it was not.
    stopped: bool = False
    # (group, kind) of the manifests whose kind the member does not serve.
    missing_kinds: set[tuple[str, str]] = field(default_factory=set)

    @property
    def only_contested(self) -> bool:
        """Every failure is an object re-applied with backoff (nothing to retry sooner)."""
        return bool(self.contests) and len(self.errors) == len(self.contests)

    def contested(self, ordinal: int, label: str, contest: Contest, retry_in: float) -> None:
        self.errors.append((ordinal, f"{label}: {contest.message()}"))
        self.contests.append(contest)
        if self.requeue_after is None or retry_in < self.requeue_after:
            self.requeue_after = retry_in

    def messages(self) -> list[str]:
        return [message for _, message in sorted(self.errors)]

    @property
    def wrote(self) -> bool:
        """Some manifest's object was written (or its write tried and failed)."""
        return bool(self.errors) or bool(self.applied - self.in_place)


class Applier:
    def __init__(
        self,
        ctx: AgentContext,
        writes: OwnWrites,
        ownership: Ownership,
        statuses: ManifestStatuses,
        contention: Contention,
    ) -> None:
        self.ctx = ctx
        self.writes = writes
        self.ownership = ownership
        self.statuses = statuses
        self.contention = contention
        self.template_events = TemplateEvents(ctx.events, ctx.cluster_name)
        # Works found in place ahead of their reconcile (start_order.py).
        self.verified = Verified()

    async def apply_all(self, work: JsonDict) -> Outcome:
        name = str((work.get("metadata") or {}).get("name"))
        items = manifests_of(work)
        outcome = Outcome(total=len(items))
        manifests: list[Manifest] = []
        for ordinal, item in enumerate(items):
            if isinstance(item, ManifestError):
                outcome.errors.append((ordinal, str(item)))
            else:
                manifests.append(item)
        grouped = deduplicate(manifests, await self._cluster_scoped(manifests))
        for ordinals, message in grouped.conflicts:
            outcome.errors.append((ordinals[0], message))
        copies_of: dict[int, list[Manifest]] = {}
        for manifest in manifests:
            if manifest.ordinal in grouped.copies:
                copies_of.setdefault(grouped.copies[manifest.ordinal], []).append(manifest)
        self.ownership.unblock(name)
        # Objects already as an apply would make them are left alone (in_place.py).
        as_recorded = self.ctx.sources.records.applied_as_recorded(work)
        verified = self.verified.take(work) if as_recorded else {}
        for manifest in apply_order(grouped.unique):
            if not self._still_wanted(work):
                outcome.stopped = True
                break
            started = time.monotonic()
            result = "error"
            written = True
            errors_before, contests_before = len(outcome.errors), len(outcome.contests)
            try:
                key, live, contest, written = await self._apply_one(
                    work, manifest, as_recorded, verified
                )
                outcome.applied.add(key)
                if not written:
                    outcome.in_place.add(key)
                for applied in (manifest, *copies_of.get(manifest.ordinal, [])):
                    with contextlib.suppress(ReflectError):
                        # Left to the workStatus controller, which reports the failure.
                        entry, problem = await self.statuses.entry(applied, key[0].resource, live)
                        outcome.statuses[applied.ordinal] = entry
                        if problem is not None:
                            outcome.health_problems[applied.ordinal] = problem
                    if contest is None:
                        outcome.succeeded += 1
                if contest is not None:
                    # Applied, but not for long so far: reported until it stays.
                    settled = self.contention.until_settled(contest)
                    outcome.contested(manifest.ordinal, manifest.label, contest, settled)
                result = "success"
                if (manifest.group, manifest.kind) == CRD_GROUP_KIND:
                    # Objects of this CRD may follow in the same Work: re-read discovery.
                    self.ctx.member_mapper.invalidate()
            except ContestedError as exc:
                outcome.applied.add(exc.key)  # still ours: its drift is watched
                retry_in = self.contention.wait(exc.contest)
                outcome.contested(manifest.ordinal, manifest.label, exc.contest, retry_in)
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
                self.ownership.block(name, exc)
            except NoKindMatchError as exc:
                # Retried with backoff, and at once when a CRD we manage starts serving the
                # kind (waiting_kinds.py).
                outcome.errors.append(
                    (manifest.ordinal, f"{manifest.label}: {exc} in the member cluster")
                )
                outcome.missing_kinds.add((manifest.group, manifest.kind))
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
                log.exception("unexpected error applying manifest", manifest=manifest.ordinal)
                outcome.errors.append((manifest.ordinal, f"{manifest.label}: {exc}"))
                outcome.retryable = True
            finally:
                self._observe(result, time.monotonic() - started)
            same = (manifest, *copies_of.get(manifest.ordinal, []))
            if result == "success":
                # (An object found in place was not synced: nothing to say about it.)
                for applied in same if written else ():
                    self.template_events.succeeded(applied)
            elif len(outcome.contests) == contests_before:
                # (An object waiting for its backoff was not written: its Work says why.)
                for failed in same:
                    self.template_events.failed(failed, outcome.errors[errors_before][1])
        # A stopped apply reached only some objects: those of earlier applies are still ours.
        kept = self.writes.objects_of(name) if outcome.stopped else set()
        self.writes.remember(name, outcome.applied | kept)
        return outcome

    async def found_in_place(self, work: JsonDict) -> dict[ObjectKey, str] | None:
        """Whether every object of `work` is already as an apply would make it, as far as the
        member caches (synced) tell without a request: the resourceVersion of each, None when
        one differs. For ordering, the apply decides (no Retain customization is asked here, so
        a kind with one may look changed)."""
        if not self.ctx.sources.records.applied_as_recorded(work):
            return None
        resolved = await self.resources_of(work)
        if resolved is None:
            return None
        objects = self.ctx.sources.member_objects
        versions: dict[ObjectKey, str] = {}
        for item, info in resolved:
            if not objects.known(info.gvr):
                return None
            namespace = item.namespace if info.namespaced else ""
            live, _ = objects.get(info.gvr, namespace, item.name)
            desired = desired_object(item, work, live=live)
            if not info.namespaced:
                desired["metadata"].pop("namespace", None)
            if live is None or not already_applied(
                desired,
                live,
                field_manager=FIELD_MANAGER,
                take_over_from=names.UPSTREAM_AGENT_FIELD_MANAGERS,
            ):
                return None
            key = (info.gvr, namespace, item.name)
            versions[key] = str((live.get("metadata") or {}).get("resourceVersion") or "")
        return versions

    async def resources_of(self, work: JsonDict) -> list[tuple[Manifest, ResourceInfo]] | None:
        """Each manifest of `work` with the member resource it names; None when one is malformed
        or names a kind the member does not serve (only an apply can tell what of it)."""
        resolved: list[tuple[Manifest, ResourceInfo]] = []
        for item in manifests_of(work):
            if isinstance(item, ManifestError):
                return None
            try:
                info = await self.ctx.member_mapper.resource_for(item.api_version, item.kind)
            except KubeError:
                return None
            resolved.append((item, info))
        return resolved

    def _still_wanted(self, work: JsonDict) -> bool:
        """Whether the Works watch still has this Work, not being deleted: once it says the
        Work is gone, replaced or being deleted, nothing more of it is applied."""
        meta = work.get("metadata") or {}
        current = self.ctx.sources.works.get(str(meta.get("name")))
        if current is None:
            return False
        current_meta = current.get("metadata") or {}
        return current_meta.get("uid") == meta.get("uid") and not current_meta.get(
            "deletionTimestamp"
        )

    async def _cluster_scoped(self, manifests: list[Manifest]) -> set[int]:
        """The ordinals of the manifests whose kind the member serves cluster-scoped, so that
        duplicates are told apart by the scope the member gives them. (A kind not known yet,
        e.g. of a CRD in the same Work, keeps the namespace as written.)"""
        out = set()
        for manifest in manifests:
            with contextlib.suppress(KubeError):
                info = await self.ctx.member_mapper.resource_for(
                    manifest.api_version, manifest.kind
                )
                if not info.namespaced:
                    out.add(manifest.ordinal)
        return out

    async def _apply_one(
        self,
        work: JsonDict,
        manifest: Manifest,
        as_recorded: bool,
        verified: dict[ObjectKey, str],
    ) -> tuple[ObjectKey, JsonDict, Contest | None, bool]:
        """Apply one manifest; its member key, the object as the apply returned it, the
        contest when something keeps undoing it (contention.py), and whether it was written
        (False: it was in place already, `as_recorded` allowing that, see in_place.py; or
        found so in `verified` at the version it still has). Raises ContestedError while the
        object waits for its backoff."""
        # The member's RESTMapper, not the control plane's (upstream maps with the Karmada API
        # server's): the member is where the object is created and the authority on what it
        # serves, and a CRD applied earlier in the same Work exists only there.
        info = await self.ctx.member_mapper.resource_for(manifest.api_version, manifest.kind)
        namespace = _namespace_for(manifest, info)
        gvr = info.gvr
        key: ObjectKey = (gvr, namespace, manifest.name)
        meta = work.get("metadata") or {}
        work_name, generation = str(meta.get("name")), meta.get("generation")
        contest = self.contention.contest(key, generation)
        if contest is not None and self.contention.wait(contest) > 0:
            raise ContestedError(key, contest)
        for _ in range(UNDONE_ATTEMPTS):
            try:
                applied, noted, written = await self._write(
                    work, manifest, info, key, as_recorded, verified
                )
            except NotFoundError as exc:
                await self._still_served(manifest, exc)
                raise
            self.ownership.taken_from(noted.previous_writer)
            if noted.undone is None:
                if written:
                    self.contention.applied(key)
                return key, applied, self.contention.contest(key, generation), written
            # Undone before its answer was even recorded: at once again, unless that is a
            # fight already.
            event_type, obj = noted.undone
            cause = undo_cause(event_type, obj, FIELD_MANAGER)
            if self.contention.undone(key, work_name, generation, cause) > 0:
                contest = self.contention.contest(key, generation)
                assert contest is not None
                raise ContestedError(key, contest)
        raise UndoneError(f"{manifest.label}: {cause} right after each apply")

    async def _write(
        self,
        work: JsonDict,
        manifest: Manifest,
        info: ResourceInfo,
        key: ObjectKey,
        as_recorded: bool,
        verified: dict[ObjectKey, str],
    ) -> tuple[JsonDict, Noted, bool]:
        gvr, namespace, _ = key
        live = await self._live(gvr, namespace, manifest.name)
        work_name = str((work.get("metadata") or {}).get("name"))
        objects = self.ctx.sources.member_objects
        for attempt in range(STALE_ATTEMPTS):
            # Found in place by an earlier comparison, and unchanged since: that comparison
            # stands (it held this Work's own labels, so no other Work owns the object).
            unchanged = attempt == 0 and still_in_place(verified, key, live)
            desired = {} if unchanged else await self._desired(work, manifest, info, key, live)
            if as_recorded and (
                unchanged
                or already_applied(
                    desired,
                    live,
                    field_manager=FIELD_MANAGER,
                    take_over_from=names.UPSTREAM_AGENT_FIELD_MANAGERS,
                )
            ):
                assert live is not None
                # Our own write as far as drift is concerned (a restarted agent has no other).
                cached = self.ctx.sources.member_objects.get(gvr, namespace, manifest.name)[0]
                noted = self.writes.note(key, work_name, live, cached=cached is live)
                return live, noted, False
            try:
                with (
                    self.writes.in_flight(key),
                    objects.writing(gvr, namespace, manifest.name) as write,
                ):
                    applied = await self.ctx.member.apply(
                        gvr,
                        desired,
                        field_manager=FIELD_MANAGER,
                        force=True,
                        namespace=namespace or None,
                        take_over_from=names.UPSTREAM_AGENT_FIELD_MANAGERS,
                    )
                    # Cached before the watch brings it: no read (workStatus's included) gets
                    # an older object, and the watch's older events of it are left out, not
                    # taken for drift.
                    write.answered(applied)
                    return applied, self.writes.note(key, work_name, applied), True
            except ConflictError:
                # (With force, the only conflict is the version the configuration was made
                # from: the cache lagged behind a write on the member.)
                if attempt + 1 == STALE_ATTEMPTS:
                    raise
                live = await self._read(gvr, namespace, manifest.name)
        raise AssertionError("unreachable")

    async def _desired(
        self,
        work: JsonDict,
        manifest: Manifest,
        info: ResourceInfo,
        key: ObjectKey,
        live: JsonDict | None,
    ) -> JsonDict:
        """The apply configuration, made from `live` (the ownership check, values a Retain
        keeps). When it carries values the member owns, it carries live's resourceVersion
        too: if the object changed since (the cache lagged), the member refuses it rather
        than reset what was to be kept. Otherwise it is unconditional, so that a status write
        by the member's own controllers costs no conflict."""
        adopting = self.ownership.check(work, manifest, key, live)
        desired = desired_object(manifest, work, live=live, adopting=adopting)
        if live is not None:
            # Member-owned values a Retain customization keeps (typed: list items of built-in
            # types carry no apiVersion/kind).
            observed = {**live, "apiVersion": manifest.api_version, "kind": manifest.kind}
            built = desired
            desired = await self.ctx.sources.interpreter.retain(desired, observed)
            version = (live.get("metadata") or {}).get("resourceVersion")
            if version and (desired != built or retains_live_replicas(built)):
                desired.setdefault("metadata", {})["resourceVersion"] = version
        if not info.namespaced:
            desired["metadata"].pop("namespace", None)
        return desired

    async def _still_served(self, manifest: Manifest, exc: NotFoundError) -> None:
        """An apply answered 404 for no object in particular (not a missing namespace): the
        resource itself may be gone, its CRD deleted where no watch of ours saw it. The
        member's kinds are read again; NoKindMatchError when the kind is no longer served."""
        if exc.details.get("name"):
            return
        self.ctx.member_mapper.invalidate()
        await self.ctx.member_mapper.resource_for(manifest.api_version, manifest.kind)

    async def _live(self, gvr: GVR, namespace: str, name: str) -> JsonDict | None:
        """The member object: from the cache of Karmada's objects; None without a request when
        the caches know no object of that name; else a live GET (an object without
        `karmada.io/managed=true` is known by name only). The first objects of a kind wait
        for its caches, whose watches are under way (agent.sources.work_kinds starts them as
        the Works name the kind), rather than read with a GET each; not for long, should the
        member be large."""
        objects = self.ctx.sources.member_objects
        await objects.wait_known(gvr, FIRST_SYNC_WAIT_SECONDS)
        cached, _ = objects.get(gvr, namespace, name)
        if cached is not None:
            return cached
        if objects.known_absent(gvr, namespace, name):
            return None
        return await self._read(gvr, namespace, name)

    async def _read(self, gvr: GVR, namespace: str, name: str) -> JsonDict | None:
        try:
            return await self.ctx.member.get(gvr, name, namespace=namespace or None)
        except NotFoundError:
            return None

    def _observe(self, result: str, seconds: float) -> None:
        try:
            histogram = self.ctx.metrics.work_sync_workload_duration
            histogram.labels(result=result).observe(seconds)
        except Exception:
            log.debug("work sync metric not recorded", exc_info=True)


def _namespace_for(manifest: Manifest, info: ResourceInfo) -> str:
    if not info.namespaced:
        return ""
    if not manifest.namespace:
        raise ManifestError(
            f"{manifest.label}: {manifest.kind} is namespaced but the manifest has no "
            f"metadata.namespace"
        )
    return manifest.namespace
