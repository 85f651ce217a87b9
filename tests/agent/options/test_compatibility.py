"""Values upstream accepts: replaced as upstream replaces them, or warned about at start
(agent/options/compatibility.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from agent.options.compatibility import start_warnings
from tests.agent.options.support import parse


@pytest.mark.parametrize(
    ("flag", "value", "attribute", "effective"),
    [
        # Upstream's member-client rate limiter falls back to 40/60 (util.ClusterRateLimiterGetter).
        ("cluster-api-qps", "0", "cluster_api_qps", 40.0),
        ("cluster-api-qps", "-1", "cluster_api_qps", 40.0),
        ("cluster-api-burst", "-3", "cluster_api_burst", 60),
        # ratelimiterflag.Options.SetDefaults.
        ("rate-limiter-qps", "0", "rate_limiter_qps", 10),
        ("rate-limiter-bucket-size", "-1", "rate_limiter_bucket_size", 100),
        ("rate-limiter-base-delay", "-5ms", "rate_limiter_base_delay", timedelta(milliseconds=5)),
        ("rate-limiter-max-delay", "0", "rate_limiter_max_delay", timedelta(seconds=1000)),
        # controller-runtime runs one worker for a non-positive concurrency.
        ("concurrent-cluster-syncs", "0", "concurrent_cluster_syncs", 1),
        # Negative thresholds, resync periods and verbosity act as 0 upstream.
        ("cluster-success-threshold", "-1s", "cluster_success_threshold", timedelta(0)),
        ("cluster-failure-threshold", "-2s", "cluster_failure_threshold", timedelta(0)),
        ("resync-period", "-1m", "resync_period", timedelta(0)),
        ("v", "-1", "verbosity", 0),
    ],
)
def test_values_upstream_replaces_are_replaced_the_same_way(
    flag: str, value: str, attribute: str, effective: Any
) -> None:
    assert getattr(parse(f"--{flag}={value}"), attribute) == effective


def test_a_max_delay_below_the_base_delay_is_accepted_as_upstream() -> None:
    options = parse("--rate-limiter-base-delay=10ms", "--rate-limiter-max-delay=1ms")
    assert options.rate_limiter_max_delay == timedelta(milliseconds=1)


def test_none_next_to_other_report_secrets_is_ignored_as_upstream() -> None:
    options = parse("--report-secrets=None,KubeCredentials")
    assert options.report_kube_credentials is True
    assert options.report_kube_impersonator is False
    assert any("'None' is ignored" in w for w in start_warnings(options))
    assert parse("--report-secrets=None").report_kube_credentials is False


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--enable-pprof"], "--enable-pprof and --profiling-bind-address have no effect"),
        (["--profiling-bind-address=:7070"], "no pprof endpoint"),
        (["--concurrent-cluster-syncs=9"], "--concurrent-cluster-syncs=9 has no effect"),
        (["--resync-period=30s"], "--resync-period=30s has no effect"),
        (["--log-json-split-stream", "--vmodule=x=2"], "--log-json-split-stream, --vmodule"),
    ],
)
def test_flags_that_cannot_apply_are_warned_about_at_start(argv: list[str], fragment: str) -> None:
    assert any(fragment in warning for warning in start_warnings(parse(*argv)))


def test_no_warning_with_the_defaults() -> None:
    assert start_warnings(parse()) == []
