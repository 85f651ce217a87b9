"""Works whose kind the member does not serve: requeued at once when a CRD the agent manages
starts serving it (not when their failure backoff ends), and a kind whose CRD was deleted reads
"no matches for kind" (client-go's words), not a bare 404, also when that CRD was installed by
someone else."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from agent.kube.resources import CUSTOM_RESOURCE_DEFINITIONS
from agent.resources import WORKS
from tests.agent.controllers.harness import (
    APPLIED_FAILED,
    APPLIED_OK,
    EXEC_NS,
    WIDGETS,
    applied_message,
    crd,
    eventually,
    karmada_work,
    running_pair,
)

JsonDict = dict[str, Any]
# A failure backoff far longer than any wait below: only a requeue on the CRD's arrival can
# apply the Work in time.
BACKOFF = timedelta(seconds=60)
NO_MATCH = 'no matches for kind "Widget" in version "example.io/v1"'


def widget(name: str, value: str = "1") -> JsonDict:
    return {
        "apiVersion": "example.io/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"value": value},
    }


def says_no_match(work: JsonDict) -> bool:
    return APPLIED_FAILED(work) and NO_MATCH in applied_message(work)


async def test_a_work_waiting_for_its_kind_is_applied_when_the_crd_arrives() -> None:
    async with running_pair(
        "execution", options={"rate_limiter_base_delay": BACKOFF, "rate_limiter_max_delay": BACKOFF}
    ) as pair:
        assert pair.execution is not None
        await pair.create_work(karmada_work("cr", [widget("w1")]))
        await pair.wait_work(
            "cr",
            lambda w: APPLIED_FAILED(w) and "no matches for kind" in applied_message(w),
            what="Work cr waiting for its kind",
        )
        # The CRD comes in another Work, as Karmada propagates it.
        await pair.create_work(karmada_work("crd", [crd()]))
        await pair.wait_work("crd", APPLIED_OK)
        await pair.wait_work("cr", APPLIED_OK, what="Work cr applied", timeout=10)
        assert (await pair.get_member(WIDGETS, "w1"))["spec"] == {"value": "1"}


async def test_a_kind_whose_crd_was_deleted_reads_no_matches() -> None:
    """The CRD installed by hand (no watch of the agent's sees it go): the apply's 404 has the
    member's kinds read again."""
    async with running_pair("execution") as pair:
        await pair.member_client.create(CUSTOM_RESOURCE_DEFINITIONS, crd())

        async def established() -> bool:
            found = await pair.member_client.get(CUSTOM_RESOURCE_DEFINITIONS, "widgets.example.io")
            return any(
                c["type"] == "Established" and c["status"] == "True"
                for c in (found.get("status") or {}).get("conditions") or []
            )

        await eventually(established, bool, what="CRD established")
        await pair.create_work(karmada_work("cr", [widget("w1")]))
        await pair.wait_work("cr", APPLIED_OK)
        await pair.member_client.delete(CUSTOM_RESOURCE_DEFINITIONS, "widgets.example.io")
        await pair.wait_member_gone(CUSTOM_RESOURCE_DEFINITIONS, "widgets.example.io", None)
        work = await pair.get_work("cr")
        work["spec"]["workload"]["manifests"][0]["spec"] = {"value": "2"}
        await pair.karmada.replace(WORKS, work, namespace=EXEC_NS)
        failed = await pair.wait_work("cr", APPLIED_FAILED, what="Work cr failed")
        assert NO_MATCH in applied_message(failed), applied_message(failed)
        assert "404" not in applied_message(failed)


async def test_a_kind_whose_managed_crd_was_deleted_reads_no_matches() -> None:
    """The CRD applied from a Work, and that Work deleted: the agent's watch of the CRD sees it
    go and the kind is read again."""
    async with running_pair("execution") as pair:
        await pair.create_work(karmada_work("crd", [crd()]))
        await pair.wait_work("crd", APPLIED_OK)
        await pair.create_work(karmada_work("cr", [widget("w1")]))
        await pair.wait_work("cr", APPLIED_OK)
        await pair.karmada.delete(WORKS, "crd", namespace=EXEC_NS)
        await pair.wait_work_gone("crd")
        await pair.wait_member_gone(CUSTOM_RESOURCE_DEFINITIONS, "widgets.example.io", None)
        work = await pair.get_work("cr")
        work["spec"]["workload"]["manifests"][0]["spec"] = {"value": "2"}
        await pair.karmada.replace(WORKS, work, namespace=EXEC_NS)
        failed = await pair.wait_work("cr", says_no_match, what="Work cr: no matches")
        assert "404" not in applied_message(failed)
