from __future__ import annotations

import copy
from typing import Any

import pytest

from emulator.apply import LAST_APPLIED, server_side_apply, track_update
from emulator.errors import ApiError

from .deploymeta import META, deployment

T0 = "2024-05-01T10:00:00Z"
T1 = "2024-05-01T10:01:00Z"
T2 = "2024-05-01T10:02:00Z"
T3 = "2024-05-01T10:03:00Z"


def apply(
    live: dict[str, Any] | None,
    cfg: dict[str, Any],
    manager: str = "alice",
    *,
    force: bool = False,
    now: str = T1,
    **kw: Any,
) -> dict[str, Any]:
    return server_side_apply(
        live, cfg, manager=manager, force=force, meta=META, api_version="apps/v1", now=now, **kw
    )


def update(
    old: dict[str, Any] | None, new: dict[str, Any], manager: str, now: str = T1, **kw: Any
) -> dict[str, Any]:
    new = copy.deepcopy(new)
    track_update(old, new, manager=manager, meta=META, api_version="apps/v1", now=now, **kw)
    return new


def entries(obj: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {
        (e["manager"], e["operation"], e.get("subresource", "")): e
        for e in obj["metadata"].get("managedFields", [])
    }


def fields(obj: dict[str, Any], manager: str, op: str = "Apply", sub: str = "") -> Any:
    return entries(obj)[(manager, op, sub)]["fieldsV1"]


def minimal(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": spec,
    }


def container_cfg(*items: dict[str, Any]) -> dict[str, Any]:
    return minimal(template={"spec": {"containers": list(items)}})


# --- creation and the recorded shape ---------------------------------------------------


def test_create_by_apply_records_one_entry_with_the_applied_fields() -> None:
    obj = apply(None, deployment(), now=T0)
    assert obj["spec"]["replicas"] == 1
    assert obj["metadata"]["managedFields"] == [
        {
            "manager": "alice",
            "operation": "Apply",
            "apiVersion": "apps/v1",
            "time": T0,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:spec": {
                    "f:replicas": {},
                    "f:selector": {},
                    "f:template": {
                        "f:metadata": {"f:labels": {"f:app": {}}},
                        "f:spec": {
                            "f:containers": {
                                'k:{"name":"web"}': {".": {}, "f:image": {}, "f:name": {}}
                            }
                        },
                    },
                }
            },
        }
    ]


def test_name_namespace_and_type_meta_are_never_owned() -> None:
    obj = apply(None, minimal(replicas=2))
    fv1 = fields(obj, "alice")
    assert fv1 == {"f:spec": {"f:replicas": {}}}


def test_reapplying_the_same_config_changes_nothing_not_even_the_time() -> None:
    first = apply(None, deployment(), now=T0)
    again = apply(first, deployment(), now=T2)
    assert again == first


def test_system_metadata_in_the_config_does_not_replace_live_values() -> None:
    live = apply(None, deployment())
    live["metadata"].update(uid="u-1", resourceVersion="7", creationTimestamp=T0)
    cfg = deployment()
    cfg["metadata"].update(uid="other", resourceVersion="1", creationTimestamp=T3)
    out = apply(live, cfg)
    assert out["metadata"]["uid"] == "u-1"
    assert out["metadata"]["resourceVersion"] == "7"
    assert out["metadata"]["creationTimestamp"] == T0


# --- sharing, conflicts and force ------------------------------------------------------


def test_two_appliers_of_the_same_value_share_the_field() -> None:
    obj = apply(None, minimal(replicas=3), "alice", now=T0)
    obj = apply(obj, minimal(replicas=3), "bob", now=T1)
    assert fields(obj, "alice") == {"f:spec": {"f:replicas": {}}}
    assert fields(obj, "bob") == {"f:spec": {"f:replicas": {}}}
    # The object did not change, so kube stamps no time on bob's entry.
    assert "time" not in entries(obj)[("bob", "Apply", "")]


def test_entries_are_ordered_apply_first_then_by_time_then_manager() -> None:
    obj = apply(None, minimal(replicas=3), "zed", now=T0)
    obj = update(obj, _with(obj, paused=True), "early-updater", now=T1)
    obj = apply(obj, minimal(minReadySeconds=1), "bob", now=T2)
    obj = apply(obj, minimal(progressDeadlineSeconds=9), "amy", now=T2)
    assert [(e["manager"], e["operation"]) for e in obj["metadata"]["managedFields"]] == [
        ("zed", "Apply"),
        ("amy", "Apply"),
        ("bob", "Apply"),
        ("early-updater", "Update"),
    ]


