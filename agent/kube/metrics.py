"""Prometheus implementations of the metric hooks, with the names, labels and buckets that
client-go and controller-runtime register (sigs.k8s.io/controller-runtime pkg/internal/metrics,
pkg/internal/controller/metrics, pkg/metrics/leaderelection.go), so dashboards built on
upstream's agent read this one unchanged.

Work queues carry `name` and `controller` (controller-runtime names a controller's queue after
the controller); `workqueue_depth` also `priority` ("0": these queues have one priority, the one
controller-runtime's priority queue gives ordinary adds). The in-progress gauges
(`workqueue_unfinished_work_seconds`, `workqueue_longest_running_processor_seconds`) are computed
when scraped, from the keys each queue's workers hold.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

# prometheus.ExponentialBuckets(10e-9, 10, 12): controller-runtime's workqueue histograms.
QUEUE_BUCKETS = tuple(1e-8 * 10**i for i in range(12))
# controller-runtime's controller_runtime_reconcile_time_seconds buckets.
RECONCILE_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8,
    0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30,
    40, 50, 60,
)  # fmt: skip
QUEUE_LABELS = ("name", "controller")
# What controller-runtime's controllers report as `result`.
RESULTS = ("error", "requeue_after", "requeue", "success")
# The priority of every key in these queues, as controller-runtime's priority queue labels
# ordinary adds.
PRIORITY = "0"


# A queue's clock now and the start times of the keys its workers hold.
InFlight = Callable[[], tuple[float, Collection[float]]]


class _InFlightCollector(Collector):
    """workqueue_unfinished_work_seconds and workqueue_longest_running_processor_seconds, from
    the queues' in-flight keys at scrape time (client-go refreshes them every 500 ms)."""

    def __init__(self) -> None:
        self.queues: dict[str, InFlight] = {}

    def collect(self) -> Iterator[GaugeMetricFamily]:
        unfinished = GaugeMetricFamily(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed "
            "by work_duration. Large values indicate stuck threads. One can deduce the number of "
            "stuck threads by observing the rate at which this increases.",
            labels=QUEUE_LABELS,
        )
        longest = GaugeMetricFamily(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            labels=QUEUE_LABELS,
        )
        for name, in_flight in sorted(self.queues.items()):
            now, started = in_flight()
            running = [max(now - s, 0.0) for s in started]
            unfinished.add_metric([name, name], sum(running))
            longest.add_metric([name, name], max(running, default=0.0))
        yield unfinished
        yield longest


class _Series:
    """The labelled series of the metrics below, each looked up once: prometheus_client's
    `labels()` checks the values and takes a lock at every call, which came to a few percent of
    the agent's CPU in a burst of Works (several series per request and per reconcile). Series
    here are never removed, so a kept one stays the registry's."""

    def __init__(self) -> None:
        self._series: dict[tuple[int, tuple[str, ...]], Any] = {}

    def __call__(self, metric: Any, *values: str) -> Any:
        key = (id(metric), values)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = metric.labels(*values)
        return series


