"""The deletion guard's share (Works being deleted of all this cluster's Works) is kept by an
index of the Works store as the Works change, so a deletion costs the same at 20 or 20,000
Works; it must count what a walk over the Works would."""

from __future__ import annotations

import random
from typing import Any

from agent.controllers.execution.deletion_guard import DELETING, SHARE_INDEX, STANDING, share_of
from agent.karmada import collected, names
from agent.kube.store import Store

JsonDict = dict[str, Any]


def work(name: str, *, deleting: bool, ours: bool, suppressed: bool) -> JsonDict:
    meta: JsonDict = {"name": name, "namespace": "karmada-es-member1"}
    if ours:
        meta["finalizers"] = [names.EXECUTION_CONTROLLER_FINALIZER]
    if deleting:
        meta["deletionTimestamp"] = "2026-11-28T09:00:00Z"
    if suppressed:
        meta["labels"] = {collected.PROPAGATION_INSTRUCTION_LABEL: collected.PROPAGATION_SUPPRESSED}
    return {"metadata": meta}


def walked(store: Store) -> tuple[int, int]:
    deleting = total = 0
    for item in store:
        if collected.is_suppressed(item):
            continue
        total += 1
        meta = item["metadata"]
        if meta.get("deletionTimestamp") and names.EXECUTION_CONTROLLER_FINALIZER in (
            meta.get("finalizers") or []
        ):
            deleting += 1
    return deleting, total


def indexed(store: Store) -> tuple[int, int]:
    deleting = store.index_size(SHARE_INDEX, DELETING)
    return deleting, deleting + store.index_size(SHARE_INDEX, STANDING)


def test_the_indexed_share_counts_what_a_walk_over_the_works_counts() -> None:
    rng = random.Random(34)
    store = Store()
    store.put(work("before-the-index", deleting=True, ours=True, suppressed=False))
    store.add_indexer(SHARE_INDEX, share_of)
    for step in range(2000):
        name = f"work-{rng.randrange(60)}"
        if rng.random() < 0.2:
            store.delete(f"karmada-es-member1/{name}")
        else:
            store.put(
                work(
                    name,
                    deleting=rng.random() < 0.4,
                    ours=rng.random() < 0.8,
                    suppressed=rng.random() < 0.1,
                )
            )
        assert indexed(store) == walked(store), f"step {step}"
    store.replace([work("only", deleting=False, ours=True, suppressed=False)])
    assert indexed(store) == walked(store) == (0, 1)


def test_a_report_of_our_own_and_a_deletion_of_another_finalizer_count_as_they_should() -> None:
    assert share_of(work("r", deleting=True, ours=True, suppressed=True)) == []
    assert share_of(work("d", deleting=True, ours=True, suppressed=False)) == [DELETING]
    assert share_of(work("o", deleting=True, ours=False, suppressed=False)) == [STANDING]
    assert share_of(work("s", deleting=False, ours=True, suppressed=False)) == [STANDING]
