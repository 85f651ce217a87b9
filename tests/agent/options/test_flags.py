"""The flag table (agent/options/flags.py): upstream's flag set and defaults, and ours."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest

from agent.options import Options
from agent.options.durations import format_duration
from agent.options.flags import FLAGS
from agent.options.parser import build_parser
from tests.agent.options.support import upstream_help

# karmada-agent's flags and defaults as upstream documents them (docs/command-line-flags/
# karmada-agent.md, cmd/agent/app/options/options.go), written as the help text prints them.
UPSTREAM_DEFAULTS: dict[str, Any] = {
    "cluster-name": "",
    "cluster-namespace": "karmada-cluster",
    "cluster-api-endpoint": "",
    "proxy-server-address": "",
    "cluster-provider": "",
    "cluster-region": "",
    "cluster-zones": [],
    "report-secrets": ["KubeCredentials", "KubeImpersonator"],
    "karmada-kubeconfig": "",
    "karmada-context": "",
    "kubeconfig": "",
    "kube-api-qps": 40.0,
    "kube-api-burst": 60,
    "cluster-api-qps": 40.0,
    "cluster-api-burst": 60,
    "cluster-status-update-frequency": "10s",
    "cluster-lease-duration": "40s",
    "cluster-lease-renew-interval-fraction": 0.25,
    "cluster-success-threshold": "30s",
    "cluster-failure-threshold": "30s",
    "cluster-cache-sync-timeout": "2m0s",
    "enable-cluster-resource-modeling": True,
    "controllers": ["*"],
    "concurrent-cluster-syncs": 5,
    "concurrent-work-syncs": 5,
    "resync-period": "0s",
    "rate-limiter-base-delay": "5ms",
    "rate-limiter-max-delay": "16m40s",
    "rate-limiter-qps": 10,
    "rate-limiter-bucket-size": 100,
    "leader-elect": True,
    "leader-elect-resource-namespace": "karmada-system",
    "leader-elect-lease-duration": "15s",
    "leader-elect-renew-deadline": "10s",
    "leader-elect-retry-period": "2s",
    "cert-rotation-checking-interval": "5m0s",
    "cert-rotation-remaining-time-threshold": 0.2,
    "karmada-kubeconfig-namespace": "karmada-system",
    "metrics-bind-address": ":8080",
    "health-probe-bind-address": ":10357",
    "enable-pprof": False,
    "profiling-bind-address": ":6060",
    "v": 0,
}


OUR_FLAGS = {
    "log-format": "auto",
    "leader-elect-lease-cluster": "karmada",
    "karmada-kubeconfig-secret": "",
    "karmada-kubeconfig-secret-key": "",
    "work-deletion-grace-period": "10m0s",
    "work-deletion-hold-threshold": 0.5,
    "delete-adopted-resources": False,
    "tunnel-server-address": "",
    "tunnel-server-name": "",
    "tunnel-server-ca-file": "",
    "tunnel-token-file": "",
    "tunnel-service-account": "",
    "tunnel-token-audience": "karmada-tunnel",
    "tunnel-proxy-url": "http://karmada-tunnel-connect.karmada-system.svc:8090",
    "tunnel-domain": "karmada-tunnel.invalid",
    "tunnel-keepalive-time": "40s",
    "tunnel-max-streams": 500,
}


def comparable(value: Any) -> Any:
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def test_flag_set_is_upstreams_plus_log_format() -> None:
    names = {flag.name for flag in FLAGS}
    assert names == set(UPSTREAM_DEFAULTS) | set(OUR_FLAGS) | {"feature-gates"}


@pytest.mark.parametrize("flag", sorted(UPSTREAM_DEFAULTS))
def test_default_equals_upstream(flag: str) -> None:
    spec = next(f for f in FLAGS if f.name == flag)
    defaults = Options()
    assert comparable(getattr(defaults, spec.attribute)) == UPSTREAM_DEFAULTS[flag]


_HELP_FLAG = re.compile(r"^\s+(?:-\w, )?--([\w-]+)(?: (\S+))?\s{2,}(.*)$")


# klog/component-base flags and --feature-gates: accepted, listed outside FLAGS.
_UPSTREAM_LOGGING_FLAGS = {
    "add-dir-header", "alsologtostderr", "alsologtostderrthreshold",
    "legacy-stderr-threshold-behavior", "log-backtrace-at", "log-dir", "log-file",
    "log-file-max-size", "log-flush-frequency", "log-json-info-buffer-size",
    "log-json-split-stream", "log-text-info-buffer-size", "log-text-split-stream",
    "logging-format", "logtostderr", "one-output", "skip-headers", "skip-log-headers",
    "stderrthreshold", "vmodule",
}  # fmt: skip


def test_upstream_binary_parses_exactly_our_flag_set() -> None:
    names = {m.group(1) for line in upstream_help().splitlines() if (m := _HELP_FLAG.match(line))}
    ours = {flag.name for flag in FLAGS} - set(OUR_FLAGS)
    assert names - {"help"} == ours | _UPSTREAM_LOGGING_FLAGS
    parser_flags = {
        option.lstrip("-")
        for action in build_parser()._actions
        for option in action.option_strings
        if option.startswith("--")
    }
    assert names <= parser_flags
