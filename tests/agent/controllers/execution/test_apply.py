"""Applying a Work's manifests: apply order, updates, one manifest's failure kept to itself,
duplicate manifests, names refused before any request, values a Retain keeps, and no GET once
the caches know every name."""

from __future__ import annotations

from typing import Any

from agent.controllers.execution import ExecutionController
from agent.controllers.execution.apply import FIELD_MANAGER
from agent.karmada import names
from agent.kube.client import KubeClient
from agent.kube.config import ClientConfig
from agent.kube.resources import CONFIGMAPS, DEPLOYMENTS, NAMESPACES
from agent.kube.transport import Transport
from agent.resources import WORKS
from tests.agent.controllers.harness import (
    APPLIED_FAILED,
    APPLIED_OK,
    WIDGETS,
    HeldEvents,
    applied_message,
    condition,
    configmap,
    crd,
    deployment,
    eventually,
    karmada_work,
    labels,
    named,
    running_pair,
    settled_patches,
)

JsonDict = dict[str, Any]


async def test_crd_then_its_object_and_namespace_then_objects() -> None:
    widget = {
        "apiVersion": "example.io/v1",
        "kind": "Widget",
        "metadata": {"name": "w1", "namespace": "team-a"},
        "spec": {"size": 3},
    }
    team_ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
    # Out of order on purpose: the object first, the things it needs last.
    work = karmada_work("widgets", [widget, configmap("cfg", "team-a"), crd(), team_ns])
    async with running_pair("execution") as pair:
        await pair.create_work(work)
        await pair.wait_work("widgets", APPLIED_OK, "Applied=True")
        obj = await pair.get_member(WIDGETS, "w1", "team-a")
        assert obj["spec"] == {"size": 3}
        assert labels(await pair.get_member(NAMESPACES, "team-a", None))[names.MANAGED_LABEL]
        assert (await pair.get_member(CONFIGMAPS, "cfg", "team-a"))["data"] == {"key": "value"}


async def test_work_update_changes_member_object() -> None:
    async with running_pair("execution") as pair:
        await pair.create_work(karmada_work("cfg", [configmap("cfg", data={"a": "1", "b": "2"})]))
        await pair.wait_member(CONFIGMAPS, "cfg", lambda o: o.get("data") == {"a": "1", "b": "2"})

        work = await pair.get_work("cfg")
        work["spec"]["workload"]["manifests"][0]["data"] = {"a": "10"}
        await pair.karmada.replace(WORKS, work)
        # "b" left the manifest, so it leaves the object: we applied it, we own it.
        await pair.wait_member(CONFIGMAPS, "cfg", lambda o: o.get("data") == {"a": "10"})
        await pair.wait_work("cfg", APPLIED_OK)


async def test_malformed_manifest_and_unknown_kind_do_not_block_the_others() -> None:
    good = configmap("good")
    unknown = {
        "apiVersion": "nothere.io/v1",
        "kind": "Gadget",
        "metadata": {"name": "g", "namespace": "default"},
    }
    no_kind = {"apiVersion": "v1", "metadata": {"name": "x", "namespace": "default"}}
    async with running_pair("execution") as pair:
        work = karmada_work("mixed", [good, unknown, no_kind])
        await pair.create_work(work)
        failed = await pair.wait_work("mixed", APPLIED_FAILED)
        message = condition(failed, names.WORK_APPLIED)["message"]  # type: ignore[index]
        assert message.startswith("Failed to apply all manifests (1/3): [")
        assert "manifest 2 (default/x) has no kind" in message
        assert "Gadget default/g" in message
        assert (await pair.get_member(CONFIGMAPS, "good"))["data"] == {"key": "value"}
        assert "error" in pair.metrics.results()


async def test_conflicting_duplicates_are_refused_without_writing() -> None:
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        # A ConfigMap watch exists already: the loop needs one to feed itself.
        await pair.create_work(karmada_work("first", [configmap("first")]))
        await pair.wait_work("first", APPLIED_OK)
        await eventually(
            lambda: _absent(pair, "dup"), bool, what="configmap cache knows dup is absent"
        )
        patches = await settled_patches(pair)

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
        message = applied_message(failed)
        assert "ConfigMap default/dup" in message
        assert "manifests 0 and 2" in message
        assert message.startswith("Failed to apply all manifests (1/3): ")
        # Nothing written for that object; the other manifest is applied.
        assert await _absent_on_member(pair, "dup")
        assert (await pair.get_member(CONFIGMAPS, "other"))["data"] == {"key": "value"}
        await pair.idle(pair.execution)
        settled = await settled_patches(pair)
        assert settled == patches + 1
        # A barrier through the same workers: nothing loops.
        await pair.create_work(karmada_work("barrier", [configmap("barrier", "kube-public")]))
        await pair.wait_work("barrier", APPLIED_OK)
        assert await settled_patches(pair) == settled + 1


