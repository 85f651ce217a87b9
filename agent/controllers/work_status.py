"""The workStatus controller: reports the state of each Work's member objects in its status.

For every manifest whose member object exists (and points back at the Work), one entry of
`status.manifestStatuses`, in ordinal order: the identifier (with `resource`, which the CRD
requires), the reflected status and the health. Upstream keeps a single entry per Work; we keep
one per manifest. Triggers: Work changes (not our own status writes) and changes of member
objects (the member-side watches, mapped back to their Work by the back-reference annotations).
The status is written only when it differs from what the Work already says.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agent.context import AgentContext, Runnable
from agent.interpreter.chain import InterpretReflectError
from agent.karmada import names
from agent.karmada.manifest_status import by_ordinal
from agent.karmada.reflect import ReflectError
from agent.karmada.status import status_of
from agent.karmada.work import Manifest, belongs_to, is_deleting, manifests_of, work_of
from agent.kube.client import GVR
from agent.kube.controller import Result, RetryableError
from agent.kube.discovery import NoKindMatchError
from agent.kube.tasks import background
from agent.logs import get_logger

from .manifest_statuses import (
    ManifestStatuses,
    awaits_first_report,
    entries_changed,
    handed_over,
)
from .watches import Watches
from .work_controller import WorkController

log = get_logger(__name__)

JsonDict = dict[str, Any]

CONTROLLER_NAME = "workStatus"


class StatusCollectionError(RetryableError):
    """Some manifests' objects could not be looked at; the Work is retried."""


def _meta(obj: JsonDict) -> JsonDict:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


class WorkStatusController(WorkController):
    def __init__(self, ctx: AgentContext, *, stop_timeout: float = 10.0) -> None:
        super().__init__(ctx, CONTROLLER_NAME, stop_timeout=stop_timeout)
        self.statuses = ManifestStatuses(ctx.sources.interpreter, ctx.events)
        # Works that met a member type whose cache was not synced yet, per type.
        self._awaiting_sync: dict[GVR, set[str]] = {}
        self._sync_waiters: dict[GVR, asyncio.Task[None]] = {}
        sources = ctx.sources
        self.watches = (
            Watches()
            .for_works(self.works, self._work_handler())
            # Every change of a member object sends its Work here.
            .member_objects_of_works(*self._member_objects(), self._member_event)
            .interpreter_config(sources.interpreter_config, on_change=self._enqueue_every_work)
            .uses(sources.interpreter)
        )

    def _stop_tasks(self) -> list[asyncio.Task[None]]:
        tasks = list(self._sync_waiters.values())
        self._sync_waiters.clear()
        return tasks

    # --- event handlers ------------------------------------------------------------------------

    def _work_updated(self, old: JsonDict, new: JsonDict) -> None:
        # Besides changes of the Work itself: the execution controller's first report (see
        # agent.controllers.manifest_statuses).
        if handed_over(old, new):
            self._work_added(new)
        elif entries_changed(old, new) and not self.works.is_own_write(new):
            # Written by someone else: what the Work says may no longer be what the member
            # objects say.
            self._work_added(new)
        else:
            super()._work_updated(old, new)

    def _member_event(self, event_type: str, gvr: GVR, obj: JsonDict) -> None:
        ref = work_of(obj)
        if ref is not None and ref[0] == self.namespace:
            self.queue.add(ref[1])

    def _when_synced(self, gvr: GVR, work_name: str) -> None:
        """Reconcile `work_name` again once the member cache of `gvr` has its first list."""
        self._awaiting_sync.setdefault(gvr, set()).add(work_name)
        if gvr in self._sync_waiters:
            return

        async def wait() -> None:
            try:
                await self.ctx.sources.member_objects.wait_synced(gvr)
            finally:
                self._sync_waiters.pop(gvr, None)
                for name in self._awaiting_sync.pop(gvr, set()):
                    self.queue.add(name)

        self._sync_waiters[gvr] = background(wait(), name=f"workStatus wait {gvr}")

    # --- reconcile -----------------------------------------------------------------------------

    async def reconcile(self, name: str) -> Result | None:
        work = self.works.get(name)
        if work is None or is_deleting(work):
            return None
        if awaits_first_report(work):
            return None
        previous = by_ordinal(status_of(work).get("manifestStatuses"))
        entries: list[JsonDict] = []
        problems: list[str] = []
        health_problems: dict[int, str] = {}
        for item in manifests_of(work):
            if not isinstance(item, Manifest):
                continue  # the execution controller reports malformed manifests
            try:
                entry, health_problem = await self._entry_for(
                    work, item, previous.get(item.ordinal)
                )
                if health_problem is not None:
                    health_problems[item.ordinal] = health_problem
            except NoKindMatchError as exc:
                problems.append(f"{item.description}: {exc} in the member cluster")
                continue
            except ReflectError as exc:
                # As upstream: the entry is not updated, a Warning Event, and a retry (no
                # Event again while a webhook keeps failing for the kind).
                if not (isinstance(exc, InterpretReflectError) and exc.repeated):
                    self.ctx.events.emit(
                        work,
                        "Warning",
                        names.EVENT_REFLECT_STATUS_FAILED,
                        f"Status not reflected: {exc}.",
                    )
                problems.append(str(exc))
                entry = previous.get(item.ordinal)
            if entry is not None:
                entries.append(entry)
        current = status_of(work)
        fitted = self.statuses.fitted(work, {"manifestStatuses": entries or None})
        if any(current.get(key) != value for key, value in fitted.items()):
            written = await self.statuses.write(self.works, work, fitted)
            self.statuses.emit_written(work, status_of(written), health_problems)
        if problems:
            self.log.info("status of some manifests not collected", problems=problems)
            raise StatusCollectionError("; ".join(problems))
        return None

    async def _entry_for(
        self, work: JsonDict, manifest: Manifest, previous: JsonDict | None
    ) -> tuple[JsonDict | None, str | None]:
        info = await self.ctx.member_mapper.resource_for(manifest.api_version, manifest.kind)
        namespace = manifest.namespace if info.namespaced else ""
        gvr = info.gvr
        objects = self.ctx.sources.member_objects
        live, synced = objects.get(gvr, namespace, manifest.name)
        if not synced:
            # Not known yet: keep what was reported and look again once the cache is filled.
            self._when_synced(gvr, str(_meta(work).get("name")))
            return previous, None
        meta = _meta(work)
        if live is None or not belongs_to(live, str(meta.get("namespace")), str(meta.get("name"))):
            return None, None
        # List items of built-in types carry no apiVersion/kind; the rules need them.
        typed = {**live, "apiVersion": manifest.api_version, "kind": manifest.kind}
        return await self.statuses.entry(manifest, info.resource, typed)


def build(ctx: AgentContext) -> Runnable:
    return WorkStatusController(ctx)
