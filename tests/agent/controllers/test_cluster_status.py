"""clusterStatus: unit tests of the pieces, and sync passes against emulators (the job function
called directly, or scheduled on a fake clock)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from agent.controllers import cluster_status
from agent.controllers.cluster_status import (
    ClusterStatusController,
    Health,
    MemberCaches,
    ReadyDamper,
    api_enablements_condition,
    observed_ready_condition,
    trim_node,
    trim_pod,
)
from agent.controllers.watches import start_source
from agent.events import EventEmitter
from agent.karmada.conditions import new_condition
from agent.kube.client import KubeClient
from agent.kube.clock import FakeClock, ServerClock
from agent.kube.resources import EVENTS, NODES, PODS
from agent.metrics import AgentMetrics
from agent.options import Options
from agent.registration import register
from agent.resources import CLUSTERS
from agent.sources.cluster import ClusterInformer
from tests.agent.controllers.clusterenv import emulator_pair, kube_client, wait_for
from tests.agent.controllers.harness import HeldEvents
from tests.e2e.support import kubectl

READY = observed_ready_condition(Health(True, True))
UNREACHABLE = observed_ready_condition(Health(False, False))


def test_observed_conditions() -> None:
    assert (READY["status"], READY["reason"]) == ("True", "ClusterReady")
    assert (UNREACHABLE["status"], UNREACHABLE["reason"]) == ("False", "ClusterNotReachable")
    not_ready = observed_ready_condition(Health(True, False))
    assert (not_ready["status"], not_ready["reason"]) == ("False", "ClusterNotReady")


def test_damper_publishes_first_observation_then_holds_flips() -> None:
    clock = FakeClock()
    damper = ReadyDamper(success_threshold=30, failure_threshold=20, clock=clock)
    published = {**READY, "lastTransitionTime": "t0"}
    # First observation after start goes out at once, whatever is published.
    assert damper.adjust(published, UNREACHABLE) is UNREACHABLE
    damper = ReadyDamper(success_threshold=30, failure_threshold=20, clock=clock)
    assert damper.adjust(None, READY) is READY
    # A failure is held back for the failure threshold, counted from the first failure.
    assert damper.adjust(published, UNREACHABLE) is published
    clock.advance(19)
    assert damper.adjust(published, UNREACHABLE) is published
    clock.advance(1.5)
    assert damper.adjust(published, UNREACHABLE) is UNREACHABLE
    # A blip back to healthy restarts the count; success uses its own threshold.
    failed = {**UNREACHABLE, "lastTransitionTime": "t1"}
    assert damper.adjust(failed, READY) is failed
    clock.advance(29)
    assert damper.adjust(failed, READY) is failed
    clock.advance(2)
    assert damper.adjust(failed, READY) is READY
    # Same status as published: no damping at all.
    assert damper.adjust(published, READY) is READY


def test_api_enablements_condition() -> None:
    some = [{"groupVersion": "v1", "resources": []}]
    assert api_enablements_condition(some, False)["reason"] == "Complete"
    assert api_enablements_condition(some, True)["reason"] == "Partial"
    empty = api_enablements_condition([], True)
    assert (empty["status"], empty["reason"]) == ("False", "Empty")


def test_trimmed_objects_keep_only_what_summaries_need() -> None:
    node = {
        "metadata": {"name": "n1", "resourceVersion": "5", "labels": {"a": "b"}, "uid": "u"},
        "spec": {"podCIDR": "10.0.0.0/24"},
        "status": {
            "allocatable": {"cpu": "4", "pods": "110"},
            "capacity": {"cpu": "4"},
            "images": [{"names": ["x"] * 50}],
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "True", "message": "kubelet is posting"},
            ],
        },
    }
    assert trim_node(node) == {
        "metadata": {"name": "n1", "resourceVersion": "5"},
        "status": {
            "allocatable": {"cpu": "4", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    pod = {
        "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "7", "labels": {"x": "y"}},
        "spec": {
            "nodeName": "n1",
            "containers": [
                {
                    "name": "c",
                    "image": "i",
                    "env": [{"name": "A"}],
                    "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}},
                },
                {"name": "d", "image": "i"},
            ],
            "initContainers": [{"name": "i", "resources": {"requests": {"memory": "1Gi"}}}],
            "overhead": {"cpu": "100m"},
            "volumes": [{"name": "v"}],
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready"}]},
    }
    assert trim_pod(pod) == {
        "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "7"},
        "spec": {
            "nodeName": "n1",
            "containers": [{"resources": {"requests": {"cpu": "1"}}}, {}],
            "initContainers": [{"resources": {"requests": {"memory": "1Gi"}}}],
            "overhead": {"cpu": "100m"},
        },
        "status": {"phase": "Running"},
    }


def condition(cluster: dict[str, Any], kind: str) -> dict[str, Any]:
    for item in cluster["status"]["conditions"]:
        if item["type"] == kind:
            return dict(item)
    raise AssertionError(f"no {kind} condition")


@asynccontextmanager
async def registered_cluster(tmp_path: Path, **options: Any) -> AsyncIterator[Any]:
    """Emulators with this cluster registered (options: no Secrets reported, then `options`)
    and the emulated karmada-controller-manager's finalizer on its Cluster, so the status
    controller's gate opens: (pair, karmada, member, options)."""
    async with (
        emulator_pair(tmp_path) as pair,
        kube_client(pair.karmada_kubeconfig) as karmada,
        kube_client(pair.member_kubeconfig) as member,
    ):
        agent_options = pair.options(**{"report_secrets": (), **options})
        await register(karmada, member, agent_options)
        await wait_for(lambda: _has_finalizer(pair), timeout=10)
        yield pair, karmada, member, agent_options


