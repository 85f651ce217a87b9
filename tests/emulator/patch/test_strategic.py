from __future__ import annotations

from typing import Any

import pytest

from emulator.errors import ApiError
from emulator.fieldmeta import NoFieldMeta
from emulator.patch import apply_strategic_merge_patch

from .deploymeta import META


def pod_spec(**fields: Any) -> dict[str, Any]:
    return {"spec": {"template": {"spec": fields}}}


def containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = obj["spec"]["template"]["spec"]["containers"]
    return result


LIVE = pod_spec(
    containers=[
        {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
        {"name": "b", "image": "b:1", "ports": [{"containerPort": 80, "protocol": "TCP"}]},
    ],
    volumes=[{"name": "v1", "emptyDir": {}}],
)


def smp(obj: dict[str, Any], patch: Any) -> dict[str, Any]:
    return apply_strategic_merge_patch(obj, patch, META)


def test_merge_list_by_key_merges_matching_item_and_keeps_others() -> None:
    out = smp(LIVE, pod_spec(containers=[{"name": "b", "image": "b:2"}]))
    assert containers(out) == [
        {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
        {"name": "b", "image": "b:2", "ports": [{"containerPort": 80, "protocol": "TCP"}]},
    ]
    assert containers(LIVE)[1]["image"] == "b:1"


def test_new_item_is_appended_and_nested_lists_merge_by_their_keys() -> None:
    out = smp(
        LIVE,
        pod_spec(
            containers=[
                {"name": "a", "env": [{"name": "Y", "value": "2"}]},
                {"name": "c", "image": "c:1"},
            ]
        ),
    )
    # Like apimachinery: patch items not in the live list come before later live-only ones.
    assert [c["name"] for c in containers(out)] == ["a", "c", "b"]
    assert containers(out)[0]["env"] == [{"name": "Y", "value": "2"}, {"name": "X", "value": "1"}]


def test_ports_merge_by_container_port() -> None:
    out = smp(
        LIVE,
        pod_spec(containers=[{"name": "b", "ports": [{"containerPort": 443}]}]),
    )
    assert containers(out)[1]["ports"] == [
        {"containerPort": 443},
        {"containerPort": 80, "protocol": "TCP"},
    ]


def test_patch_delete_directive_in_list_item() -> None:
    out = smp(LIVE, pod_spec(containers=[{"name": "a", "$patch": "delete"}]))
    assert [c["name"] for c in containers(out)] == ["b"]


def test_patch_replace_directive_in_list() -> None:
    out = smp(LIVE, pod_spec(containers=[{"name": "z", "image": "z"}, {"$patch": "replace"}]))
    assert containers(out) == [{"name": "z", "image": "z"}]


def test_patch_replace_directive_in_map() -> None:
    live = {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}}
    out = smp(live, {"spec": {"strategy": {"$patch": "replace", "type": "Recreate"}}})
    assert out["spec"]["strategy"] == {"type": "Recreate"}


def test_patch_delete_directive_in_map_leaves_it_empty() -> None:
    live = {"spec": {"strategy": {"type": "RollingUpdate"}}}
    out = smp(live, {"spec": {"strategy": {"$patch": "delete"}}})
    assert out["spec"]["strategy"] == {}


def test_patch_delete_directive_for_absent_map_adds_nothing() -> None:
    out = smp({"spec": {}}, {"spec": {"strategy": {"$patch": "delete"}}})
    assert out == {"spec": {}}


def test_patch_replace_at_root_replaces_object() -> None:
    out = smp({"a": 1, "b": 2}, {"$patch": "replace", "c": 3})
    assert out == {"c": 3}


def test_null_deletes_and_unmatched_nulls_are_ignored() -> None:
    live = {"metadata": {"labels": {"a": "1", "b": "2"}}}
    out = smp(live, {"metadata": {"labels": {"a": None, "c": None}}})
    assert out == {"metadata": {"labels": {"b": "2"}}}


def test_nulls_inside_new_values_are_dropped() -> None:
    out = smp({}, {"spec": {"x": {"a": None, "b": 1}}})
    assert out == {"spec": {"x": {"b": 1}}}


def test_list_without_merge_strategy_is_replaced() -> None:
    live = pod_spec(containers=[{"name": "a", "args": ["1", "2"]}])
    out = smp(live, pod_spec(containers=[{"name": "a", "args": ["3"]}]))
    assert containers(out)[0]["args"] == ["3"]


def test_unknown_lists_are_replaced_without_schema() -> None:
    live = pod_spec(containers=[{"name": "a"}, {"name": "b"}])
    out = apply_strategic_merge_patch(live, pod_spec(containers=[{"name": "c"}]), NoFieldMeta())
    assert containers(out) == [{"name": "c"}]


def test_primitive_merge_list_is_a_set_union() -> None:
    live = {"metadata": {"finalizers": ["a", "b"]}}
    out = smp(live, {"metadata": {"finalizers": ["c", "a"]}})
    assert out["metadata"]["finalizers"] == ["c", "a", "b"]


def test_delete_from_primitive_list() -> None:
    live = {"metadata": {"finalizers": ["a", "b", "c"]}}
    out = smp(live, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["b", "x"]}})
    assert out["metadata"]["finalizers"] == ["a", "c"]


