"""Values upstream accepts that this agent cannot apply as they read: replaced as upstream's agent
replaces them, or warned about once at start. (Those refused instead are in agent.options.validation.)"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from agent.options.durations import format_duration
from agent.options.model import Options


def apply_upstream_fallbacks(values: dict[str, Any]) -> dict[str, Any]:
    """Where upstream's agent replaces a non-positive value by a default, so do we: the member
    client's rate limits (40 QPS, burst 60), the work queues' rate limiter (5ms, 1000s, 10, 100)
    and controller-runtime's one worker for --concurrent-cluster-syncs. Negative resync periods,
    thresholds and verbosity behave as 0 there, and are made 0 here."""
    defaults = Options()
    zero = timedelta(0)
    for name in (
        "cluster_api_qps",
        "cluster_api_burst",
        "rate_limiter_base_delay",
        "rate_limiter_max_delay",
        "rate_limiter_qps",
        "rate_limiter_bucket_size",
    ):
        value = values.get(name)
        if value is not None and value <= (zero if isinstance(value, timedelta) else 0):
            values[name] = getattr(defaults, name)
    if values.get("concurrent_cluster_syncs", 1) <= 0:
        values["concurrent_cluster_syncs"] = 1
    for name in ("resync_period", "cluster_success_threshold", "cluster_failure_threshold"):
        if values.get(name, zero) < zero:
            values[name] = zero
    if values.get("verbosity", 0) < 0:
        values["verbosity"] = 0
    return values


def start_warnings(options: Options) -> list[str]:
    """What the agent says once at start about flags it accepts but cannot apply as upstream."""
    warnings: list[str] = []
    defaults = Options()
    if options.ignored_flags:
        warnings.append(
            "ignoring klog flags this agent does not use: " + ", ".join(options.ignored_flags)
        )
    if options.enable_pprof or options.profiling_bind_address != defaults.profiling_bind_address:
        warnings.append(
            "--enable-pprof and --profiling-bind-address have no effect: this agent has no pprof "
            "endpoint"
        )
    if options.concurrent_cluster_syncs != defaults.concurrent_cluster_syncs:
        warnings.append(
            f"--concurrent-cluster-syncs={options.concurrent_cluster_syncs} has no effect: the "
            "agent syncs one Cluster, its own, one pass at a time (as upstream's agent does "
            "whatever the value)"
        )
    if options.resync_period > timedelta(0):
        warnings.append(
            f"--resync-period={format_duration(options.resync_period)} has no effect: the "
            "agent's watches deliver every change, and drift and health flow from them"
        )
    if "None" in options.report_secrets and len(options.report_secrets) > 1:
        warnings.append(
            "--report-secrets: 'None' is ignored next to other values (as upstream does); "
            f"reporting {', '.join(k for k in options.report_secrets if k != 'None')}"
        )
    return warnings
