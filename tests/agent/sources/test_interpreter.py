"""The interpreter chain through the agent: a Work carrying custom resources reports the health
and status their customizations (bundled, or the control plane's, hot-reloaded) interpret."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from agent.interpreter import Interpreter, InterpretError
from agent.karmada import names
from agent.kube.client import GVR
from agent.kube.resources import CUSTOM_RESOURCE_DEFINITIONS
from agent.resources import RESOURCE_INTERPRETER_CUSTOMIZATIONS, WORKS
from agent.sources.interpreter import AgentInterpreter
from tests.agent.controllers.harness import (
    WIDGETS,
    Pair,
    configmap,
    crd,
    eventually,
    karmada_work,
    running_pair,
)
from tests.agent.interpreter.samples import customization as interpreter_customization

JsonDict = dict[str, Any]

CLONESETS = GVR("apps.kruise.io", "v1alpha1", "clonesets")


def cloneset() -> JsonDict:
    return {
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "CloneSet",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 3, "updateStrategy": {"partition": 0}},
    }


def widget(replicas: int = 2) -> JsonDict:
    return {
        "apiVersion": "example.io/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "default"},
        "spec": {"replicas": replicas},
    }


def customization(name: str, **scripts: str) -> JsonDict:
    return interpreter_customization(name, "example.io/v1", "Widget", **scripts)


async def install(pair: Pair, definition: JsonDict, gvr: GVR) -> None:
    await pair.member_client.create(CUSTOM_RESOURCE_DEFINITIONS, definition)
    pair.ctx.member_mapper.invalidate()

    async def served() -> bool:
        try:
            await pair.member_client.list(gvr, namespace="default")
        except Exception:
            return False
        return True

    await eventually(served, bool, what=f"{gvr} served")


async def set_status(pair: Pair, gvr: GVR, name: str, status: JsonDict) -> None:
    live = await pair.get_member(gvr, name)
    live["status"] = status
    await pair.member_client.update_status(gvr, live)


def entry(work: JsonDict, ordinal: int = 0) -> JsonDict:
    for item in (work.get("status") or {}).get("manifestStatuses") or []:
        if item["identifier"]["ordinal"] == ordinal:
            return dict(item)
    return {}


async def test_bundled_customization_reports_a_kruise_cloneset() -> None:
    async with running_pair("execution", "workStatus") as pair:
        await install(
            pair,
            crd("apps.kruise.io", "CloneSet", "clonesets", version="v1alpha1", status=True),
            CLONESETS,
        )
        await pair.create_work(karmada_work("cloneset", [cloneset()]))
        # No status yet: the bundled rule cannot judge it (Unknown, as upstream's), where no
        # rule would say Healthy.
        await pair.wait_work("cloneset", lambda w: entry(w).get("health") == names.UNKNOWN)
        live = await pair.get_member(CLONESETS, "web")
        generation = live["metadata"]["generation"]
        status = {
            "observedGeneration": generation,
            "replicas": 3,
            "availableReplicas": 3,
            "updatedReplicas": 3,
            "readyReplicas": 3,
            "updateRevision": "web-6d4b",
            "collisionCount": 0,
        }
        await set_status(pair, CLONESETS, "web", status)
        done = await pair.wait_work(
            "cloneset", lambda w: entry(w).get("health") == names.HEALTHY, "CloneSet Healthy"
        )
        reported = {k: v for k, v in status.items() if k != "collisionCount"}
        assert entry(done)["status"] == {
            **reported,
            "generation": generation,
            "resourceTemplateGeneration": 1,
        }
        await set_status(pair, CLONESETS, "web", {**status, "availableReplicas": 1})
        await pair.wait_work(
            "cloneset",
            lambda w: entry(w).get("health") == names.UNHEALTHY,
            "CloneSet with unavailable replicas",
        )


async def test_control_plane_customizations_apply_without_restart() -> None:
    health = "function InterpretHealth(o) return (o.status or {}).ready == o.spec.replicas end"
    reflect = "function ReflectStatus(o) return {ready = (o.status or {}).ready or 0} end"
    async with running_pair("execution", "workStatus") as pair:
        await install(pair, crd(status=True), WIDGETS)
        await pair.create_work(karmada_work("widget", [widget()]))
        await pair.wait_work("widget", lambda w: entry(w).get("health") == names.HEALTHY)
        await set_status(pair, WIDGETS, "w", {"ready": 1})
        await pair.wait_work("widget", lambda w: entry(w).get("status") == {"ready": 1})

        created = await pair.karmada.create(
            RESOURCE_INTERPRETER_CUSTOMIZATIONS,
            customization("widgets", health=health, reflect=reflect),
        )
        await pair.wait_work(
            "widget",
            lambda w: entry(w).get("health") == names.UNHEALTHY,
            "the new customization's health",
        )
        await set_status(pair, WIDGETS, "w", {"ready": 2, "other": "x"})
        await pair.wait_work(
            "widget",
            lambda w: (
                entry(w).get("health") == names.HEALTHY and entry(w)["status"] == {"ready": 2}
            ),
            "health and status by the customization",
        )

        # A script that loops: Unknown health, and an Event naming the customization.
        looping = copy.deepcopy(created)
        looping["spec"]["customizations"]["healthInterpretation"]["luaScript"] = (
            "function InterpretHealth() while true do end end"
        )
        created = await pair.karmada.replace(RESOURCE_INTERPRETER_CUSTOMIZATIONS, looping)
        await pair.wait_work(
            "widget", lambda w: entry(w).get("health") == names.UNKNOWN, "Unknown health"
        )
        failed = [
            e
            for e in await pair.events_for("widget")
            if e["reason"] == names.EVENT_INTERPRET_HEALTH_FAILED
        ]
        assert failed
        assert (
            'ResourceInterpreterCustomization "widgets" failed in InterpretHealth'
            in (failed[-1]["message"])
        )
        assert "budget" in failed[-1]["message"]
        # Everything else is served meanwhile: another Work is applied and reported.
        await pair.create_work(karmada_work("other", [configmap("other")]))
        await pair.wait_work("other", lambda w: entry(w).get("health") == names.HEALTHY)

        # Deleted: the built-in rules again (no rule for Widget: Healthy, whole status).
        await pair.karmada.delete(RESOURCE_INTERPRETER_CUSTOMIZATIONS, "widgets")
        await pair.wait_work(
            "widget",
            lambda w: (
                entry(w).get("health") == names.HEALTHY
                and entry(w)["status"] == {"ready": 2, "other": "x"}
            ),
            "built-in rules again",
        )


async def test_retain_keeps_the_members_value_and_a_failing_retain_fails_the_apply() -> None:
    retain = """
    function Retain(desired, observed)
      desired.spec.replicas = observed.spec.replicas
      return desired
    end
    """
    async with running_pair("execution", "workStatus") as pair:
        await install(pair, crd(status=True), WIDGETS)
        await pair.karmada.create(
            RESOURCE_INTERPRETER_CUSTOMIZATIONS, customization("keep", retain=retain)
        )
        await pair.create_work(karmada_work("widget", [widget(2)]))
        live = await pair.wait_member(WIDGETS, "w")
        assert live["spec"]["replicas"] == 2
        # A member-side controller scales it; a Work change re-applies, keeping the member's value.
        live["spec"]["replicas"] = 5
        await pair.member_client.replace(WIDGETS, live, namespace="default")
        work = await pair.get_work("widget")
        work["metadata"]["annotations"]["touched"] = "1"
        manifest = work["spec"]["workload"]["manifests"][0]
        manifest["metadata"]["labels"]["team"] = "a"
        await pair.karmada.replace(WORKS, work, namespace=work["metadata"]["namespace"])
        relabelled = await pair.wait_member(
            WIDGETS, "w", lambda o: o["metadata"]["labels"].get("team") == "a"
        )
        assert relabelled["spec"]["replicas"] == 5

        broken = customization("keep", retain="function Retain() error('no luck') end")
        current = await pair.karmada.get(RESOURCE_INTERPRETER_CUSTOMIZATIONS, "keep")
        broken["metadata"] = current["metadata"]
        await pair.karmada.replace(RESOURCE_INTERPRETER_CUSTOMIZATIONS, broken)

        def failed(w: JsonDict) -> bool:
            applied = [c for c in w["status"].get("conditions") or [] if c["type"] == "Applied"]
            return bool(applied) and applied[0]["status"] == "False"

        done = await pair.wait_work("widget", failed, "Applied False")
        [applied] = [c for c in done["status"]["conditions"] if c["type"] == "Applied"]
        assert 'ResourceInterpreterCustomization "keep" failed in Retain' in applied["message"]
        assert "no luck" in applied["message"]


async def test_a_looping_script_does_not_hold_up_the_event_loop() -> None:
    chain = AgentInterpreter(Interpreter())
    chain.interpreter.customizations.put(
        customization("loop", health="function InterpretHealth() while true do end end")
    )
    task = asyncio.create_task(chain.interpret_health({**widget(), "status": {}}))
    turns = 0
    while not task.done() and turns < 1000:
        await asyncio.sleep(0)
        turns += 1
    # A thousand turns of the loop (milliseconds) while the script used up its budget (20
    # million instructions); a script run on the loop would have finished in the first.
    assert not task.done()
    with pytest.raises(InterpretError, match="budget"):
        await task
