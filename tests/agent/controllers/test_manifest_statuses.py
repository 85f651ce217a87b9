"""The hand-off of a Work's manifestStatuses: the execution controller writes the first ones
together with Applied, the workStatus controller waits for that write and keeps them from then
on."""

from __future__ import annotations

import copy
from typing import Any

from agent.karmada import names
from agent.karmada.manifest_status import CONDITION_STATUS_TRUNCATED
from agent.kube.resources import CONFIGMAPS, NAMESPACES
from agent.resources import WORKS
from emulator.storage import ETCD_MAX_REQUEST_BYTES, encode_body

from .harness import (
    EXEC_NS,
    WIDGETS,
    WorkIds,
    condition,
    configmap,
    crd,
    eventually,
    has_condition,
    karmada_manifest,
    karmada_work,
    running_pair,
)
from .test_work_status import statuses

JsonDict = dict[str, Any]


async def test_execution_writes_the_first_statuses_with_applied_in_one_write() -> None:
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        await pair.create_work(karmada_work("first", [configmap("first")]))
        reported = await pair.wait_work("first", lambda w: len(statuses(w)) == 1)
        await pair.idle(pair.execution)
        applied = condition(reported, names.WORK_APPLIED)
        assert applied is not None
        assert applied["status"] == "True"
        [entry] = statuses(reported)
        assert entry["identifier"]["ordinal"] == 0
        assert entry["identifier"]["kind"] == "ConfigMap"
        assert entry["identifier"]["resource"] == "configmaps"
        assert entry["health"] == names.HEALTHY
        assert pair.cp.accounting.counts(resource="works/status") == 1
        # A ConfigMap: no status to reflect, no health that anything judges, no status Event.
        reasons = {e["reason"] for e in await pair.events_for("first")}
        assert names.EVENT_INTERPRET_HEALTH_SUCCEED not in reasons
        assert names.EVENT_SYNC_SUCCEED in reasons

        # Reported once: the entries are the workStatus controller's from now on, and another
        # apply of the same Work leaves them alone.
        await pair.member_client.patch(
            CONFIGMAPS, "first", {"data": {"key": "drifted"}}, namespace="default"
        )
        await pair.wait_member(CONFIGMAPS, "first", lambda o: o["data"] == {"key": "value"})
        await pair.idle(pair.execution)
        assert pair.cp.accounting.counts(resource="works/status") == 1


async def test_waits_for_the_execution_controllers_first_report() -> None:
    async with running_pair("workStatus") as pair:
        assert pair.work_status is not None
        ids = WorkIds()
        cm = karmada_manifest(configmap("early"), "early", ids)
        await pair.member_client.create(CONFIGMAPS, cm)
        await pair.create_work(karmada_work("early", [cm], raw=True))
        await pair.idle(pair.work_status)
        # No Applied condition yet: the first manifestStatuses are the execution controller's
        # to write, together with Applied.
        assert statuses(await pair.get_work("early")) == []
        assert pair.cp.accounting.counts(resource="works/status") == 0
        await pair.mark_applied("early")
        reported = await pair.wait_work("early", lambda w: len(statuses(w)) == 1)
        assert statuses(reported)[0]["health"] == names.HEALTHY


# --- a status the control plane cannot store ----------------------------------------------------


def widget(name: str) -> JsonDict:
    return {
        "apiVersion": "example.io/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"size": 1},
    }


def stored_size(obj: JsonDict) -> int:
    return len(encode_body(obj))


