"""A cache another controller reads is written by its Reflector only: from its watch, and from
the answers to our writes through `Reflector.writing`, which keeps it from going back to an
older object (agent.kube.reflector). This test keeps new code from putting objects into a
store directly (a write's answer put there would be taken back by the next late watch event,
or take the cache back itself)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCANNED = ("agent", "bootstrap")
# The store itself and the one module that writes to it.
WRITERS = {"agent/kube/store.py", "agent/kube/reflector.py"}
STORE_WRITES = {"put", "delete", "replace"}
# Reflector methods that once fed a write's answer into the cache unchecked.
RETIRED = {"observe"}


def store_of(node: ast.expr) -> bool:
    """`node` names a store: `store`, `x.store`, or a Store's private items."""
    if isinstance(node, ast.Name):
        return node.id in ("store", "_store")
    return isinstance(node, ast.Attribute) and node.attr in ("store", "_store")


def offences(source: str, name: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source, name)):
        if not isinstance(node, ast.Attribute):
            continue
        where = f"{name}:{node.lineno}"
        if node.attr in STORE_WRITES and store_of(node.value):
            found.append(f"{where}: {node.attr} on a store")
        elif node.attr == "_items" and store_of(node.value):
            found.append(f"{where}: a store's items")
        elif (
            node.attr in RETIRED
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "reflector"
        ):
            found.append(f"{where}: reflector.{node.attr}")
    return found


def test_only_the_reflector_writes_to_a_store() -> None:
    found = [
        offence
        for top in SCANNED
        for path in sorted((ROOT / top).rglob("*.py"))
        if str(path.relative_to(ROOT)) not in WRITERS
        for offence in offences(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert found == [], "write through Reflector.writing (its answered), not the store:\n" + (
        "\n".join(found)
    )


def test_the_check_finds_what_it_looks_for() -> None:
    code = (
        "def f(works, store, answer):\n"
        "    works.reflector.store.put(answer)\n"
        "    store.delete('ns/a')\n"
        "    works.reflector.observe(answer)\n"
        "    works.reflector.store._items['ns/a'] = answer\n"
    )
    assert sorted(o.split(": ", 1)[1] for o in offences(code, "sample.py")) == [
        "a store's items",
        "delete on a store",
        "put on a store",
        "reflector.observe",
    ]
