from __future__ import annotations

import copy
from typing import Any

from emulator.apply import server_side_apply, track_update

from .deploymeta import META, deployment

T0 = "2024-05-01T10:00:00Z"
T1 = "2024-05-01T10:01:00Z"
T2 = "2024-05-01T10:02:00Z"


def update(
    old: dict[str, Any] | None, new: dict[str, Any], manager: str, now: str = T1, **kw: Any
) -> dict[str, Any]:
    new = copy.deepcopy(new)
    track_update(old, new, manager=manager, meta=META, api_version="apps/v1", now=now, **kw)
    return new


def changed(obj: dict[str, Any], **spec: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["spec"].update(spec)
    return out


def by_manager(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["manager"]: e for e in obj["metadata"].get("managedFields", [])}


def test_create_owns_every_field_it_set() -> None:
    obj = update(None, deployment(), "kubectl-create", now=T0)
    [entry] = obj["metadata"]["managedFields"]
    assert entry["manager"] == "kubectl-create"
    assert entry["operation"] == "Update"
    assert entry["apiVersion"] == "apps/v1"
    assert entry["time"] == T0
    assert entry["fieldsType"] == "FieldsV1"
    fv1 = entry["fieldsV1"]
    assert "f:name" not in fv1.get("f:metadata", {})
    assert fv1["f:spec"]["f:replicas"] == {}
    assert fv1["f:spec"]["f:selector"] == {}
    containers = fv1["f:spec"]["f:template"]["f:spec"]["f:containers"]
    assert containers['k:{"name":"web"}'] == {".": {}, "f:image": {}, "f:name": {}}


def test_labels_added_on_create_carry_the_dot() -> None:
    cfg = deployment()
    cfg["metadata"]["labels"] = {"app": "web"}
    obj = update(None, cfg, "kubectl-create")
    assert obj["metadata"]["managedFields"][0]["fieldsV1"]["f:metadata"] == {
        "f:labels": {".": {}, "f:app": {}}
    }


def test_update_takes_changed_fields_from_other_managers() -> None:
    obj = update(None, deployment(), "kubectl-create", now=T0)
    obj = update(obj, changed(obj, replicas=4), "kubectl-scale", now=T1)
    managers = by_manager(obj)
    assert managers["kubectl-scale"]["fieldsV1"] == {"f:spec": {"f:replicas": {}}}
    assert "f:replicas" not in managers["kubectl-create"]["fieldsV1"]["f:spec"]
    assert managers["kubectl-create"]["time"] == T0


def test_same_manager_accumulates_fields_and_time_moves() -> None:
    obj = update(None, deployment(), "ctl", now=T0)
    obj = update(obj, changed(obj, paused=True), "ctl", now=T2)
    [entry] = obj["metadata"]["managedFields"]
    assert entry["time"] == T2
    assert entry["fieldsV1"]["f:spec"]["f:paused"] == {}
    assert entry["fieldsV1"]["f:spec"]["f:replicas"] == {}


def test_no_change_keeps_entries_and_times() -> None:
    obj = update(None, deployment(), "ctl", now=T0)
    again = update(obj, obj, "other", now=T2)
    assert again["metadata"]["managedFields"] == obj["metadata"]["managedFields"]


def test_removed_fields_leave_every_set_and_empty_entries_go() -> None:
    obj = update(None, deployment(), "creator", now=T0)
    obj = update(obj, changed(obj, paused=True), "pauser", now=T1)
    unpaused = copy.deepcopy(obj)
    del unpaused["spec"]["paused"]
    obj = update(obj, unpaused, "creator", now=T2)
    assert "pauser" not in by_manager(obj)


def test_apply_owned_fields_move_to_the_updater() -> None:
    obj = server_side_apply(
        None,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {"replicas": 1, "paused": False},
        },
        manager="alice",
        force=False,
        meta=META,
        api_version="apps/v1",
        now=T0,
    )
    obj = update(obj, changed(obj, replicas=9), "hpa", now=T1)
    managers = by_manager(obj)
    assert managers["alice"]["fieldsV1"] == {"f:spec": {"f:paused": {}}}
    assert managers["hpa"]["fieldsV1"] == {"f:spec": {"f:replicas": {}}}
    # Stamped by the change it made; the applier's time is that of its own last change.
    assert (managers["alice"]["time"], managers["hpa"]["time"]) == (T0, T1)


