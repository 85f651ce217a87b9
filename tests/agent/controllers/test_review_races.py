"""Races between reconciles, our own writes and the watches that feed the caches."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from pathlib import Path
from typing import Any

from agent.app import EXIT_OK, Agent
from agent.karmada import names
from agent.kube.controller import Controller, Result
from agent.kube.resources import CONFIGMAPS, DEPLOYMENTS
from agent.kube.workqueue import WorkQueue
from agent.resources import WORKS
from tests.agent.test_app import controllers_stopped, lost_leadership

from .clusterenv import emulator_pair, wait_for
from .harness import (
    EXEC_NS,
    WorkIds,
    configmap,
    deployment,
    eventually,
    has_condition,
    karmada_manifest,
    karmada_work,
    running_pair,
)

JsonDict = dict[str, Any]
APPLIED_OK = has_condition(names.WORK_APPLIED, "True", names.REASON_APPLIED_SUCCESSFUL)


async def test_spec_change_is_applied_when_our_status_write_overtakes_its_watch_event() -> None:
    """The Work changes while its first apply is in flight, and the watch is behind (a dropped
    stream, a slow watch cache). The status write that ends the reconcile answers with the new
    spec; caching that answer must not make the new spec look already handled."""
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        rule = pair.member.faults.add_latency(0.5, verb="patch", resource="configmaps")
        await pair.create_work(karmada_work("w", [configmap("cm", data={"v": "1"})]))
        await eventually(
            lambda: _cached(pair, "w"), lambda w: w is not None, what="Work in the cache"
        )
        # The reconcile of version 1 is now waiting on the member; the watch falls behind.
        await pair.execution.works.stop()
        live = await pair.get_work("w")
        ids = WorkIds()
        live["spec"]["workload"]["manifests"] = [
            karmada_manifest(configmap("cm", data={"v": "2"}), "w", ids)
        ]
        await pair.karmada.replace(WORKS, live, namespace=live["metadata"]["namespace"])
        await pair.wait_work("w", APPLIED_OK, "Applied=True for the first version")
        pair.member.faults.remove(rule.id)
        # The watch catches up.
        pair.execution.works.start()
        await pair.wait_member(
            CONFIGMAPS, "cm", lambda cm: cm.get("data") == {"v": "2"}, what="version 2 applied"
        )


async def _cached(pair: Any, name: str) -> JsonDict | None:
    return pair.execution.works.get(name)  # type: ignore[no-any-return]


async def test_retained_replicas_survive_a_second_apply() -> None:
    """`resourcetemplate.karmada.io/retain-replicas=true`: the member keeps its replicas. The
    first apply creates the Deployment with the template's replicas; a later apply must not
    drop them (with server-side apply, a field its only manager stops applying is removed and
    defaulted)."""
    async with running_pair("execution") as pair:
        template = deployment("web", replicas=3)
        template["metadata"]["labels"][names.RETAIN_REPLICAS_LABEL] = "true"
        await pair.create_work(karmada_work("web", [template]))
        await pair.wait_work("web", APPLIED_OK, "Applied=True")
        created = await pair.get_member(DEPLOYMENTS, "web")
        assert created["spec"]["replicas"] == 3

        # The template changes (a new annotation): the Work is applied again.
        live = await pair.get_work("web")
        manifest = live["spec"]["workload"]["manifests"][0]
        manifest["metadata"]["annotations"]["example.io/note"] = "second"
        await pair.karmada.replace(WORKS, live, namespace=live["metadata"]["namespace"])
        await pair.wait_member(
            DEPLOYMENTS,
            "web",
            lambda d: d["metadata"].get("annotations", {}).get("example.io/note") == "second",
            what="second version applied",
        )
        again = await pair.get_member(DEPLOYMENTS, "web")
        assert again["spec"]["replicas"] == 3

        # The member scales it (an HPA there); the next apply keeps the member's choice.
        await pair.member_client.patch(
            DEPLOYMENTS, "web", {"spec": {"replicas": 5}}, patch_type="merge", namespace="default"
        )
        live = await pair.get_work("web")
        manifest = live["spec"]["workload"]["manifests"][0]
        manifest["metadata"]["annotations"]["example.io/note"] = "third"
        await pair.karmada.replace(WORKS, live, namespace=live["metadata"]["namespace"])
        await pair.wait_member(
            DEPLOYMENTS,
            "web",
            lambda d: d["metadata"].get("annotations", {}).get("example.io/note") == "third",
            what="third version applied",
        )
        await pair.idle(pair.execution)
        scaled = await pair.get_member(DEPLOYMENTS, "web")
        assert scaled["spec"]["replicas"] == 5


async def test_lost_leadership_abandons_in_flight_applies_at_once(tmp_path: Path) -> None:
    """A replica that can no longer renew its Lease must stop writing at once: a successor may
    take over as soon as the Lease expires. An apply stuck on a slow member is abandoned, not
    waited for until the shutdown bound."""
    async with emulator_pair(tmp_path) as env:
        options = env.options(
            leader_elect=True,
            leader_elect_lease_cluster="karmada",
            leader_elect_lease_duration=timedelta(seconds=2),
            leader_elect_renew_deadline=timedelta(seconds=1),
            leader_elect_retry_period=timedelta(milliseconds=200),
            controllers=("clusterStatus", "execution"),
        )
        agent = Agent(options, install_signal_handlers=False, shutdown_timeout=30)
        task = asyncio.create_task(agent.run())
        await wait_for(lambda: _ready(env), timeout=20)
        slow = env.member.faults.add_latency(30, verb="patch", resource="configmaps")
        async with env.karmada.client() as client:
            response = await client.post(
                f"/apis/work.karmada.io/v1alpha1/namespaces/{EXEC_NS}/works",
                json=karmada_work("w", [configmap("cm")]),
            )
            assert response.status_code == 201, response.text
        await wait_for(lambda: _fired(slow), timeout=10)
        manager = agent.manager
        assert manager is not None
        env.karmada.faults.add_error(500, verb="update", resource="leases.coordination.k8s.io")
        # Well within the 30 s shutdown bound and the 30 s stuck apply.
        await wait_for(lambda: controllers_stopped(manager), timeout=8)
        await wait_for(lambda: lost_leadership(agent), timeout=2)
        # The stuck apply itself was cancelled, not left running behind the manager's back.
        await wait_for(_no_execution_workers, timeout=2)
        # The replica campaigns again rather than exiting.
        assert not task.done()
        agent.stop_event.set()
        assert await asyncio.wait_for(task, 10) == EXIT_OK


async def _ready(env: Any) -> bool:
    obj = await env.cluster()
    conditions = (obj or {}).get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


async def _fired(rule: Any) -> bool:
    return bool(rule.fired)


async def _no_execution_workers() -> bool:
    return not [
        t
        for t in asyncio.all_tasks()
        if t.get_name().startswith("execution-worker") and not t.done()
    ]


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
