"""The Works of this cluster's execution namespace: one list+watch (never polled), shared by
every controller that reads them (each starts and stops it, so any of them can run alone under
`--controllers`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent.karmada import names
from agent.kube.client import KubeClient
from agent.kube.informers import WatchedReflector, typed_transform
from agent.kube.reflector import EventHandler, Reflector
from agent.resources import WORKS

JsonDict = dict[str, Any]


class WorkInformer(WatchedReflector):
    def __init__(self, client: KubeClient, namespace: str, *, name: str = "works") -> None:
        super().__init__(
            Reflector(
                client,
                WORKS,
                namespace=namespace,
                transform=typed_transform(names.WORK_API_VERSION, "Work"),
                name=f"{name} {namespace}",
            )
        )
        self.client = client
        self.namespace = namespace

    def get(self, name: str) -> JsonDict | None:
        return self.reflector.store.get_by(self.namespace, name)

    def names(self) -> list[str]:
        return [str(obj["metadata"]["name"]) for obj in self.reflector.store]

    def add_handler(self, handler: EventHandler) -> Callable[[], None]:
        return self.reflector.add_handler(handler)

    async def patch_status(
        self, work: JsonDict, status: JsonDict, *, precondition: bool = False
    ) -> JsonDict:
        """Merge-patch `status` (only the keys given) into the Work's status subresource and
        keep the answer in the cache, so the next reconcile compares against what we wrote
        even before the watch brings it back. The handlers hear of it too: the answer may carry
        a spec change whose own watch event has not arrived yet. With `precondition`, only
        over the Work as given (its resourceVersion; a 409 Conflict otherwise): for a write of
        a list another writer may have changed meanwhile."""
        meta = work.get("metadata") or {}
        body: JsonDict = {"status": status}
        if precondition:
            body["metadata"] = {"resourceVersion": meta.get("resourceVersion")}
        updated = await self.client.patch(
            WORKS,
            str(meta.get("name")),
            body,
            patch_type="merge",
            namespace=self.namespace,
            subresource="status",
        )
        self.reflector.observe(updated)
        return updated
