"""The member's Service EndpointSlices: one list+watch shared by serviceExport and
endpointsliceCollect (each starts and stops it).

Whole objects are kept only for the Services some controller wants reported; every other slice
is held as a stub (name, namespace, labels, resourceVersion), so memory follows what is
exported, not the member's size. When a Service becomes wanted, `refresh` reads its slices once
and fills the stubs in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent.karmada import collected
from agent.kube.client import KubeClient
from agent.kube.informers import Informer, typed_transform
from agent.kube.listeners import listen
from agent.kube.reflector import HandlerFuncs, Reflector
from agent.kube.resources import ENDPOINT_SLICES
from agent.kube.store import object_key
from agent.logs import get_logger

log = get_logger(__name__)

JsonDict = dict[str, Any]
# handler(event_type, slice) with event_type "ADDED", "MODIFIED" or "DELETED".
SliceHandler = Callable[[str, JsonDict], None]
Wanted = Callable[[str, str], bool]

_full = typed_transform(collected.ENDPOINT_SLICE_API_VERSION, collected.ENDPOINT_SLICE_KIND)


def is_stub(endpoint_slice: JsonDict) -> bool:
    # addressType is required in every EndpointSlice, so only a stub lacks it.
    return "addressType" not in endpoint_slice


def _service_key(obj: JsonDict) -> list[str]:
    meta = obj.get("metadata") or {}
    service = collected.service_of(obj)
    return [f"{meta.get('namespace', '')}/{service}"] if service else []


class MemberSlices(Informer):
    name = "member-endpointslices"

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self._interests: list[Wanted] = []
        self._handlers: list[SliceHandler] = []
        super().__init__(
            Reflector(
                client,
                ENDPOINT_SLICES,
                # Only Service slices: selector-less slices of other owners never matter here.
                label_selector=collected.SERVICE_NAME_LABEL,
                transform=self._trim,
                name="member endpointslices",
            )
        )
        self.reflector.store.add_indexer("service", _service_key)
        self.reflector.add_handler(
            HandlerFuncs(
                add=lambda obj: self._fan_out("ADDED", obj),
                update=lambda _old, new: self._fan_out("MODIFIED", new),
                delete=lambda obj: self._fan_out("DELETED", obj),
            )
        )

    # --- lifecycle: started by the first user, stopped with the last ---------------------------

    def start(self) -> None:
        first = not self.started
        super().start()
        if first:
            log.info("watching member EndpointSlices", selector=collected.SERVICE_NAME_LABEL)

    # --- interest: which Services are kept whole ------------------------------------------------

    def want(self, wanted: Wanted) -> Callable[[], None]:
        """Keep whole the slices of every Service for which `wanted(namespace, name)` holds;
        returns the function that withdraws this interest."""
        return listen(self._interests, wanted)

    def wanted(self, namespace: str, service: str) -> bool:
        return any(wanted(namespace, service) for wanted in self._interests)

    def _trim(self, obj: JsonDict) -> JsonDict:
        obj = _full(obj)
        meta = obj.get("metadata") or {}
        if self.wanted(str(meta.get("namespace", "")), collected.service_of(obj)):
            return obj
        kept = ("name", "namespace", "labels", "resourceVersion", "uid")
        return {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "metadata": {k: meta[k] for k in kept if k in meta},
        }

    # --- reads ---------------------------------------------------------------------------------

    def get(self, namespace: str, name: str) -> JsonDict | None:
        return self.reflector.store.get_by(namespace, name)

    def of_service(self, namespace: str, service: str) -> list[JsonDict]:
        return self.reflector.store.by_index("service", f"{namespace}/{service}")

    async def refresh(self, namespace: str, service: str) -> list[JsonDict]:
        """The Service's slices, whole: stubs (kept while nobody wanted them) are read again."""
        slices = self.of_service(namespace, service)
        stubs = [object_key(s) for s in slices if is_stub(s)]
        if stubs:
            # Read as it is now: a whole slice is cached unless the watch delivered its
            # version, or a newer one, meanwhile (Reflector.writing).
            with self.reflector.writing(*stubs, refill=True) as read:
                listed = await self.client.list(
                    ENDPOINT_SLICES,
                    namespace=namespace,
                    label_selector=f"{collected.SERVICE_NAME_LABEL}={service}",
                )
                for item in listed.get("items") or []:
                    if f"{namespace}/{(item.get('metadata') or {}).get('name')}" in stubs:
                        read.answered(
                            {**item, "metadata": {**item["metadata"], "namespace": namespace}}
                        )
            slices = self.of_service(namespace, service)
        return [s for s in slices if not is_stub(s)]

    # --- events --------------------------------------------------------------------------------

    def subscribe(self, handler: SliceHandler) -> Callable[[], None]:
        return listen(self._handlers, handler)

    def _fan_out(self, event_type: str, obj: JsonDict) -> None:
        for handler in list(self._handlers):
            try:
                handler(event_type, obj)
            except Exception:
                log.exception("EndpointSlice handler failed")
