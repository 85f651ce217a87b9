"""An agent that starts again over Works it applied before (issue 34): what differs from the Works
is written, nothing else. Unchanged Works cost no member write, no status write and no Event;
a member object deleted or edited while no agent ran is put back, and a new or changed Work
applied. (The restarted agent is a fresh process as far as the controllers can tell: new
sources, empty caches, the durable record read back from the member.)"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, cast

from agent.context import AgentContext
from agent.controllers.execution import ExecutionController
from agent.controllers.manager import ControllerManager
from agent.controllers.work_status import WorkStatusController
from agent.events import EventEmitter
from agent.kube.discovery import RESTMapper
from agent.kube.resources import CONFIGMAPS
from agent.resources import WORKS
from agent.sources import live_sources
from emulator.emulator import Emulator
from emulator.requestinfo import RequestAttributes
from tests.agent.controllers.harness import (
    APPLIED_OK,
    EXEC_NS,
    Pair,
    StubMetrics,
    configmap,
    deployment,
    karmada_work,
    running_pair,
)

JsonDict = dict[str, Any]
WRITES = frozenset(("create", "update", "patch", "delete"))


@dataclass
class Writes:
    """The writes an emulator serves, by (resource[/subresource], name)."""

    seen: list[tuple[str, str, str]] = field(default_factory=list)

    async def hook(self, req: Any, attrs: RequestAttributes) -> None:
        if attrs.is_resource_request and attrs.verb in WRITES:
            resource = attrs.resource + (f"/{attrs.subresource}" if attrs.subresource else "")
            name = attrs.name
            if not name and req.body:
                name = str((json.loads(req.body).get("metadata") or {}).get("name") or "")
            self.seen.append((attrs.verb, resource, name))

    def of(self, resource: str) -> list[tuple[str, str]]:
        return [(verb, name) for verb, r, name in self.seen if r == resource]


def watch_writes(emu: Emulator) -> Writes:
    writes = Writes()
    emu.api.hooks.insert(0, writes.hook)
    return writes


@asynccontextmanager
async def restarted_agent(
    pair: Pair,
    order: list[str] | None = None,
    prepare: Callable[[ExecutionController], None] | None = None,
) -> AsyncIterator[tuple[AgentContext, list[Any]]]:
    """The execution and workStatus controllers of a new agent process on the same clusters;
    the Works its execution controller reconciles are appended to `order`, in order;
    `prepare` is given the execution controller before it starts."""
    async with AsyncExitStack() as stack:
        options = pair.ctx.options
        sources = live_sources(pair.karmada, pair.member_client, options)
        events = EventEmitter(pair.karmada, component="karmada-agent")
        ctx = AgentContext(
            options=options,
            cluster_name=pair.ctx.cluster_name,
            karmada=pair.karmada,
            member=pair.member_client,
            karmada_mapper=RESTMapper(pair.karmada),
            member_mapper=RESTMapper(pair.member_client),
            events=events,
            metrics=cast(Any, StubMetrics()),
            sources=sources,
        )
        stack.push_async_callback(events.stop)
        execution = ExecutionController(ctx)
        if order is not None:
            reconcile = execution.controller._reconcile

            async def noted(name: str) -> Any:
                order.append(name)
                return await reconcile(name)

            execution.controller._reconcile = noted
        if prepare is not None:
            prepare(execution)
        controllers: list[Any] = [execution, WorkStatusController(ctx)]
        # As the app runs them: the sources they declare started by the manager.
        manager = ControllerManager(
            ctx,
            builders={
                runnable.name: (lambda _ctx, runnable=runnable: runnable)
                for runnable in controllers
            },
        )
        stack.push_async_callback(manager.stop)
        await manager.start()
        yield ctx, controllers


async def stop_agent(pair: Pair) -> None:
    """The first agent goes (SIGTERM: what it queued for the record is written)."""
    assert pair.manager is not None
    await pair.manager.stop()
    await pair.ctx.events.stop()


def healthy(work: JsonDict) -> bool:
    entries = (work.get("status") or {}).get("manifestStatuses") or []
    return bool(entries) and all(e.get("health") == "Healthy" for e in entries)


def data_of(value: str) -> Any:
    return lambda obj: (obj.get("data") or {}).get("key") == value


UNCHANGED = [*(f"a-{i}" for i in range(7)), "web"]


async def applied_then_stopped(pair: Pair) -> None:
    """Works applied and reported by a first agent, which then stops; then, while no agent
    runs: an object deleted, one edited, a Work changed, a new Work (created last, so that the
    order of the Works puts them behind the unchanged ones)."""
    for name in UNCHANGED[:-1]:
        await pair.create_work(karmada_work(name, [configmap(name)]))
    await pair.create_work(karmada_work("web", [deployment("web")]))
    for name in ("z-deleted", "z-edited", "z-changed"):
        await pair.create_work(karmada_work(name, [configmap(name)]))
    for name in [*UNCHANGED[:-1], "z-deleted", "z-edited", "z-changed"]:
        await pair.wait_work(name, APPLIED_OK)
    await pair.wait_work("web", healthy, what="web reported Healthy")
    await pair.idle(pair.execution, pair.work_status)
    await stop_agent(pair)

    await pair.member_client.delete(CONFIGMAPS, "z-deleted", namespace="default")
    edited = await pair.get_member(CONFIGMAPS, "z-edited")
    edited["data"] = {"key": "edited"}
    await pair.member_client.replace(CONFIGMAPS, edited, namespace="default")
    changed = await pair.get_work("z-changed")
    changed["spec"]["workload"]["manifests"][0]["data"] = {"key": "changed"}
    await pair.karmada.replace(WORKS, changed, namespace=EXEC_NS)
    await pair.create_work(karmada_work("z-new", [configmap("z-new")]))


async def changes_corrected(pair: Pair) -> None:
    await pair.wait_member(CONFIGMAPS, "z-deleted", data_of("value"))
    await pair.wait_member(CONFIGMAPS, "z-edited", data_of("value"))
    await pair.wait_member(CONFIGMAPS, "z-changed", data_of("changed"))
    await pair.wait_work("z-new", APPLIED_OK)


CHANGED = ["z-changed", "z-deleted", "z-edited", "z-new"]


async def test_a_restart_writes_only_what_differs_and_sees_to_it_first() -> None:
    async with running_pair("execution", "workStatus") as pair:
        await applied_then_stopped(pair)

        member_writes, cp_writes = watch_writes(pair.member), watch_writes(pair.cp)
        order: list[str] = []
        async with restarted_agent(pair, order) as (ctx, controllers):
            await changes_corrected(pair)
            await ctx.events.flush(5.0)
            await pair.idle(*controllers)

        assert sorted(member_writes.of("configmaps")) == [("patch", n) for n in CHANGED]
        assert member_writes.of("deployments") == []
        status_writes = [name for _, name in cp_writes.of("works/status")]
        assert not set(UNCHANGED) & set(status_writes), status_writes
        assert "z-new" in status_writes
        # No Event about a Work (or its template) whose objects were all in place.
        about = {name.rsplit(".", 1)[0] for _, name in cp_writes.of("events")}
        assert not set(UNCHANGED) & about, about
        assert {"z-deleted", "z-changed", "z-new"} <= about
        # By need, not by the order of the Works: what changed first, then the others.
        first = list(dict.fromkeys(order))
        assert sorted(first[: len(CHANGED)]) == CHANGED, first
        assert sorted(first[len(CHANGED) :]) == sorted(UNCHANGED), first


async def test_a_restart_sees_to_changes_while_the_unchanged_works_are_still_compared() -> None:
    """The workers do not wait for the full comparison of the Works applied before: new and
    changed Works are applied, a deleted object (missing from the cache) and one written by
    someone else since our apply (its managedFields) are put back, all while the comparison
    has not got past its first Work. A Work that comparison found in place is not compared
    again by its reconcile, and still costs no write."""
    async with running_pair("execution", "workStatus") as pair:
        await applied_then_stopped(pair)
        # Our apply's time set back, so that the edit is later by more than the second the
        # managedFields' times tell apart.
        edited = await pair.get_member(CONFIGMAPS, "z-edited")
        for entry in edited["metadata"]["managedFields"]:
            if entry["operation"] == "Apply":
                entry["time"] = "2020-01-01T00:00:00Z"
        await pair.member_client.replace(CONFIGMAPS, edited, namespace="default")

        gate = asyncio.Event()
        compared: list[str] = []
        desired_for: list[str] = []

        def prepare(execution: ExecutionController) -> None:
            applier = execution.applier
            found_in_place, desired = applier.found_in_place, applier._desired

            async def gated(work: JsonDict) -> Any:
                compared.append(work["metadata"]["name"])
                await gate.wait()
                return await found_in_place(work)

            async def noted(work: JsonDict, *args: Any) -> Any:
                desired_for.append(work["metadata"]["name"])
                return await desired(work, *args)

            applier.found_in_place = gated  # type: ignore[method-assign]
            applier._desired = noted  # type: ignore[method-assign]

        member_writes = watch_writes(pair.member)
        order: list[str] = []
        async with restarted_agent(pair, order, prepare) as (_, controllers):
            await changes_corrected(pair)
            assert len(compared) == 1, compared
            assert sorted(dict.fromkeys(order)) == CHANGED, order
            gate.set()
            await pair.idle(*controllers)

        assert sorted(member_writes.of("configmaps")) == [("patch", n) for n in CHANGED]
        assert member_writes.of("deployments") == []
        first = list(dict.fromkeys(order))
        assert sorted(first[len(CHANGED) :]) == sorted(UNCHANGED), first
        # Compared once, by the pass: their reconciles took its word.
        assert sorted(set(compared)) == sorted(UNCHANGED), compared
        assert not set(UNCHANGED) & set(desired_for), desired_for