def test_changing_another_appliers_value_is_a_conflict_naming_it() -> None:
    obj = apply(None, minimal(replicas=3), "alice")
    with pytest.raises(ApiError) as caught:
        apply(obj, minimal(replicas=5), "bob")
    assert caught.value.status() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'Apply failed with 1 conflict: conflict with "alice": .spec.replicas',
        "reason": "Conflict",
        "code": 409,
        "details": {
            "causes": [
                {
                    "reason": "FieldManagerConflict",
                    "message": 'conflict with "alice"',
                    "field": ".spec.replicas",
                }
            ]
        },
    }


def test_force_moves_ownership_to_the_applier() -> None:
    obj = apply(None, minimal(replicas=3, minReadySeconds=1), "alice")
    obj = apply(obj, minimal(replicas=5), "bob", force=True, now=T2)
    assert obj["spec"]["replicas"] == 5
    assert fields(obj, "alice") == {"f:spec": {"f:minReadySeconds": {}}}
    assert fields(obj, "bob") == {"f:spec": {"f:replicas": {}}}


def test_force_removes_an_entry_left_empty() -> None:
    obj = apply(None, minimal(replicas=3), "alice")
    obj = apply(obj, minimal(replicas=5), "bob", force=True)
    assert ("alice", "Apply", "") not in entries(obj)


def test_multiple_conflicts_are_grouped_by_manager() -> None:
    obj = apply(None, minimal(replicas=3, paused=False), "alice", now=T0)
    obj = update(obj, _with(obj, minReadySeconds=4), "kube-controller", now=T1)
    with pytest.raises(ApiError) as caught:
        apply(obj, minimal(replicas=1, paused=True, minReadySeconds=9), "bob", now=T2)
    err = caught.value
    assert err.message == (
        "Apply failed with 3 conflicts: "
        'conflicts with "alice":\n- .spec.paused\n- .spec.replicas\n'
        'conflicts with "kube-controller" using apps/v1:\n- .spec.minReadySeconds'
    )
    assert err.details is not None
    assert [(c["message"], c["field"]) for c in err.details["causes"]] == [
        ('conflict with "alice"', ".spec.paused"),
        ('conflict with "alice"', ".spec.replicas"),
        ('conflict with "kube-controller" using apps/v1', ".spec.minReadySeconds"),
    ]


