"""serviceExport end to end: emulated control plane and member, the member's EndpointSlices kept
by its emulated EndpointSlice controller. Whether serviceExport and endpointsliceCollect are on
by default, as upstream."""

from __future__ import annotations

from typing import Any

from agent.karmada import collected, names
from agent.kube.errors import NotFoundError
from agent.kube.resources import ENDPOINT_SLICES
from agent.options import Options
from agent.options.feature_gates import resolve_feature_gates
from agent.resources import SERVICE_EXPORTS, WORKS

from .harness import (
    APPLIED_OK,
    EXEC_NS,
    Pair,
    eventually,
    has_condition,
    karmada_work,
    running_pair,
)

JsonDict = dict[str, Any]


def app(name: str, replicas: int = 2) -> list[JsonDict]:
    """A Deployment and the Service selecting its Pods."""
    labels = {"app": name}
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "selector": labels,
                "ports": [{"name": "http", "port": 80, "targetPort": 8080}],
            },
        },
    ]


def service_export(name: str) -> JsonDict:
    return {
        "apiVersion": collected.SERVICE_EXPORT_API_VERSION,
        "kind": "ServiceExport",
        "metadata": {"name": name, "namespace": "default"},
    }


async def member_slices(pair: Pair, service: str) -> list[JsonDict]:
    listed = await pair.member_client.list(
        ENDPOINT_SLICES, namespace="default", label_selector=f"kubernetes.io/service-name={service}"
    )
    return [s for s in listed["items"] if not collected.is_karmada_slice(s)]


async def reported(pair: Pair, service: str, reporter: collected.Reporter) -> list[JsonDict]:
    listed = await pair.karmada.list(
        WORKS,
        namespace=EXEC_NS,
        label_selector=f"{reporter.namespace_label}=default,{reporter.name_label}={service}",
    )
    return [w for w in listed["items"] if collected.is_reported_by(w, reporter)]


def endpoint_count(work: JsonDict) -> int:
    manifest = work["spec"]["workload"]["manifests"][0]
    return len(manifest.get("endpoints") or [])


def ready_count(pair: Pair, service: str, reporter: collected.Reporter, count: int) -> Any:
    async def check() -> list[JsonDict] | None:
        works = await reported(pair, service, reporter)
        live = [w for w in works if not w["metadata"].get("deletionTimestamp")]
        return live if live and sum(endpoint_count(w) for w in live) == count else None

    return check


async def test_exported_service_slices_become_works_with_upstream_names_and_labels() -> None:
    async with running_pair("execution", "serviceExport") as pair:
        await pair.create_work(karmada_work("web", [*app("web"), service_export("web")]))
        await pair.wait_work("web", APPLIED_OK, "Applied=True")

        works = await eventually(
            ready_count(pair, "web", collected.SERVICE_EXPORT, 2), bool, what="2 endpoints reported"
        )
        slices = await member_slices(pair, "web")
        assert len(works) == len(slices) == 1
        eps, work = slices[0], works[0]
        meta = work["metadata"]
        assert meta["name"] == names.generate_work_name(
            "EndpointSlice", eps["metadata"]["name"], "default"
        )
        assert meta["labels"] == {
            "endpointslice.karmada.io/namespace": "default",
            "endpointslice.karmada.io/name": "web",
            "endpointslice.karmada.io/managed-by": "ServiceExport",
        }
        assert meta["finalizers"] == ["karmada.io/endpointslice-controller"]
        assert work["spec"]["suspendDispatching"] is True

        manifest = work["spec"]["workload"]["manifests"][0]
        assert (manifest["apiVersion"], manifest["kind"]) == (
            "discovery.k8s.io/v1",
            "EndpointSlice",
        )
        m_meta = manifest["metadata"]
        assert m_meta["name"] == eps["metadata"]["name"]
        assert m_meta["labels"]["karmada.io/managed"] == "true"
        assert m_meta["labels"]["kubernetes.io/service-name"] == "web"
        annotations = m_meta["annotations"]
        assert annotations["resourcetemplate.karmada.io/uid"] == eps["metadata"]["uid"]
        assert annotations["work.karmada.io/name"] == meta["name"]
        assert annotations["work.karmada.io/namespace"] == EXEC_NS
        assert annotations["resourcetemplate.karmada.io/managed-labels"] == ",".join(
            sorted(m_meta["labels"])
        )
        for server_field in ("uid", "resourceVersion", "ownerReferences", "managedFields"):
            assert server_field not in m_meta
        assert manifest["endpoints"] == eps["endpoints"]
        assert manifest["ports"] == eps["ports"]

        # The execution controller leaves the reported Work alone: dispatch is suspended.
        await pair.wait_work(
            meta["name"],
            has_condition(names.WORK_DISPATCHING, "False", names.REASON_SUSPEND_DISPATCHING),
        )


