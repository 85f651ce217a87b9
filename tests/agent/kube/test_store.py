"""Store: its revision moves with every change of its content, and only then."""

from __future__ import annotations

from agent.kube.store import Store


def _cm(name: str, value: str = "a") -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "ns"}, "data": {"k": value}}


def test_revision_moves_with_every_change_and_only_then() -> None:
    store = Store()
    seen = [store.revision]
    store.put(_cm("one"))
    store.put(_cm("one", "b"))
    store.delete("ns/one")
    store.replace([_cm("two")])
    seen.append(store.revision)
    assert seen[1] > seen[0]
    revisions = []
    for change in (
        lambda: store.put(_cm("three")),
        lambda: store.put(_cm("three", "b")),
        lambda: store.delete("ns/three"),
        lambda: store.replace([]),
    ):
        before = store.revision
        change()
        revisions.append(store.revision > before)
    assert revisions == [True, True, True, True]
    # Reads, and deleting what is not there, change nothing.
    before = store.revision
    store.list()
    store.get("ns/two")
    store.delete("ns/absent")
    store.add_indexer("by-value", lambda obj: [str(obj.get("data"))])
    assert store.revision == before
