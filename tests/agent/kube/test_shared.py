"""Cached objects share their short strings (agent.kube.shared, through Store.prepare)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.kube import shared as shared_module
from agent.kube.shared import SHARED_MAX_LENGTH, shared
from agent.kube.store import Store


def parsed(name: str) -> dict[str, Any]:
    """A new parse each time, as from a response: no string shared with another parse."""
    return json.loads(
        json.dumps(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {
                    "name": name,
                    "labels": {"karmada.io/managed": "true"},
                    "annotations": {"note": "x" * (SHARED_MAX_LENGTH + 1)},
                },
                "spec": {"replicas": 2, "paused": False, "template": {"spec": {
                    "containers": [{"name": "app", "image": "nginx:1.27", "args": ["a", 1]}],
                }}},
                "status": {"conditions": [{"type": "Available", "status": "True"}]},
            }
        )
    )  # fmt: skip


def test_a_shared_copy_is_equal_and_new() -> None:
    obj = parsed("web-1")
    copy = shared(obj)
    assert copy == obj
    assert copy is not obj
    assert copy["metadata"] is not obj["metadata"]


def test_keys_and_short_values_are_one_copy_across_objects() -> None:
    first, second = shared(parsed("web-1")), shared(parsed("web-2"))
    assert next(iter(first["metadata"])) is next(iter(second["metadata"]))
    assert first["kind"] is second["kind"]
    assert (
        first["metadata"]["labels"]["karmada.io/managed"]
        is (second["metadata"]["labels"]["karmada.io/managed"])
    )
    containers = first["spec"]["template"]["spec"]["containers"]
    others = second["spec"]["template"]["spec"]["containers"]
    assert containers[0]["image"] is others[0]["image"]
    assert containers[0]["args"][0] is others[0]["args"][0]


def test_long_values_are_kept_as_parsed() -> None:
    first, second = parsed("web-1"), parsed("web-2")
    long_first = shared(first)["metadata"]["annotations"]["note"]
    long_second = shared(second)["metadata"]["annotations"]["note"]
    assert long_first == long_second
    assert long_first is first["metadata"]["annotations"]["note"]
    assert long_first is not long_second


def test_the_table_starts_again_once_full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shared_module, "TABLE_SIZE", 8)
    monkeypatch.setattr(shared_module, "_table", {})
    for i in range(20):
        assert shared({f"key-{i}": f"value-{i}"}) == {f"key-{i}": f"value-{i}"}
        assert len(shared_module._table) <= 8 + 2


def test_a_store_keeps_the_shared_copy() -> None:
    store = Store(transform=lambda obj: {**obj, "trimmed": True})
    first, second = store.prepare(parsed("web-1")), store.prepare(parsed("web-2"))
    assert first == {**parsed("web-1"), "trimmed": True}
    assert first["apiVersion"] is second["apiVersion"]
