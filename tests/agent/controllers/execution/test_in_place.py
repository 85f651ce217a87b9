"""What counts as "already applied" (execution/in_place.py): every difference an apply would
undo makes the object look different; only other managers' additions do not."""

from __future__ import annotations

import copy
from typing import Any

from agent.controllers.execution.in_place import (
    Verified,
    already_applied,
    holds,
    still_in_place,
    touched_since_applied,
)
from agent.kube.resources import CONFIGMAPS

JsonDict = dict[str, Any]
OURS = {"manager": "karmada-agent", "operation": "Apply", "time": "2026-01-01T00:00:00Z"}
DESIRED: JsonDict = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {
        "name": "web",
        "namespace": "default",
        "labels": {"karmada.io/managed": "true"},
        "annotations": {"work.karmada.io/name": "web"},
    },
    "spec": {
        "replicas": 2,
        "paused": False,
        "template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}},
    },
}


def live(**changes: Any) -> JsonDict:
    obj = copy.deepcopy(DESIRED)
    obj["metadata"].update(resourceVersion="7", uid="u", managedFields=[dict(OURS)])
    obj["metadata"]["labels"]["other"] = "x"  # another manager's label
    obj["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = "IfNotPresent"
    obj["spec"]["strategy"] = {"type": "RollingUpdate"}  # a default
    obj["status"] = {"replicas": 2}
    for path, value in changes.items():
        target = obj
        *parents, last = path.split("__")
        for key in parents:
            target = target[key]
        if value is None:
            target.pop(last, None)
        else:
            target[last] = value
    return obj


def applied(obj: JsonDict | None) -> bool:
    return already_applied(
        DESIRED, obj, field_manager="karmada-agent", take_over_from=("karmada-agent",)
    )


def test_an_object_with_defaults_and_others_additions_is_in_place() -> None:
    assert applied(live())


def test_every_difference_an_apply_would_undo_is_seen() -> None:
    assert not applied(None)  # deleted
    assert not applied(live(spec__replicas=3))  # edited
    assert not applied(live(spec__replicas=None))  # a field removed
    assert not applied(live(spec__paused=0))  # false is not 0
    assert not applied(live(metadata__labels={"other": "x"}))  # our label removed
    containers = [{"name": "web", "image": "nginx:1.27"}, {"name": "sidecar", "image": "s"}]
    assert not applied(live(spec__template__spec__containers=containers))
    assert not applied(live(metadata__deletionTimestamp="2026-01-01T00:00:00Z"))


def test_an_object_not_applied_by_us_or_still_written_by_upstream_is_applied() -> None:
    update = {"manager": "karmada-agent", "operation": "Update"}
    assert not applied(live(metadata__managedFields=[{"manager": "kubectl", "operation": "Apply"}]))
    assert not applied(live(metadata__managedFields=[dict(OURS), update]))
    status = {**update, "subresource": "status"}
    assert applied(live(metadata__managedFields=[dict(OURS), status]))


def test_holds_compares_values_not_types_loosely() -> None:
    assert holds({"a": None}, {})
    assert not holds({"a": None}, {"a": 1})
    assert holds({"a": [1, {"b": 2}]}, {"a": [1, {"b": 2, "c": 3}], "d": 4})
    assert not holds({"a": [1]}, {"a": [1, 2]})
    assert not holds({"a": "1"}, {"a": 1})
    assert not holds({"a": {"b": 1}}, {"a": "b"})


def touched(*entries: JsonDict, **changes: Any) -> bool:
    return touched_since_applied(
        live(metadata__managedFields=list(entries), **changes), "karmada-agent"
    )


def test_a_write_by_someone_else_after_our_apply_is_a_cheap_signal_of_drift() -> None:
    later = "2026-01-01T00:00:01Z"
    assert not touched(OURS)
    assert not touched(OURS, {"manager": "kubectl", "operation": "Update", "time": OURS["time"]})
    assert touched(OURS, {"manager": "kubectl", "operation": "Update", "time": later})
    assert touched(OURS, {"manager": "karmada-agent", "operation": "Update", "time": later})
    assert touched(OURS, {"manager": "kubectl", "operation": "Apply", "time": later})
    assert touched(OURS, {"manager": "kubectl", "operation": "Update"})  # no time: who knows
    # The member's controllers reporting status say nothing about what we applied.
    status = {"manager": "kcm", "operation": "Update", "subresource": "status", "time": later}
    assert not touched(OURS, status)
    scale = {"manager": "kubectl", "operation": "Update", "subresource": "scale", "time": later}
    assert touched(OURS, scale)
    assert touched({"manager": "kubectl", "operation": "Update", "time": later})  # not ours
    assert touched(OURS, metadata__deletionTimestamp=later)


def test_a_work_found_in_place_is_taken_at_the_versions_seen_and_only_once() -> None:
    work = {"metadata": {"name": "w", "uid": "u", "resourceVersion": "5", "generation": 1}}
    key = (CONFIGMAPS, "default", "web")
    verified = Verified()
    verified.remember(work, {key: "7"})
    found = verified.take(work)
    assert still_in_place(found, key, live())
    assert not still_in_place(found, key, live(metadata__resourceVersion="8"))
    assert not still_in_place(found, (CONFIGMAPS, "default", "other"), live())
    assert not still_in_place(found, key, None)
    assert verified.take(work) == {}  # once
    verified.remember(work, {key: "7"})
    assert verified.take({"metadata": {**work["metadata"], "resourceVersion": "6"}}) == {}
    verified.remember(work, {key: "7"})
    verified.forget("w")
    assert verified.take(work) == {}