async def test_an_unavailable_apiservice_is_left_out_of_api_enablements(tmp_path: Path) -> None:
    """The member's metrics-server uninstalled but its APIService v1beta1.metrics.k8s.io left
    behind (Available=False, ServiceNotFound): kube-apiserver answers 503 for its discovery
    (kubectl: ServiceUnavailable) and marks it Stale in the aggregated document, and the
    Cluster's apiEnablements leave it out, with CompleteAPIEnablements False/Partial, as
    upstream (ServerGroupsAndResources' ErrGroupDiscoveryFailed). Listed while it served."""
    aggregated_accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    async with registered_cluster(tmp_path) as (pair, karmada, member, options):
        controller = ClusterStatusController(
            karmada=karmada,
            member=member,
            options=options,
            metrics=AgentMetrics(CollectorRegistry()),
        )

        async def reported() -> tuple[list[str], dict[str, Any]]:
            await controller.sync_once()
            obj = await pair.cluster()
            assert obj is not None
            gvs = [e["groupVersion"] for e in obj["status"]["apiEnablements"]]
            return gvs, condition(obj, "CompleteAPIEnablements")

        try:
            async with pair.member.client() as admin:

                async def served() -> bool:
                    answer = await admin.get("/apis/metrics.k8s.io/v1beta1")
                    return answer.status_code == 200

                await wait_for(served, timeout=10)
                gvs, apis = await reported()
                assert "metrics.k8s.io/v1beta1" in gvs
                assert (apis["status"], apis["reason"]) == ("True", "Complete")

                gone = await admin.delete("/api/v1/namespaces/kube-system/services/metrics-server")
                assert gone.status_code == 200, gone.text

                async def unavailable() -> bool:
                    answer = await admin.get("/apis/metrics.k8s.io/v1beta1")
                    return answer.status_code == 503

                await wait_for(unavailable, timeout=10)
                aggregated = await admin.get("/apis", headers={"Accept": aggregated_accept})
                (metrics_group,) = [
                    g
                    for g in aggregated.json()["items"]
                    if g["metadata"]["name"] == "metrics.k8s.io"
                ]
                assert [v["freshness"] for v in metrics_group["versions"]] == ["Stale"]
            with pytest.raises(AssertionError, match="the server is currently unable to handle"):
                await kubectl(
                    pair.member_kubeconfig, "get", "--raw", "/apis/metrics.k8s.io/v1beta1"
                )
            gvs, apis = await reported()
            assert "v1" in gvs
            assert "metrics.k8s.io/v1beta1" not in gvs
            assert (apis["status"], apis["reason"]) == ("False", "Partial")
        finally:
            await controller.stop()


