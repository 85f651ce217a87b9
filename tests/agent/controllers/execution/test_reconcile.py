"""ExecutionController.reconcile, one row per exit, on fake sources (the Works, the Cluster, the
records) and a fake applier; the emulator tests beside this one hold the same paths against an
API server.

Each row gives the Work in the cache (or none), whether the Cluster is Ready, what the apply
comes to, and whether the status write fails; and expects what the reconcile returns or
raises, the status written, the Events, and whether the Work was recorded and applied.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

import pytest

from agent.context import AgentContext
from agent.controllers.execution.apply import Outcome
from agent.controllers.execution.contention import EVENT_REAPPLY_THROTTLED, Contest
from agent.controllers.execution.controller import ExecutionController, WorkSyncError
from agent.controllers.execution.in_place import Verified
from agent.karmada import names
from agent.karmada.conditions import new_condition
from agent.karmada.work import applied_message, dispatching_condition
from agent.kube.controller import Result, TerminalError
from agent.kube.errors import ApiError, from_status
from agent.kube.store import Store
from agent.options import Options
from agent.sources.member_objects import MemberObjects
from agent.sources.works import merge_patch

from ..harness import CLUSTER, EXEC_NS, StubMetrics, configmap, karmada_work

JsonDict = dict[str, Any]
NAME = "w"


# --- the fakes ---------------------------------------------------------------------------------


class NotWatched:
    """What the controller's declaration (`watches`) asks of a source; never started here."""

    def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def wait_synced(self, timeout: float | None = None) -> bool:
        return True


class FakeWorks(NotWatched):
    """The Works cache: `get` from a dict; a status write merges into it (or fails)."""

    namespace = EXEC_NS

    def __init__(self, works: list[JsonDict]) -> None:
        self.objects = {w["metadata"]["name"]: w for w in works}
        # What the deletion guard indexes (no outage here: its share is never asked for).
        self.reflector = SimpleNamespace(store=Store())
        self.written: list[JsonDict] = []
        self.fail_writes = False
        self.write_error = {"code": 500, "reason": "InternalError", "message": "write failed"}

    def get(self, name: str) -> JsonDict | None:
        return self.objects.get(name)

    def names(self) -> list[str]:
        return list(self.objects)

    def add_handler(self, handler: object) -> Callable[[], None]:
        return lambda: None

    async def patch_status(
        self, work: JsonDict, status: JsonDict, *, precondition: bool = False
    ) -> JsonDict:
        if self.fail_writes:
            raise from_status(self.write_error)
        self.written.append(copy.deepcopy(status))
        name = work["metadata"]["name"]
        updated = {**work, "status": merge_patch(work.get("status") or {}, status)}
        self.objects[name] = updated
        return updated


@dataclass
class FakeCluster(NotWatched):
    ready: bool = True
    terminating: bool = False
    on_ready_callbacks: list[Callable[[], None]] = field(default_factory=list)

    def on_ready(self, callback: Callable[[], None]) -> Callable[[], None]:
        self.on_ready_callbacks.append(callback)
        return lambda: None

    def turn_ready(self) -> None:
        self.ready = True
        for callback in self.on_ready_callbacks:
            callback()


@dataclass
class FakeRecords:
    saved: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    async def save(self, work: JsonDict) -> None:
        self.saved.append(work["metadata"]["name"])

    async def delete(self, name: str) -> None:
        self.deleted.append(name)


@dataclass
class FakeEvents:
    recorded: list[tuple[str, str]] = field(default_factory=list)

    def emit(self, obj: JsonDict, type_: str, reason: str, message: str) -> None:
        self.recorded.append((type_, reason))


class FakeInterpreter:
    def interprets_health(self, api_version: str, kind: str) -> bool:
        return False


@dataclass
class FakeApplier:
    outcome: Outcome
    applied: int = 0
    verified: Verified = field(default_factory=Verified)

    async def apply_all(self, work: JsonDict) -> Outcome:
        self.applied += 1
        return self.outcome


@dataclass
class FakeDeletion:
    """Deletion has its own tests (test_deletion.py): here, only that it is handed the Work."""

    reconciled: list[str] = field(default_factory=list)

    async def reconcile(self, work: JsonDict) -> Result | None:
        self.reconciled.append(work["metadata"]["name"])
        return Result(requeue_after=7.0)


@dataclass
class Fakes:
    controller: ExecutionController
    works: FakeWorks
    records: FakeRecords
    events: FakeEvents
    applier: FakeApplier
    deletion: FakeDeletion


