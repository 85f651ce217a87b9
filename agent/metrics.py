"""The agent's Prometheus metrics, with upstream karmada-agent's names and labels.

Cluster collectors follow karmada's pkg/metrics/cluster.go (label `member_cluster`), the Work sync
histogram follows pkg/metrics/resource.go (label `result`), and the build-info gauge follows
pkg/metrics/version.go. The client layer's rest_client_*, workqueue_*, controller_runtime_* and
leader_election_master_status metrics (agent.kube.metrics) and the process collector are
registered on the same registry.
"""

from __future__ import annotations

import contextlib
import functools
import platform
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)

from agent.karmada.quantity import QuantityError, parse_quantity
from agent.kube.metrics import PrometheusMetrics
from agent.version import build_info

CLUSTER_LABEL = "member_cluster"
# prometheus.ExponentialBuckets(0.001, 2, 12), as upstream's duration histograms.
DURATION_BUCKETS = tuple(0.001 * 2**i for i in range(12))
PROBE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def _quantity_float(resources: dict[str, Any] | None, name: str) -> float | None:
    if not resources or name not in resources:
        return None
    try:
        return float(parse_quantity(resources[name]).value)
    except (QuantityError, TypeError, ArithmeticError, ValueError):
        return None


class CertificateMetrics:
    """The Karmada client certificate in use, and the rotations attempted."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.expiration = Gauge(
            "karmada_agent_client_certificate_expiration_seconds",
            "The notAfter of the client certificate the agent uses for the Karmada control "
            "plane, in seconds since the Unix epoch.",
            [CLUSTER_LABEL],
            registry=registry,
        )
        self.rotations = Counter(
            "karmada_agent_client_certificate_rotations",
            "Rotations of the agent's Karmada client certificate, by result "
            "('success' or 'error').",
            [CLUSTER_LABEL, "result"],
            registry=registry,
        )

    def observe(self, cluster: str, not_after: float) -> None:
        """The certificate in use expires at `not_after`; the rotation counters exist."""
        self.expiration.labels(cluster).set(not_after)
        for result in ("success", "error"):
            self.rotations.labels(cluster, result)


class AgentMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        # No `<counter>_created` series: Go's client (upstream's agent) has none.
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = registry
        self.client = PrometheusMetrics(registry)

        def gauge(name: str, help_text: str) -> Gauge:
            return Gauge(name, help_text, [CLUSTER_LABEL], registry=registry)

        self.cluster_ready_state = gauge(
            "cluster_ready_state", "State of the cluster (1 if ready, 0 otherwise)."
        )
        self.cluster_node_number = gauge("cluster_node_number", "Number of nodes in the cluster.")
        self.cluster_ready_node_number = gauge(
            "cluster_ready_node_number", "Number of ready nodes in the cluster."
        )
        self.cluster_memory_allocatable_bytes = gauge(
            "cluster_memory_allocatable_bytes", "Allocatable cluster memory resource in bytes."
        )
        self.cluster_cpu_allocatable_number = gauge(
            "cluster_cpu_allocatable_number", "Number of allocatable CPU in the cluster."
        )
        self.cluster_pod_allocatable_number = gauge(
            "cluster_pod_allocatable_number", "Number of allocatable pods in the cluster."
        )
        self.cluster_memory_allocated_bytes = gauge(
            "cluster_memory_allocated_bytes", "Allocated cluster memory resource in bytes."
        )
        self.cluster_cpu_allocated_number = gauge(
            "cluster_cpu_allocated_number", "Number of allocated CPU in the cluster."
        )
        self.cluster_pod_allocated_number = gauge(
            "cluster_pod_allocated_number", "Number of allocated pods in the cluster."
        )
        self.cluster_sync_status_duration = Histogram(
            "cluster_sync_status_duration_seconds",
            "Duration in seconds for syncing the status of the cluster once.",
            [CLUSTER_LABEL],
            registry=registry,
        )
        self.cluster_health_probe_success = gauge(
            "cluster_health_probe_success",
            "Result of the last health probe of the member cluster (1 success, 0 failure), "
            "before threshold adjustment.",
        )
        self.cluster_health_probe_duration = Histogram(
            "cluster_health_probe_duration_seconds",
            "Duration in seconds of the health probe to the member cluster.",
            [CLUSTER_LABEL],
            buckets=PROBE_BUCKETS,
            registry=registry,
        )
        self.cluster_health_probe_total = Counter(
            "cluster_health_probe",
            "Total number of health probes to the member cluster, by result.",
            [CLUSTER_LABEL, "result"],
            registry=registry,
        )
        self.work_sync_workload_duration = Histogram(
            "work_sync_workload_duration_seconds",
            "Duration in seconds to sync the workload to a target cluster. By the result, "
            "'error' means a work failed to sync workloads. Otherwise 'success'.",
            ["result"],
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        # The heartbeat (agent.controllers.heartbeat): its age is time() minus this. The
        # control plane marks the cluster unknown when the Lease is not renewed for
        # --cluster-lease-duration (40 s by default).
        self.cluster_lease_renewed = gauge(
            "karmada_agent_cluster_lease_last_renew_timestamp_seconds",
            "When the agent last renewed its cluster's Lease on the control plane (its "
            "heartbeat), as Unix time.",
        )
        self.control_plane_unreachable = Counter(
            "karmada_agent_control_plane_unreachable",
            "Times the Karmada control plane became unreachable (a request got no response "
            "after it had answered).",
            registry=registry,
        )
        # Outage-safe deletion (agent.controllers.execution.deletion_guard) and Works deleted behind our back.
        self.work_deletions_held = Gauge(
            "karmada_agent_work_deletions_held",
            "Works whose deletion is held after a control-plane outage longer than the cluster "
            "lease (their member objects are kept until the grace period ends).",
            registry=registry,
        )
        self.work_deletion_holds = Counter(
            "karmada_agent_work_deletion_holds",
            "Work deletions held after a control-plane outage, since the agent started.",
            registry=registry,
        )
        self.works_orphaned = Counter(
            "karmada_agent_works_orphaned",
            "Works deleted without the agent's cleanup (its finalizer removed by someone else), "
            "leaving their member objects in place.",
            registry=registry,
        )
        # The agent's clock against each API server's (agent.kube.clock.ServerClock).
        self.clock_skew_seconds = Gauge(
            "karmada_agent_clock_skew_seconds",
            "How far the agent's clock is ahead of the API server's (negative: behind), from "
            "the Date of its answers; server is 'karmada' (the control plane) or 'member'.",
            ["server"],
            registry=registry,
        )
        # Objects something on the member keeps undoing (agent.controllers.execution.contention).
        self.contested_objects = Gauge(
            "karmada_agent_contested_objects",
            "Member objects that something keeps undoing (deleting or changing back) faster "
            "than a person would, re-applied with backoff instead of at once.",
            registry=registry,
        )
        self.object_contests = Counter(
            "karmada_agent_object_contests",
            "Times a member object became contested (undone again and again), since the agent "
            "started.",
            registry=registry,
        )
        info = build_info()
        # Upstream's labels (pkg/metrics/version.go); go_version stays empty, python_version is
        # added.
        self.build_info = Gauge(
            "karmada_build_info",
            "Karmada build metadata exposed as labels with a constant value of 1.",
            [
                "git_version",
                "git_commit",
                "git_short_commit",
                "git_tree_state",
                "build_date",
                "go_version",
                "compiler",
                "platform",
                "python_version",
            ],
            registry=registry,
        )
        self.build_info.labels(
            git_version=info.git_version,
            git_commit=info.git_commit,
            git_short_commit=info.git_commit[:7],
            git_tree_state="clean" if info.git_commit != "unknown" else "unknown",
            build_date=info.build_date,
            go_version="",
            compiler=platform.python_implementation(),
            platform=info.platform,
            python_version=info.python_version,
        ).set(1)
        # process_cpu_seconds_total, process_resident_memory_bytes, ... as controller-runtime's
        # registry has them.
        ProcessCollector(registry=registry)

    @functools.cached_property
    def certificates(self) -> CertificateMetrics:
        """certRotation's metrics, declared when it starts on a client certificate or at the
        first 401 for one (an agent with a token has nothing to report, and a family is never
        declared without samples)."""
        return CertificateMetrics(self.registry)

    def observe_cluster_status(self, cluster: str, status: dict[str, Any]) -> None:
        """Gauges from a Cluster's status, as upstream's RecordClusterStatus."""
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or ()
        )
        self.cluster_ready_state.labels(cluster).set(1 if ready else 0)
        nodes = status.get("nodeSummary")
        if isinstance(nodes, dict):
            self.cluster_node_number.labels(cluster).set(int(nodes.get("totalNum") or 0))
            self.cluster_ready_node_number.labels(cluster).set(int(nodes.get("readyNum") or 0))
        summary = status.get("resourceSummary")
        if not isinstance(summary, dict):
            return
        for key, gauges in (
            (
                "allocatable",
                (
                    self.cluster_memory_allocatable_bytes,
                    self.cluster_cpu_allocatable_number,
                    self.cluster_pod_allocatable_number,
                ),
            ),
            (
                "allocated",
                (
                    self.cluster_memory_allocated_bytes,
                    self.cluster_cpu_allocated_number,
                    self.cluster_pod_allocated_number,
                ),
            ),
        ):
            resources = summary.get(key)
            if not isinstance(resources, dict):
                continue
            for name, metric in zip(("memory", "cpu", "pods"), gauges, strict=True):
                metric.labels(cluster).set(_quantity_float(resources, name) or 0.0)

    def observe_health_probe(
        self, cluster: str, *, online: bool, healthy: bool, seconds: float
    ) -> None:
        success = online and healthy
        self.cluster_health_probe_success.labels(cluster).set(1 if success else 0)
        self.cluster_health_probe_total.labels(cluster, "success" if success else "error").inc()
        self.cluster_health_probe_duration.labels(cluster).observe(seconds)

    def forget_cluster(self, cluster: str) -> None:
        """Drop a deleted cluster's series (upstream's CleanupMetricsForCluster)."""
        for metric in (
            self.cluster_ready_state,
            self.cluster_node_number,
            self.cluster_ready_node_number,
            self.cluster_memory_allocatable_bytes,
            self.cluster_cpu_allocatable_number,
            self.cluster_pod_allocatable_number,
            self.cluster_memory_allocated_bytes,
            self.cluster_cpu_allocated_number,
            self.cluster_pod_allocated_number,
            self.cluster_sync_status_duration,
            self.cluster_health_probe_success,
            self.cluster_health_probe_duration,
            self.cluster_lease_renewed,
        ):
            with contextlib.suppress(KeyError):
                metric.remove(cluster)
        for result in ("success", "error"):
            with contextlib.suppress(KeyError):
                self.cluster_health_probe_total.remove(cluster, result)
