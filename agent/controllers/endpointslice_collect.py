"""endpointsliceCollect: reports the EndpointSlices of Services a MultiClusterService selects.

Runs only with the MultiClusterService feature gate, as upstream. The control plane tells this
cluster which Services to collect with dispatch-suspended Works that carry a
MultiClusterService (networking.karmada.io/v1alpha1) and name the Service in their labels
`multiclusterservice.karmada.io/namespace` and `.../name`. Each EndpointSlice of such a Service
becomes a Work in `karmada-es-<cluster>`, suppressed for propagation, that the control plane's
MultiClusterService machinery dispatches to the consuming clusters. Slices dispatched into this
member by that machinery are never collected back.
"""

from __future__ import annotations

from typing import Any

from agent.context import AgentContext
from agent.karmada import collected
from agent.kube.controller import Result
from agent.sources.member_slices import is_stub

from .slice_reporting import Key, SliceReportingController

JsonDict = dict[str, Any]
SERVICE_KEY = "Service"


def _collects(work: JsonDict) -> tuple[str, str] | None:
    """The Service a Work asks this cluster to collect, if it is such a Work."""
    if (work.get("metadata") or {}).get("deletionTimestamp"):
        return None
    if (collected.MULTI_CLUSTER_SERVICE_API_VERSION, collected.MULTI_CLUSTER_SERVICE_KIND) not in (
        collected.manifest_kinds(work)
    ):
        return None
    return collected.MULTI_CLUSTER_SERVICE.service_labels(work)


_COLLECTS_INDEX = "collects"


def _collects_index(work: JsonDict) -> list[str]:
    service = _collects(work)
    return [f"{service[0]}/{service[1]}"] if service is not None else []


class EndpointSliceCollectController(SliceReportingController):
    name = "endpointsliceCollect"

    def __init__(self, ctx: AgentContext) -> None:
        super().__init__(ctx, collected.MULTI_CLUSTER_SERVICE)
        self.works.reflector.store.add_indexer(_COLLECTS_INDEX, _collects_index)

    def _wanted(self, namespace: str, service: str) -> bool:
        return bool(
            self.works.reflector.store.index_keys(_COLLECTS_INDEX, f"{namespace}/{service}")
        )

    def _work_event(self, work: JsonDict) -> None:
        service = _collects(work)
        if service is None:
            return
        self.ensure_member_watches()
        self.queue.add((SERVICE_KEY, *service))

    def _slice_event(self, event_type: str, endpoint_slice: JsonDict) -> None:
        meta = endpoint_slice.get("metadata") or {}
        namespace, name = str(meta.get("namespace", "")), str(meta["name"])
        wanted = self._wanted(namespace, collected.service_of(endpoint_slice))
        if wanted or (event_type == "DELETED" and self.reports.work_for(namespace, name)):
            self.queue.add((collected.ENDPOINT_SLICE_KIND, namespace, name))

    async def reconcile(self, key: Key) -> Result | None:
        kind, namespace, name = key
        self.require_member_synced()
        if kind == SERVICE_KEY:
            await self._collect_service(namespace, name)
        else:
            await self._sync_slice(namespace, name)
        return None

    @staticmethod
    def _collectable(endpoint_slice: JsonDict) -> bool:
        labels = (endpoint_slice.get("metadata") or {}).get("labels") or {}
        return labels.get(collected.SLICE_MANAGED_BY_LABEL) != collected.DISPATCHED_SLICE_MANAGER

    async def _collect_service(self, namespace: str, service: str) -> None:
        if not self._wanted(namespace, service):
            return
        for endpoint_slice in await self.slices.refresh(namespace, service):
            if self._collectable(endpoint_slice):
                await self.reports.report(endpoint_slice)

    async def _sync_slice(self, namespace: str, name: str) -> None:
        endpoint_slice = self.slices.get(namespace, name)
        if endpoint_slice is None:
            work = self.reports.work_for(namespace, name)
            if work is not None and collected.is_reported_by(work, collected.MULTI_CLUSTER_SERVICE):
                await self.reports.withdraw(work)
            return
        if not self._collectable(endpoint_slice):
            return
        service = collected.service_of(endpoint_slice)
        if not self._wanted(namespace, service):
            return
        if is_stub(endpoint_slice):
            await self._collect_service(namespace, service)
            return
        await self.reports.report(endpoint_slice)


def build(ctx: AgentContext) -> EndpointSliceCollectController:
    return EndpointSliceCollectController(ctx)