def fakes(work: JsonDict | None, *, ready: bool, outcome: Outcome) -> Fakes:
    works = FakeWorks([work] if work is not None else [])
    records, events = FakeRecords(), FakeEvents()
    options = Options(cluster_name=CLUSTER)
    sources = type(
        "FakeSources",
        (),
        {
            "works": works,
            "cluster": FakeCluster(ready=ready),
            "records": records,
            "interpreter": FakeInterpreter(),
            "interpreter_config": (),
            "member_objects": MemberObjects(cast(Any, None), options),
            "link": None,
        },
    )()
    ctx = AgentContext(
        options=options,
        cluster_name=CLUSTER,
        karmada=cast(Any, None),
        member=cast(Any, None),
        karmada_mapper=cast(Any, None),
        member_mapper=cast(Any, None),
        events=cast(Any, events),
        metrics=cast(Any, StubMetrics()),
        sources=cast(Any, sources),
    )
    controller = ExecutionController(ctx)
    applier, deletion = FakeApplier(outcome), FakeDeletion()
    controller.applier = cast(Any, applier)
    controller.deletion.reconcile = deletion.reconcile  # type: ignore[method-assign]
    return Fakes(controller, works, records, events, applier, deletion)


# --- the Works and outcomes of the rows --------------------------------------------------------


def work(**changes: Any) -> JsonDict:
    obj = karmada_work(NAME, [configmap("cfg")])
    obj["metadata"].update(uid="uid-1", generation=1, resourceVersion="1")
    for key, value in changes.items():
        if key == "suspend":
            obj["spec"]["suspendDispatching"] = value
        elif key == "deleting":
            obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        elif key == "status":
            obj["status"] = value
    return obj


ENTRY = {
    "identifier": {
        "ordinal": 0,
        "group": "",
        "version": "v1",
        "kind": "ConfigMap",
        "resource": "configmaps",
        "namespace": "default",
        "name": "cfg",
    },
    "health": "Healthy",
}


def applied() -> Outcome:
    return Outcome(
        total=1,
        succeeded=1,
        applied={cast(Any, ("configmaps", "default", "cfg"))},
        statuses={0: ENTRY},
    )


def failed(*, retryable: bool) -> Outcome:
    outcome = Outcome(total=1, retryable=retryable)
    outcome.errors.append((0, "ConfigMap default/cfg: refused by the member cluster: bad"))
    return outcome


def contested() -> Outcome:
    outcome = Outcome(total=1, applied={cast(Any, ("configmaps", "default", "cfg"))})
    contest = Contest(work=NAME, generation=1, cause="deleted", rounds_to_contest=3)
    outcome.contested(0, "ConfigMap default/cfg", contest, 12.5)
    return outcome


