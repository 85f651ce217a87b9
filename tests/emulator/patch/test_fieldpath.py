from __future__ import annotations

import pytest

from emulator import fieldpath as fp


def test_fields_v1_round_trip_and_shape() -> None:
    paths = {
        ("f:spec", "f:replicas"),
        ("f:spec", "f:containers", 'k:{"name":"b"}'),
        ("f:spec", "f:containers", 'k:{"name":"b"}', "f:image"),
        ("f:spec", "f:containers", 'k:{"name":"a"}'),
        ("f:metadata", "f:finalizers", 'v:"x"'),
        ("f:metadata", "f:labels"),
        ("f:metadata", "f:labels", "f:app"),
    }
    doc = fp.to_fields_v1(paths)
    assert doc == {
        "f:metadata": {"f:finalizers": {'v:"x"': {}}, "f:labels": {".": {}, "f:app": {}}},
        "f:spec": {
            "f:containers": {'k:{"name":"a"}': {}, 'k:{"name":"b"}': {".": {}, "f:image": {}}},
            "f:replicas": {},
        },
    }
    assert list(doc["f:spec"]) == ["f:containers", "f:replicas"]
    assert fp.from_fields_v1(doc) == paths


def test_element_order_fields_before_keys_before_values() -> None:
    pes = ['v:"a"', 'k:{"port":10}', "f:z", 'k:{"port":9}', "f:a", "v:1"]
    assert sorted(pes, key=fp.element_sort_key) == [
        "f:a",
        "f:z",
        'k:{"port":9}',
        'k:{"port":10}',
        "v:1",
        'v:"a"',
    ]


@pytest.mark.parametrize(
    ("path", "text"),
    [
        (("f:spec", "f:replicas"), ".spec.replicas"),
        (("f:spec", "f:c", 'k:{"name":"web"}', "f:image"), '.spec.c[name="web"].image'),
        (("f:p", 'k:{"containerPort":80,"protocol":"TCP"}'), '.p[containerPort=80,protocol="TCP"]'),
        (("f:metadata", "f:finalizers", 'v:"a"'), '.metadata.finalizers[="a"]'),
    ],
)
def test_path_strings(path: fp.Path, text: str) -> None:
    assert fp.to_string(path) == text


def test_malformed_fields_v1_is_rejected() -> None:
    with pytest.raises(ValueError, match="invalid path element"):
        fp.from_fields_v1({"spec": {}})


def test_iterate_members_before_subtrees() -> None:
    paths = {("f:b", "f:x"), ("f:a",), ("f:b",), ("f:c",)}
    assert list(fp.iterate(paths)) == [("f:a",), ("f:b",), ("f:c",), ("f:b", "f:x")]
