"""The controller registry, and the manager's start/stop order and stop bound."""

from __future__ import annotations

import asyncio
import contextlib
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from agent.context import AgentContext, Runnable
from agent.controllers import CONTROLLER_MODULES, load_builders
from agent.controllers.manager import ControllerManager
from agent.controllers.watches import OnDemand, Watches
from agent.kube.controller import Controller, Result
from agent.kube.workqueue import WorkQueue
from agent.options import Options
from agent.options.controller_selection import CONTROLLERS

from .harness import eventually


class Recorder:
    def __init__(self, name: str, log: list[str], *, hang: bool = False, uses: Any = None) -> None:
        self.name = name
        self.log = log
        self.hang = hang
        if uses is not None:
            # What it watches, declared: the manager starts it.
            self.watches = Watches().uses(uses)

    async def start(self) -> None:
        self.log.append(f"start {self.name}")

    async def stop(self) -> None:
        self.log.append(f"stop {self.name}")
        if self.hang:
            await asyncio.Event().wait()


def context() -> AgentContext:
    return cast(AgentContext, type("Ctx", (), {"options": Options(cluster_name="m1")})())


def test_registry_builds_every_upstream_controller() -> None:
    selection = load_builders(set(CONTROLLERS))
    assert set(selection.builders) == set(CONTROLLERS)
    assert selection.unavailable == {}


def test_registry_builds_only_enabled() -> None:
    assert load_builders(set()).builders == {}
    assert "clusterStatus" not in load_builders({"execution"}).builders


def test_the_independence_contract_names_every_controller() -> None:
    """pyproject.toml's import-linter contract that keeps the controllers from importing each
    other lists exactly the controllers of the registry."""
    pyproject = Path(__file__).resolve().parents[3] / "pyproject.toml"
    contracts = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]["contracts"]
    [independence] = [c for c in contracts if c["type"] == "independence"]
    assert sorted(independence["modules"]) == sorted(CONTROLLER_MODULES.values())


async def test_manager_order_failures_and_bounded_stop() -> None:
    log: list[str] = []

    # A source two controllers declare: started once, before them, and stopped after them.
    shared = Recorder("shared", log)

    def good(name: str) -> Any:
        return lambda _ctx: Recorder(name, log, uses=shared)

    def broken(_ctx: AgentContext) -> Runnable:
        raise RuntimeError("no member access")

    def hanging(_ctx: AgentContext) -> Runnable:
        return Recorder("hanging", log, hang=True)

    manager = ControllerManager(
        context(),
        builders={"a": good("a"), "broken": broken, "hanging": hanging, "b": good("b")},
        stop_timeout=0.5,
    )
    await manager.start()
    assert log == ["start shared", "start a", "start hanging", "start b"]
    assert manager.failed == {"broken": "no member access"}
    log.clear()
    loop = asyncio.get_running_loop()
    began = loop.time()
    await manager.stop()
    assert loop.time() - began < 2.0
    assert log == ["stop b", "stop hanging", "stop a", "stop shared"]
    assert manager.running == []


class Watch:
    """An informer's start and stop, recorded."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log

    def start(self) -> None:
        self.log.append(f"start {self.name}")

    async def stop(self) -> None:
        self.log.append(f"stop {self.name}")


async def test_on_demand_watches_start_when_first_needed_and_stop_with_the_sources() -> None:
    """As the slice reporters watch the member: declared with the controller, started on the
    first Work that needs them (subscribed first, so no event is missed), stopped by the
    manager after the controller."""
    log: list[str] = []

    def subscribe() -> Callable[[], None]:
        log.append("subscribe")
        return lambda: log.append("unsubscribe")

    member = OnDemand(Watch("slices", log), Watch("exports", log), subscribe=[subscribe])
    reporter = Recorder("reporter", log)
    reporter.watches = Watches().on_demand(member)
    manager = ControllerManager(context(), builders={"reporter": lambda _ctx: reporter})
    await manager.start()
    assert log == ["start reporter"]
    assert member.ensure()
    assert not member.ensure()
    assert log == ["start reporter", "subscribe", "start slices", "start exports"]
    log.clear()
    await manager.stop()
    assert log == ["stop reporter", "unsubscribe", "stop exports", "stop slices"]


async def test_an_abandoned_controller_stop_cancels_the_reconciles_in_flight() -> None:
    """The manager bounds each controller's stop with wait_for; when that bound runs out, the
    reconciles in flight must end too instead of running on unsupervised."""
    entered = asyncio.Event()
    finished: list[str] = []

    async def reconcile(key: str) -> Result | None:
        entered.set()
        await asyncio.Event().wait()  # a call that never answers
        finished.append(key)
        return None

    controller: Controller[str] = Controller("stuck", WorkQueue("stuck"), reconcile)
    controller.start()
    controller.queue.add("w")
    await asyncio.wait_for(entered.wait(), 5)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(controller.stop(30), 0.1)
    await eventually(
        lambda: _value(controller.running), lambda running: not running, timeout=2, what="stop"
    )
    assert finished == []


async def _value(value: Any) -> Any:
    return value
