"""Objects something on the member keeps undoing: put back at once at a human pace, re-applied
on a per-object backoff once it is a fight, and reported.

A round is one of our writes undone: the object deleted, or changed to something else, by
someone other than this agent, whatever the cause (a garbage collector deleting an object whose
owner is gone, another controller, a person); drift.py tells. Rounds are put back at once while
they come at a human pace. From ROUNDS rounds within WINDOW seconds on, the object is
contested: each further re-apply waits a backoff (BACKOFF_BASE seconds, doubling up to
BACKOFF_MAX) and its Work says so (Applied=False naming the object and what undoes it, one
Warning Event ReapplyThrottled; the metrics karmada_agent_contested_objects and
karmada_agent_object_contests) instead of fighting at full speed. A contest ends once the object
has stayed as we wrote it for QUIET seconds after a re-apply, or when the Work changes.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from agent.karmada import names
from agent.kube.backoff import Backoff
from agent.kube.clock import REAL_CLOCK, Clock

from .drift import ObjectKey

JsonDict = dict[str, Any]

ROUNDS = 5
WINDOW = 5.0
BACKOFF_BASE = 1.0
BACKOFF_MAX = 300.0
QUIET = 10.0
EVENT_REAPPLY_THROTTLED = names.EVENT_REAPPLY_THROTTLED


@dataclass
class Contest:
    """The rounds of one member object. `contested_since` is set once they came too fast."""

    work: str
    generation: object
    cause: str = ""
    rounds: deque[float] = field(default_factory=deque)
    last_round: float = 0.0
    last_applied: float | None = None
    contested_since: float | None = None
    rounds_to_contest: int = 0
    backoff: Backoff = field(
        default_factory=lambda: Backoff(initial=BACKOFF_BASE, cap=BACKOFF_MAX, jitter=0.0)
    )
    next_attempt: float = 0.0
    # The Warning Event is recorded by the reconcile that reports the contest first.
    reported: bool = False

    @property
    def contested(self) -> bool:
        return self.contested_since is not None

    def message(self) -> str:
        """Why the object is re-applied with backoff; the same for the whole contest, so that
        the Work's condition does not change with every round."""
        return (
            f"undone {self.rounds_to_contest} times within {WINDOW:.0f}s ({self.cause}); "
            f"re-applied with backoff (up to {BACKOFF_MAX:.0f}s) instead of at once"
        )


def undo_cause(event_type: str, obj: JsonDict, ours: str) -> str:
    """What undid a write of the field manager `ours`, as far as the watch event tells."""
    meta = obj.get("metadata") or {}
    if event_type != "DELETED":
        writer = last_writer(obj, ours)
        return f"changed on the member by {writer}" if writer else "changed on the member"
    owners = [
        f"{ref.get('kind')} {ref.get('name')} (uid {ref.get('uid')})"
        for ref in meta.get("ownerReferences") or []
        if isinstance(ref, dict)
    ]
    if not owners:
        return "deleted on the member"
    return (
        f"deleted on the member; its ownerReferences name {', '.join(owners)}, and the "
        f"member's garbage collector deletes an object whose owners do not exist"
    )


def last_writer(obj: JsonDict, ours: str) -> str | None:
    """The field manager that wrote the object last, other than `ours` (from managedFields)."""
    entries = [
        entry
        for entry in (obj.get("metadata") or {}).get("managedFields") or []
        if isinstance(entry, dict) and entry.get("manager") not in (None, ours)
    ]
    if not entries:
        return None
    latest = max(entries, key=lambda entry: str(entry.get("time") or ""))
    return str(latest["manager"])


class Contention:
    def __init__(self, *, clock: Clock = REAL_CLOCK, metrics: Any = None) -> None:
        self.clock = clock
        self.metrics = metrics
        self._objects: dict[ObjectKey, Contest] = {}

    def undone(self, key: ObjectKey, work: str, generation: object, cause: str) -> float:
        """A write of `key` (applied for Work `work` at `generation`) was undone; returns how
        long to wait before putting it back (0: at once)."""
        now = self.clock.now()
        self._prune(now)
        contest = self._objects.get(key)
        if contest is None or contest.work != work or contest.generation != generation:
            contest = Contest(work, generation)
            self._objects[key] = contest
        if not contest.contested:
            contest.cause = cause  # kept for the whole contest, as its message says it
        contest.last_round = now
        contest.rounds.append(now)
        while contest.rounds and contest.rounds[0] < now - WINDOW:
            contest.rounds.popleft()
        if contest.contested_since is None:
            if len(contest.rounds) < ROUNDS:
                return 0.0
            contest.contested_since = now
            contest.rounds_to_contest = len(contest.rounds)
            self._count(started=True)
        wait = contest.backoff.next()
        contest.next_attempt = now + wait
        return wait

    def contest(self, key: ObjectKey, generation: object) -> Contest | None:
        """The object's contest while it lasts (None: no fight, or over: quiet since our last
        re-apply, or the Work changed)."""
        contest = self._objects.get(key)
        if contest is None or not contest.contested:
            return None
        now = self.clock.now()
        quiet = contest.last_applied is not None and contest.last_applied > contest.last_round
        if contest.generation != generation or (quiet and now - contest.last_round >= QUIET):
            del self._objects[key]
            self._count()
            return None
        return contest

    def wait(self, contest: Contest) -> float:
        """Seconds until the contested object may be re-applied."""
        return max(contest.next_attempt - self.clock.now(), 0.0)

    def until_settled(self, contest: Contest) -> float:
        """Seconds until the contest is over if nothing undoes the object meanwhile."""
        return max(contest.last_round + QUIET - self.clock.now(), 0.0)

    def applied(self, key: ObjectKey) -> None:
        """Our write of `key` stands (not undone while it was in flight)."""
        contest = self._objects.get(key)
        if contest is not None:
            contest.last_applied = self.clock.now()

    def forget_work(self, work: str) -> None:
        for key in [k for k, c in self._objects.items() if c.work == work]:
            del self._objects[key]
        self._count()

    @property
    def contested(self) -> int:
        return sum(1 for c in self._objects.values() if c.contested)

    def _prune(self, now: float) -> None:
        """Forget objects whose rounds were at a human pace and are over."""
        stale = [
            key
            for key, c in self._objects.items()
            if not c.contested and c.last_round < now - WINDOW
        ]
        for key in stale:
            del self._objects[key]

    def _count(self, *, started: bool = False) -> None:
        try:
            self.metrics.contested_objects.set(self.contested)
            if started:
                self.metrics.object_contests.inc()
        except AttributeError:
            pass  # metrics without these (tests' stand-ins)
