"""serviceExport: reports the EndpointSlices of exported Services to the control plane.

For every ServiceExport (multicluster.x-k8s.io/v1alpha1) on the member, each EndpointSlice of the
Service of the same name becomes a Work in `karmada-es-<cluster>` named as the control plane names
Works, dispatch-suspended, carrying the slice; karmada-controller-manager turns those into the
ServiceImport's slices in the consuming clusters. Slices that Karmada itself put on this member
are never reported back. When a slice or the ServiceExport goes, its Works go (or lose this
controller's mark, when endpointsliceCollect reports the same slice).

As upstream, the member is watched only once an applied Work carries a ServiceExport, and at
start every Work this cluster reported earlier is checked against the member (orphans removed).
"""

from __future__ import annotations

from typing import Any

from agent.context import AgentContext
from agent.karmada import collected, conditions, names
from agent.karmada.status import status_of
from agent.kube.controller import Result
from agent.kube.informers import Informer, typed_transform
from agent.kube.reflector import HandlerFuncs, Reflector
from agent.resources import SERVICE_EXPORTS
from agent.sources.member_slices import is_stub

from .slice_reporting import Key, SliceReportingController

JsonDict = dict[str, Any]


class _ServiceExports(Informer):
    def __init__(self, ctx: AgentContext) -> None:
        super().__init__(
            Reflector(
                ctx.member,
                SERVICE_EXPORTS,
                transform=typed_transform(
                    collected.SERVICE_EXPORT_API_VERSION, collected.SERVICE_EXPORT_KIND
                ),
                name="member serviceexports",
            )
        )

    def get(self, namespace: str, name: str) -> JsonDict | None:
        return self.reflector.store.get_by(namespace, name)


def _applied(work: JsonDict) -> bool:
    return conditions.is_true(status_of(work).get("conditions"), names.WORK_APPLIED)


class ServiceExportController(SliceReportingController):
    name = "serviceExport"

    def __init__(self, ctx: AgentContext) -> None:
        self.exports = _ServiceExports(ctx)
        super().__init__(ctx, collected.SERVICE_EXPORT, member_sources=(self.exports,))
        self.exports.reflector.add_handler(
            HandlerFuncs(
                add=self._export_event,
                update=lambda _old, new: self._export_event(new),
                delete=self._export_event,
            )
        )

    # --- member watches ------------------------------------------------------------------------

    def _member_synced(self) -> bool:
        return self.slices.synced and self.exports.synced

    def _wanted(self, namespace: str, service: str) -> bool:
        return self.exports.get(namespace, service) is not None

    # --- events --------------------------------------------------------------------------------

    def _work_event(self, work: JsonDict) -> None:
        if collected.is_reported_by(work, collected.SERVICE_EXPORT):
            # Reported earlier (perhaps before a restart): check it against the member.
            service = collected.SERVICE_EXPORT.service_labels(work)
            if service is not None:
                self.queue.add((collected.SERVICE_EXPORT_KIND, *service))
            return
        if collected.is_suppressed(work) or not _applied(work):
            return
        if (collected.SERVICE_EXPORT_API_VERSION, collected.SERVICE_EXPORT_KIND) in (
            collected.manifest_kinds(work)
        ):
            self.ensure_member_watches()

    def _export_event(self, export: JsonDict) -> None:
        meta = export.get("metadata") or {}
        self.queue.add(
            (collected.SERVICE_EXPORT_KIND, str(meta.get("namespace", "")), meta["name"])
        )

    def _slice_event(self, event_type: str, endpoint_slice: JsonDict) -> None:
        meta = endpoint_slice.get("metadata") or {}
        namespace, name = str(meta.get("namespace", "")), str(meta["name"])
        exported = self._wanted(namespace, collected.service_of(endpoint_slice))
        if exported or (event_type == "DELETED" and self.reports.work_for(namespace, name)):
            self.queue.add((collected.ENDPOINT_SLICE_KIND, namespace, name))

    # --- reconcile -----------------------------------------------------------------------------

    async def reconcile(self, key: Key) -> Result | None:
        kind, namespace, name = key
        self.require_member_synced()
        if kind == collected.SERVICE_EXPORT_KIND:
            await self._sync_export(namespace, name)
        else:
            await self._sync_slice(namespace, name)
        return None

    async def _sync_export(self, namespace: str, service: str) -> None:
        if self.exports.get(namespace, service) is None:
            for work in self.reports.reported_for(namespace, service):
                await self.reports.withdraw(work)
            return
        current = [
            s
            for s in await self.slices.refresh(namespace, service)
            if not collected.is_karmada_slice(s)
        ]
        keep = {collected.slice_work_name(namespace, s["metadata"]["name"]) for s in current}
        for work in self.reports.reported_for(namespace, service):
            if work["metadata"]["name"] not in keep:
                await self.reports.withdraw(work)
        for endpoint_slice in current:
            await self.reports.report(endpoint_slice)

    async def _sync_slice(self, namespace: str, name: str) -> None:
        endpoint_slice = self.slices.get(namespace, name)
        if endpoint_slice is None:
            work = self.reports.work_for(namespace, name)
            if work is not None and collected.is_reported_by(work, collected.SERVICE_EXPORT):
                await self.reports.withdraw(work)
            return
        if collected.is_karmada_slice(endpoint_slice):
            return
        service = collected.service_of(endpoint_slice)
        if not self._wanted(namespace, service):
            return
        if is_stub(endpoint_slice):
            await self._sync_export(namespace, service)
            return
        await self.reports.report(endpoint_slice)


def build(ctx: AgentContext) -> ServiceExportController:
    return ServiceExportController(ctx)
