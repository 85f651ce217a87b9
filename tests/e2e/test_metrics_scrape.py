"""/metrics after one Work (issue 24 item 4): every family the agent declares has samples, and
the families upstream's agent exposes (client-go's workqueue, controller-runtime's reconcile and
leader-election metrics, the process collector, karmada_build_info, the cluster and Work
collectors) are there with upstream's names and labels, per controller as upstream names them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from agent.app import Agent
from agent.resources import WORKS
from emulator.works import configmap, control_plane_work, deployment

from .support import agent_options, client_for, emulated_clusters, eventually, work_applied

CLUSTER = "member1"
# What the real Go agent exposed after one Work against these emulators (its /metrics, less
# Go's runtime collectors and controller-runtime's webhook and certificate-watcher families,
# which the agent never feeds, and the process network counters prometheus_client lacks).
UPSTREAM_FAMILIES = {
    "cluster_cpu_allocatable_number": "gauge",
    "cluster_memory_allocatable_bytes": "gauge",
    "cluster_node_number": "gauge",
    "cluster_pod_allocatable_number": "gauge",
    "cluster_ready_node_number": "gauge",
    "cluster_ready_state": "gauge",
    "cluster_sync_status_duration_seconds": "histogram",
    "controller_runtime_active_workers": "gauge",
    "controller_runtime_max_concurrent_reconciles": "gauge",
    "controller_runtime_reconcile_errors": "counter",
    "controller_runtime_reconcile_panics": "counter",
    "controller_runtime_reconcile_time_seconds": "histogram",
    "controller_runtime_reconcile_timeouts": "counter",
    "controller_runtime_reconcile": "counter",
    "controller_runtime_terminal_reconcile_errors": "counter",
    "karmada_build_info": "gauge",
    "leader_election_master_status": "gauge",
    "process_cpu_seconds": "counter",
    "process_max_fds": "gauge",
    "process_open_fds": "gauge",
    "process_resident_memory_bytes": "gauge",
    "process_start_time_seconds": "gauge",
    "process_virtual_memory_bytes": "gauge",
    "rest_client_requests": "counter",
    "work_sync_workload_duration_seconds": "histogram",
    "workqueue_adds": "counter",
    "workqueue_depth": "gauge",
    "workqueue_longest_running_processor_seconds": "gauge",
    "workqueue_queue_duration_seconds": "histogram",
    "workqueue_retries": "counter",
    "workqueue_unfinished_work_seconds": "gauge",
    "workqueue_work_duration_seconds": "histogram",
}
# Upstream's controller names, as its metrics label them (on by default in both agents).
CONTROLLERS = (
    "cluster-status-controller",
    "execution-controller",
    "work-status-controller",
    "service-export-controller",
)
QUEUES = ("execution-controller", "work-status-controller", "service-export-controller")


async def test_every_family_has_samples_after_one_work(tmp_path: Path) -> None:
    async with emulated_clusters(tmp_path) as (_, _, karmada_kc, member_kc):
        options = agent_options(
            karmada_kc, member_kc, CLUSTER, "--metrics-bind-address=127.0.0.1:0"
        )
        agent = Agent(options, install_signal_handlers=False, identity="scraped")
        task = asyncio.create_task(agent.run())
        admin = await client_for(karmada_kc)
        try:
            await eventually(lambda: _true(agent.leading.is_set()), timeout=30, what="leading")
            work = control_plane_work(
                CLUSTER,
                "one",
                [configmap("one"), deployment("one", requests={"cpu": "100m", "memory": "64Mi"})],
            )
            await admin.create(WORKS, work, namespace=f"karmada-es-{CLUSTER}")
            await eventually(
                lambda: work_applied(admin, CLUSTER, "one"), timeout=30, what="applied"
            )
            assert agent.serving is not None
            assert agent.serving.metrics is not None
            url = f"http://127.0.0.1:{agent.serving.metrics.port}/metrics"

            async def scraped() -> dict[str, tuple[str, list[tuple[str, dict[str, str], float]]]]:
                async with httpx.AsyncClient() as http:
                    text = (await http.get(url)).text
                families = {
                    f.name: (f.type, [(s.name, s.labels, s.value) for s in f.samples])
                    for f in text_string_to_metric_families(text)
                }
                # The cluster gauges come with a status pass after the Work's Pod runs.
                assert families.get("cluster_cpu_allocated_number", ("", []))[1]
                return families

            families = await eventually(scraped, timeout=20, what="a full scrape")
            declared = {f.name: len(f.samples) for f in agent.registry.collect()}
        finally:
            agent.stop_event.set()
            assert await asyncio.wait_for(task, 30) == 0
            await admin.close()

    empty = sorted(name for name, count in declared.items() if not count)
    assert empty == [], f"declared without samples: {empty}"
    assert set(families) == set(declared)
    missing = {n: t for n, t in UPSTREAM_FAMILIES.items() if families.get(n, ("", []))[0] != t}
    assert missing == {}, f"missing or of another type: {missing}"

    def labelled(family: str, **labels: str) -> list[float]:
        return [
            value
            for _, sample_labels, value in families[family][1]
            if all(sample_labels.get(k) == v for k, v in labels.items())
        ]

    for controller in CONTROLLERS:
        for result in ("success", "error", "requeue", "requeue_after"):
            assert labelled("controller_runtime_reconcile", controller=controller, result=result)
        assert labelled("controller_runtime_max_concurrent_reconciles", controller=controller)
    assert sum(labelled("controller_runtime_reconcile", controller="execution-controller")) >= 1
    for queue in QUEUES:
        assert labelled("workqueue_depth", name=queue, controller=queue, priority="0")
        for family in ("workqueue_adds", "workqueue_retries", "workqueue_unfinished_work_seconds"):
            assert labelled(family, name=queue, controller=queue)
    assert labelled("workqueue_adds", name="execution-controller")[0] >= 1
    assert labelled("leader_election_master_status", name=f"karmada-agent-{CLUSTER}") == [1.0]
    build = families["karmada_build_info"][1][0][1]
    assert {"git_version", "git_commit", "build_date", "compiler", "platform"} <= set(build)


async def _true(value: bool) -> bool:
    return value
