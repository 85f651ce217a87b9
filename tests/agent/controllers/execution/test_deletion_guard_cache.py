"""The deletion guard's WorkDeletionHeld condition is written over the Cluster as the shared
Cluster cache holds it: a late watch event must not make that cache forget a condition we
wrote (the hold would then never be cleared)."""

from __future__ import annotations

from typing import Any

from agent.controllers.execution.deletion_guard import CONDITION_DELETION_HELD
from agent.karmada.conditions import find
from agent.resources import CLUSTERS
from tests.agent.controllers.harness import CLUSTER, HeldEvents, eventually, running_pair

JsonDict = dict[str, Any]


def held_status(cluster: JsonDict) -> str | None:
    condition = find((cluster.get("status") or {}).get("conditions"), CONDITION_DELETION_HELD)
    return None if condition is None else str(condition.get("status"))


async def test_a_late_cluster_event_does_not_keep_a_released_hold_on_the_cluster() -> None:
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        guard, watch = pair.execution.guard, pair.execution.cluster
        assert await watch.wait_synced(10)
        # The Cluster watch lags: another writer's change, then the echo of our condition,
        # come after the answer to our write.
        events = HeldEvents(watch.reflector, lambda _e: True)
        cluster = await pair.karmada.get(CLUSTERS, CLUSTER)
        cluster["metadata"].setdefault("labels", {})["edited"] = "yes"
        await pair.karmada.replace(CLUSTERS, cluster)
        guard._held["held"] = guard._clock.now() + 600.0  # a deletion held after an outage
        await guard._write_condition()
        assert held_status(await pair.karmada.get(CLUSTERS, CLUSTER)) == "True"
        await events.arrived(2)
        events.release(until=lambda _e: True)  # the other writer's change: older than ours
        guard.release("held")
        assert guard._publisher is not None
        await guard._publisher
        events.release()
        await eventually(
            lambda: pair.karmada.get(CLUSTERS, CLUSTER),
            lambda c: held_status(c) == "False",
            what="the hold cleared on the Cluster",
        )
