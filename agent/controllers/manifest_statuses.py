"""Who writes a Work's status.manifestStatuses, and when: the hand-off between the execution
and workStatus controllers, in one place.

1. The execution controller writes a Work's first manifestStatuses together with its first
   Applied condition, in one status write, from the answers of its applies (`first_report`).
2. Until then the workStatus controller leaves the Work alone (`awaits_first_report`); the
   Applied condition being written or changing is what sends the Work to it (`handed_over`).
3. From then on the workStatus controller keeps the entries current from the member watches.
   An object the execution controller applied is in the member cache from the apply's answer
   on, whether or not its watch event has arrived (`SelectedInformers.writing`): the cache's
   lagging behind does not make it absent. A member change brings the Work back to the
   workStatus controller. So does any change of the entries but our own writes
   (`entries_changed`, `WorkInformer.is_own_write`). The Works cache never goes back to an
   older Work than the answer to our last write (agent.kube.reflector), so a late watch event
   of an earlier write is no change to look at.

Both build an entry the same way (`entry`: the interpreter's reflected status and health),
write the status the same way (`fitted`, `write`) and record the same Events for a change of the
entries (`emit_events`); the rules themselves are agent.karmada.manifest_status.

A status the control plane cannot store (the Work with it larger than etcd takes, 1.5 MiB by
default) is written cut down: the largest reflected statuses left out first, manifestStatuses
altogether if need be, the conditions always, with the condition StatusTruncated saying what is
left out. `fitted` cuts by an estimate before any request; `write` cuts further when the API
server refuses a write as too large anyway, and when even the conditions are refused, says so
with a Warning Event (StatusTooLargeError: nothing to retry until the Work changes).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from agent.events import EventEmitter
from agent.interpreter import InterpretError
from agent.karmada import names
from agent.karmada.conditions import find, set_condition
from agent.karmada.manifest_status import (
    CONDITION_STATUS_TRUNCATED,
    STORED_OBJECT_LIMIT,
    STORED_OBJECT_MARGIN,
    Fitted,
    applied_status,
    by_ordinal,
    fit_status,
    is_first_report,
    status_entry,
    status_events,
    truncated_condition,
)
from agent.karmada.status import copy_conditions, status_of
from agent.karmada.work import Manifest
from agent.kube.controller import TerminalError
from agent.kube.errors import is_request_too_large
from agent.sources.interpreter import AgentInterpreter
from agent.sources.works import WorkInformer

JsonDict = dict[str, Any]


class StatusTooLargeError(TerminalError):
    """Not even the Work's conditions could be written: the Work itself is about as large as
    the control plane stores. Nothing to retry until the Work changes."""


def awaits_first_report(work: JsonDict) -> bool:
    """Not applied yet: the execution controller writes the first manifestStatuses together
    with Applied (one status write); the workStatus controller waits for that write."""
    return is_first_report(work)


def handed_over(old: JsonDict, new: JsonDict) -> bool:
    """The Work's Applied condition was written or changed: the statuses of its objects are the
    workStatus controller's to look at (again)."""
    return applied_status(old) != applied_status(new)


def entries_changed(old: JsonDict, new: JsonDict) -> bool:
    """The Work's manifestStatuses differ between `old` and `new`."""
    return status_of(old).get("manifestStatuses") != status_of(new).get("manifestStatuses")