def test_delete_from_absent_primitive_list_is_a_no_op() -> None:
    out = smp({"metadata": {}}, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}})
    assert out == {"metadata": {}}


def test_delete_from_primitive_list_and_add_together() -> None:
    live = {"metadata": {"finalizers": ["a", "b"]}}
    patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"], "finalizers": ["c"]}}
    assert smp(live, patch)["metadata"]["finalizers"] == ["c", "b"]


def test_retain_keys_clears_other_fields() -> None:
    live = {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}}
    out = smp(live, {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}})
    assert out["spec"]["strategy"] == {"type": "Recreate"}


def test_retain_keys_in_list_item() -> None:
    live = pod_spec(volumes=[{"name": "v", "emptyDir": {}}])
    patch = pod_spec(volumes=[{"name": "v", "$retainKeys": ["name", "secret"], "secret": {"x": 1}}])
    assert smp(live, patch)["spec"]["template"]["spec"]["volumes"] == [
        {"name": "v", "secret": {"x": 1}}
    ]


def test_set_element_order_reorders_merged_list() -> None:
    patch = pod_spec(
        **{
            "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
            "containers": [{"name": "a", "image": "a:2"}],
        }
    )
    out = smp(LIVE, patch)
    assert [c["name"] for c in containers(out)] == ["b", "a"]
    assert containers(out)[1]["image"] == "a:2"