async def test_sync_reports_status_and_skips_unchanged_writes(tmp_path: Path) -> None:
    async with registered_cluster(tmp_path) as (pair, karmada, member, options):
        registry = CollectorRegistry()
        metrics = AgentMetrics(registry)
        controller = ClusterStatusController(
            karmada=karmada, member=member, options=options, metrics=metrics
        )
        try:
            await controller.sync_once()
            obj = await pair.cluster()
            assert obj is not None
            status = obj["status"]
            ready = condition(obj, "Ready")
            assert (ready["status"], ready["reason"]) == ("True", "ClusterReady")
            apis = condition(obj, "CompleteAPIEnablements")
            assert (apis["status"], apis["reason"]) == ("True", "Complete")
            version = await pair.member_get("/version")
            assert version is not None
            assert status["kubernetesVersion"] == version["gitVersion"]
            # Upstream's shape and order: entries by groupVersion, resources by name, no
            # subresources.
            gvs = [e["groupVersion"] for e in status["apiEnablements"]]
            assert gvs == sorted(gvs)
            assert "v1" in gvs
            assert "apps/v1" in gvs
            core = next(e for e in status["apiEnablements"] if e["groupVersion"] == "v1")
            names = [r["name"] for r in core["resources"]]
            assert names == sorted(names)
            assert "pods" in names
            assert all("/" not in n for n in names)
            assert {"name": "nodes", "kind": "Node"} in core["resources"]
            # Summaries from the member profile's seeded Nodes.
            nodes = (await pair.member_get("/api/v1/nodes") or {})["items"]
            ready_nodes = [
                n
                for n in nodes
                if any(
                    c["type"] == "Ready" and c["status"] == "True"
                    for c in n["status"]["conditions"]
                )
            ]
            assert status["nodeSummary"] == {"totalNum": len(nodes), "readyNum": len(ready_nodes)}
            pods_total = sum(int(n["status"]["allocatable"]["pods"]) for n in nodes)
            assert status["resourceSummary"]["allocatable"]["pods"] == str(pods_total)
            # Default resource models on the Cluster -> allocatableModelings, one per grade.
            models = obj["spec"]["resourceModels"]
            modelings = status["resourceSummary"]["allocatableModelings"]
            assert [m["grade"] for m in modelings] == [m["grade"] for m in models]
            assert sum(m["count"] for m in modelings) == len(nodes)
            # Metrics follow the status.
            text = generate_latest(registry).decode()
            assert 'cluster_ready_state{member_cluster="member1"} 1.0' in text
            assert f'cluster_node_number{{member_cluster="member1"}} {float(len(nodes))}' in text
            assert (
                'cluster_sync_status_duration_seconds_count{member_cluster="member1"} 1.0' in text
            )
            assert controller.heartbeat is not None
            assert controller.heartbeat.running

            # Nothing changed: no Cluster write at all on the next passes.
            pair.karmada.accounting.reset()
            await controller.sync_once()
            await controller.sync_once()
            writes = sum(
                pair.karmada.accounting.counts(verb=v, resource="clusters.cluster.karmada.io")
                for v in ("update", "patch", "create")
            )
            assert writes == 0
            again = await pair.cluster()
            assert again is not None
            assert condition(again, "Ready")["lastTransitionTime"] == ready["lastTransitionTime"]
        finally:
            await controller.stop()
        assert controller.heartbeat is None