class ManifestStatuses:
    def __init__(self, interpreter: AgentInterpreter, events: EventEmitter) -> None:
        self.interpreter = interpreter
        self.events = events

    async def entry(
        self, manifest: Manifest, resource: str, live: JsonDict
    ) -> tuple[JsonDict, str | None]:
        """The entry of `manifest` from its member object `live`, and why its health is Unknown
        when a customization failed to interpret it; raises ReflectError when the object's
        status cannot be reflected."""
        reflected = await self.interpreter.reflect_status(live)
        try:
            health = await self.interpreter.interpret_health(live)
        except InterpretError as exc:
            # As upstream: the health is Unknown, and an InterpretHealthFailed Event says why.
            return status_entry(manifest, resource, reflected, names.UNKNOWN), str(exc)
        return status_entry(manifest, resource, reflected, health), None

    def first_report(self, work: JsonDict, entries: dict[int, JsonDict]) -> JsonDict:
        """What the execution controller adds to its status write once every manifest of `work`
        is applied: the first manifestStatuses (`entries` by ordinal, from the apply answers)
        when nothing has been reported on the Work yet; else nothing, the workStatus controller
        keeps them. Their Events follow the write (`emit_written`)."""
        if not is_first_report(work):
            return {}
        return {"manifestStatuses": [entries[ordinal] for ordinal in sorted(entries)] or None}

    def emit_written(
        self, before: JsonDict, written: JsonDict, health_problems: dict[int, str] | None = None
    ) -> None:
        """The Events of a status write that carried manifestStatuses (as written: entries
        whose reflected status was left out reflect nothing)."""
        if "manifestStatuses" not in written:
            return
        previous = by_ordinal(status_of(before).get("manifestStatuses"))
        self.emit_events(before, previous, written["manifestStatuses"] or [], health_problems)

    def fitted(self, work: JsonDict, status: JsonDict) -> JsonDict:
        """`status` (the keys to merge into the Work's status) as it can be stored."""
        return _with_truncation(
            work, fit_status(work, status, STORED_OBJECT_LIMIT - STORED_OBJECT_MARGIN)
        )

    async def write(self, works: WorkInformer, work: JsonDict, status: JsonDict) -> JsonDict:
        """Write `status` (as `fitted` gave it); when the API server refuses it as too large,
        again with every reflected status left out, then without manifestStatuses."""

        def attempts() -> Iterator[JsonDict]:
            yield status
            for limit in (STORED_OBJECT_LIMIT, 0):
                yield _with_truncation(work, fit_status(work, status, limit, floor=True))

        refused: Exception | None = None
        for attempt in attempts():
            try:
                return await works.patch_status(
                    work,
                    attempt,
                    precondition="conditions" in attempt and "conditions" not in status,
                )
            except Exception as exc:
                if not is_request_too_large(exc):
                    raise
                refused = exc
        message = (
            f"The status of this Work cannot be written, not even its conditions: the "
            f"control plane refuses it as too large ({refused}). The Work's manifests take "
            f"nearly all of the {STORED_OBJECT_LIMIT // 1024} KiB it stores per object."
        )
        self.events.emit(work, "Warning", names.EVENT_STATUS_TOO_LARGE, message)
        raise StatusTooLargeError(message)

    def emit_events(
        self,
        work: JsonDict,
        previous: dict[int, JsonDict],
        entries: list[JsonDict],
        health_problems: dict[int, str] | None = None,
    ) -> None:
        """The Events of a manifestStatuses write, whichever controller writes it."""
        events = status_events(
            previous, entries, health_problems, self.interpreter.interprets_health
        )
        for event in events:
            self.events.emit(work, event.type, event.reason, event.message)


def _with_truncation(work: JsonDict, fitted: Fitted) -> JsonDict:
    """The fitted status, its conditions saying what is left out (StatusTruncated set, or
    removed once everything fits again). Conditions the caller did not write are taken from the
    Work, and written only when StatusTruncated changes."""
    status = dict(fitted.status)
    given = status.get("conditions")
    conditions = copy.deepcopy(given) if isinstance(given, list) else copy_conditions(work)
    if fitted.truncated:
        changed = set_condition(conditions, truncated_condition(fitted))
    else:
        present = find(conditions, CONDITION_STATUS_TRUNCATED)
        changed = present is not None
        if present is not None:
            conditions.remove(present)
    if changed or isinstance(given, list):
        status["conditions"] = conditions
    return status
