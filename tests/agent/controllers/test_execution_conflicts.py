"""Works that disagree about a member object: two manifests of one Work naming the same object,
two Works claiming it, and the agent's own writes never taken for drift."""

from __future__ import annotations

from typing import Any

from agent.karmada import names
from agent.kube.resources import CONFIGMAPS
from agent.resources import WORKS

from .harness import (
    EXEC_NS,
    condition,
    configmap,
    eventually,
    karmada_work,
    running_pair,
)
from .test_execution import APPLIED_FAILED, APPLIED_OK

JsonDict = dict[str, Any]


def _applied_message(work: JsonDict) -> str:
    cond = condition(work, names.WORK_APPLIED)
    assert cond is not None
    return str(cond["message"])


async def _settled_patches(pair: Any, resource: str = "configmaps") -> int:
    """The member PATCH count once the execution controller has been idle for a moment and
    the count stopped moving: a loop keeps it moving."""
    await pair.idle(pair.execution)
    return int(pair.member.accounting.counts(verb="patch", resource=resource))


async def test_conflicting_duplicates_are_refused_without_writing() -> None:
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        # A ConfigMap watch exists already: the loop needs one to feed itself.
        await pair.create_work(karmada_work("first", [configmap("first")]))
        await pair.wait_work("first", APPLIED_OK)
        await eventually(
            lambda: _absent(pair, "dup"), bool, what="configmap cache knows dup is absent"
        )
        patches = await _settled_patches(pair)

        work = karmada_work(
            "dup",
            [
                configmap("dup", data={"v": "1"}),
                configmap("other"),
                configmap("dup", data={"v": "2"}),
            ],
        )
        await pair.create_work(work)
        failed = await pair.wait_work("dup", APPLIED_FAILED, "Applied=False")
        message = _applied_message(failed)
        assert "ConfigMap default/dup" in message
        assert "manifests 0 and 2" in message
        assert message.startswith("Failed to apply all manifests (1/3): ")
        # Nothing written for that object; the other manifest is applied.
        assert await _absent_on_member(pair, "dup")
        assert (await pair.get_member(CONFIGMAPS, "other"))["data"] == {"key": "value"}
        await pair.idle(pair.execution)
        settled = await _settled_patches(pair)
        assert settled == patches + 1
        # A barrier through the same workers: nothing loops.
        await pair.create_work(karmada_work("barrier", [configmap("barrier", "kube-public")]))
        await pair.wait_work("barrier", APPLIED_OK)
        assert await _settled_patches(pair) == settled + 1


async def test_identical_duplicates_are_applied_once() -> None:
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        await pair.create_work(karmada_work("first", [configmap("first")]))
        await pair.wait_work("first", APPLIED_OK)
        patches = await _settled_patches(pair)
        same = configmap("same", data={"v": "1"})
        await pair.create_work(karmada_work("same", [same, same]))
        await pair.wait_work("same", APPLIED_OK)
        assert (await pair.get_member(CONFIGMAPS, "same"))["data"] == {"v": "1"}
        assert await _settled_patches(pair) == patches + 1


async def test_own_writes_of_two_manifests_are_not_drift() -> None:
    """The agent writes one object twice in a reconcile (a Work carrying the same object under
    two manifests that differ only in how the control plane rendered them is one example; two
    Works taking it over one after the other with overwrite another): every resourceVersion our
    applies returned is ours, whichever came last."""
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        await pair.create_work(karmada_work("first", [configmap("first")]))
        await pair.wait_work("first", APPLIED_OK)
        overwrite = {names.CONFLICT_RESOLUTION_ANNOTATION: names.CONFLICT_OVERWRITE}
        await pair.create_work(
            karmada_work("a", [configmap("shared", data={"v": "a"})], annotations=overwrite)
        )
        await pair.wait_work("a", APPLIED_OK)
        await pair.create_work(
            karmada_work("b", [configmap("shared", data={"v": "b"})], annotations=overwrite)
        )
        await pair.wait_work("b", APPLIED_OK)
        await pair.wait_member(CONFIGMAPS, "shared", lambda o: o["data"] == {"v": "b"})
        settled = await _settled_patches(pair)
        await pair.create_work(karmada_work("barrier", [configmap("barrier", "kube-public")]))
        await pair.wait_work("barrier", APPLIED_OK)
        # Work a no longer owns the object: b took it over, and a is not re-applied for it.
        assert await _settled_patches(pair) == settled + 1
        assert (await pair.get_member(CONFIGMAPS, "shared"))["data"] == {"v": "b"}


