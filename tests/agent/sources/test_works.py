"""The Works source: one list+watch shared by the controllers that read it, and a status write
whose answer overtakes the watch."""

from __future__ import annotations

from typing import Any

from agent.kube.resources import CONFIGMAPS
from agent.resources import WORKS
from tests.agent.controllers.harness import (
    APPLIED_OK,
    WorkIds,
    configmap,
    eventually,
    karmada_manifest,
    karmada_work,
    running_pair,
)
from tests.agent.controllers.test_work_status import all_healthy, statuses

JsonDict = dict[str, Any]


async def test_both_controllers_share_one_works_watch() -> None:
    async with running_pair("execution", "workStatus") as pair:
        assert pair.execution is not None
        assert pair.work_status is not None
        assert pair.execution.works is pair.work_status.works
        await pair.create_work(karmada_work("shared", [configmap("shared")]))
        await pair.wait_work("shared", all_healthy(1))
        assert pair.cp.accounting.counts(verb="list", resource="works") == 1
        assert pair.cp.accounting.watches_opened(resource="works") == 1
        # One controller stopping leaves the other its Works.
        await pair.stop(pair.execution)
        await pair.member_client.delete(CONFIGMAPS, "shared", namespace="default")
        await pair.wait_work("shared", lambda w: statuses(w) == [], "entry dropped")


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


async def test_a_status_write_is_answered_with_the_metadata_only() -> None:
    """Over a slow link the whole Work back for every status write was most of what crossed
    it: the answer is the Work's metadata, and the cache holds the Work with our status."""
    big = configmap("big", data={"blob": "x" * 20_000})
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        await pair.create_work(karmada_work("big", [big]))
        await pair.wait_work("big", APPLIED_OK)
        _, answered = pair.cp.accounting.body_bytes(verb="patch", resource="works/status")
        assert 0 < answered < 5_000
        cached = pair.execution.works.get("big")
        assert cached is not None
        assert APPLIED_OK(cached)
        assert cached["spec"]["workload"]["manifests"][0]["data"]["blob"] == "x" * 20_000
        live = await pair.get_work("big")
        assert cached["metadata"]["resourceVersion"] == live["metadata"]["resourceVersion"]
        assert cached["status"] == live["status"]
