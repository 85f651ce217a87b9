"""The Works of this cluster's execution namespace: one list+watch (never polled), shared by
every controller that reads them (each starts and stops it, so any of them can run alone under
`--controllers`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent.karmada import names
from agent.kube.client import KubeClient
from agent.kube.informers import Informer, typed_transform
from agent.kube.reflector import EventHandler, Reflector
from agent.resources import WORKS

JsonDict = dict[str, Any]


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: `patch` merged into `target` (None removes a key, lists are replaced)."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


class WorkInformer(Informer):
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
        keep the answer in the cache (Reflector.writing), so the next reconcile compares
        against what we wrote even before the watch brings it back. The handlers hear of it
        too: the answer may carry a spec change whose own watch event has not arrived yet. With `precondition`, only
        over the Work as given (its resourceVersion; a 409 Conflict otherwise): for a write of
        a list another writer may have changed meanwhile."""
        meta = work.get("metadata") or {}
        name = str(meta.get("name"))
        body: JsonDict = {"status": status}
        if precondition:
            body["metadata"] = {"resourceVersion": meta.get("resourceVersion")}
        with self.reflector.writing(f"{self.namespace}/{name}") as write:
            # Answered with the metadata only: the rest is the Work as we knew it with our
            # status merged in (over a slow link the whole Work back, for every status write,
            # was most of what crossed it).
            answer = await self.client.patch(
                WORKS,
                name,
                body,
                patch_type="merge",
                namespace=self.namespace,
                subresource="status",
                metadata_only=True,
            )
            known = self.get(name) or work
            written = answer.get("metadata") or {}
            known_meta = known.get("metadata") or {}
            if answer.get("kind") == "PartialObjectMetadata" and all(
                written.get(key) == known_meta.get(key) for key in ("uid", "generation")
            ):
                updated = {
                    **known,
                    "metadata": written,
                    "status": merge_patch(known.get("status") or {}, status),
                }
            elif answer.get("kind") == "PartialObjectMetadata":
                # The Work changed meanwhile (its spec): read it whole.
                updated = await self.client.get(WORKS, name, namespace=self.namespace)
            else:
                updated = answer  # a server that answered with the whole Work
            write.answered(updated)
        return updated

    def is_own_write(self, work: JsonDict) -> bool:
        """`work` is as a status write of ours left it (not a later change by anyone)."""
        return self.reflector.is_own_write(work)
