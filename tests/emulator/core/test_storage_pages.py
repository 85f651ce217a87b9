"""Storage reads in key order: lists and the snapshots that paged LISTs read, against a
brute-force rewind of every event."""

from __future__ import annotations

import random

from emulator.storage import Storage

GR = ("", "configmaps")


def cm(namespace: str, name: str, value: str = "0") -> dict[str, object]:
    return {"metadata": {"namespace": namespace, "name": name}, "data": {"v": value}}


def key(obj: dict[str, object]) -> str:
    meta = obj["metadata"]
    assert isinstance(meta, dict)
    return f"{meta['namespace']}/{meta['name']}"


def test_snapshot_pages_match_a_rewind_of_every_change() -> None:
    rng = random.Random(34)
    storage = Storage(history_size=100000)
    namespaces = ["a", "a-b", "b"]
    states: list[tuple[int, dict[tuple[str, str], dict[str, object]]]] = []
    live: dict[tuple[str, str], dict[str, object]] = {}
    for step in range(600):
        ns = rng.choice(namespaces)
        name = f"cm-{rng.randrange(80)}"
        if (ns, name) in live and rng.random() < 0.4:
            storage.delete(GR, ns, name)
            del live[(ns, name)]
        elif (ns, name) in live:
            live[(ns, name)] = storage.update(GR, cm(ns, name, str(step))).obj
        else:
            live[(ns, name)] = storage.create(GR, cm(ns, name, str(step))).obj
        if step % 50 == 0:
            states.append((storage.revision, dict(live)))
    for rv, then in states:
        for namespace in (None, *namespaces):
            expected = [then[k] for k in sorted(then) if namespace is None or k[0] == namespace]
            assert storage.snapshot(GR, namespace, rv) == expected
            starts = (expected[0], expected[len(expected) // 2], expected[-1]) if expected else ()
            for start in starts:
                after = key(start)
                rest = [o for o in expected if key(o) > after]
                assert storage.snapshot(GR, namespace, rv, after=after) == rest
    current = [live[k] for k in sorted(live)]
    assert storage.list(GR) == current
    assert storage.list(GR, "a-b") == [o for o in current if key(o).startswith("a-b/")]
    assert storage.list(GR, "missing") == []