async def test_a_cluster_scoped_duplicate_with_a_stray_namespace_is_refused() -> None:
    """Two copies of one ClusterRole, the second with a metadata.namespace and other rules, are
    one object: refused as conflicting duplicates, nothing applied, nothing looping."""

    def role(verbs: list[str], **meta: str) -> JsonDict:
        return {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "dupcr", **meta},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs}],
        }

    async with running_pair("execution") as pair:
        assert pair.execution is not None
        await pair.create_work(
            karmada_work("dupcr", [role(["get"]), role(["get", "list"], namespace="whatever")])
        )
        failed = await pair.wait_work("dupcr", APPLIED_FAILED, "Applied=False")
        assert "manifests 0 and 1 describe the same object ClusterRole dupcr" in (
            applied_message(failed)
        )
        await pair.idle(pair.execution)
        assert pair.member.accounting.counts(verb="patch", resource="clusterroles") == 0


async def _absent(pair: Any, name: str) -> bool:
    return bool(pair.ctx.sources.member_objects.known_absent(CONFIGMAPS, "default", name))


async def _absent_on_member(pair: Any, name: str) -> bool:
    listed = await pair.member_client.list(CONFIGMAPS, namespace="default")
    return name not in {o["metadata"]["name"] for o in listed["items"]}


async def test_identical_duplicates_are_applied_once() -> None:
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        await pair.create_work(karmada_work("first", [configmap("first")]))
        await pair.wait_work("first", APPLIED_OK)
        patches = await settled_patches(pair)
        same = configmap("same", data={"v": "1"})
        await pair.create_work(karmada_work("same", [same, same]))
        await pair.wait_work("same", APPLIED_OK)
        assert (await pair.get_member(CONFIGMAPS, "same"))["data"] == {"v": "1"}
        assert await settled_patches(pair) == patches + 1


async def test_dot_segment_names_are_refused_naming_the_field() -> None:
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        await pair.create_work(karmada_work("first", [configmap("first")]))
        await pair.wait_work("first", APPLIED_OK)
        await pair.idle(pair.execution)
        await pair.ctx.sources.records.flush()
        pair.member.accounting.reset()
        bad = [configmap(".."), configmap("x", ".."), configmap("a%2Fb"), configmap("fine")]
        await pair.create_work(karmada_work("dots", bad))
        failed = await pair.wait_work("dots", APPLIED_FAILED, "Applied=False")
        message = applied_message(failed)
        assert message.startswith("Failed to apply all manifests (1/4): [")
        assert "metadata.name: Invalid value: \"..\": may not be '..'" in message
        assert "metadata.namespace: Invalid value: \"..\": may not be '..'" in message
        assert "may not contain '%'" in message
        await pair.idle(pair.execution)
        await pair.ctx.sources.records.flush()
        # Only the good manifest reached the member, and the Work's record of what was applied
        # (a segment of the record, agent.sources.work_records); nothing was read or written
        # elsewhere.
        assert pair.member.accounting.counts(verb="patch", resource="configmaps") == 1
        assert pair.member.accounting.counts(verb="patch") == 1
        assert pair.member.accounting.counts(verb="create", resource="secrets") == 1
        assert pair.member.accounting.counts(verb="get", resource="namespaces") == 0


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


async def test_retained_replicas_survive_an_apply_from_a_cache_behind_the_member() -> None:
    """The member scales the Deployment, and the Work changes before the member watch brings
    the scale: the apply made from the cached object would put its replicas back. Made from
    that version (its resourceVersion), it is refused, and made again from the object read."""
    async with running_pair("execution") as pair:
        assert pair.execution is not None
        objects = pair.ctx.sources.member_objects
        template = deployment("web", replicas=3)
        template["metadata"]["labels"][names.RETAIN_REPLICAS_LABEL] = "true"
        await pair.create_work(karmada_work("web", [template]))
        await pair.wait_work("web", APPLIED_OK, "Applied=True")
        await pair.idle(pair.execution)
        member = await pair.get_member(DEPLOYMENTS, "web")

        def cached_version() -> Any:
            obj = objects.get(DEPLOYMENTS, "default", "web")[0] or {}
            return obj.get("metadata", {}).get("resourceVersion")

        version = member["metadata"]["resourceVersion"]
        await eventually(cached_version, lambda rv: rv == version, what="cache caught up")

        held = HeldEvents(objects._reflectors[DEPLOYMENTS], named("web"))
        await pair.member_client.patch(
            DEPLOYMENTS, "web", {"spec": {"replicas": 5}}, patch_type="merge", namespace="default"
        )
        await held.arrived(1)
        stale = objects.get(DEPLOYMENTS, "default", "web")[0]
        assert stale is not None
        assert stale["spec"]["replicas"] == 3

        live = await pair.get_work("web")
        live["spec"]["workload"]["manifests"][0]["metadata"]["annotations"]["example.io/n"] = "2"
        await pair.karmada.replace(WORKS, live, namespace=live["metadata"]["namespace"])
        await pair.wait_member(
            DEPLOYMENTS,
            "web",
            lambda d: d["metadata"].get("annotations", {}).get("example.io/n") == "2",
            what="second version applied",
        )
        await pair.wait_work("web", APPLIED_OK, "Applied=True")
        assert (await pair.get_member(DEPLOYMENTS, "web"))["spec"]["replicas"] == 5
        held.release()
        await pair.idle(pair.execution)
        assert (await pair.get_member(DEPLOYMENTS, "web"))["spec"]["replicas"] == 5