def _with(obj: dict[str, Any], **spec: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["spec"].update(spec)
    return out


# --- removal of fields the applier stops applying --------------------------------------


def test_dropping_a_field_it_alone_owns_removes_it() -> None:
    obj = apply(None, minimal(replicas=3, minReadySeconds=5), "alice")
    obj = apply(obj, minimal(replicas=3), "alice", now=T2)
    assert "minReadySeconds" not in obj["spec"]
    assert fields(obj, "alice") == {"f:spec": {"f:replicas": {}}}


def test_dropping_a_field_another_applier_also_owns_keeps_it() -> None:
    obj = apply(None, minimal(replicas=3, minReadySeconds=5), "alice")
    obj = apply(obj, minimal(minReadySeconds=5), "bob")
    obj = apply(obj, minimal(replicas=3), "alice", now=T2)
    assert obj["spec"]["minReadySeconds"] == 5
    assert fields(obj, "bob") == {"f:spec": {"f:minReadySeconds": {}}}


def test_dropping_a_field_an_updater_also_owns_keeps_it() -> None:
    obj = apply(None, minimal(replicas=3, minReadySeconds=5), "alice")
    obj = update(obj, _with(obj, minReadySeconds=6), "editor")
    obj = apply(obj, minimal(replicas=3), "alice", now=T2)
    assert obj["spec"]["minReadySeconds"] == 6


def test_fields_nobody_applied_survive_an_appliers_removal() -> None:
    live = apply(None, minimal(replicas=3, minReadySeconds=5), "alice")
    live["spec"]["revisionHistoryLimit"] = 10  # e.g. defaulted by the server
    obj = apply(live, minimal(replicas=3), "alice")
    assert obj["spec"]["revisionHistoryLimit"] == 10


def test_dropping_a_list_item_removes_it_but_keeps_items_of_others() -> None:
    obj = apply(None, container_cfg({"name": "a", "image": "a"}, {"name": "b", "image": "b"}))
    obj = apply(obj, container_cfg({"name": "c", "image": "c"}), "bob")
    obj = apply(obj, container_cfg({"name": "a", "image": "a"}), "alice", now=T2)
    assert [c["name"] for c in obj["spec"]["template"]["spec"]["containers"]] == ["a", "c"]


def test_dropping_a_label_removes_only_that_label() -> None:
    cfg = minimal()
    cfg["metadata"]["labels"] = {"a": "1", "b": "2"}
    obj = apply(None, cfg)
    cfg["metadata"]["labels"] = {"a": "1"}
    obj = apply(obj, cfg, now=T2)
    assert obj["metadata"]["labels"] == {"a": "1"}


# --- lists by their list type ----------------------------------------------------------


def test_containers_merge_by_name_and_each_owner_keeps_its_item() -> None:
    obj = apply(None, container_cfg({"name": "a", "image": "a:1"}), "alice")
    obj = apply(obj, container_cfg({"name": "sidecar", "image": "s:1"}), "bob")
    names = [c["name"] for c in obj["spec"]["template"]["spec"]["containers"]]
    assert names == ["a", "sidecar"]
    bob = fields(obj, "bob")["f:spec"]["f:template"]["f:spec"]["f:containers"]
    assert bob == {'k:{"name":"sidecar"}': {".": {}, "f:image": {}, "f:name": {}}}


def test_conflict_inside_a_keyed_item_names_the_item() -> None:
    obj = apply(None, container_cfg({"name": "a", "image": "a:1"}), "alice")
    with pytest.raises(ApiError) as caught:
        apply(obj, container_cfg({"name": "a", "image": "a:2"}), "bob")
    assert caught.value.details is not None
    assert caught.value.details["causes"][0]["field"] == (
        '.spec.template.spec.containers[name="a"].image'
    )


def test_ports_are_keyed_by_port_and_protocol_with_tcp_default() -> None:
    cfg = container_cfg(
        {"name": "a", "ports": [{"containerPort": 80}, {"containerPort": 53, "protocol": "UDP"}]}
    )
    obj = apply(None, cfg)
    ports = fields(obj, "alice")["f:spec"]["f:template"]["f:spec"]["f:containers"][
        'k:{"name":"a"}'
    ]["f:ports"]
    assert list(ports) == [
        'k:{"containerPort":53,"protocol":"UDP"}',
        'k:{"containerPort":80,"protocol":"TCP"}',
    ]
    other = container_cfg({"name": "a", "ports": [{"containerPort": 80, "protocol": "UDP"}]})
    obj = apply(obj, other, "bob")
    assert [
        p["containerPort"] for p in obj["spec"]["template"]["spec"]["containers"][0]["ports"]
    ] == [
        80,
        53,
        80,
    ]


def test_set_lists_union_with_ownership() -> None:
    cfg = minimal()
    del cfg["spec"]
    cfg["metadata"]["finalizers"] = ["a", "b"]
    obj = apply(None, cfg, "alice")
    cfg["metadata"]["finalizers"] = ["b", "c"]
    obj = apply(obj, cfg, "bob")
    assert obj["metadata"]["finalizers"] == ["a", "b", "c"]
    assert fields(obj, "bob") == {"f:metadata": {"f:finalizers": {'v:"b"': {}, 'v:"c"': {}}}}
    cfg["metadata"]["finalizers"] = ["a"]
    obj = apply(obj, cfg, "alice", now=T2)
    assert obj["metadata"]["finalizers"] == ["a", "b", "c"]  # b is bob's too
    cfg["metadata"]["finalizers"] = ["c"]
    obj = apply(obj, cfg, "bob", now=T3)
    assert obj["metadata"]["finalizers"] == ["a", "c"]


def test_atomic_lists_are_replaced_and_owned_whole() -> None:
    obj = apply(None, container_cfg({"name": "a", "args": ["1", "2"]}), "alice")
    with pytest.raises(ApiError) as caught:
        apply(obj, container_cfg({"name": "a", "args": ["3"]}), "bob")
    assert caught.value.details is not None
    assert caught.value.details["causes"][0]["field"] == (
        '.spec.template.spec.containers[name="a"].args'
    )
    obj = apply(obj, container_cfg({"name": "a", "args": ["3"]}), "bob", force=True)
    assert obj["spec"]["template"]["spec"]["containers"][0]["args"] == ["3"]


def test_atomic_maps_are_owned_whole() -> None:
    obj = apply(None, minimal(selector={"matchLabels": {"a": "1"}}), "alice")
    assert fields(obj, "alice") == {"f:spec": {"f:selector": {}}}
    obj = apply(obj, minimal(selector={"matchLabels": {"b": "2"}}), "alice", now=T2)
    assert obj["spec"]["selector"] == {"matchLabels": {"b": "2"}}


def test_missing_list_key_is_an_error() -> None:
    with pytest.raises(ApiError) as caught:
        apply(None, container_cfg({"image": "x"}))
    assert caught.value.code == 500
    assert caught.value.message == (
        "failed to create typed patch object (default/web; apps/v1, Kind=Deployment): "
        ".spec.template.spec.containers: element 0: associative list with keys has an element "
        'that omits key field "name" (and doesn\'t have default value)'
    )


def test_duplicate_keys_in_config_are_an_error() -> None:
    with pytest.raises(ApiError) as caught:
        apply(None, container_cfg({"name": "a"}, {"name": "a"}))
    assert caught.value.message.endswith(
        '.spec.template.spec.containers: duplicate entries for key [name="a"]'
    )


# --- bad configurations ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda c: c.update(apiVersion="apps/v1beta1"),
            "invalid object type: apps/v1beta1, Kind=Deployment",
        ),
        (lambda c: c.update(kind="StatefulSet"), "invalid object type: apps/v1, Kind=StatefulSet"),
        (lambda c: c["metadata"].update(managedFields=[]), "metadata.managedFields must be nil"),
    ],
)
def test_bad_configuration_is_400(mutate: Any, message: str) -> None:
    live = apply(None, deployment())
    cfg = deployment()
    mutate(cfg)
    with pytest.raises(ApiError) as caught:
        apply(live, cfg)
    assert caught.value.status() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "BadRequest",
        "code": 400,
    }