async def test_unchanged_member_caches_are_not_summed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The summaries walk every cached Pod; at idle (nothing changed on the member) a pass
    reuses the last figures, and a changed Pod is summed on the next pass."""
    summed: list[int] = []
    real = cluster_status.member_summaries

    def counted(nodes: Any, pods: Any, models: Any) -> dict[str, Any]:
        summed.append(len(pods))
        return real(nodes, pods, models)

    monkeypatch.setattr(cluster_status, "member_summaries", counted)
    async with registered_cluster(tmp_path) as (pair, karmada, member, options):
        controller = ClusterStatusController(karmada=karmada, member=member, options=options)
        try:
            for _ in range(3):
                await controller.sync_once()
            assert len(summed) == 1
            before = await pair.cluster()
            assert before is not None
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "new", "namespace": "default"},
                "spec": {
                    "containers": [
                        {"name": "c", "image": "i", "resources": {"requests": {"cpu": "250m"}}}
                    ]
                },
            }
            await member.create(PODS, pod, namespace="default")
            await wait_for(lambda: _cached_pod(controller, "default/new"), timeout=10)
            await controller.sync_once()
            await controller.sync_once()
            assert len(summed) == 2
            after = await pair.cluster()
            assert after is not None
            assert _pods_summed(after) == _pods_summed(before) + 1
        finally:
            await controller.stop()


class HeldCaches(MemberCaches):
    """Member caches that count as synced only once `release` is set (a member whose Pod LIST
    takes long)."""

    release: asyncio.Event

    @property
    def synced(self) -> bool:
        return self.release.is_set() and super().synced

    async def wait_synced(self, timeout: float) -> bool:
        await self.release.wait()
        return await super().wait_synced(timeout)


async def test_ready_goes_out_before_the_member_caches_have_synced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After an outage the Cluster is Ready=Unknown (the Lease lapsed) with the summaries of
    before. The first pass publishes Ready=True at once, the summaries left as they were
    (never wiped, never from a half-filled cache); once the caches have synced, the summaries
    follow in the same pass, not a period later."""
    monkeypatch.setattr(HeldCaches, "release", asyncio.Event(), raising=False)
    monkeypatch.setattr(cluster_status, "MemberCaches", HeldCaches)
    old_summary = {"totalNum": 99, "readyNum": 98}
    async with registered_cluster(tmp_path) as (pair, karmada, member, options):
        cluster = await pair.cluster()
        assert cluster is not None
        lapsed = {
            **new_condition("Ready", "Unknown", "ClusterStatusUnknown", "lease lapsed"),
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
        await karmada.update_status(
            CLUSTERS,
            {**cluster, "status": {"conditions": [lapsed], "nodeSummary": old_summary}},
        )
        controller = ClusterStatusController(karmada=karmada, member=member, options=options)
        passing = asyncio.create_task(controller.sync_once())
        try:

            async def published_ready() -> dict[str, Any] | None:
                obj = await pair.cluster()
                ready = condition(obj, "Ready") if obj else {}
                return obj if ready.get("status") == "True" else None

            obj = await wait_for(published_ready, timeout=10)
            assert not passing.done()  # still waiting for the caches
            assert obj["status"]["nodeSummary"] == old_summary
            assert "resourceSummary" not in obj["status"]
            assert condition(obj, "CompleteAPIEnablements")["status"] == "True"
            assert obj["status"]["kubernetesVersion"]

            HeldCaches.release.set()
            await asyncio.wait_for(passing, 10)
            after = await pair.cluster()
            assert after is not None
            nodes = (await pair.member_get("/api/v1/nodes") or {})["items"]
            assert after["status"]["nodeSummary"]["totalNum"] == len(nodes)
            assert "allocatable" in after["status"]["resourceSummary"]
        finally:
            HeldCaches.release.set()
            await asyncio.wait_for(passing, 10)
            await controller.stop()


async def test_caches_that_sync_during_the_ready_write_still_send_the_summaries_in_that_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The member caches finish syncing while the pass's first write (Ready, the summaries of
    before) is on its way: the summaries still follow in the same pass, not a period later."""
    monkeypatch.setattr(HeldCaches, "release", asyncio.Event(), raising=False)
    monkeypatch.setattr(cluster_status, "MemberCaches", HeldCaches)
    async with registered_cluster(tmp_path) as (pair, karmada, member, options):
        cluster = await pair.cluster()
        assert cluster is not None
        lapsed = {
            **new_condition("Ready", "Unknown", "ClusterStatusUnknown", "lease lapsed"),
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
        old_summary = {"totalNum": 99, "readyNum": 98}
        await karmada.update_status(
            CLUSTERS, {**cluster, "status": {"conditions": [lapsed], "nodeSummary": old_summary}}
        )
        controller = ClusterStatusController(karmada=karmada, member=member, options=options)
        write = karmada.update_status

        async def caches_sync_meanwhile(*args: Any, **kwargs: Any) -> Any:
            written = await write(*args, **kwargs)
            assert controller.caches is not None
            HeldCaches.release.set()
            assert await controller.caches.wait_synced(10)
            return written

        monkeypatch.setattr(karmada, "update_status", caches_sync_meanwhile)
        try:
            await asyncio.wait_for(controller.sync_once(), 10)
            after = await pair.cluster()
            assert after is not None
            assert condition(after, "Ready")["status"] == "True"
            nodes = (await pair.member_get("/api/v1/nodes") or {})["items"]
            assert after["status"]["nodeSummary"]["totalNum"] == len(nodes)
        finally:
            await controller.stop()


class WatchedHeldCaches(HeldCaches):
    """HeldCaches that tell when a pass starts waiting for them (`entered`)."""

    entered: asyncio.Event

    async def wait_synced(self, timeout: float) -> bool:
        self.entered.set()
        return await super().wait_synced(timeout)


def _ready(cluster: dict[str, Any] | None) -> bool:
    conditions = ((cluster or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


async def test_a_first_status_waits_for_the_member_caches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Cluster with no summaries published yet is not made Ready without them (Karmada's
    scheduler would read it as a cluster with no room): the first status waits for the
    member caches, then goes out whole."""
    monkeypatch.setattr(HeldCaches, "release", asyncio.Event(), raising=False)
    monkeypatch.setattr(WatchedHeldCaches, "entered", asyncio.Event(), raising=False)
    monkeypatch.setattr(cluster_status, "MemberCaches", WatchedHeldCaches)
    async with registered_cluster(tmp_path) as (pair, karmada, member, options):
        controller = ClusterStatusController(karmada=karmada, member=member, options=options)
        passing = asyncio.create_task(controller.sync_once())
        try:
            await asyncio.wait_for(WatchedHeldCaches.entered.wait(), 10)
            assert not _ready(await pair.cluster())
            HeldCaches.release.set()
            await asyncio.wait_for(passing, 10)
            after = await pair.cluster()
            assert after is not None
            assert _ready(after)
            assert after["status"]["nodeSummary"]["totalNum"] >= 1
            assert "allocatable" in after["status"]["resourceSummary"]
        finally:
            HeldCaches.release.set()
            await asyncio.wait_for(passing, 10)
            await controller.stop()


