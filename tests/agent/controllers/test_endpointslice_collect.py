"""endpointsliceCollect end to end: the slices of a Service a MultiClusterService selects are
collected into suppressed Works, shared with serviceExport when both report a slice."""

from __future__ import annotations

from typing import Any

from agent.karmada import collected, names
from agent.kube.resources import ENDPOINT_SLICES
from agent.resources import WORKS
from tests.agent.controllers.harness import (
    APPLIED_OK,
    EXEC_NS,
    eventually,
    karmada_work,
    running_pair,
)
from tests.agent.controllers.test_service_export import app, ready_count, service_export

JsonDict = dict[str, Any]


def multi_cluster_service_work(name: str) -> JsonDict:
    mcs = {
        "apiVersion": collected.MULTI_CLUSTER_SERVICE_API_VERSION,
        "kind": "MultiClusterService",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"types": ["CrossCluster"]},
    }
    # As the control plane's MultiClusterService controller writes it: dispatch-suspended.
    work = karmada_work(
        names.generate_work_name("MultiClusterService", name, "default"), [mcs], suspend=True
    )
    work["metadata"]["labels"].update(
        {collected.MCS_NAMESPACE_LABEL: "default", collected.MCS_NAME_LABEL: name}
    )
    return work


async def test_multicluster_service_collects_slices_suppressed_and_shares_works() -> None:
    async with running_pair("execution", "serviceExport", "endpointsliceCollect") as pair:
        await pair.create_work(karmada_work("web", list(app("web"))))
        await pair.wait_work("web", APPLIED_OK)
        await pair.create_work(multi_cluster_service_work("web"))

        works = await eventually(
            ready_count(pair, "web", collected.MULTI_CLUSTER_SERVICE, 2), bool, what="collected"
        )
        work = works[0]
        labels = work["metadata"]["labels"]
        assert labels[collected.PROPAGATION_INSTRUCTION_LABEL] == "suppressed"
        assert labels[collected.WORK_MANAGED_BY_LABEL] == "MultiClusterService"
        assert "suspendDispatching" not in work["spec"]
        manifest = work["spec"]["workload"]["manifests"][0]
        # Carried as the member has it: not marked as a Karmada workload.
        assert names.WORK_NAME_ANNOTATION not in manifest["metadata"].get("annotations", {})
        assert "uid" not in manifest["metadata"]
        # The execution controller never applies a suppressed Work, nor writes its status.
        assert "status" not in (await pair.get_work(work["metadata"]["name"]))
        slice_name = manifest["metadata"]["name"]
        assert (await pair.member_client.get(ENDPOINT_SLICES, slice_name, namespace="default"))[
            "metadata"
        ]["labels"]["endpointslice.kubernetes.io/managed-by"] == "endpointslice-controller.k8s.io"

        # Exporting the same Service: one Work, both reporters named in managed-by.
        await pair.create_work(karmada_work("web-export", [service_export("web")]))

        async def shared() -> JsonDict | None:
            current = await pair.get_work(work["metadata"]["name"])
            return (
                current
                if collected.managers(current)
                == {
                    "MultiClusterService",
                    "ServiceExport",
                }
                else None
            )

        both = await eventually(shared, bool, what="Work reported by both")
        assert both["metadata"]["labels"]["endpointslice.karmada.io/name"] == "web"

        # The export goes: the Work stays for the MultiClusterService, without the export's marks.
        await pair.karmada.delete(WORKS, "web-export", namespace=EXEC_NS)

        async def only_mcs() -> JsonDict | None:
            current = await pair.get_work(work["metadata"]["name"])
            return current if collected.managers(current) == {"MultiClusterService"} else None

        left = await eventually(only_mcs, bool, what="export's mark withdrawn")
        assert "endpointslice.karmada.io/name" not in left["metadata"]["labels"]
        assert not left["metadata"].get("deletionTimestamp")