def test_set_element_order_without_list_in_patch() -> None:
    patch = pod_spec(**{"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}]})
    assert [c["name"] for c in containers(smp(LIVE, patch))] == ["b", "a"]


def test_set_element_order_for_primitive_list() -> None:
    live = {"metadata": {"finalizers": ["a", "b"]}}
    patch = {"metadata": {"$setElementOrder/finalizers": ["b", "c", "a"], "finalizers": ["c"]}}
    assert smp(live, patch)["metadata"]["finalizers"] == ["b", "c", "a"]


def test_directives_do_not_leak_into_new_values() -> None:
    patch = {
        "spec": {
            "newthing": {
                "$retainKeys": ["a"],
                "a": 1,
                "$setElementOrder/l": [1],
                "gone": {"$patch": "delete"},
            }
        }
    }
    assert smp({"spec": {}}, patch) == {"spec": {"newthing": {"a": 1}}}


def test_replace_strategy_map_is_replaced() -> None:
    live = {"spec": {"replaced": {"a": 1, "b": 2}}}
    assert smp(live, {"spec": {"replaced": {"c": 3}}})["spec"]["replaced"] == {"c": 3}


def test_type_change_replaces_value() -> None:
    assert smp({"spec": {"x": {"a": 1}}}, {"spec": {"x": "flat"}}) == {"spec": {"x": "flat"}}


def test_patch_merge_tags_without_list_type() -> None:
    live = {"spec": {"tagged": [{"id": 1, "v": "a"}], "taggedSet": ["x"]}}
    out = smp(live, {"spec": {"tagged": [{"id": 1, "v": "b"}, {"id": 2}], "taggedSet": ["y"]}})
    assert out["spec"] == {"tagged": [{"id": 1, "v": "b"}, {"id": 2}], "taggedSet": ["y", "x"]}


def test_null_patch_changes_nothing() -> None:
    assert smp(LIVE, None) == LIVE


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if code == 422:
        body["details"] = {}
    return body


@pytest.mark.parametrize(
    ("patch", "code", "reason", "message"),
    [
        (
            pod_spec(containers=[{"image": "x"}]),
            500,
            "",
            "map: map[image:x] does not contain declared merge key: name",
        ),
        (
            pod_spec(containers=[{"image": "x", "$patch": "delete"}]),
            500,
            "",
            "map: map[$patch:delete image:x] does not contain declared merge key: name",
        ),
        (
            {"spec": {"strategy": {"$patch": "explode"}}},
            500,
            "",
            "unknown patch type: explode in map: map[$patch:explode]",
        ),
        (
            pod_spec(containers=[{"$patch": "merge"}]),
            500,
            "",
            "merging lists cannot yet be specified in the patch",
        ),
        (
            {"metadata": {"finalizers": [1]}},
            500,
            "",
            "list element types are not identical: [[a] [1]]",
        ),
        (
            {"spec": {"strategy": {"$retainKeys": ["type"], "other": 1}}},
            400,
            "BadRequest",
            "invalid patch format of retainKeys",
        ),
        (
            {"spec": {"strategy": {"$retainKeys": "type"}}},
            400,
            "BadRequest",
            "invalid patch format of retainKeys",
        ),
        (
            {"metadata": {"$deleteFromPrimitiveList": ["a"]}},
            400,
            "BadRequest",
            "invalid patch format of primitive list",
        ),
        (
            {"metadata": {"$setElementOrder": ["a"]}},
            400,
            "BadRequest",
            "invalid patch format of setElementOrder list",
        ),
        (
            [1],
            400,
            "BadRequest",
            "json: cannot unmarshal array into Go value of type map[string]interface {}",
        ),
    ],
)
def test_errors(patch: Any, code: int, reason: str, message: str) -> None:
    live = {
        "metadata": {"finalizers": ["a"]},
        "spec": {"strategy": {"type": "RollingUpdate"}},
        **pod_spec(containers=[{"name": "a"}]),
    }
    live["spec"]["strategy"] = {"type": "RollingUpdate"}
    with pytest.raises(ApiError) as caught:
        smp(live, patch)
    assert caught.value.code == code
    assert caught.value.reason == reason
    assert caught.value.message == message
    if code != 500:
        assert caught.value.status() == status(code, reason, message)


def test_set_element_order_mismatch_is_an_error() -> None:
    patch = pod_spec(
        **{
            "$setElementOrder/containers": [{"name": "a"}],
            "containers": [{"name": "b", "image": "x"}],
        }
    )
    with pytest.raises(ApiError) as caught:
        smp(LIVE, patch)
    assert caught.value.code == 500
    assert "doesn't match $setElementOrder list" in caught.value.message


def test_list_of_lists_is_422() -> None:
    with pytest.raises(ApiError) as caught:
        smp({"metadata": {"finalizers": [["a"]]}}, {"metadata": {"finalizers": [["b"]]}})
    assert caught.value.status() == status(
        422, "Invalid", "the server rejected our request due to an error in our request"
    )