# --- subresources and ignored fields ---------------------------------------------------


def test_status_subresource_entries_are_separate() -> None:
    obj = apply(None, minimal(replicas=1), "ctl")
    status_cfg = {**minimal(), "status": {"replicas": 1}}
    del status_cfg["spec"]
    obj = apply(obj, status_cfg, "ctl", subresource="status", ignore=[("spec",)])
    assert fields(obj, "ctl") == {"f:spec": {"f:replicas": {}}}
    assert fields(obj, "ctl", sub="status") == {"f:status": {"f:replicas": {}}}
    assert entries(obj)[("ctl", "Apply", "status")]["subresource"] == "status"


def test_ignored_fields_are_neither_owned_nor_contested() -> None:
    live = apply(None, minimal(replicas=1))
    live["status"] = {"replicas": 7}
    live = update(live, _with(live), "status-writer")
    cfg = {**minimal(replicas=1), "status": {"replicas": 2}}
    obj = apply(live, cfg, "alice", ignore=[("status",)])
    assert fields(obj, "alice") == {"f:spec": {"f:replicas": {}}}


# --- interplay with updates -------------------------------------------------------------


def test_before_first_apply_owns_fields_of_untracked_objects() -> None:
    live = deployment()
    live["metadata"]["uid"] = "u"
    with pytest.raises(ApiError) as caught:
        apply(live, minimal(replicas=4), "alice")
    assert caught.value.message == (
        'Apply failed with 1 conflict: conflict with "before-first-apply" using apps/v1: '
        ".spec.replicas"
    )
    obj = apply(live, minimal(replicas=1), "alice")
    assert ("before-first-apply", "Update", "") in entries(obj)


def test_kubectl_client_side_then_server_side_apply_upgrade() -> None:
    created = deployment()
    created["metadata"]["annotations"] = {LAST_APPLIED: '{"spec":{"replicas":1}}\n'}
    obj = update(None, created, "kubectl-client-side-apply", now=T0)
    # Someone scales it with kubectl edit: that field is no longer client-side-apply's.
    obj = update(obj, _with(obj, minReadySeconds=3), "kubectl-edit", now=T1)

    # Another manager applying a new replicas count conflicts with the CSA manager.
    with pytest.raises(ApiError) as caught:
        apply(obj, minimal(replicas=2), "argocd", now=T2)
    assert caught.value.message == (
        'Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using '
        "apps/v1: .spec.replicas"
    )

    # `kubectl apply --server-side` (manager "kubectl") may take over the fields that the
    # last-applied annotation lists...
    upgraded = apply(obj, minimal(replicas=2), "kubectl", now=T2)
    assert upgraded["spec"]["replicas"] == 2
    assert fields(upgraded, "kubectl") == {"f:spec": {"f:replicas": {}}}
    assert upgraded["metadata"]["annotations"][LAST_APPLIED] == (
        '{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web",'
        '"namespace":"default"},"spec":{"replicas":2}}\n'
    )
    # ...but not fields someone else changed since.
    with pytest.raises(ApiError) as caught:
        apply(obj, minimal(minReadySeconds=9), "kubectl", now=T3)
    assert caught.value.message == (
        'Apply failed with 1 conflict: conflict with "kubectl-edit" using apps/v1: '
        ".spec.minReadySeconds"
    )