async def test_statuses_too_large_to_store_are_left_out_largest_first_and_said_so() -> None:
    """Five custom resources whose statuses take 1.8 MB together: the Work cannot store all of them
    (1.5 MiB per object). The largest reflected statuses are left out (the entries stay, with
    their health), the conditions kept, and StatusTruncated names what is left out. No status
    write is refused on the way, and nothing is applied again."""
    sizes = {f"w{i}": (5 - i) * 120_000 for i in range(5)}  # 600 KB .. 120 KB
    async with running_pair("execution", "workStatus") as pair:
        await pair.create_work(karmada_work("widget-crd", [crd(status=True)]))
        await pair.wait_work("widget-crd", has_condition(names.WORK_APPLIED, "True"))
        await pair.create_work(karmada_work("widgets", [widget(n) for n in sizes]))
        await pair.wait_work("widgets", has_condition(names.WORK_APPLIED, "True"))
        for name, size in sizes.items():
            live = await pair.get_member(WIDGETS, name)
            live["status"] = {"blob": "x" * size}
            await pair.member_client.update_status(WIDGETS, live, namespace="default")

        def truncated(work: JsonDict) -> bool:
            cond = condition(work, CONDITION_STATUS_TRUNCATED)
            return cond is not None and "manifest 0 (Widget default/w0)" in str(cond["message"])

        work = await pair.wait_work("widgets", truncated, "StatusTruncated")
        await pair.idle(pair.work_status, pair.execution)
        work = await pair.get_work("widgets")
        assert stored_size(work) <= ETCD_MAX_REQUEST_BYTES
        cond = condition(work, CONDITION_STATUS_TRUNCATED)
        assert cond is not None
        assert cond["status"] == "True"
        assert cond["reason"] == "StatusTooLarge"
        entries = {e["identifier"]["name"]: e for e in statuses(work)}
        assert set(entries) == set(sizes)
        assert all(e["health"] for e in entries.values())
        # The largest go first; what fits stays.
        assert "status" not in entries["w0"]
        assert entries["w4"]["status"] == {"blob": "x" * 120_000}
        assert "manifest 4" not in str(cond["message"])
        assert has_condition(names.WORK_APPLIED, "True")(work)
        assert pair.member.accounting.counts(verb="patch", resource="widgets") == len(sizes)

        # The statuses shrink: everything fits again, and StatusTruncated goes.
        for name in sizes:
            live = await pair.get_member(WIDGETS, name)
            live["status"] = {"blob": "small"}
            await pair.member_client.update_status(WIDGETS, live, namespace="default")
        work = await pair.wait_work(
            "widgets",
            lambda w: (
                condition(w, CONDITION_STATUS_TRUNCATED) is None
                and all(e.get("status") == {"blob": "small"} for e in statuses(w))
            ),
            "StatusTruncated gone",
        )


async def test_a_failed_status_write_does_not_apply_the_member_again() -> None:
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        pair.cp.faults.add_rule(verb="patch", resource="works/status", code=500, count=3)
        await pair.create_work(karmada_work("retried", [configmap("retried")]))
        await pair.wait_work("retried", has_condition(names.WORK_APPLIED, "True"))
        await pair.idle(pair.execution)
        assert pair.cp.accounting.counts(verb="patch", resource="works/status") == 4
        assert pair.member.accounting.counts(verb="patch", resource="configmaps") == 1
        reasons = [e["reason"] for e in await pair.events_for("retried")]
        assert reasons.count(names.EVENT_SYNC_SUCCEED) == 1


async def test_a_work_with_no_room_for_its_conditions_says_so_in_an_event() -> None:
    """The Work's manifests take all but a few bytes of what etcd stores: not even Applied can
    be written. A Warning Event says so; the member is applied once, and not again."""
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        await pair.create_work(karmada_work("widget-crd", [crd()]))
        await pair.wait_work("widget-crd", has_condition(names.WORK_APPLIED, "True"))
        big = widget("big")
        work = karmada_work("full", [big])
        # Its size as stored, measured on a copy in another namespace (names of equal length).
        probe = copy.deepcopy(work)
        probe["metadata"]["namespace"] = "x" * len(EXEC_NS)
        await pair.karmada.create(NAMESPACES, {"metadata": {"name": "x" * len(EXEC_NS)}})
        stored = await pair.karmada.create(WORKS, probe, namespace=probe["metadata"]["namespace"])
        fill = ETCD_MAX_REQUEST_BYTES - stored_size(stored) - 100
        work["spec"]["workload"]["manifests"][0]["spec"]["blob"] = "x" * fill
        await pair.create_work(work)

        async def warned() -> list[str]:
            return [e["reason"] for e in await pair.events_for("full")]

        await eventually(warned, lambda reasons: "StatusTooLarge" in reasons)
        await pair.idle(pair.execution)
        assert condition(await pair.get_work("full"), names.WORK_APPLIED) is None
        assert pair.member.accounting.counts(verb="patch", resource="widgets") == 1
        assert (await pair.get_member(WIDGETS, "big"))["spec"]["blob"] == "x" * fill
