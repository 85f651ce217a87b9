"""Who writes a Work's status.manifestStatuses, and when: the hand-off between the execution
and workStatus controllers, in one place.

1. The execution controller writes a Work's first manifestStatuses together with its first
   Applied condition, in one status write, from the answers of its applies (`first_report`).
2. Until then the workStatus controller leaves the Work alone (`awaits_first_report`); the
   Applied condition being written or changing is what sends the Work to it (`handed_over`).
3. From then on the workStatus controller keeps the entries current from the member watches.

Both build an entry the same way (`entry`: the interpreter's reflected status and health) and
record the same Events for a change of the entries (`record_events`); the rules themselves are
agent.karmada.manifest_status.
"""

from __future__ import annotations

from typing import Any

from agent.events import EventRecorder
from agent.interpreter import InterpretError
from agent.karmada import names
from agent.karmada.manifest_status import (
    applied_status,
    by_ordinal,
    is_first_report,
    status_entry,
    status_events,
)
from agent.karmada.status import status_of
from agent.karmada.work import Manifest
from agent.sources.interpreter import AgentInterpreter

JsonDict = dict[str, Any]


def awaits_first_report(work: JsonDict) -> bool:
    """Not applied yet: the execution controller writes the first manifestStatuses together
    with Applied (one status write); the workStatus controller waits for that write."""
    return is_first_report(work)


def handed_over(old: JsonDict, new: JsonDict) -> bool:
    """The Work's Applied condition was written or changed: the statuses of its objects are the
    workStatus controller's to look at (again)."""
    return applied_status(old) != applied_status(new)


class ManifestStatuses:
    def __init__(self, interpreter: AgentInterpreter, events: EventRecorder) -> None:
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

    def first_report(
        self, work: JsonDict, entries: dict[int, JsonDict], health_problems: dict[int, str]
    ) -> JsonDict:
        """What the execution controller adds to its status write once every manifest of `work`
        is applied: the first manifestStatuses (`entries` by ordinal, from the apply answers)
        when nothing has been reported on the Work yet, with their Events; else nothing, the
        workStatus controller keeps them."""
        if not is_first_report(work):
            return {}
        previous = by_ordinal(status_of(work).get("manifestStatuses"))
        ordered = [entries[ordinal] for ordinal in sorted(entries)]
        self.record_events(work, previous, ordered, health_problems)
        return {"manifestStatuses": ordered or None}

    def record_events(
        self,
        work: JsonDict,
        previous: dict[int, JsonDict],
        entries: list[JsonDict],
        health_problems: dict[int, str] | None = None,
    ) -> None:
        """The Events of a manifestStatuses write, whichever controller writes it."""
        for event in status_events(previous, entries, health_problems):
            self.events.record(work, event.type, event.reason, event.message)
