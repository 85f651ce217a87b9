"""Works waiting for a kind the member does not serve (yet), by group and kind.

A Work whose manifest names such a kind fails and is retried on its backoff, which grows with
each failure (up to --rate-limiter-max-delay). The CRDs the agent manages are watched (the
member-object caches of the kinds the Works name, agent.sources.work_kinds; started here too
for the CRD resource when a Work first waits): when one starts
serving a kind (Established), the Works waiting for it are requeued at once and the member's
kinds read again. When one goes, the kinds are read again too, so that its kind reads "no
matches for kind" rather than failing with the 404 of a resource that is gone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from agent.karmada import conditions
from agent.kube.discovery import RESTMapper
from agent.kube.informers import SelectedInformers
from agent.kube.resources import CUSTOM_RESOURCE_DEFINITIONS

JsonDict = dict[str, Any]
GroupKind = tuple[str, str]


def _group_kind(crd: JsonDict) -> GroupKind:
    spec = crd.get("spec") or {}
    return str(spec.get("group") or ""), str((spec.get("names") or {}).get("kind") or "")


def _established(crd: JsonDict) -> bool:
    return conditions.is_true((crd.get("status") or {}).get("conditions"), "Established")


class WaitingKinds:
    def __init__(
        self, mapper: RESTMapper, objects: SelectedInformers, enqueue: Callable[[str], None]
    ) -> None:
        self.mapper = mapper
        self.objects = objects
        self.enqueue = enqueue
        self._waiting: dict[GroupKind, set[str]] = {}

    def wait(self, work_name: str, kinds: Iterable[GroupKind]) -> None:
        """The Work failed for want of these kinds."""
        for kind in kinds:
            self._waiting.setdefault(kind, set()).add(work_name)
        if self._waiting:
            self.objects.ensure(CUSTOM_RESOURCE_DEFINITIONS, "CustomResourceDefinition")

    def forget(self, work_name: str) -> None:
        for kind in list(self._waiting):
            names = self._waiting[kind]
            names.discard(work_name)
            if not names:
                del self._waiting[kind]

    def crd_changed(self, event_type: str, crd: JsonDict) -> None:
        """A watch event of a CRD the agent manages."""
        if event_type == "DELETED":
            self.mapper.invalidate()
            return
        if not _established(crd):
            return
        waiting = self._waiting.pop(_group_kind(crd), None)
        if waiting:
            self.mapper.invalidate()
            for name in sorted(waiting):
                self.enqueue(name)
