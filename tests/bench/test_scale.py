"""bench.scale's pure parts: the changes made while the agent is down, the restarts of one run,
the share of Works reported out of the order they came in, when each kind of change was
corrected."""

from __future__ import annotations

import argparse
import itertools
from typing import Any, cast

import pytest

from agent.kube.client import KubeClient
from agent.kube.errors import NotFoundError
from agent.kube.resources import CONFIGMAPS, DEPLOYMENTS
from bench.agent_latency import _out_of_order, _WorkTracker, member_object, patience
from bench.scale import _ChangePlan, _CorrectedByKind, _edit, _looks_edited, restart_kinds


def test_out_of_order_counts_works_reported_before_an_earlier_one() -> None:
    tracker = _WorkTracker()
    names = ["a", "b", "c", "d"]
    tracker.applied.update(a=1.0, b=2.0, c=3.0, d=4.0)
    assert _out_of_order(tracker, names) == 0.0
    tracker.applied.update(a=5.0)  # every later Work overtook the first
    assert _out_of_order(tracker, names) == 0.75


def test_an_edit_changes_a_field_the_work_sets_and_is_seen_until_undone() -> None:
    for gvr, obj in (
        (CONFIGMAPS, {"data": {"index": "3"}}),
        (DEPLOYMENTS, {"spec": {"replicas": 2}}),
    ):
        assert not _looks_edited(gvr, obj)
        edit = _edit(gvr)
        edited = {key: {**obj[key], **edit[key]} for key in obj}
        assert _looks_edited(gvr, edited)


def test_restart_kinds_read_the_signals_in_order() -> None:
    assert restart_kinds("TERM,KILL,offline") == ["TERM", "KILL", "TERM+offline"]
    assert restart_kinds("KILL+offline") == ["KILL+offline"]
    for wrong in ("", "HUP", "TERM,kill"):
        with pytest.raises(argparse.ArgumentTypeError):
            restart_kinds(wrong)


def test_each_restart_changes_works_no_other_restart_touches() -> None:
    plan = _ChangePlan(20000, [80, 80, 80])
    picks = [plan.pick(60) for _ in range(3)]
    flat = [i for p in picks for i in p]
    assert len(set(flat)) == len(flat) == 180
    assert all(0 <= i < 20000 for i in flat)
    # Spread evenly from the last Work backwards over the whole set.
    assert flat[0] == 19999
    assert {a - b for a, b in itertools.pairwise(flat)} == {20000 // 180}
    assert [plan.new_index() for _ in range(3)] == [20000, 20001, 20002]
    with pytest.raises(SystemExit):
        _ChangePlan(10, [80])


def test_patience_grows_with_the_works() -> None:
    assert patience(200) == 300.0
    assert patience(200, 600) == 600.0
    assert patience(20000) == 4000.0


class FakeMember:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}

    async def get(self, gvr: Any, name: str, namespace: str | None = None) -> dict[str, Any]:
        if name not in self.objects:
            raise NotFoundError({"code": 404, "reason": "NotFound"})
        return self.objects[name]


async def test_each_kind_of_change_is_timed_when_it_is_corrected() -> None:
    """deleted: 1 (a ConfigMap), edited: 3, changed: 5 (a ConfigMap each), new: one Work."""
    member, tracker = FakeMember(), _WorkTracker()
    changed = {"deleted": [1], "edited": [3], "changed": [5], "new_works": ["bench-new-0"]}
    names = {kind: member_object(changed[kind][0])[1] for kind in ("deleted", "edited", "changed")}
    member.objects[names["edited"]] = {"data": {"index": "edited"}}
    member.objects[names["changed"]] = {"data": {"index": "5"}}
    by_kind = _CorrectedByKind(cast(KubeClient, member), changed, tracker, since=0.0, offline=False)
    assert not await by_kind.check()
    assert by_kind.after == {}
    member.objects[names["deleted"]] = {"data": {"index": "1"}}
    tracker.applied_now.add("bench-new-0")
    assert not await by_kind.check()
    assert set(by_kind.after) == {"deleted", "new_works"}
    first = dict(by_kind.after)
    member.objects[names["edited"]] = {"data": {"index": "3"}}
    member.objects[names["changed"]] = {"data": {"changed": "yes"}}
    assert await by_kind.check()
    assert set(by_kind.after) == {"deleted", "new_works", "edited", "changed"}
    assert {k: by_kind.after[k] for k in first} == first  # the first time each was seen
    offline = _CorrectedByKind(cast(KubeClient, member), changed, tracker, since=0.0, offline=True)
    assert await offline.check()
    assert set(offline.after) == {"deleted", "edited"}