def already_applied() -> JsonDict:
    """The status of a Work this agent applied and reported before."""
    applied_ok = new_condition(
        names.WORK_APPLIED,
        "True",
        names.REASON_APPLIED_SUCCESSFUL,
        applied_message(1, 1, []),
    )
    return {
        "conditions": [
            {**dispatching_condition(work()), "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {**applied_ok, "lastTransitionTime": "2026-01-01T00:00:00Z"},
        ],
        "manifestStatuses": [ENTRY],
    }


def conditions_written(written: list[JsonDict]) -> list[dict[str, str]]:
    """(type: status) of the conditions of each status write."""
    return [{c["type"]: c["status"] for c in w.get("conditions") or []} for w in written]


# --- the table ---------------------------------------------------------------------------------


@dataclass
class Row:
    id: str
    work: JsonDict | None
    outcome: Outcome = field(default_factory=applied)
    ready: bool = True
    write_fails: bool = False
    # The status write answered 404: the Work is gone.
    write_finds_gone: bool = False
    returns: Result | None = None
    raises: type[Exception] | None = None
    writes: list[dict[str, str]] = field(default_factory=list)
    first_statuses: bool = False
    events: list[tuple[str, str]] = field(default_factory=list)
    recorded: bool = False
    applies: int = 0
    check: Callable[[Fakes], None] | None = None


DISPATCHING = ("Normal", names.EVENT_WORK_DISPATCHING)

ROWS = [
    Row(
        "gone: bookkeeping forgotten, record dropped",
        work=None,
        check=lambda f: (
            f.records.deleted == [NAME] or pytest.fail(f"record not dropped: {f.records.deleted}")
        ),
    ),
    Row(
        "deleting: handed to deletion, its result returned",
        work=work(deleting=True),
        returns=Result(requeue_after=7.0),
        check=lambda f: f.deletion.reconciled == [NAME] or pytest.fail("deletion not called"),
    ),
    Row(
        "suspended: Dispatching=False written and recorded, nothing applied",
        work=work(suspend=True),
        writes=[{names.WORK_DISPATCHING: "False"}],
        events=[DISPATCHING],
        recorded=True,
    ),
    Row(
        "cluster not Ready: Dispatching written, nothing applied or recorded",
        work=work(),
        ready=False,
        writes=[{names.WORK_DISPATCHING: "True"}],
        events=[DISPATCHING],
    ),
    Row(
        "applied: Applied=True with the first manifestStatuses, recorded, SyncSucceed",
        work=work(),
        writes=[{names.WORK_DISPATCHING: "True", names.WORK_APPLIED: "True"}],
        first_statuses=True,
        events=[DISPATCHING, ("Normal", names.EVENT_SYNC_SUCCEED)],
        recorded=True,
        applies=1,
    ),
    Row(
        "applied again, status unchanged: no write, recorded, SyncSucceed",
        work=work(status=already_applied()),
        events=[("Normal", names.EVENT_SYNC_SUCCEED)],
        recorded=True,
        applies=1,
    ),
    Row(
        "only contested objects: requeued after their backoff, one Warning per contest",
        work=work(),
        outcome=contested(),
        returns=Result(requeue_after=12.5),
        writes=[{names.WORK_DISPATCHING: "True", names.WORK_APPLIED: "False"}],
        events=[DISPATCHING, ("Warning", EVENT_REAPPLY_THROTTLED)],
        recorded=True,
        applies=1,
    ),
    Row(
        "a failure retrying can fix: Applied=False, SyncFailed, retried",
        work=work(),
        outcome=failed(retryable=True),
        raises=WorkSyncError,
        writes=[{names.WORK_DISPATCHING: "True", names.WORK_APPLIED: "False"}],
        events=[DISPATCHING, ("Warning", names.EVENT_SYNC_FAILED)],
        applies=1,
    ),
    Row(
        "only manifests that must change failed: Applied=False, SyncFailed, not retried",
        work=work(),
        outcome=failed(retryable=False),
        raises=TerminalError,
        writes=[{names.WORK_DISPATCHING: "True", names.WORK_APPLIED: "False"}],
        events=[DISPATCHING, ("Warning", names.EVENT_SYNC_FAILED)],
        applies=1,
    ),
    Row(
        "the Work is being deleted while it is applied: the apply stops, nothing written",
        work=work(),
        outcome=Outcome(total=1, stopped=True),
        events=[DISPATCHING],
        applies=1,
    ),
    Row(
        "the status write finds the Work gone (404): nothing recorded or retried",
        work=work(),
        write_finds_gone=True,
        events=[DISPATCHING],
        applies=1,
        check=lambda f: not f.controller._unreported or pytest.fail("kept for a retry"),
    ),
    Row(
        "the status write fails: the error raised, nothing recorded",
        work=work(),
        write_fails=True,
        raises=ApiError,
        events=[DISPATCHING],
        applies=1,
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
async def test_reconcile(row: Row) -> None:
    f = fakes(row.work, ready=row.ready, outcome=row.outcome)
    f.works.fail_writes = row.write_fails or row.write_finds_gone
    if row.write_finds_gone:
        f.works.write_error = {"code": 404, "reason": "NotFound", "message": "gone"}
    if row.raises is not None:
        with pytest.raises(row.raises):
            await f.controller.reconcile(NAME)
    else:
        assert await f.controller.reconcile(NAME) == row.returns
    assert conditions_written(f.works.written) == row.writes
    assert any("manifestStatuses" in w for w in f.works.written) == row.first_statuses
    assert f.events.recorded == row.events
    assert f.records.saved == ([NAME] if row.recorded else [])
    assert f.applier.applied == row.applies
    if row.check is not None:
        row.check(f)


async def test_a_retry_after_a_failed_status_write_writes_the_status_only() -> None:
    """The exit of a failed status write, followed: what was applied stands, and the retry
    writes the status without applying again."""
    f = fakes(work(), ready=True, outcome=applied())
    f.works.fail_writes = True
    with pytest.raises(ApiError):
        await f.controller.reconcile(NAME)
    f.works.fail_writes = False
    assert await f.controller.reconcile(NAME) is None
    assert f.applier.applied == 1
    assert conditions_written(f.works.written) == [
        {names.WORK_DISPATCHING: "True", names.WORK_APPLIED: "True"}
    ]
    assert f.records.saved == [NAME]


async def test_works_waiting_for_the_cluster_are_told_once_per_episode(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A hundred Works find the Cluster not Ready: one INFO line when the first starts waiting,
    one with their count when it turns Ready (each Work at DEBUG only); then every Work is
    enqueued again and applied; the next episode is told again."""
    caplog.set_level(logging.INFO)
    count = 100
    f = fakes(None, ready=False, outcome=applied())
    for i in range(count):
        obj = work()
        obj["metadata"]["name"] = f"w{i}"
        f.works.objects[f"w{i}"] = obj
    f.controller.watches.subscribe()
    cluster = cast(FakeCluster, f.controller.cluster)

    def infos() -> list[tuple[str, object]]:
        return [
            (r.getMessage(), getattr(r, "agent_log_fields", {}).get("works"))
            for r in caplog.records
            if r.levelno >= logging.INFO and "Ready" in r.getMessage()
        ]

    for i in range(count):
        assert await f.controller.reconcile(f"w{i}") is None
    await f.controller.reconcile("w0")  # a Work waiting twice counts once
    assert f.applier.applied == 0
    assert infos() == [("member cluster is not Ready; Works wait until it is", None)]

    cluster.turn_ready()
    assert infos()[1:] == [("Works waited for the Cluster to turn Ready", count)]
    assert len(f.controller.queue) == count

    caplog.clear()
    cluster.ready = False
    await f.controller.reconcile("w1")
    cluster.turn_ready()
    assert infos() == [
        ("member cluster is not Ready; Works wait until it is", None),
        ("Works waited for the Cluster to turn Ready", 1),
    ]


async def test_the_cluster_turning_ready_keeps_works_found_in_place_behind() -> None:
    """After an outage the Works that waited for Ready go first: the Cluster turning Ready
    queues every Work, but those deferred as applied before (a start's order) stay behind."""
    f = fakes(None, ready=False, outcome=applied())
    for i in range(4):
        obj = work()
        obj["metadata"]["name"] = f"w{i}"
        f.works.objects[f"w{i}"] = obj
        f.controller.queue.add(f"w{i}")
    f.controller.watches.subscribe()
    cluster = cast(FakeCluster, f.controller.cluster)
    queue = f.controller.queue
    assert queue.defer(["w0", "w1", "w2"], held=True) == 3
    assert await queue.get() == "w3"
    assert await f.controller.reconcile("w3") is None  # waits for Ready
    queue.done("w3")

    cluster.turn_ready()
    assert [queue.is_deferred(f"w{i}") for i in range(3)] == [True, True, True]
    assert await queue.get() == "w3"


async def test_a_new_interpreter_configuration_compares_works_found_in_place_again() -> None:
    """What an apply makes of a Work may change with the interpreter's configuration: the
    start's word that a Work's objects are in place no longer holds."""
    f = fakes(None, ready=True, outcome=applied())
    obj = work()
    f.works.objects[obj["metadata"]["name"]] = obj
    f.controller.applier.verified.remember(obj, {})
    assert len(f.controller.applier.verified) == 1
    f.controller._interpreter_changed()
    assert len(f.controller.applier.verified) == 0
    assert len(f.controller.queue) == 1


async def test_a_cluster_being_removed_is_told_once_not_per_work(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The Cluster being removed and not Ready: each Work's deletion leaves its member objects
    in place and drops the finalizer; the log says so once, not once per Work."""
    caplog.set_level(logging.INFO)
    f = fakes(None, ready=False, outcome=applied())
    cluster = cast(FakeCluster, f.controller.cluster)
    cluster.terminating = True
    deletion = f.controller.deletion
    del deletion.reconcile  # the real one, not the fakes' stand-in
    finalized: list[str] = []

    async def remove_finalizer(work: JsonDict) -> None:
        finalized.append(work["metadata"]["name"])

    deletion._remove_finalizer = remove_finalizer  # type: ignore[method-assign]
    for i in range(50):
        obj = work()
        obj["metadata"].update(
            name=f"w{i}",
            deletionTimestamp="2026-01-01T00:00:00Z",
            finalizers=[names.EXECUTION_CONTROLLER_FINALIZER],
        )
        assert await deletion.reconcile(obj) is None
    assert len(finalized) == 50
    told = [r for r in caplog.records if "cluster is being removed" in r.getMessage()]
    assert len(told) == 1
