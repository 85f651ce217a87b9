"""Prometheus implementations of the metric hooks, with client-go / controller-runtime names."""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram


class PrometheusMetrics:
    """Implements RequestMetrics, QueueMetrics and ControllerMetrics on one registry."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.requests = Counter(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            ["code", "method", "host"],
            registry=registry,
        )
        self.request_latency = Histogram(
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb and host.",
            ["verb", "host"],
            registry=registry,
        )
        self.queue_adds = Counter(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            ["name"],
            registry=registry,
        )
        self.queue_depth = Gauge(
            "workqueue_depth", "Current depth of workqueue", ["name"], registry=registry
        )
        self.queue_latency_seconds = Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested.",
            ["name"],
            registry=registry,
        )
        self.work_duration_seconds = Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            ["name"],
            registry=registry,
        )
        self.queue_retries = Counter(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            ["name"],
            registry=registry,
        )
        self.reconciles = Counter(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            ["controller", "result"],
            registry=registry,
        )
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            ["controller"],
            registry=registry,
        )
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            ["controller"],
            registry=registry,
        )

        self.leader_status = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates "
            "backup, 1 indicates master. 'name' is the string used to identify the lease. Please "
            "make sure to group by name.",
            ["name"],
            registry=registry,
        )

    # LeaderMetrics
    def leader_on(self, name: str) -> None:
        self.leader_status.labels(name=name).set(1)

    def leader_off(self, name: str) -> None:
        self.leader_status.labels(name=name).set(0)

    # RequestMetrics
    def observe(self, *, method: str, host: str, code: str, seconds: float) -> None:
        self.requests.labels(code=code, method=method, host=host).inc()
        self.request_latency.labels(verb=method, host=host).observe(seconds)

    # QueueMetrics
    def add(self, name: str) -> None:
        self.queue_adds.labels(name=name).inc()

    def depth(self, name: str, depth: int) -> None:
        self.queue_depth.labels(name=name).set(depth)

    def queue_latency(self, name: str, seconds: float) -> None:
        self.queue_latency_seconds.labels(name=name).observe(seconds)

    def work_duration(self, name: str, seconds: float) -> None:
        self.work_duration_seconds.labels(name=name).observe(seconds)

    def retry(self, name: str) -> None:
        self.queue_retries.labels(name=name).inc()

    # ControllerMetrics
    def reconcile(self, controller: str, result: str, seconds: float) -> None:
        self.reconciles.labels(controller=controller, result=result).inc()
        if result in ("error", "terminal_error"):
            self.reconcile_errors.labels(controller=controller).inc()
        self.reconcile_time.labels(controller=controller).observe(seconds)
