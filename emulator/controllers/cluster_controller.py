"""karmada-controller-manager's cluster controller, the parts a pull agent relies on.

- every Cluster gets its execution namespace karmada-es-<name> (label karmada.io/system),
  scheduling taints from its Ready condition, and finalizer karmada.io/cluster-controller;
- a Cluster being deleted loses its execution namespace (for an unready Pull cluster the
  Works there first lose karmada.io/execution-controller), then the finalizer;
- every monitor period, a Pull cluster whose Ready condition did not change and whose
  Lease karmada-cluster/<name> was not renewed within the grace period is set
  Ready=Unknown (ClusterStatusUnknown, or ClusterStatusNeverUpdated if never posted).

Clusters are read from the storage while the emulator serves cluster.karmada.io itself, and
through the API (list and watch, as karmada-controller-manager reads them) while an aggregated
API server does; the controller starts over on the other source when that changes.
"""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass
from datetime import datetime, timedelta

from emulator.controllers import ControllerContext, run_all, tolerate
from emulator.controllers.informer import Informer
from emulator.controllers.subscription import Subscription
from emulator.controllers.workqueue import WorkQueue
from emulator.errors import ApiError
from emulator.loopback import JSON
from emulator.timefmt import parse_time, rfc3339

CLUSTERS_PATH = "/apis/cluster.karmada.io/v1alpha1/clusters"
CLUSTERS = ("cluster.karmada.io", "clusters")
CLUSTER_GROUP_VERSION = ("cluster.karmada.io", "v1alpha1")
SYSTEM_LABEL = "karmada.io/system"
FINALIZER = "karmada.io/cluster-controller"
EXECUTION_FINALIZER = "karmada.io/execution-controller"
EXECUTION_PREFIX = "karmada-es-"
LEASE_NAMESPACE = "karmada-cluster"
TAINT_NOT_READY = "cluster.karmada.io/not-ready"
TAINT_UNREACHABLE = "cluster.karmada.io/unreachable"


def execution_namespace(cluster_name: str) -> str:
    return EXECUTION_PREFIX + cluster_name