async def test_the_first_apply_of_a_kind_waits_for_its_caches_rather_than_a_get() -> None:
    async with running_pair("execution") as pair:
        objects = pair.ctx.sources.member_objects
        assert not objects.known(CONFIGMAPS)
        await pair.create_work(karmada_work("first", [configmap("first"), configmap("also")]))
        await pair.wait_work("first", APPLIED_OK)
        assert objects.known(CONFIGMAPS)
        accounting = pair.member.accounting
        assert accounting.counts(verb="get", resource="configmaps", namespace="default") == 0
        assert accounting.counts(verb="patch", resource="configmaps", namespace="default") == 2


async def test_no_get_before_apply_once_the_caches_know_every_name() -> None:
    async with running_pair("execution") as pair:
        objects = pair.ctx.sources.member_objects
        await pair.create_work(karmada_work("first", [configmap("first")]))
        await pair.wait_work("first", APPLIED_OK)

        async def absent(name: str) -> bool:
            return objects.known_absent(CONFIGMAPS, "default", name)

        await eventually(lambda: absent("second"), bool, what="configmap caches synced")
        pair.member.accounting.reset()
        await pair.create_work(karmada_work("second", [configmap("second")]))
        await pair.wait_work("second", APPLIED_OK)
        assert pair.member.accounting.counts(verb="get", resource="configmaps") == 0
        assert pair.member.accounting.counts(verb="patch", resource="configmaps") == 1
        # An object that is not Karmada's, created after the caches synced, is known by name:
        # the ownership guard still refuses it (after one GET to look at it).
        await pair.member_client.create(CONFIGMAPS, configmap("late", data={"owner": "them"}))
        await eventually(lambda: absent("late"), lambda known: not known, what="late seen")
        await pair.create_work(karmada_work("late", [configmap("late", data={"owner": "us"})]))
        await pair.wait_work("late", APPLIED_FAILED, "Applied=False")
        assert (await pair.get_member(CONFIGMAPS, "late"))["data"] == {"owner": "them"}


async def test_fields_upstreams_agent_wrote_are_taken_over() -> None:
    """After a switch from upstream's Go agent: it created the object (a create or PUT, recorded
    as the Update manager named after its User-Agent); a field the Work no longer has is removed
    at our first apply, although that manager wrote it."""
    async with running_pair() as pair:
        written = karmada_work("cfg", [configmap("cfg", data={"a": "1", "b": "2"})])
        go_agent = KubeClient(
            Transport(
                ClientConfig(
                    host=pair.member.url,
                    qps=0,
                    user_agent="karmada-agent/v1.19.0 (linux/amd64) kubernetes/f8fdd02",
                ),
                transport_factory=lambda _cfg: pair.member.transport(),
            )
        )
        try:
            await go_agent.create(
                CONFIGMAPS, written["spec"]["workload"]["manifests"][0], namespace="default"
            )
        finally:
            await go_agent.close()
        live = await pair.get_member(CONFIGMAPS, "cfg")
        assert [(e["manager"], e["operation"]) for e in live["metadata"]["managedFields"]] == [
            ("karmada-agent", "Update")
        ]
        work = karmada_work("cfg", [configmap("cfg", data={"a": "1"})])
        work["spec"]["workload"]["manifests"][0]["metadata"] = written["spec"]["workload"][
            "manifests"
        ][0]["metadata"]
        execution = ExecutionController(pair.ctx)
        await pair.start("execution", execution)
        try:
            await pair.create_work(work)
            await pair.wait_work("cfg", APPLIED_OK)
            member = await pair.wait_member(
                CONFIGMAPS, "cfg", lambda o: o.get("data") == {"a": "1"}
            )
            managers = [(e["manager"], e["operation"]) for e in member["metadata"]["managedFields"]]
            assert managers == [(FIELD_MANAGER, "Apply")]
        finally:
            await pair.stop(execution)
