"""Member-side caches of the objects Karmada manages, per resource type in use: a watch of
Karmada's objects and one of the others' names, each starting with the objects there are
(sendInitialEvents, as client-go's reflector does; a server that refuses it gets a list first).

Only objects labelled `karmada.io/managed=true` are cached whole, so memory grows with what
Karmada put on the member, not with the member's size (upstream's informers cache every object
of a type); of every other object only the name is kept, so an apply needs no GET to know it
would not take over someone else's object. Of managedFields only who wrote and when is kept:
enough to say who keeps changing an object back. The mechanism is agent.kube.informers; this
module holds Karmada's choice of selectors. Which types are watched follows the kinds the Works
name (agent.sources.work_kinds).
"""

from __future__ import annotations

from agent.karmada import names
from agent.kube.client import KubeClient
from agent.kube.discovery import RESTMapper
from agent.kube.informers import SelectedInformers
from agent.options import Options

from .work_kinds import WorkKinds
from .works import WorkInformer

MANAGED_SELECTOR = f"{names.MANAGED_LABEL}=true"
# Every other object (label absent or not "true"): only their names are kept.
OTHERS_SELECTOR = f"{names.MANAGED_LABEL}!=true"


class MemberObjects(SelectedInformers):
    name = "member-objects"

    def __init__(self, client: KubeClient, options: Options | None = None) -> None:
        options = options or Options()
        super().__init__(
            client,
            label_selector=MANAGED_SELECTOR,
            others_selector=OTHERS_SELECTOR,
            sync_timeout=options.cluster_cache_sync_timeout.total_seconds(),
            description="member objects",
            keep_writers=True,
        )
        self._kinds: WorkKinds | None = None

    def kinds_named_by(self, works: WorkInformer, mapper: RESTMapper) -> WorkKinds:
        """What starts the watches of the kinds `works` name (one, however many controllers
        declare it)."""
        if self._kinds is None or self._kinds.works is not works:
            self._kinds = WorkKinds(works, mapper, self)
        return self._kinds
