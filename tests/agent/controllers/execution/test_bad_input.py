"""Bad input stays local: a Work whose manifest cannot be applied gets Applied=False with a
message naming the manifest (ordinal, kind, name) and the cause, while another Work created at
the same time is applied as usual. One test per kind of bad input."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from agent.karmada import names
from agent.karmada.work import Manifest, manifests_of
from agent.kube.errors import InvalidError
from agent.kube.resources import CONFIGMAPS
from tests.agent.controllers.harness import (
    APPLIED_FAILED,
    APPLIED_OK,
    Pair,
    condition,
    configmap,
    deployment,
    karmada_work,
    running_pair,
)

JsonDict = dict[str, Any]


@asynccontextmanager
async def beside_a_good_work(
    manifests: list[Any], *, raw: bool = False, before: list[JsonDict] | None = None
) -> AsyncIterator[tuple[str, Pair]]:
    """Create (on the member) the objects `before`, then the Work "bad" with `manifests` and
    the Work "good" with one ConfigMap; yield the Applied=False message of "bad" once "good" is
    applied, with the pair."""
    async with running_pair("execution") as pair:
        for obj in before or []:
            await pair.member_client.create(CONFIGMAPS, obj)
        await pair.create_work(karmada_work("bad", manifests, raw=raw))
        await pair.create_work(karmada_work("good", [configmap("good")]))
        await pair.wait_work("good", APPLIED_OK, "the good Work applied")
        assert (await pair.get_member(CONFIGMAPS, "good"))["data"] == {"key": "value"}
        failed = await pair.wait_work("bad", APPLIED_FAILED, "the bad Work Applied=False")
        cond = condition(failed, names.WORK_APPLIED)
        assert cond is not None
        assert cond["reason"] == names.REASON_APPLIED_FAILED
        yield str(cond["message"]), pair
        assert names.EVENT_SYNC_FAILED in {e["reason"] for e in await pair.events_for("bad")}


def applies_to_member(pair: Pair, resource: str) -> int:
    return pair.member.accounting.counts(verb="patch", resource=resource)


async def test_a_manifest_that_is_not_an_object() -> None:
    # The Work CRD types each manifest as an object, so the control plane refuses such a Work
    # and the agent never sees it; should one reach it anyway, the message says what it is.
    async with running_pair("execution") as pair:
        bad = karmada_work("bad", [configmap("fine"), ["a", "list"]], raw=True)
        with pytest.raises(InvalidError) as refused:
            await pair.create_work(bad)
        assert "spec.workload.manifests[1]" in str(refused.value)
    parsed = manifests_of(bad)
    assert isinstance(parsed[0], Manifest)
    assert [str(p) for p in parsed[1:]] == ["manifest 1 is not an object but an array"]
    assert str(manifests_of(karmada_work("w", [None], raw=True))[0]) == (
        "manifest 0 is not an object but null"
    )


async def test_a_manifest_without_api_version() -> None:
    no_version = {"kind": "ConfigMap", "metadata": {"name": "nov", "namespace": "default"}}
    async with beside_a_good_work([no_version]) as (message, _):
        assert message == (
            "Failed to apply all manifests (0/1): "
            "manifest 0 (ConfigMap default/nov) has no apiVersion"
        )


async def test_a_manifest_without_kind() -> None:
    no_kind = {"apiVersion": "v1", "metadata": {"name": "nok", "namespace": "default"}}
    async with beside_a_good_work([configmap("fine"), no_kind]) as (message, _):
        assert message == (
            "Failed to apply all manifests (1/2): manifest 1 (default/nok) has no kind"
        )


async def test_a_manifest_of_a_kind_the_member_does_not_serve() -> None:
    gadget = {
        "apiVersion": "nothere.io/v1",
        "kind": "Gadget",
        "metadata": {"name": "g", "namespace": "default"},
    }
    async with beside_a_good_work([gadget]) as (message, _):
        assert message.startswith(
            "Failed to apply all manifests (0/1): manifest 0 (Gadget default/g): "
        )
        assert "nothere.io/v1" in message
        assert message.endswith("in the member cluster")


async def test_a_manifest_the_member_refuses_as_invalid() -> None:
    broken = deployment("broken")
    broken["spec"]["selector"] = {"matchLabels": {"app": "something-else"}}
    async with beside_a_good_work([broken]) as (message, pair):
        assert message.startswith(
            "Failed to apply all manifests (0/1): manifest 0 (Deployment default/broken): "
            "refused by the member cluster: 422 Invalid: "
        )
        assert "`selector` does not match template `labels`" in message
        # Refused as written: not retried until the Work changes.
        assert pair.execution is not None
        await pair.idle(pair.execution)
        assert applies_to_member(pair, "deployments") == 1


async def test_a_manifest_over_the_member_size_limit() -> None:
    # ConfigMap data may total 1 MiB; the Work itself still fits the control plane's limits.
    huge = configmap("huge", data={"blob": "x" * (1024 * 1024 + 1)})
    async with beside_a_good_work([huge]) as (message, _):
        assert message.startswith(
            "Failed to apply all manifests (0/1): manifest 0 (ConfigMap default/huge): "
            "refused by the member cluster: 422 Invalid: "
        )
        assert "Too long: may not be more than 1048576 bytes" in message


async def test_a_manifest_colliding_with_an_unmanaged_object() -> None:
    local = configmap("local", data={"by": "hand"})
    taking = [configmap("local", data={"by": "karmada"})]
    async with beside_a_good_work(taking, before=[local]) as (message, pair):
        assert message.startswith(
            "Failed to apply all manifests (0/1): manifest 0 (ConfigMap default/local): "
            "ConfigMap default/local already exists in the member cluster and is not managed by "
            "Karmada"
        )
        assert (await pair.get_member(CONFIGMAPS, "local"))["data"] == {"by": "hand"}
