"""SyncSucceed / SyncFailed Events on the resource template, as upstream's execution controller
records them beside the Work's: one per manifest each time it is applied, about the control
plane's object the manifest was rendered from (what `kubectl describe` of a Deployment on the
Karmada API server shows).

The Event names the manifest's apiVersion, kind, namespace and name, and the template's uid:
the manifest's own `metadata.uid` or else its `resourcetemplate.karmada.io/uid` annotation. A
manifest with neither gets no Event (a log line says so), as upstream. Repeats of the same
Event fold into its count (agent.events).
"""

from __future__ import annotations

from typing import Any

from agent.events import EventEmitter
from agent.karmada import names
from agent.karmada.work import Manifest
from agent.logs import get_logger

log = get_logger(__name__)

JsonDict = dict[str, Any]


def template_reference(manifest: JsonDict) -> JsonDict | None:
    """The object an Event about the manifest's resource template names; None without a uid."""
    meta = manifest.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    uid = meta.get("uid") or annotations.get(names.RESOURCE_TEMPLATE_UID_ANNOTATION)
    if not uid or not meta.get("name") or not manifest.get("kind"):
        return None
    reference: JsonDict = {"name": meta["name"], "uid": uid}
    if meta.get("namespace"):
        reference["namespace"] = meta["namespace"]
    return {
        "apiVersion": manifest.get("apiVersion", ""),
        "kind": manifest["kind"],
        "metadata": reference,
    }


class TemplateEvents:
    def __init__(self, events: EventEmitter, cluster: str) -> None:
        self.events = events
        self.cluster = cluster

    def succeeded(self, manifest: Manifest) -> None:
        self._emit(
            manifest,
            "Normal",
            names.EVENT_SYNC_SUCCEED,
            f"Successfully applied resource({manifest.namespace}/{manifest.name}) "
            f"to cluster {self.cluster}",
        )

    def failed(self, manifest: Manifest, error: str) -> None:
        where = f"{manifest.namespace}/{manifest.name}" if manifest.namespace else manifest.name
        self._emit(
            manifest,
            "Warning",
            names.EVENT_SYNC_FAILED,
            f"Failed to create or update resource({where}) in member cluster({self.cluster}): "
            f"{error.removeprefix(manifest.label + ': ')}",
        )

    def _emit(self, manifest: Manifest, type_: Any, reason: str, message: str) -> None:
        reference = template_reference(manifest.obj)
        if reference is None:
            log.info(
                "no Event on the resource template: the manifest names no template uid",
                manifest=manifest.label,
                reason=reason,
            )
            return
        self.events.emit(reference, type_, reason, message)
