from __future__ import annotations

from typing import Any

import pytest

from emulator.errors import ApiError
from emulator.patch import apply_merge_patch

DOC: dict[str, Any] = {
    "metadata": {"name": "a", "labels": {"x": "1", "y": "2"}},
    "spec": {"list": [1, 2], "obj": {"k": "v"}, "n": 1},
}


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        ({}, DOC),
        (
            {"metadata": {"labels": {"x": None}}},
            {**DOC, "metadata": {"name": "a", "labels": {"y": "2"}}},
        ),
        (
            {"metadata": {"labels": {"z": "3"}}},
            {**DOC, "metadata": {"name": "a", "labels": {"x": "1", "y": "2", "z": "3"}}},
        ),
        # lists are replaced, not merged
        ({"spec": {"list": [3]}}, {**DOC, "spec": {"list": [3], "obj": {"k": "v"}, "n": 1}}),
        ({"spec": None}, {"metadata": DOC["metadata"]}),
        # an object replacing a scalar loses its nulls
        (
            {"spec": {"n": {"a": 1, "b": None}}},
            {**DOC, "spec": {"list": [1, 2], "obj": {"k": "v"}, "n": {"a": 1}}},
        ),
        # a new object is added without its nulls, recursively
        ({"status": {"a": None, "b": {"c": None, "d": 1}}}, {**DOC, "status": {"b": {"d": 1}}}),
        # a scalar replaces an object
        ({"spec": {"obj": "flat"}}, {**DOC, "spec": {"list": [1, 2], "obj": "flat", "n": 1}}),
        # deleting what is absent is fine
        ({"nothing": None}, DOC),
    ],
)
def test_merge_patch(patch: dict[str, Any], expected: dict[str, Any]) -> None:
    assert apply_merge_patch(DOC, patch) == expected
    assert DOC["metadata"]["labels"] == {"x": "1", "y": "2"}


@pytest.mark.parametrize("patch", [None, 5, "x", True])
def test_non_object_patch_is_400(patch: Any) -> None:
    with pytest.raises(ApiError) as caught:
        apply_merge_patch(DOC, patch)
    assert caught.value.status() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Invalid JSON Patch",
        "reason": "BadRequest",
        "code": 400,
    }


def test_array_patch_is_invalid_patch_field() -> None:
    with pytest.raises(ApiError) as caught:
        apply_merge_patch(DOC, [1])
    err = caught.value
    assert err.code == 422
    assert err.reason == "Invalid"
    assert err.message.startswith(' "" is invalid: patch: Invalid value: "[1]"')
    assert err.details is not None
    assert err.details["causes"][0]["field"] == "patch"
    assert err.details["causes"][0]["reason"] == "FieldValueInvalid"