def test_untracked_objects_stay_untracked_on_update() -> None:
    live = deployment()
    live["metadata"]["uid"] = "u"
    out = update(live, changed(live, replicas=2), "ctl")
    assert "managedFields" not in out["metadata"]


def test_empty_managed_fields_in_the_request_reset_them() -> None:
    obj = update(None, deployment(), "ctl", now=T0)
    new = changed(obj, replicas=5)
    new["metadata"]["managedFields"] = []
    assert "managedFields" not in update(obj, new, "ctl")["metadata"]
    new["metadata"]["managedFields"] = [{}]
    assert "managedFields" not in update(obj, new, "ctl")["metadata"]


def test_managed_fields_in_the_request_replace_the_stored_ones() -> None:
    obj = update(None, deployment(), "ctl", now=T0)
    new = changed(obj, replicas=5)
    new["metadata"]["managedFields"] = [
        {
            "manager": "someone",
            "operation": "Update",
            "apiVersion": "apps/v1",
            "time": T0,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:paused": {}}},
        }
    ]
    out = update(obj, new, "ctl", now=T1)
    assert set(by_manager(out)) == {"someone", "ctl"}
    assert by_manager(out)["ctl"]["fieldsV1"] == {"f:spec": {"f:replicas": {}}}


def test_subresource_writes_ignore_managed_fields_in_the_request() -> None:
    obj = update(None, deployment(), "ctl", now=T0)
    new = copy.deepcopy(obj)
    new["status"] = {"replicas": 1}
    new["metadata"]["managedFields"] = []
    out = update(obj, new, "kcm", subresource="status", ignore=[("spec",)])
    entry = next(e for e in out["metadata"]["managedFields"] if e["manager"] == "kcm")
    assert entry["subresource"] == "status"
    assert entry["fieldsV1"] == {"f:status": {".": {}, "f:replicas": {}}}
    assert "ctl" in by_manager(out)


def test_ignored_fields_are_not_owned() -> None:
    obj = update(None, deployment(), "ctl", now=T0, ignore=[("status",)])
    new = changed(obj, paused=True)
    new["status"] = {"replicas": 3}
    out = update(obj, new, "other", ignore=[("status",)])
    assert by_manager(out)["other"]["fieldsV1"] == {"f:spec": {"f:paused": {}}}


def test_update_managers_are_capped_into_ancient_changes() -> None:
    obj = update(None, deployment(), "m00", now="2024-05-01T09:00:00Z")
    for i in range(1, 12):
        new = copy.deepcopy(obj)
        new["metadata"].setdefault("labels", {})[f"l{i}"] = "x"
        obj = update(obj, new, f"m{i:02d}", now=f"2024-05-01T10:{i:02d}:00Z")
    managers = by_manager(obj)
    assert len(managers) == 10
    assert "ancient-changes" in managers
    assert {"m00", "m01", "m02"}.isdisjoint(managers)
    ancient = managers["ancient-changes"]
    assert ancient["operation"] == "Update"
    assert ancient["time"] == "2024-05-01T10:02:00Z"
    labels = ancient["fieldsV1"]["f:metadata"]["f:labels"]
    assert "f:l1" in labels
    assert "f:l2" in labels
    assert "f:replicas" in ancient["fieldsV1"]["f:spec"]


def test_updates_at_another_version_are_separate_entries() -> None:
    obj = update(None, deployment(), "ctl", now=T0)
    new = changed(obj, paused=True)
    track_update(obj, new, manager="ctl", meta=META, api_version="apps/v1beta2", now=T1)
    versions = sorted(e["apiVersion"] for e in new["metadata"]["managedFields"])
    assert versions == ["apps/v1", "apps/v1beta2"]