async def test_object_of_another_work_is_not_taken_over_silently() -> None:
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        await pair.create_work(karmada_work("owner", [configmap("shared", data={"v": "owner"})]))
        await pair.wait_work("owner", APPLIED_OK)
        await pair.wait_member(CONFIGMAPS, "shared", lambda o: o["data"] == {"v": "owner"})

        await pair.create_work(karmada_work("intruder", [configmap("shared", data={"v": "x"})]))
        failed = await pair.wait_work("intruder", APPLIED_FAILED, "Applied=False")
        message = _applied_message(failed)
        assert f"Work {EXEC_NS}/owner" in message
        assert names.CONFLICT_RESOLUTION_ANNOTATION in message
        assert (await pair.get_member(CONFIGMAPS, "shared"))["data"] == {"v": "owner"}
        await pair.wait_work("owner", APPLIED_OK)

        # With conflict-resolution: overwrite the second Work takes the object over.
        work = await pair.get_work("intruder")
        work["metadata"]["annotations"][names.CONFLICT_RESOLUTION_ANNOTATION] = "overwrite"
        await pair.karmada.replace(WORKS, work)
        await pair.wait_work("intruder", APPLIED_OK)
        taken = await pair.get_member(CONFIGMAPS, "shared")
        assert taken["data"] == {"v": "x"}
        assert taken["metadata"]["annotations"][names.WORK_NAME_ANNOTATION] == "intruder"
        # The first Work now sees it has lost the object rather than fighting for it.
        lost = await pair.wait_work("owner", APPLIED_FAILED, "owner Applied=False")
        assert f"Work {EXEC_NS}/intruder" in _applied_message(lost)
        settled = await _settled_patches(pair)
        await pair.create_work(karmada_work("barrier", [configmap("barrier", "kube-public")]))
        await pair.wait_work("barrier", APPLIED_OK)
        assert await _settled_patches(pair) == settled + 1


async def _absent(pair: Any, name: str) -> bool:
    return bool(pair.ctx.sources.member_objects.known_absent(CONFIGMAPS, "default", name))


async def _absent_on_member(pair: Any, name: str) -> bool:
    listed = await pair.member_client.list(CONFIGMAPS, namespace="default")
    return name not in {o["metadata"]["name"] for o in listed["items"]}


async def test_dot_segment_names_are_refused_naming_the_field() -> None:
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        await pair.create_work(karmada_work("first", [configmap("first")]))
        await pair.wait_work("first", APPLIED_OK)
        await pair.idle(pair.execution)
        pair.member.accounting.reset()
        bad = [configmap(".."), configmap("x", ".."), configmap("a%2Fb"), configmap("fine")]
        await pair.create_work(karmada_work("dots", bad))
        failed = await pair.wait_work("dots", APPLIED_FAILED, "Applied=False")
        message = _applied_message(failed)
        assert message.startswith("Failed to apply all manifests (1/4): [")
        assert "metadata.name: Invalid value: \"..\": may not be '..'" in message
        assert "metadata.namespace: Invalid value: \"..\": may not be '..'" in message
        assert "may not contain '%'" in message
        await pair.idle(pair.execution)
        # Only the good manifest reached the member, and the Work's record of what was applied;
        # nothing was read or written elsewhere.
        assert pair.member.accounting.counts(verb="patch", resource="configmaps") == 1
        assert pair.member.accounting.counts(verb="patch", resource="secrets") == 1
        assert pair.member.accounting.counts(verb="patch") == 2
        assert pair.member.accounting.counts(verb="get", resource="namespaces") == 0