class NeverSyncedCaches(MemberCaches):
    """Member caches that never sync (a Pod LIST that never ends); each wait counted."""

    waits = 0

    @property
    def synced(self) -> bool:
        return False

    async def wait_synced(self, timeout: float) -> bool:
        NeverSyncedCaches.waits += 1
        return False


async def test_a_first_status_whose_caches_never_sync_waits_for_them_once_per_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing published and the member caches not synced within the timeout: the pass writes
    the status without summaries after one wait, not a second one after the write."""
    monkeypatch.setattr(NeverSyncedCaches, "waits", 0)
    monkeypatch.setattr(cluster_status, "MemberCaches", NeverSyncedCaches)
    async with registered_cluster(tmp_path) as (pair, karmada, member, options):
        controller = ClusterStatusController(karmada=karmada, member=member, options=options)
        try:
            await asyncio.wait_for(controller.sync_once(), 10)
            assert NeverSyncedCaches.waits == 1
            after = await pair.cluster()
            assert _ready(after)
            assert "resourceSummary" not in after["status"]
        finally:
            await controller.stop()


def _pods_summed(cluster: dict[str, Any]) -> int:
    summary = cluster["status"]["resourceSummary"]
    return sum(int((summary.get(k) or {}).get("pods", 0)) for k in ("allocating", "allocated"))


async def _cached_pod(controller: ClusterStatusController, key: str) -> bool:
    return controller.caches is not None and controller.caches.pods.store.get(key) is not None


@asynccontextmanager
async def on_the_cluster_informer(
    karmada: KubeClient, member: KubeClient, options: Options
) -> AsyncIterator[tuple[ClusterInformer, ClusterStatusController]]:
    """The controller on a Cluster informer, started from its declaration as the controller
    manager starts it and synced, without the controller's periodic schedule (the test runs
    each pass)."""
    informer = ClusterInformer(karmada, "member1")
    controller = ClusterStatusController(
        karmada=karmada, member=member, options=options, cluster_informer=informer
    )
    assert controller.watches.sources == [informer]
    for source in controller.watches.sources:
        await start_source(source)
    try:
        assert await informer.wait_synced(10)
        yield informer, controller
    finally:
        await controller.stop()
        for source in reversed(controller.watches.sources):
            await source.stop()


async def _label_the_cluster(pair: Any) -> None:
    """A change of the Cluster by another writer."""
    async with pair.karmada.client() as client:
        path = "/apis/cluster.karmada.io/v1alpha1/clusters/member1"
        obj = (await client.get(path)).json()
        obj["metadata"].setdefault("labels", {})["edited"] = "yes"
        assert (await client.put(path, json=obj)).status_code == 200


async def test_reads_its_cluster_from_the_shared_informer_not_by_polling(tmp_path: Path) -> None:
    async with (
        registered_cluster(tmp_path, enable_cluster_resource_modeling=False) as (
            pair,
            karmada,
            member,
            options,
        ),
        on_the_cluster_informer(karmada, member, options) as (informer, controller),
    ):
        await controller.sync_once()
        assert informer.ready  # our own write is in the shared cache at once
        pair.karmada.accounting.reset()
        await controller.sync_once()
        await controller.sync_once()
        clusters = "clusters.cluster.karmada.io"
        assert pair.karmada.accounting.counts(verb="get", resource=clusters) == 0
        assert pair.karmada.accounting.counts(verb="update", resource=clusters + "/*") == 0
        # A change by someone else reaches the next pass through the watch, not a GET.
        await _label_the_cluster(pair)
        await wait_for(lambda: _labelled(informer), timeout=10)
        pair.karmada.accounting.reset()
        await controller.sync_once()
        assert pair.karmada.accounting.counts(verb="get", resource=clusters) == 0


async def test_a_late_watch_event_does_not_take_the_cluster_back_before_our_write(
    tmp_path: Path,
) -> None:
    async with (
        registered_cluster(tmp_path) as (pair, karmada, member, options),
        on_the_cluster_informer(karmada, member, options) as (informer, controller),
    ):
        await controller.sync_once()
        # The Cluster watch lags: another writer's change, then the echo of our next
        # status write, come after the answer to that write.
        held = HeldEvents(informer.reflector, lambda _e: True)
        await _label_the_cluster(pair)
        # A new member Node: the next pass writes the node summary.
        await member.create(
            NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "extra"}}
        )
        await wait_for(lambda: _cached_node(controller, "extra"), timeout=10)
        await controller.sync_once()
        ours = informer.cluster
        assert ours is not None
        await held.arrived(2)
        held.release(until=lambda _e: True)  # the other writer's change: older than ours
        assert informer.cluster == ours
        pair.karmada.accounting.reset()
        await controller.sync_once()
        clusters = "clusters.cluster.karmada.io"
        assert pair.karmada.accounting.counts(verb="get", resource=clusters) == 0
        assert pair.karmada.accounting.counts(verb="update", resource=clusters + "/*") == 0
        held.release()
        await wait_for(lambda: _labelled(informer), timeout=10)


async def _cached_node(controller: ClusterStatusController, name: str) -> bool:
    return controller.caches is not None and controller.caches.nodes.store.get(name) is not None


async def _labelled(informer: ClusterInformer) -> bool:
    return ((informer.cluster or {}).get("metadata") or {}).get("labels", {}).get("edited") == "yes"


async def _has_finalizer(pair: Any) -> bool:
    obj = await pair.cluster()
    return bool(obj and "karmada.io/cluster-controller" in obj["metadata"].get("finalizers", []))


async def test_offline_member_is_reported_after_the_failure_threshold(tmp_path: Path) -> None:
    async with registered_cluster(
        tmp_path,
        cluster_failure_threshold=timedelta(seconds=30),
        cluster_success_threshold=timedelta(seconds=20),
        enable_cluster_resource_modeling=False,
    ) as (pair, karmada, member, options):
        clock = FakeClock()
        controller = ClusterStatusController(
            karmada=karmada, member=member, options=options, clock=clock
        )
        await controller.start()
        try:
            periodic = controller.periodic
            assert periodic is not None
            runs = 1
            assert await periodic.wait_runs(runs, timeout=10)

            async def ready_after_next_sync() -> dict[str, Any]:
                # One scheduled sync per step: the interval is 10 s plus up to 1 s of jitter.
                nonlocal runs
                runs += 1
                clock.advance(11)
                assert await periodic.wait_runs(runs, timeout=10)
                obj = await pair.cluster()
                assert obj is not None
                return obj

            obj = await pair.cluster()
            assert obj is not None
            assert condition(obj, "Ready")["status"] == "True"
            version_before = obj["status"]["kubernetesVersion"]

            await pair.member.faults.go_offline()
            # Failures seen at +0, +11 and +22 s are within the 30 s threshold.
            for _ in range(3):
                obj = await ready_after_next_sync()
                assert condition(obj, "Ready")["status"] == "True"
            obj = await ready_after_next_sync()
            ready = condition(obj, "Ready")
            assert (ready["status"], ready["reason"]) == ("False", "ClusterNotReachable")
            # Offline: only the Ready condition changes; collected fields are kept.
            assert obj["status"]["kubernetesVersion"] == version_before

            await pair.member.faults.come_back()
            # Successes at +0 and +11 s are within the 20 s threshold.
            for _ in range(2):
                obj = await ready_after_next_sync()
                assert condition(obj, "Ready")["status"] == "False"
            obj = await ready_after_next_sync()
            assert condition(obj, "Ready")["reason"] == "ClusterReady"
        finally:
            await controller.stop()


class _Recorder:
    """Duck-typed stand-in for KubeClient that records calls."""

    def __init__(self, cluster: dict[str, Any] | None = None) -> None:
        self.cluster = cluster
        self.calls: list[str] = []
        self.transport = SimpleNamespace(server_clock=ServerClock())

    async def get(self, gvr: Any, name: str, **_: Any) -> dict[str, Any]:
        self.calls.append(f"get {gvr.resource}/{name}")
        assert self.cluster is not None
        return self.cluster

    async def raw_get(self, path: str, **_: Any) -> Any:
        self.calls.append(f"raw_get {path}")
        raise AssertionError("the member must not be probed before the gate opens")

    async def update_status(self, *_: Any, **__: Any) -> dict[str, Any]:
        self.calls.append("update_status")
        raise AssertionError("no status write before the gate opens")


async def test_waits_for_the_cluster_controller_finalizer() -> None:
    karmada = _Recorder({"metadata": {"name": "member1", "finalizers": ["other"]}, "spec": {}})
    member = _Recorder()
    controller = ClusterStatusController(
        karmada=cast(Any, karmada),
        member=cast(Any, member),
        options=Options(cluster_name="member1"),
    )
    await controller.sync_once()
    assert karmada.calls == ["get clusters/member1"]
    assert member.calls == []
    assert controller.heartbeat is None


async def test_clock_skew_against_the_member_is_reported_too(tmp_path: Path) -> None:
    """Each API server's clock is compared with the agent's: the member's 10 minutes behind
    (the agent ahead of it) is named as the member cluster's, in the condition and the gauge,
    while the control plane's agrees."""
    async with skew_controller(tmp_path) as (pair, _, member, controller, registry, _):
        pair.member.set_clock_offset(-600)
        await member.server_version()  # an answer dated by the member's skewed clock
        await controller.sync_once()
        obj = await pair.cluster()
        assert obj is not None
        clock = condition(obj, "ClockSynchronized")
        assert (clock["status"], clock["reason"]) == ("False", "ClockSkewed")
        assert "600s ahead of the member cluster" in clock["message"]
        assert "Karmada control plane" not in clock["message"]
        member_skew = registry.get_sample_value(
            "karmada_agent_clock_skew_seconds", {"server": "member"}
        )
        assert member_skew is not None
        assert abs(member_skew - 600) < 2
        karmada_skew = registry.get_sample_value(
            "karmada_agent_clock_skew_seconds", {"server": "karmada"}
        )
        assert karmada_skew is not None
        assert abs(karmada_skew) < 2