async def test_reported_works_follow_endpoint_changes_and_the_export_going() -> None:
    async with running_pair("execution", "serviceExport") as pair:
        await pair.create_work(karmada_work("web", app("web", replicas=1)))
        await pair.create_work(karmada_work("web-export", [service_export("web")]))
        await eventually(
            ready_count(pair, "web", collected.SERVICE_EXPORT, 1), bool, what="1 endpoint"
        )

        # Scale out through the Work: the reported slice follows the member's endpoints.
        current = await pair.get_work("web")
        current["spec"]["workload"]["manifests"][0]["spec"]["replicas"] = 3
        await pair.karmada.replace(WORKS, current)
        await eventually(
            ready_count(pair, "web", collected.SERVICE_EXPORT, 3), bool, what="3 endpoints"
        )

        # The ServiceExport's Work goes, so the export leaves the member: the reports are
        # withdrawn (the control plane's EndpointSlice controller then removes its finalizer).
        await pair.karmada.delete(WORKS, "web-export", namespace=EXEC_NS)
        await pair.wait_member_gone(SERVICE_EXPORTS, "web")

        async def withdrawn() -> bool:
            works = await reported(pair, "web", collected.SERVICE_EXPORT)
            return bool(works) and all(w["metadata"].get("deletionTimestamp") for w in works)

        await eventually(withdrawn, bool, what="reported Works deleted")


async def test_slices_karmada_dispatched_here_are_never_reported_back() -> None:
    async with running_pair("execution", "serviceExport") as pair:
        imported = {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": "imported-web-member2",
                "namespace": "default",
                "labels": {
                    "kubernetes.io/service-name": "web",
                    "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.karmada.io",
                },
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.9.9.9"]}],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        }
        await pair.member_client.create(ENDPOINT_SLICES, imported, namespace="default")
        await pair.create_work(karmada_work("web", [*app("web"), service_export("web")]))
        works = await eventually(
            ready_count(pair, "web", collected.SERVICE_EXPORT, 2), bool, what="own slice reported"
        )
        imported_work = collected.slice_work_name("default", "imported-web-member2")
        assert imported_work not in {w["metadata"]["name"] for w in works}
        # A change to the imported slice is no reason to report it either.
        live = await pair.member_client.get(
            ENDPOINT_SLICES, "imported-web-member2", namespace="default"
        )
        live["endpoints"] = [{"addresses": ["10.9.9.10"]}]
        await pair.member_client.replace(ENDPOINT_SLICES, live)
        await pair.idle(pair.controllers["serviceExport"])
        try:
            await pair.get_work(imported_work)
        except NotFoundError:
            pass
        else:
            raise AssertionError("an EndpointSlice Karmada dispatched was reported back")


async def test_orphaned_reports_are_removed_at_start() -> None:
    async with running_pair("execution") as pair:
        await pair.create_work(karmada_work("web", [*app("web"), service_export("web")]))
        await pair.wait_work("web", APPLIED_OK, "Applied=True")
        await eventually(lambda: member_slices(pair, "web"), bool, what="member slices")
        # A report left by an earlier run for a slice that no longer exists.
        stale_slice = {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": "web-gone1",
                "namespace": "default",
                "labels": {"kubernetes.io/service-name": "web"},
            },
            "addressType": "IPv4",
            "endpoints": [],
        }
        orphan = collected.desired_work(stale_slice, collected.SERVICE_EXPORT, EXEC_NS, None)
        await pair.karmada.create(WORKS, orphan, namespace=EXEC_NS)

        controller = pair.controllers.setdefault("serviceExport", _build(pair, "serviceExport"))
        # As the app starts it: its declared sources first, by the manager.
        await pair.start("serviceExport", controller)
        try:
            await eventually(
                ready_count(pair, "web", collected.SERVICE_EXPORT, 2), bool, what="reports"
            )

            async def orphan_withdrawn() -> bool:
                work = await pair.get_work(orphan["metadata"]["name"])
                return bool(work["metadata"].get("deletionTimestamp"))

            await eventually(orphan_withdrawn, bool, what="orphan withdrawn")
        finally:
            await pair.stop(controller)


def _build(pair: Pair, name: str) -> Any:
    from agent.controllers import load_builders

    return load_builders([name]).builders[name](pair.ctx)


def test_controllers_enabled_as_upstream() -> None:
    assert "serviceExport" in Options().enabled_controllers()
    assert "endpointsliceCollect" not in Options().enabled_controllers()
    gated = Options(feature_gates=resolve_feature_gates({"MultiClusterService": True}))
    assert {"serviceExport", "endpointsliceCollect"} <= gated.enabled_controllers()
    assert "serviceExport" not in Options(controllers=("*", "-serviceExport")).enabled_controllers()
