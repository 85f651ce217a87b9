"""Objects something on the member keeps undoing (a garbage collector, a deleted owner, another
controller) are re-applied with backoff and reported, not fought at full speed; edits at a
human pace are still put back at once."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

from prometheus_client import CollectorRegistry

from agent.controllers.execution.contention import (
    BACKOFF_BASE,
    EVENT_REAPPLY_THROTTLED,
    QUIET,
    ROUNDS,
    Contention,
)
from agent.kube.clock import FakeClock
from agent.kube.errors import KubeError
from agent.kube.resources import CONFIGMAPS
from agent.metrics import AgentMetrics
from agent.resources import WORKS
from tests.agent.controllers.harness import (
    APPLIED_FAILED,
    APPLIED_OK,
    applied_message,
    configmap,
    eventually,
    karmada_work,
    running_pair,
)

JsonDict = dict[str, Any]


def owned_by(name: str, owner: JsonDict) -> JsonDict:
    cm = configmap(name)
    cm["metadata"]["ownerReferences"] = [owner]
    return cm


def agent_patches(pair: Any) -> int:
    return int(pair.member.accounting.counts(verb="patch", resource="configmaps"))


async def warnings(pair: Any, name: str, reason: str) -> list[JsonDict]:
    return [
        e
        for e in await pair.events_for(name)
        if e.get("type") == "Warning" and e.get("reason") == reason
    ]


async def test_an_object_the_garbage_collector_keeps_deleting_is_reported_not_fought() -> None:
    ghost = {"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost", "uid": str(uuid.uuid4())}
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        await pair.create_work(karmada_work("orphan", [owned_by("orphan", ghost)]))
        failed = await pair.wait_work("orphan", APPLIED_FAILED, "Applied=False")
        message = applied_message(failed)
        assert "manifest 0 (ConfigMap default/orphan)" in message
        assert f"ownerReferences name ConfigMap ghost (uid {ghost['uid']})" in message
        assert "garbage collector" in message
        assert "re-applied with backoff" in message
        reported_at = agent_patches(pair)
        # A few rounds at full speed, then the backoff: no fight.
        assert reported_at <= ROUNDS + 1
        # The first backoff attempt comes, and the collector deletes the object again.
        await eventually(lambda: _value(agent_patches(pair)), lambda n: n > reported_at)
        assert APPLIED_FAILED(await pair.get_work("orphan"))
        assert len(await warnings(pair, "orphan", EVENT_REAPPLY_THROTTLED)) == 1
        assert pair.execution.contention.contested == 1


async def test_a_deleted_owner_takes_its_dependent_with_it_and_the_work_says_so() -> None:
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        owner = await pair.member_client.create(CONFIGMAPS, configmap("owner"), namespace="default")
        ref = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": "owner",
            "uid": owner["metadata"]["uid"],
        }
        await pair.create_work(karmada_work("owned", [owned_by("owned", ref)]))
        await pair.wait_work("owned", APPLIED_OK)
        await pair.wait_member(CONFIGMAPS, "owned")
        await pair.member_client.delete(CONFIGMAPS, "owner", namespace="default")
        failed = await pair.wait_work("owned", APPLIED_FAILED, "Applied=False")
        assert "ownerReferences name ConfigMap owner" in applied_message(failed)
        assert agent_patches(pair) <= ROUNDS + 2


async def test_another_controller_that_reverts_every_change_is_named_not_fought() -> None:
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        await pair.create_work(karmada_work("fought", [configmap("fought", data={"k": "ours"})]))
        await pair.wait_work("fought", APPLIED_OK)
        stop = asyncio.Event()

        async def other_controller() -> None:
            # Puts its own value back whenever the object differs (with PUT, so that its
            # requests are told apart from the agent's PATCHes).
            while not stop.is_set():
                with contextlib.suppress(KubeError):
                    live = await pair.member_client.get(CONFIGMAPS, "fought", namespace="default")
                    if live["data"] != {"k": "theirs"}:
                        live["data"] = {"k": "theirs"}
                        await pair.member_client.replace(
                            CONFIGMAPS, live, field_manager="other-controller"
                        )
                await asyncio.sleep(0.005)  # the other controller's resync pace

        fighter = asyncio.create_task(other_controller())
        try:
            failed = await pair.wait_work("fought", APPLIED_FAILED, "Applied=False")
            message = applied_message(failed)
            assert "changed on the member by other-controller" in message
            assert "re-applied with backoff" in message
            assert agent_patches(pair) <= ROUNDS + 2
            assert len(await warnings(pair, "fought", EVENT_REAPPLY_THROTTLED)) == 1
        finally:
            stop.set()
            await fighter
        # The fight over, the object stays as we write it at the next attempt, and the Work
        # says Applied=True again once it has stayed so.
        await pair.wait_member(CONFIGMAPS, "fought", lambda o: o["data"] == {"k": "ours"})
        await pair.wait_work("fought", APPLIED_OK, timeout=30)


async def test_edits_at_a_human_pace_are_put_back_at_once() -> None:
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        clock = FakeClock()
        pair.execution.contention.clock = clock
        await pair.create_work(karmada_work("edited", [configmap("edited", data={"k": "ours"})]))
        await pair.wait_work("edited", APPLIED_OK)
        for edit in range(3 * ROUNDS):
            await pair.member_client.patch(
                CONFIGMAPS, "edited", {"data": {"k": f"edit {edit}"}}, namespace="default"
            )
            # Put back without any backoff: the contention clock does not move meanwhile.
            await pair.wait_member(CONFIGMAPS, "edited", lambda o: o["data"] == {"k": "ours"})
            clock.advance(3.0)  # the next edit, a few seconds later
        await pair.idle(pair.execution)
        assert APPLIED_OK(await pair.get_work("edited"))
        assert pair.execution.contention.contested == 0
        assert await warnings(pair, "edited", EVENT_REAPPLY_THROTTLED) == []


async def test_a_changed_work_ends_the_contest() -> None:
    """The Work fixed (the dangling ownerReference dropped): applied at once, Applied=True."""
    ghost = {"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost", "uid": str(uuid.uuid4())}
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        await pair.create_work(karmada_work("fixed", [owned_by("fixed", ghost)]))
        await pair.wait_work("fixed", APPLIED_FAILED, "Applied=False")
        work = await pair.get_work("fixed")
        del work["spec"]["workload"]["manifests"][0]["metadata"]["ownerReferences"]
        await pair.karmada.replace(WORKS, work)
        await pair.wait_work("fixed", APPLIED_OK)
        await pair.wait_member(CONFIGMAPS, "fixed")


def test_contests_are_counted_in_the_metrics() -> None:
    """karmada_agent_contested_objects follows the fights going on, karmada_agent_object_contests
    counts each that started."""
    registry = CollectorRegistry()
    clock = FakeClock()
    contention = Contention(clock=clock, metrics=AgentMetrics(registry))
    key = (CONFIGMAPS, "default", "fought")

    def sample(name: str) -> float | None:
        return registry.get_sample_value(name)

    waits = []
    for _ in range(ROUNDS):
        waits.append(contention.undone(key, "w", 1, "changed on the member"))
        clock.advance(0.1)
    assert waits == [0.0] * (ROUNDS - 1) + [BACKOFF_BASE]
    assert sample("karmada_agent_contested_objects") == 1
    assert sample("karmada_agent_object_contests_total") == 1
    # Re-applied after the backoff, and left alone: the contest is over.
    clock.advance(BACKOFF_BASE)
    contention.applied(key)
    clock.advance(QUIET)
    assert contention.contest(key, 1) is None
    assert sample("karmada_agent_contested_objects") == 0
    assert sample("karmada_agent_object_contests_total") == 1


async def _value(value: int) -> int:
    return value
