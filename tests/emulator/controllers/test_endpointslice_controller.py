"""The member emulator keeps EndpointSlices for selector Services, as kube-controller-manager's
EndpointSlice controller does."""

from __future__ import annotations

from typing import Any

from agent.kube.errors import NotFoundError
from agent.kube.resources import DEPLOYMENTS, ENDPOINT_SLICES, SERVICES
from agent.resources import SERVICE_EXPORTS
from emulator.controllers import Knobs
from emulator.emulator import run_emulator
from tests.agent.controllers.harness import eventually, kube_client

JsonDict = dict[str, Any]


def deployment(name: str, replicas: int) -> JsonDict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "web",
                            "image": "nginx:1.27",
                            "ports": [{"name": "http", "containerPort": 8080}],
                        }
                    ]
                },
            },
        },
    }


def service(name: str, *, selector: bool = True) -> JsonDict:
    spec: JsonDict = {"ports": [{"name": "web", "port": 80, "targetPort": "http"}]}
    if selector:
        spec["selector"] = {"app": name}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default", "labels": {"tier": "front"}},
        "spec": spec,
    }


def ready_addresses(slices: list[JsonDict]) -> int:
    return sum(
        1
        for s in slices
        for ep in s.get("endpoints") or []
        if (ep.get("conditions") or {}).get("ready")
    )


async def test_slices_follow_the_pods_a_service_selects() -> None:
    async with run_emulator("member", knobs=Knobs(workload_ready_delay=0.02)) as member:
        client = kube_client(member)
        try:
            await client.create(DEPLOYMENTS, deployment("web", 2))
            await client.create(SERVICES, service("web"))
            await client.create(SERVICES, service("manual", selector=False))

            async def slices_of(name: str) -> list[JsonDict]:
                listed = await client.list(
                    ENDPOINT_SLICES,
                    namespace="default",
                    label_selector=f"kubernetes.io/service-name={name}",
                )
                return list(listed["items"])

            async def with_ready(count: int) -> list[JsonDict] | None:
                slices = await slices_of("web")
                return slices if ready_addresses(slices) == count else None

            slices = await eventually(lambda: with_ready(2), bool, what="2 ready endpoints")
            assert len(slices) == 1
            eps = slices[0]
            assert eps["metadata"]["name"].startswith("web-")
            assert eps["metadata"]["labels"] == {
                "kubernetes.io/service-name": "web",
                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
                "tier": "front",
            }
            owner = eps["metadata"]["ownerReferences"][0]
            assert (owner["kind"], owner["name"], owner["controller"]) == ("Service", "web", True)
            assert eps["addressType"] == "IPv4"
            # The named targetPort resolved to the container's port.
            assert eps["ports"] == [{"name": "web", "port": 8080, "protocol": "TCP"}]
            pods = {ep["targetRef"]["name"] for ep in eps["endpoints"]}
            assert len(pods) == 2
            assert all(name.startswith("web-") for name in pods)
            assert all(ep.get("nodeName") for ep in eps["endpoints"])

            # A selector-less Service gets no slices from the controller.
            assert await slices_of("manual") == []

            # Scaling changes the endpoints of the same slice.
            scaled = await client.get(DEPLOYMENTS, "web", namespace="default")
            scaled["spec"]["replicas"] = 3
            await client.replace(DEPLOYMENTS, scaled)
            slices = await eventually(lambda: with_ready(3), bool, what="3 ready endpoints")
            assert [s["metadata"]["name"] for s in slices] == [eps["metadata"]["name"]]

            # Deleting the Service removes its slices (garbage collection by owner).
            await client.delete(SERVICES, "web", namespace="default")

            async def gone() -> bool:
                return not await slices_of("web")

            await eventually(gone, bool, what="slices collected")
        finally:
            await client.close()


async def test_mcs_api_is_served_on_member_and_control_plane() -> None:
    export = {
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ServiceExport",
        "metadata": {"name": "web", "namespace": "default"},
    }
    for profile in ("member", "karmada"):
        async with run_emulator(profile) as emu:
            client = kube_client(emu)
            try:
                created = await client.create(SERVICE_EXPORTS, export)
                assert created["metadata"]["uid"]
                await client.delete(SERVICE_EXPORTS, "web", namespace="default")
                try:
                    await client.get(SERVICE_EXPORTS, "web", namespace="default")
                except NotFoundError:
                    pass
                else:
                    raise AssertionError("ServiceExport still there after delete")
            finally:
                await client.close()
