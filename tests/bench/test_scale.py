"""bench.scale's pure parts: the changes made while the agent is down, and the share of Works
reported out of the order they came in."""

from __future__ import annotations

from agent.kube.resources import CONFIGMAPS, DEPLOYMENTS
from bench.agent_latency import _out_of_order, _WorkTracker
from bench.scale import _edit, _looks_edited


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
