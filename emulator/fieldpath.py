"""Field sets as server-side apply records them (structured-merge-diff's fieldpath).

A path is a tuple of path elements, each already in its FieldsV1 spelling:
`f:<field>` for a struct or map field, `k:<json object>` for an associative-list
item (its key fields, sorted), `v:<json>` for a set-list item and `i:<n>` for an
index. A field set is a plain `set` of such paths; the FieldsV1 document that kube
stores in `managedFields[].fieldsV1` is the same set written as a trie, where a
node that is itself a member and also has children carries a `".": {}` entry.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

Path = tuple[str, ...]


def field(name: str) -> str:
    return "f:" + name


def key(fields: dict[str, Any]) -> str:
    return "k:" + compact_json({k: fields[k] for k in sorted(fields)})


def value(item: Any) -> str:
    return "v:" + compact_json(item)


def compact_json(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


# --- ordering -----------------------------------------------------------------------
# structured-merge-diff orders path elements field < key < value < index, fields by
# name, keys by (name, value) pairs, values by type (numbers, strings, bools, lists,
# maps, null) then value.


def _value_rank(v: Any) -> tuple[Any, ...]:
    if isinstance(v, bool):
        return (2, v)
    if isinstance(v, int | float):
        return (0, v)
    if isinstance(v, str):
        return (1, v)
    if isinstance(v, list):
        return (3, tuple(_value_rank(x) for x in v))
    if isinstance(v, dict):
        return (4, tuple((k, _value_rank(v[k])) for k in sorted(v)))
    return (5,)


def element_sort_key(pe: str) -> tuple[Any, ...]:
    kind, _, rest = pe.partition(":")
    if kind == "f":
        return (0, rest)
    if kind == "k":
        fields = json.loads(rest)
        return (1, tuple((name, _value_rank(fields[name])) for name in sorted(fields)))
    if kind == "v":
        return (2, _value_rank(json.loads(rest)))
    return (3, int(rest) if rest.lstrip("-").isdigit() else 0)


# --- FieldsV1 encoding --------------------------------------------------------------


class _Node:
    __slots__ = ("children", "member")

    def __init__(self) -> None:
        self.member = False
        self.children: dict[str, _Node] = {}


def _trie(paths: Iterable[Path]) -> _Node:
    root = _Node()
    for path in paths:
        node = root
        for pe in path:
            node = node.children.setdefault(pe, _Node())
        node.member = True
    return root


def _emit(node: _Node) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if node.member and node.children:
        out["."] = {}
    for pe in sorted(node.children, key=element_sort_key):
        out[pe] = _emit(node.children[pe])
    return out


def to_fields_v1(paths: Iterable[Path]) -> dict[str, Any]:
    return _emit(_trie(paths))


def from_fields_v1(doc: Any) -> set[Path]:
    """Parse a FieldsV1 document; raises ValueError when it is malformed."""
    out: set[Path] = set()

    def walk(node: Any, prefix: Path) -> None:
        if not isinstance(node, dict):
            raise ValueError(f"expected an object at {to_string(prefix) or '.'}")
        if not node and prefix:
            out.add(prefix)
            return
        for pe, child in node.items():
            if pe == ".":
                if prefix:
                    out.add(prefix)
                continue
            if len(pe) < 2 or pe[1] != ":" or pe[0] not in "fkvi":
                raise ValueError(f"invalid path element {pe!r}")
            walk(child, (*prefix, pe))

    walk(doc, ())
    return out


# --- human-readable paths (conflict messages) ---------------------------------------


def _go_value(v: Any) -> str:
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, int | float):
        return json.dumps(v)
    return compact_json(v)


def element_string(pe: str) -> str:
    kind, _, rest = pe.partition(":")
    if kind == "f":
        return "." + rest
    if kind == "k":
        fields = json.loads(rest)
        return "[" + ",".join(f"{k}={_go_value(fields[k])}" for k in sorted(fields)) + "]"
    if kind == "v":
        return f"[={_go_value(json.loads(rest))}]"
    return f"[{rest}]"


def to_string(path: Path) -> str:
    return "".join(element_string(pe) for pe in path)


# --- set helpers --------------------------------------------------------------------


def iterate(paths: Iterable[Path]) -> Iterator[Path]:
    """Paths in structured-merge-diff's iteration order: at each level the members
    first, then each child's subtree, both sorted by element."""

    def walk(node: _Node, prefix: Path) -> Iterator[Path]:
        ordered = sorted(node.children, key=element_sort_key)
        for pe in ordered:
            if node.children[pe].member:
                yield (*prefix, pe)
        for pe in ordered:
            yield from walk(node.children[pe], (*prefix, pe))

    return walk(_trie(paths), ())


def prefixes(paths: Iterable[Path]) -> set[Path]:
    """Every proper, non-empty prefix of the given paths."""
    out: set[Path] = set()
    for path in paths:
        for i in range(1, len(path)):
            out.add(path[:i])
    return out


def with_named_fields(paths: set[Path]) -> set[Path]:
    """The set plus every field (`f:`) that has a member below it: a struct field
    is owned whenever something inside it is (EnsureNamedFieldsAreMembers). We cannot
    tell struct fields from map keys, so every field counts as named."""
    return paths | {p for p in prefixes(paths) if p[-1].startswith("f:")}


def without_prefixes(paths: set[Path], dropped: Iterable[Path]) -> set[Path]:
    """Drop every path equal to or below one of `dropped` (RecursiveDifference)."""
    roots = set(dropped)
    if not roots:
        return set(paths)
    return {p for p in paths if not any(p[:i] in roots for i in range(1, len(p) + 1))}