@asynccontextmanager
async def skew_controller(tmp_path: Path) -> AsyncIterator[Any]:
    """A registered cluster and its status controller, with metrics and Events of its own:
    (pair, karmada, member, controller, registry, events)."""
    async with registered_cluster(tmp_path, enable_cluster_resource_modeling=False) as (
        pair,
        karmada,
        member,
        options,
    ):
        registry = CollectorRegistry()
        events = EventEmitter(karmada, component="karmada-agent")
        controller = ClusterStatusController(
            karmada=karmada,
            member=member,
            options=options,
            metrics=AgentMetrics(registry),
            events=events,
        )
        try:
            yield pair, karmada, member, controller, registry, events
        finally:
            await controller.stop()
            await events.stop()


async def test_clock_skew_is_reported_on_the_cluster(tmp_path: Path) -> None:
    """The agent's clock 10 minutes ahead of the control plane's (its Date headers say so):
    ClockSynchronized=False with how far, the gauge, one ClockSkewed Warning Event; a steady
    skew writes nothing more; the clocks agreeing again turns it True."""
    async with skew_controller(tmp_path) as (pair, karmada, _, controller, registry, events):
        pair.karmada.set_clock_offset(-600)
        await karmada.server_version()  # an answer dated by the skewed clock
        await controller.sync_once()
        obj = await pair.cluster()
        assert obj is not None
        clock = condition(obj, "ClockSynchronized")
        assert (clock["status"], clock["reason"]) == ("False", "ClockSkewed")
        assert "600s ahead of the Karmada control plane" in clock["message"]
        assert "member cluster" not in clock["message"]
        skew = registry.get_sample_value("karmada_agent_clock_skew_seconds", {"server": "karmada"})
        assert skew is not None
        assert abs(skew - 600) < 2
        await events.flush(5)
        listed = await karmada.list(EVENTS, namespace="default")
        skewed = [e for e in listed["items"] if e["reason"] == "ClockSkewed"]
        assert len(skewed) == 1
        assert skewed[0]["type"] == "Warning"
        assert skewed[0]["involvedObject"]["kind"] == "Cluster"

        status_writes = "clusters.cluster.karmada.io/status"
        assert pair.karmada.accounting.counts(verb="update", resource=status_writes) >= 1
        pair.karmada.accounting.reset()
        for _ in range(3):
            await controller.sync_once()
        assert pair.karmada.accounting.counts(verb="update", resource=status_writes) == 0

        pair.karmada.set_clock_offset(0)
        await karmada.server_version()
        await controller.sync_once()
        obj = await pair.cluster()
        assert obj is not None
        assert condition(obj, "ClockSynchronized")["status"] == "True"
