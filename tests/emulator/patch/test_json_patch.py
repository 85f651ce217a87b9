from __future__ import annotations

from typing import Any

import pytest

from emulator.errors import ApiError
from emulator.patch import apply_json_patch

DOC: dict[str, Any] = {
    "metadata": {"name": "a", "labels": {"x": "1", "a/b": "slash", "m~n": "tilde"}},
    "spec": {"list": [1, 2, 3], "obj": {"k": "v"}, "nil": None},
}

# The body kube-apiserver answers for any JSON patch that cannot be applied.
NOT_APPLIED = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "the server rejected our request due to an error in our request",
    "reason": "Invalid",
    "details": {},
    "code": 422,
}


@pytest.mark.parametrize(
    ("ops", "path", "expected"),
    [
        ([{"op": "add", "path": "/spec/new", "value": 5}], ("spec", "new"), 5),
        ([{"op": "add", "path": "/spec/obj/k", "value": "w"}], ("spec", "obj", "k"), "w"),
        ([{"op": "add", "path": "/spec/list/-", "value": 4}], ("spec", "list"), [1, 2, 3, 4]),
        ([{"op": "add", "path": "/spec/list/0", "value": 0}], ("spec", "list"), [0, 1, 2, 3]),
        ([{"op": "add", "path": "/spec/list/3", "value": 9}], ("spec", "list"), [1, 2, 3, 9]),
        ([{"op": "add", "path": "/spec/list/-1", "value": 9}], ("spec", "list"), [1, 2, 3, 9]),
        ([{"op": "remove", "path": "/spec/list/-1"}], ("spec", "list"), [1, 2]),
        ([{"op": "add", "path": "/spec/n"}], ("spec", "n"), None),
        ([{"op": "remove", "path": "/spec/list/1"}], ("spec", "list"), [1, 3]),
        (
            [{"op": "remove", "path": "/metadata/labels/a~1b"}],
            ("metadata", "labels"),
            {"x": "1", "m~n": "tilde"},
        ),
        (
            [{"op": "remove", "path": "/metadata/labels/m~0n"}],
            ("metadata", "labels"),
            {"x": "1", "a/b": "slash"},
        ),
        ([{"op": "replace", "path": "/spec/list/0", "value": 7}], ("spec", "list"), [7, 2, 3]),
        ([{"op": "replace", "path": "/metadata/name", "value": "b"}], ("metadata", "name"), "b"),
        ([{"op": "replace", "path": "/spec/nil", "value": 1}], ("spec", "nil"), 1),
        (
            [{"op": "move", "from": "/spec/obj/k", "path": "/spec/moved"}],
            ("spec",),
            {"list": [1, 2, 3], "obj": {}, "nil": None, "moved": "v"},
        ),
        (
            [{"op": "move", "from": "/spec/list/0", "path": "/spec/list/-"}],
            ("spec", "list"),
            [2, 3, 1],
        ),
        ([{"op": "copy", "from": "/spec/obj", "path": "/spec/copy"}], ("spec", "copy"), {"k": "v"}),
        (
            [
                {"op": "test", "path": "/spec/list", "value": [1, 2, 3]},
                {"op": "replace", "path": "/spec/list", "value": []},
            ],
            ("spec", "list"),
            [],
        ),
        (
            [
                {"op": "test", "path": "/spec/list/0", "value": 1.0},
                {"op": "add", "path": "/spec/t", "value": True},
            ],
            ("spec", "t"),
            True,
        ),
        (
            [
                {"op": "test", "path": "/spec/absent", "value": None},
                {"op": "add", "path": "/spec/t", "value": 1},
            ],
            ("spec", "t"),
            1,
        ),
        (
            [
                {"op": "test", "path": "/spec/nil", "value": None},
                {"op": "add", "path": "/spec/t", "value": 2},
            ],
            ("spec", "t"),
            2,
        ),
    ],
)
def test_operations(ops: list[dict[str, Any]], path: tuple[str, ...], expected: Any) -> None:
    out = apply_json_patch(DOC, ops)
    node: Any = out
    for part in path:
        node = node[part]
    assert node == expected
    assert DOC["spec"]["list"] == [1, 2, 3], "the input must not be modified"


def test_copy_is_deep() -> None:
    out = apply_json_patch(
        DOC,
        [
            {"op": "copy", "from": "/spec/obj", "path": "/spec/copy"},
            {"op": "replace", "path": "/spec/copy/k", "value": "changed"},
        ],
    )
    assert out["spec"]["obj"] == {"k": "v"}
    assert out["spec"]["copy"] == {"k": "changed"}


def test_patch_is_all_or_nothing() -> None:
    with pytest.raises(ApiError):
        apply_json_patch(
            DOC,
            [
                {"op": "replace", "path": "/metadata/name", "value": "b"},
                {"op": "test", "path": "/metadata/name", "value": "a"},
            ],
        )
    assert DOC["metadata"]["name"] == "a"


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "test", "path": "/metadata/name", "value": "other"}],
        [{"op": "test", "path": "/spec/list/0", "value": True}],
        [{"op": "test", "path": "/spec/absent", "value": 1}],
        [{"op": "test", "path": "/spec/nil", "value": 0}],
        [{"op": "remove", "path": "/spec/absent"}],
        [{"op": "remove", "path": "/spec/list/3"}],
        [{"op": "remove", "path": "/no/such/parent"}],
        [{"op": "replace", "path": "/spec/absent", "value": 1}],
        [{"op": "replace", "path": "/spec/list/5", "value": 1}],
        [{"op": "add", "path": "/spec/list/5", "value": 1}],
        [{"op": "add", "path": "/spec/list/x", "value": 1}],
        [{"op": "add", "path": "/missing/child", "value": 1}],
        [{"op": "add", "path": "", "value": {}}],
        [{"op": "move", "from": "/spec/absent", "path": "/spec/b"}],
        [{"op": "copy", "from": "/nope/x", "path": "/spec/b"}],
        [{"op": "move", "path": "/spec/b"}],
        [{"op": "frobnicate", "path": "/spec"}],
        [{"path": "/spec"}],
        [{"op": "add", "value": 1}],
    ],
)
def test_failures_are_422_without_detail(ops: list[dict[str, Any]]) -> None:
    with pytest.raises(ApiError) as caught:
        apply_json_patch(DOC, ops)
    assert caught.value.status() == NOT_APPLIED
    assert caught.value.details == {}


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        ({"op": "add"}, "json: cannot unmarshal object into Go value of type jsonpatch.Patch"),
        ("x", "json: cannot unmarshal string into Go value of type jsonpatch.Patch"),
        (["x"], "json: cannot unmarshal string into Go value of type jsonpatch.Operation"),
    ],
)
def test_undecodable_patch_is_400(ops: Any, message: str) -> None:
    with pytest.raises(ApiError) as caught:
        apply_json_patch(DOC, ops)
    assert caught.value.status() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "BadRequest",
        "code": 400,
    }


def test_empty_patch_returns_a_copy() -> None:
    out = apply_json_patch(DOC, [])
    assert out == DOC
    assert out is not DOC
