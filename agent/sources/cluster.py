"""This cluster's own Cluster object from one list+watch selected by name, so that readiness
and termination are known without a GET per reconcile; shared by every controller that reads
the Cluster (each starts and stops it), so none of them polls it."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from agent.karmada import conditions, names
from agent.karmada.status import status_of
from agent.kube.client import KubeClient
from agent.kube.informers import Informer, typed_transform
from agent.kube.listeners import listen
from agent.kube.reflector import HandlerFuncs, Reflector, Write
from agent.logs import get_logger
from agent.resources import CLUSTERS

log = get_logger(__name__)

JsonDict = dict[str, Any]


class ClusterInformer(Informer):
    """This cluster's Cluster object; `on_ready` callbacks fire when it turns Ready."""

    def __init__(self, client: KubeClient, cluster_name: str) -> None:
        super().__init__(
            Reflector(
                client,
                CLUSTERS,
                field_selector=f"metadata.name={cluster_name}",
                transform=typed_transform(names.CLUSTER_API_VERSION, "Cluster"),
                name=f"cluster {cluster_name}",
            )
        )
        self.cluster_name = cluster_name
        self._on_ready: list[Callable[[], None]] = []
        self.reflector.add_handler(
            HandlerFuncs(add=self._changed, update=lambda old, new: self._changed(new, old))
        )

    @property
    def cluster(self) -> JsonDict | None:
        return self.reflector.store.get_by(None, self.cluster_name)

    def writing(self) -> AbstractContextManager[Write]:
        """Around a write of the Cluster: its answer is cached (Reflector.writing)."""
        return self.reflector.writing(self.cluster_name)

    @property
    def ready(self) -> bool:
        cluster = self.cluster
        return cluster is not None and _is_ready(cluster)

    @property
    def terminating(self) -> bool:
        """Being deleted, or already gone."""
        cluster = self.cluster
        return cluster is None or bool((cluster.get("metadata") or {}).get("deletionTimestamp"))

    def on_ready(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback` whenever the Cluster turns Ready; returns the unsubscribe."""
        return listen(self._on_ready, callback)

    def _changed(self, new: JsonDict, old: JsonDict | None = None) -> None:
        if _is_ready(new) and (old is None or not _is_ready(old)):
            log.info("cluster is ready", cluster=self.cluster_name)
            for callback in list(self._on_ready):
                callback()


def _is_ready(cluster: JsonDict) -> bool:
    return conditions.is_true(status_of(cluster).get("conditions"), names.CONDITION_READY)
