"""A Deployment rollout propagated through the agent, with the control plane played by the test.

The agent applies the Work's manifest and reflects the member Deployment's status into the
Work; the test plays karmada-controller-manager on the other side: it renders the resource
template into the Work (with the `resourcetemplate.karmada.io/generation` annotation, as the
binding controller does) and aggregates the reflected statuses into the template's status as
upstream's aggregateDeploymentStatus does. The member's deployment controller is played by the
test too (the emulator's workload simulator is held off), so every intermediate state is seen.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from agent.karmada import names
from agent.kube.resources import CONFIGMAPS, DEPLOYMENTS
from agent.resources import WORKS
from emulator.controllers import Knobs
from tests import polling
from tests.agent.controllers.harness import (
    CLUSTER,
    EXEC_NS,
    Pair,
    WorkIds,
    configmap,
    deployment,
    karmada_manifest,
    karmada_work,
    running_pair,
)

JsonDict = dict[str, Any]

# The member's own controllers never act within a test.
HELD_OFF = Knobs(workload_ready_delay=3600.0, simulate_pods=False)

_SUMMED = (
    "replicas",
    "readyReplicas",
    "updatedReplicas",
    "availableReplicas",
    "unavailableReplicas",
)


def aggregate_deployment_status(template: JsonDict, items: list[JsonDict]) -> JsonDict:
    """The template's status from the members' reflected statuses (ResourceBinding
    status.aggregatedStatus items), as karmada-io/karmada pkg/resourceinterpreter/default/
    native/aggregatestatus.go (aggregateDeploymentStatus, v1.10 onwards) computes it.

    The replica counts are summed. observedGeneration becomes the template's generation only
    when every member reports a status observed at its own generation (observedGeneration >=
    generation) and rendered from this template generation or a later one
    (resourceTemplateGeneration >= the template's generation); otherwise it keeps its value."""
    generation = int(template["metadata"]["generation"])
    old = template.get("status") or {}
    new: JsonDict = dict.fromkeys(_SUMMED, 0)
    current = 0
    for item in items:
        status = item.get("status")
        if status is None:
            continue
        for field in _SUMMED:
            new[field] += int(status.get(field, 0))
        if (
            int(status.get("observedGeneration", 0)) >= int(status.get("generation", 0))
            and int(status.get("resourceTemplateGeneration", 0)) >= generation
        ):
            current += 1
    observed = generation if current == len(items) else int(old.get("observedGeneration", 0))
    # appsv1.DeploymentStatus as the control plane writes it: zero counts left out.
    return {k: v for k, v in {"observedGeneration": observed, **new}.items() if v}


class ControlPlane:
    """The part of karmada-controller-manager the test needs: one Deployment template, its
    Work for the one member, and the template status aggregated from the Work."""

    def __init__(self, pair: Pair, template: JsonDict) -> None:
        self.pair = pair
        self.template = template
        self.ids = WorkIds()
        self.work_name = f"{template['metadata']['name']}-deployment"
        # An OverridePolicy's edit of this member's copy, if any.
        self.override: Callable[[JsonDict], None] | None = None

    def render(self) -> JsonDict:
        """The template as the binding controller renders it into the Work's manifest."""
        workload = copy.deepcopy(self.template)
        workload.pop("status", None)
        if self.override is not None:
            self.override(workload["spec"])
        manifest = karmada_manifest(workload, self.work_name, self.ids)
        manifest["metadata"]["annotations"][names.RESOURCE_TEMPLATE_GENERATION_ANNOTATION] = str(
            self.template["metadata"]["generation"]
        )
        return manifest

    async def propagate(self) -> None:
        work = karmada_work(self.work_name, [self.render()], raw=True)
        work["metadata"]["labels"][names.WORK_PERMANENT_ID_LABEL] = self.ids.work
        work["metadata"]["labels"][names.BINDING_PERMANENT_ID_LABEL] = self.ids.binding
        await self.pair.create_work(work)

    async def edit_template(self, edit: Callable[[JsonDict], None]) -> None:
        """A user's edit of the template: a new generation, rendered into the Work again."""
        edit(self.template["spec"])
        self.template["metadata"]["generation"] += 1
        work = await self.pair.get_work(self.work_name)
        work["spec"]["workload"]["manifests"] = [self.render()]
        await self.pair.karmada.replace(WORKS, work)

    async def reported(self, check: Any, what: str) -> JsonDict:
        """The member's reflected status, once the Work reports one that passes `check`."""

        def entry(work: JsonDict) -> JsonDict | None:
            for item in (work.get("status") or {}).get("manifestStatuses") or []:
                if item["identifier"]["kind"] == "Deployment" and "status" in item:
                    return dict(item["status"])
            return None

        work = await self.pair.wait_work(
            self.work_name, lambda w: (s := entry(w)) is not None and check(s), what
        )
        status = entry(work)
        assert status is not None
        return status

    def aggregate(self, reflected: JsonDict) -> JsonDict:
        items = [{"clusterName": CLUSTER, "status": reflected, "applied": True}]
        self.template["status"] = aggregate_deployment_status(self.template, items)
        return dict(self.template["status"])


async def member_deployment_controller_syncs(pair: Pair, name: str) -> int:
    """The member's deployment controller observes the current spec and completes the rollout."""
    live = await pair.get_member(DEPLOYMENTS, name)
    generation = int(live["metadata"]["generation"])
    replicas = int(live["spec"]["replicas"])
    live["status"] = {
        "observedGeneration": generation,
        "replicas": replicas,
        "updatedReplicas": replicas,
        "readyReplicas": replicas,
        "availableReplicas": replicas,
    }
    await pair.member_client.update_status(DEPLOYMENTS, live)
    return generation


def set_image(image: str) -> Callable[[JsonDict], None]:
    def edit(spec: JsonDict) -> None:
        spec["template"]["spec"]["containers"][0]["image"] = image

    return edit


async def test_template_observed_generation_follows_each_rollout_through_the_agent() -> None:
    async with running_pair("execution", "workStatus", knobs=HELD_OFF) as pair:
        template = deployment("web", replicas=2)
        # A template edited a few times before it was propagated: its generation and the
        # member object's generation are counted apart.
        template["metadata"]["generation"] = 5
        cp = ControlPlane(pair, template)
        await cp.propagate()

        # Applied, not yet seen by the member's deployment controller: not observed.
        first = await cp.reported(lambda s: s.get("resourceTemplateGeneration") == 5, "applied")
        assert first == {"generation": 1, "resourceTemplateGeneration": 5}
        assert "observedGeneration" not in cp.aggregate(first)

        member_generation = await member_deployment_controller_syncs(pair, "web")
        done = await cp.reported(lambda s: s.get("observedGeneration") == 1, "rolled out")
        assert done == {
            "generation": member_generation,
            "resourceTemplateGeneration": 5,
            "observedGeneration": member_generation,
            "replicas": 2,
            "updatedReplicas": 2,
            "readyReplicas": 2,
            "availableReplicas": 2,
        }
        assert cp.aggregate(done)["observedGeneration"] == 5

        # Two image rollouts, then a template edit an OverridePolicy hides from this member:
        # its spec stays, but the new annotation alone bumps a Deployment's generation, so
        # the member's controller has to observe that one too.
        rollouts = [
            (set_image("nginx:1.28"), None, "nginx:1.28"),
            (set_image("nginx:1.29"), None, "nginx:1.29"),
            (set_image("nginx:1.30"), set_image("nginx:1.29"), "nginx:1.29"),
        ]
        for edit, override, image in rollouts:
            cp.override = override
            await cp.edit_template(edit)
            template_generation = cp.template["metadata"]["generation"]
            stale = await cp.reported(
                lambda s, g=template_generation: s.get("resourceTemplateGeneration") == g,
                f"generation {template_generation} applied",
            )
            # The member has the new manifest; its deployment controller has not observed it.
            assert stale["generation"] == member_generation + 1
            assert stale["observedGeneration"] == member_generation
            assert cp.aggregate(stale)["observedGeneration"] == template_generation - 1

            member_generation = await member_deployment_controller_syncs(pair, "web")
            current = await cp.reported(
                lambda s, g=member_generation: s.get("observedGeneration") == g,
                f"generation {template_generation} rolled out",
            )
            assert current["generation"] == member_generation
            assert cp.aggregate(current)["observedGeneration"] == template_generation
            live = await pair.get_member(DEPLOYMENTS, "web")
            assert live["spec"]["template"]["spec"]["containers"][0]["image"] == image

        assert cp.template["metadata"]["generation"] == 8
        assert cp.template["status"] == {
            "observedGeneration": 8,
            "replicas": 2,
            "updatedReplicas": 2,
            "readyReplicas": 2,
            "availableReplicas": 2,
        }


async def test_rollouts_converge_with_the_members_simulated_controllers() -> None:
    # The emulator's workload simulator plays the member's deployment controller this time.
    async with running_pair(
        "execution", "workStatus", knobs=Knobs(workload_ready_delay=0.2)
    ) as pair:
        cp = ControlPlane(pair, deployment("sim", replicas=3))
        cp.template["metadata"]["generation"] = 1
        await cp.propagate()
        for image in (None, "nginx:1.28", "nginx:1.29"):
            if image is not None:
                await cp.edit_template(set_image(image))
            generation = cp.template["metadata"]["generation"]
            settled = await cp.reported(
                lambda s, g=generation: (
                    s.get("resourceTemplateGeneration") == g
                    and s.get("observedGeneration", 0) >= s.get("generation", 0)
                ),
                f"generation {generation} rolled out by the member",
            )
            status = cp.aggregate(settled)
            assert status["observedGeneration"] == generation
            assert status["readyReplicas"] == 3


async def test_a_member_not_reporting_holds_the_template_back() -> None:
    template = {"metadata": {"generation": 3}, "status": {"observedGeneration": 2}}
    fresh = {"generation": 4, "observedGeneration": 4, "resourceTemplateGeneration": 3}
    assert aggregate_deployment_status(template, [{"status": fresh}])["observedGeneration"] == 3
    for lagging in (
        None,  # applied, status not reflected yet
        {**fresh, "observedGeneration": 3},  # its controller has not observed its spec
        {**fresh, "resourceTemplateGeneration": 2},  # rendered from an older template
    ):
        items = [{"status": fresh}, {"status": lagging}]
        assert aggregate_deployment_status(template, items)["observedGeneration"] == 2


async def test_status_without_template_generation_is_not_reflected_until_it_has_one() -> None:
    async with running_pair("execution", "workStatus", knobs=HELD_OFF) as pair:
        ids = WorkIds()
        bare = karmada_manifest(deployment("bare"), "bare", ids)
        del bare["metadata"]["annotations"][names.RESOURCE_TEMPLATE_GENERATION_ANNOTATION]
        cm = karmada_manifest(configmap("bare-config"), "bare", ids)
        await pair.create_work(karmada_work("bare", [bare, cm], raw=True))

        async def failed() -> bool:
            reasons = [e["reason"] for e in await pair.events_for("bare")]
            return names.EVENT_REFLECT_STATUS_FAILED in reasons

        await pair.wait_work("bare", lambda w: bool(w.get("status", {}).get("conditions")))
        await polling.eventually(failed, what="ReflectStatusFailed event")
        work = await pair.get_work("bare")
        kinds = [e["identifier"]["kind"] for e in work["status"]["manifestStatuses"]]
        assert kinds == ["ConfigMap"]
        await pair.get_member(CONFIGMAPS, "bare-config")

        # The control plane renders the annotation: the status is reflected.
        bare["metadata"]["annotations"][names.RESOURCE_TEMPLATE_GENERATION_ANNOTATION] = "1"
        work["spec"]["workload"]["manifests"] = [bare, cm]
        await pair.karmada.replace(WORKS, work)
        reported = await pair.wait_work(
            "bare",
            lambda w: len(w["status"].get("manifestStatuses") or []) == 2,
            "Deployment status reflected",
        )
        deploy = reported["status"]["manifestStatuses"][0]
        # The new annotation alone bumped the Deployment's generation.
        assert deploy["status"] == {"generation": 2, "resourceTemplateGeneration": 1}
        assert reported["metadata"]["namespace"] == EXEC_NS