class PrometheusMetrics:
    """Implements RequestMetrics, QueueMetrics, ControllerMetrics and LeaderMetrics on one
    registry."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self._of = _Series()
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
        # Work queues.
        self.queue_depth = Gauge(
            "workqueue_depth",
            "Current depth of workqueue by workqueue and priority",
            [*QUEUE_LABELS, "priority"],
            registry=registry,
        )
        self.queue_adds = Counter(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            QUEUE_LABELS,
            registry=registry,
        )
        self.queue_latency_seconds = Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            QUEUE_LABELS,
            buckets=QUEUE_BUCKETS,
            registry=registry,
        )
        self.work_duration_seconds = Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            QUEUE_LABELS,
            buckets=QUEUE_BUCKETS,
            registry=registry,
        )
        self.queue_retries = Counter(
            "workqueue_retries",
            "Total number of items added to the workqueue with a non-zero delay (rate-limited "
            "requeues, explicit RequeueAfter or AddAfter calls)",
            QUEUE_LABELS,
            registry=registry,
        )
        self._in_flight = _InFlightCollector()
        registry.register(self._in_flight)
        # Controllers.
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
        self.terminal_reconcile_errors = Counter(
            "controller_runtime_terminal_reconcile_errors",
            "Total number of terminal reconciliation errors per controller",
            ["controller"],
            registry=registry,
        )
        self.reconcile_panics = Counter(
            "controller_runtime_reconcile_panics",
            "Total number of reconciliation panics per controller",
            ["controller"],
            registry=registry,
        )
        self.reconcile_timeouts = Counter(
            "controller_runtime_reconcile_timeouts",
            "Total number of reconciliation timeouts per controller",
            ["controller"],
            registry=registry,
        )
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            ["controller"],
            buckets=RECONCILE_BUCKETS,
            registry=registry,
        )
        self.max_concurrent_reconciles = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            ["controller"],
            registry=registry,
        )
        self.active_workers = Gauge(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            ["controller"],
            registry=registry,
        )
        # Leader election.
        self.leader_status = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates "
            "backup, 1 indicates master. 'name' is the string used to identify the lease. Please "
            "make sure to group by name.",
            ["name"],
            registry=registry,
        )

    # RequestMetrics
    def observe(self, *, method: str, host: str, code: str, seconds: float) -> None:
        self._of(self.requests, code, method, host).inc()
        self._of(self.request_latency, method, host).observe(seconds)

    # QueueMetrics
    def track(self, name: str, in_flight: InFlight) -> None:
        """A queue starts: its series exist from now on (at zero), as client-go's do."""
        self._in_flight.queues[name] = in_flight
        self.queue_depth.labels(name, name, PRIORITY).set(0)
        self.queue_adds.labels(name, name)
        self.queue_latency_seconds.labels(name, name)
        self.work_duration_seconds.labels(name, name)
        self.queue_retries.labels(name, name)

    def add(self, name: str) -> None:
        self._of(self.queue_adds, name, name).inc()

    def depth(self, name: str, depth: int) -> None:
        self._of(self.queue_depth, name, name, PRIORITY).set(depth)

    def queue_latency(self, name: str, seconds: float) -> None:
        self._of(self.queue_latency_seconds, name, name).observe(seconds)

    def work_duration(self, name: str, seconds: float) -> None:
        self._of(self.work_duration_seconds, name, name).observe(seconds)

    def retry(self, name: str) -> None:
        self.queue_retries.labels(name, name).inc()

    # ControllerMetrics
    def controller_started(self, controller: str, workers: int) -> None:
        """Every series of the controller at zero, its worker count, as controller-runtime
        does when a controller starts."""
        for result in RESULTS:
            self.reconciles.labels(controller, result)
        for counter in (
            self.reconcile_errors,
            self.terminal_reconcile_errors,
            self.reconcile_panics,
            self.reconcile_timeouts,
        ):
            counter.labels(controller)
        self.reconcile_time.labels(controller)
        self.max_concurrent_reconciles.labels(controller).set(workers)
        self.active_workers.labels(controller).set(0)

    def worker_active(self, controller: str, delta: int) -> None:
        self._of(self.active_workers, controller).inc(delta)

    def reconcile(self, controller: str, result: str, seconds: float) -> None:
        """`result`: success, requeue, requeue_after, error, terminal_error (an error retrying
        cannot fix) or panic (an unexpected exception: a bug)."""
        if result in ("error", "terminal_error", "panic"):
            self.reconcile_errors.labels(controller).inc()
            if result == "terminal_error":
                self.terminal_reconcile_errors.labels(controller).inc()
            elif result == "panic":
                self.reconcile_panics.labels(controller).inc()
            result = "error"
        self._of(self.reconciles, controller, result).inc()
        self._of(self.reconcile_time, controller).observe(seconds)

    # LeaderMetrics
    def leader_on(self, name: str) -> None:
        self.leader_status.labels(name=name).set(1)

    def leader_off(self, name: str) -> None:
        self.leader_status.labels(name=name).set(0)