def ready_condition(cluster: JSON) -> JSON | None:
    for condition in cluster.get("status", {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return dict(condition)
    return None


def desired_taints(cluster: JSON, now: str) -> list[JSON]:
    """spec.taints after applying the Ready condition's scheduling taints."""
    condition = ready_condition(cluster)
    status = condition.get("status") if condition else None
    if status == "True":
        add, remove = [], [TAINT_NOT_READY, TAINT_UNREACHABLE]
    elif status == "Unknown":
        add, remove = [TAINT_UNREACHABLE], [TAINT_NOT_READY]
    else:  # False, or no condition yet
        add, remove = [TAINT_NOT_READY], [TAINT_UNREACHABLE] if status == "False" else []
    current: list[JSON] = list(cluster.get("spec", {}).get("taints") or [])

    def present(key: str, taints: list[JSON]) -> bool:
        return any(t.get("key") == key and t.get("effect") == "NoSchedule" for t in taints)

    kept = [t for t in current if not (t.get("key") in remove and t.get("effect") == "NoSchedule")]
    for key in add:
        if not present(key, kept):
            kept.append({"key": key, "effect": "NoSchedule", "timeAdded": now})
    return kept


@dataclass
class _Health:
    probe: datetime
    ready: JSON | None
    renew_time: str | None = None


Clusters = Subscription | Informer


async def run(ctx: ControllerContext) -> None:
    aggregation = ctx.aggregation
    while True:
        remote = aggregation is not None and aggregation.served_remotely(*CLUSTER_GROUP_VERSION)
        clusters = (
            Informer(ctx.api, CLUSTERS_PATH) if remote else Subscription(ctx.storage, CLUSTERS)
        )
        if aggregation is None:
            await _run(ctx, clusters)
            return
        job = asyncio.ensure_future(_run(ctx, clusters))
        changed = asyncio.ensure_future(aggregation.changed())
        try:
            done, _ = await asyncio.wait({job, changed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (job, changed):
                task.cancel()
            await asyncio.gather(job, changed, return_exceptions=True)
        if job in done:
            job.result()  # the controller failed: so does this


async def _run(ctx: ControllerContext, clusters: Clusters) -> None:
    namespaces = Subscription(
        ctx.storage,
        ("", "namespaces"),
        where=lambda ns: (ns["metadata"].get("labels") or {}).get(SYSTEM_LABEL) == "true",
    )

    async def reconcile(name: str) -> None:
        cluster = clusters.get(name)
        if cluster is None:
            return
        if cluster["metadata"].get("deletionTimestamp"):
            await _remove(ctx, cluster, queue)
        else:
            await _sync(ctx, cluster)

    queue = WorkQueue(reconcile, retry_delay=ctx.knobs.retry_delay)

    def on_cluster(event_type: str, obj: JSON) -> None:
        if event_type != "DELETED":
            queue.add(obj["metadata"]["name"])

    clusters.add_handler(on_cluster)

    def on_namespace(event_type: str, obj: JSON) -> None:
        name = obj["metadata"]["name"]
        if name.startswith(EXECUTION_PREFIX):
            queue.add(name[len(EXECUTION_PREFIX) :])

    namespaces.add_handler(on_namespace)
    await run_all(clusters.run(), namespaces.run(), queue.run(), _monitor(ctx, clusters))


async def _sync(ctx: ControllerContext, cluster: JSON) -> None:
    name = cluster["metadata"]["name"]
    namespace = execution_namespace(name)
    if await tolerate(ctx.api.get(f"/api/v1/namespaces/{namespace}"), 404) is None:
        new_namespace = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": namespace, "labels": {SYSTEM_LABEL: "true"}},
        }
        await tolerate(ctx.api.create("/api/v1/namespaces", new_namespace), 409)
    updated = copy.deepcopy(cluster)
    taints = desired_taints(cluster, rfc3339(ctx.clock()))
    if taints != (cluster.get("spec", {}).get("taints") or []):
        updated.setdefault("spec", {})["taints"] = taints
    finalizers: list[str] = list(cluster["metadata"].get("finalizers") or [])
    if FINALIZER not in finalizers:
        updated["metadata"]["finalizers"] = [*finalizers, FINALIZER]
    if updated != cluster:
        await ctx.api.update(f"{CLUSTERS_PATH}/{name}", updated)


async def _remove(ctx: ControllerContext, cluster: JSON, queue: WorkQueue) -> None:
    name = cluster["metadata"]["name"]
    namespace = execution_namespace(name)
    condition = ready_condition(cluster)
    if cluster.get("spec", {}).get("syncMode") == "Pull" and (
        condition is None or condition.get("status") != "True"
    ):
        works_path = f"/apis/work.karmada.io/v1alpha1/namespaces/{namespace}/works"
        listed = await tolerate(ctx.api.list(works_path), 404)
        for work in (listed or {}).get("items") or []:
            finalizers = work["metadata"].get("finalizers") or []
            if EXECUTION_FINALIZER in finalizers:
                work = copy.deepcopy(work)
                work["metadata"]["finalizers"] = [f for f in finalizers if f != EXECUTION_FINALIZER]
                await ctx.api.update(f"{works_path}/{work['metadata']['name']}", work)
    await tolerate(ctx.api.delete(f"/api/v1/namespaces/{namespace}"), 404)
    if await tolerate(ctx.api.get(f"/api/v1/namespaces/{namespace}"), 404) is not None:
        queue.add_after(name, ctx.knobs.cluster_cleanup_check_interval)
        return
    finalizers = cluster["metadata"].get("finalizers") or []
    if FINALIZER in finalizers:
        updated = copy.deepcopy(cluster)
        updated["metadata"]["finalizers"] = [f for f in finalizers if f != FINALIZER]
        await ctx.api.update(f"{CLUSTERS_PATH}/{name}", updated)


async def _monitor(ctx: ControllerContext, clusters: Clusters) -> None:
    health: dict[str, _Health] = {}
    while True:
        await asyncio.sleep(ctx.knobs.cluster_monitor_period)
        for name in list(health):
            if clusters.get(name) is None:
                del health[name]
        for name in [c["metadata"]["name"] for c in clusters.items()]:
            for _attempt in range(5):
                cluster = clusters.get(name)
                if cluster is None:
                    break
                try:
                    await _check_health(ctx, cluster, health)
                    break
                except ApiError as exc:
                    if exc.code == 404:
                        health.pop(name, None)
                        break
                    await asyncio.sleep(0.02)


async def _check_health(ctx: ControllerContext, cluster: JSON, health: dict[str, _Health]) -> None:
    name = cluster["metadata"]["name"]
    knobs = ctx.knobs
    now = ctx.clock()
    current = ready_condition(cluster)
    saved = health.get(name)
    if current is None:
        grace = knobs.cluster_startup_grace_period
        if saved is None:
            created = cluster["metadata"].get("creationTimestamp")
            saved = _Health(parse_time(created) if created else now, None)
    else:
        grace = knobs.cluster_monitor_grace_period
    if saved is None or saved.ready != current:
        saved = _Health(now, current, saved.renew_time if saved else None)
    health[name] = saved
    if cluster.get("spec", {}).get("syncMode") == "Push":
        return
    lease = await tolerate(
        ctx.api.get(f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{name}"),
        404,
    )
    if lease is not None:
        renew = lease.get("spec", {}).get("renewTime")
        if renew and (saved.renew_time is None or parse_time(renew) > parse_time(saved.renew_time)):
            saved.renew_time = renew
            saved.probe = now
    if now <= saved.probe + timedelta(seconds=grace):
        return
    updated = copy.deepcopy(cluster)
    conditions: list[JSON] = updated.setdefault("status", {}).setdefault("conditions", [])
    stamp = rfc3339(now)
    if current is None:
        conditions.append(
            {
                "type": "Ready",
                "status": "Unknown",
                "reason": "ClusterStatusNeverUpdated",
                "message": "Cluster status controller never posted cluster status.",
                "lastTransitionTime": stamp,
            }
        )
    elif current.get("status") != "Unknown":
        for condition in conditions:
            if condition.get("type") == "Ready":
                condition.update(
                    status="Unknown",
                    reason="ClusterStatusUnknown",
                    message="Cluster status controller stopped posting cluster status.",
                    lastTransitionTime=stamp,
                )
    else:
        return
    written = await ctx.api.update(f"{CLUSTERS_PATH}/{name}/status", updated)
    health[name] = _Health(saved.probe, ready_condition(written), saved.renew_time)
