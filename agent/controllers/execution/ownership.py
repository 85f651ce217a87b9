"""Ownership: which Work may write a member object.

Refused before anything is written: an object Karmada does not manage (no
`karmada.io/managed=true`), and an object managed through another Work (as the live object
says, or as this process applied it last), unless this Work (or manifest) says
`work.karmada.io/conflict-resolution: overwrite`. A Work refused for another Work's object waits:
it is reconciled again when that object is deleted or changes hands. When an overwriting Work
takes an object over, the previous owner is reconciled so that it reports the loss.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent.karmada import names
from agent.karmada.work import Manifest, is_managed, may_overwrite, work_of
from agent.sources.works import WorkInformer

from .drift import ObjectKey, OwnWrites

JsonDict = dict[str, Any]
WorkRef = tuple[str, str]  # (namespace, name) of a Work


class OwnershipError(Exception):
    """The member object exists and Karmada may not take it over."""


class OtherWorkError(Exception):
    """The member object is managed through another Work; retrying cannot help until that
    object is deleted or changes hands (which enqueues this Work again) or this Work changes."""

    def __init__(self, message: str, key: ObjectKey, owner: WorkRef | None) -> None:
        super().__init__(message)
        self.key = key
        self.owner = owner


def _take_over_hint() -> str:
    return (
        f"Annotate the Work or manifest with "
        f"{names.CONFLICT_RESOLUTION_ANNOTATION}: {names.CONFLICT_OVERWRITE} to take it over"
    )


class Ownership:
    def __init__(
        self, works: WorkInformer, writes: OwnWrites, enqueue: Callable[[str], None]
    ) -> None:
        self.works = works
        self.namespace = works.namespace
        self.writes = writes
        self.enqueue = enqueue
        # Works refused because another Work manages the object: (that owner, the Works).
        self._blocked: dict[ObjectKey, tuple[WorkRef | None, set[str]]] = {}

    def check(
        self, work: JsonDict, manifest: Manifest, key: ObjectKey, live: JsonDict | None
    ) -> bool:
        """Raise OtherWorkError or OwnershipError when `work` may not write the object; True
        when the write adopts it (it exists, not as Karmada's, and the Work may overwrite)."""
        this = str((work.get("metadata") or {}).get("name"))
        owner: WorkRef | None = None
        if live is not None and is_managed(live):
            ref = work_of(live)
            if ref is not None and ref != (self.namespace, this):
                owner = ref
        writer = self.writes.writer(key)
        if owner is None and writer not in (None, this) and writer in self.works.names():
            owner = (self.namespace, str(writer))
        overwrite = may_overwrite(manifest, work)
        if owner is not None and not overwrite:
            raise OtherWorkError(
                f"{manifest.label}: {manifest.description} is already managed by Work "
                f"{owner[0]}/{owner[1]} in the member cluster; it is left alone. "
                f"{_take_over_hint()}",
                key,
                owner,
            )
        if live is not None and not is_managed(live) and not overwrite:
            raise OwnershipError(
                f"{manifest.label}: {manifest.description} already exists in the member "
                f"cluster and is not managed by Karmada (no label {names.MANAGED_LABEL}=true); "
                f"it is left alone. {_take_over_hint()}"
            )
        return live is not None and not is_managed(live)

    def taken_from(self, previous: str | None) -> None:
        """Another Work took over an object of the Work `previous`: reconcile it so that it
        reports the loss; unless it overwrites too (two overwriting Works: the last writer keeps
        the object rather than both taking it back and forth)."""
        work = self.works.get(previous) if previous is not None else None
        if work is None:
            return
        annotations = (work.get("metadata") or {}).get("annotations") or {}
        if annotations.get(names.CONFLICT_RESOLUTION_ANNOTATION) != names.CONFLICT_OVERWRITE:
            self.enqueue(str(previous))

    # --- Works waiting for another Work's object ----------------------------------------------

    def block(self, work_name: str, exc: OtherWorkError) -> None:
        _, waiting = self._blocked.get(exc.key, (exc.owner, set()))
        waiting.add(work_name)
        self._blocked[exc.key] = (exc.owner, waiting)

    def unblock(self, work_name: str) -> None:
        """Forget that the Work waits for anything; its reconcile finds out again."""
        for key in [k for k, (_, waiting) in self._blocked.items() if work_name in waiting]:
            _, waiting = self._blocked[key]
            waiting.discard(work_name)
            if not waiting:
                del self._blocked[key]

    def release(self, key: ObjectKey, ref: WorkRef | None) -> None:
        """The object was deleted (ref None) or now points at `ref`: the Works refused because
        another Work owned it are reconciled again if that owner let go."""
        blocked = self._blocked.get(key)
        if blocked is None or blocked[0] == ref:
            return
        del self._blocked[key]
        for name in blocked[1]:
            self.enqueue(name)
