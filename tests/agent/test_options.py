"""Flags, defaults and validation of karmada-agent (agent/options/)."""

from __future__ import annotations

import os
import re
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from agent.options import HelpRequested, Options, OptionsError, parse_options
from agent.options.bind_address import BindAddress, parse_bind_address
from agent.options.compatibility import start_warnings
from agent.options.controller_selection import CONTROLLERS, ControllerSelection
from agent.options.durations import format_duration, parse_duration
from agent.options.feature_gates import FEATURE_GATES
from agent.options.flags import FLAGS
from agent.options.parser import build_parser
from agent.options.validation import REFUSED_WHERE_UPSTREAM_MISBEHAVES

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
    "tunnel-proxy-url": "http://karmada-tunnel-connect.karmada-system.svc:8090",
    "tunnel-domain": "karmada-tunnel.invalid",
    "tunnel-keepalive-time": "40s",
}

UPSTREAM_GATE_DEFAULTS = {
    "AllAlpha": False,
    "AllBeta": False,
    "ContextualLogging": True,
    "ControllerPriorityQueue": True,
    "CustomizedClusterResourceModeling": True,
    "Failover": False,
    "FederatedQuotaEnforcement": False,
    "GracefulEviction": True,
    "LoggingAlphaOptions": False,
    "LoggingBetaOptions": True,
    "MultiClusterService": False,
    "MultiplePodTemplatesScheduling": False,
    "PriorityBasedScheduling": True,
    "PropagateDeps": True,
    "PropagationPolicyPreemption": False,
    "ResourceQuotaEstimate": False,
    "SchedulingOvercommitProtection": False,
    "StatefulFailoverInjection": False,
    "WorkloadAffinity": False,
}


def parse(*argv: str) -> Options:
    return parse_options(["--cluster-name=member1", *argv])


def problems_of(*argv: str) -> tuple[str, ...]:
    with pytest.raises(OptionsError) as caught:
        parse_options(list(argv))
    return caught.value.problems


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


def test_parsed_defaults_equal_the_dataclass_defaults() -> None:
    parsed = parse()
    defaults = Options()
    for flag in FLAGS:
        if flag.name == "cluster-name":
            continue
        assert getattr(parsed, flag.attribute) == getattr(defaults, flag.attribute), flag.name


def test_feature_gate_defaults_equal_upstream() -> None:
    assert dict(parse().feature_gates) == UPSTREAM_GATE_DEFAULTS
    assert set(FEATURE_GATES) == set(UPSTREAM_GATE_DEFAULTS)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10s", timedelta(seconds=10)),
        ("2m", timedelta(minutes=2)),
        ("1000s", timedelta(seconds=1000)),
        ("16m40s", timedelta(seconds=1000)),
        ("1h30m", timedelta(minutes=90)),
        ("1.5h", timedelta(minutes=90)),
        ("300ms", timedelta(milliseconds=300)),
        ("5ms", timedelta(milliseconds=5)),
        ("1500us", timedelta(microseconds=1500)),
        ("1500\u00b5s", timedelta(microseconds=1500)),
        ("2h45m30.5s", timedelta(hours=2, minutes=45, seconds=30.5)),
        ("0", timedelta(0)),
        ("-1s", timedelta(seconds=-1)),
        ("+3s", timedelta(seconds=3)),
        (".5s", timedelta(milliseconds=500)),
        ("1.s", timedelta(seconds=1)),
    ],
)
def test_parse_duration_accepts_go_syntax(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "10", "s", "1x", "1.2.3s", ".s", "1 s", "-", "1e3s", "10S"])
def test_parse_duration_refuses_what_go_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (timedelta(0), "0s"),
        (timedelta(milliseconds=5), "5ms"),
        (timedelta(seconds=1.5), "1.5s"),
        (timedelta(minutes=5), "5m0s"),
        (timedelta(seconds=1000), "16m40s"),
        (timedelta(minutes=90), "1h30m0s"),
        (timedelta(seconds=-40), "-40s"),
        (timedelta(microseconds=1500), "1.5ms"),
    ],
)
def test_format_duration_matches_go(value: timedelta, text: str) -> None:
    assert format_duration(value) == text


def test_flag_value_forms() -> None:
    spaced = parse("--cluster-namespace", "ns1", "--cluster-lease-duration", "1m")
    assert spaced.cluster_namespace == "ns1"
    assert spaced.cluster_lease_duration == timedelta(minutes=1)
    assert parse("--leader-elect=false").leader_elect is False
    assert parse("--leader-elect").leader_elect is True
    assert parse("--leader-elect=F").leader_elect is False
    assert parse("--enable-cluster-resource-modeling=0").enable_cluster_resource_modeling is False
    assert parse("-v", "3").verbosity == 3
    assert parse("-v=4").verbosity == 4
    assert parse("--v=5").verbosity == 5
    assert parse("-v6").verbosity == 6
    # klog-style underscores in flag names, as Go components normalise them.
    assert parse("--cluster_namespace=ns2").cluster_namespace == "ns2"


def test_string_lists_replace_the_default_then_append() -> None:
    options = parse("--cluster-zones=a,b", "--cluster-zones", "c")
    assert options.cluster_zones == ("a", "b", "c")
    assert parse("--report-secrets=KubeImpersonator").report_secrets == ("KubeImpersonator",)
    assert parse("--report-secrets=None").report_secrets == ("None",)
    assert parse("--report-secrets=").report_secrets == ()
    assert parse('--cluster-zones="z1",z2').cluster_zones == ("z1", "z2")


def test_feature_gates_parse_and_merge() -> None:
    options = parse(
        "--feature-gates=MultiClusterService=true,ControllerPriorityQueue=false",
        "--feature-gates",
        "Failover=true",
    )
    assert options.gate("MultiClusterService") is True
    assert options.gate("ControllerPriorityQueue") is False
    assert options.gate("Failover") is True
    assert options.gate("CustomizedClusterResourceModeling") is True
    all_alpha = parse("--feature-gates=AllAlpha=true,WorkloadAffinity=false")
    assert all_alpha.gate("MultiClusterService") is True
    assert all_alpha.gate("WorkloadAffinity") is False  # explicit beats AllAlpha
    assert all_alpha.gate("ControllerPriorityQueue") is True  # beta: untouched


@pytest.mark.parametrize(
    ("entries", "enabled"),
    [
        (("*",), set(CONTROLLERS) - {"endpointsliceCollect"}),
        (("*", "-certRotation"), set(CONTROLLERS) - {"endpointsliceCollect", "certRotation"}),
        (("*", "certRotation"), set(CONTROLLERS) - {"endpointsliceCollect"}),
        (("execution",), {"execution"}),
        (("execution", "workStatus"), {"execution", "workStatus"}),
        (("-execution", "*"), set(CONTROLLERS) - {"endpointsliceCollect", "execution"}),
        (
            ("-execution", "execution", "*"),
            set(CONTROLLERS) - {"endpointsliceCollect", "execution"},
        ),
        ((), set()),
    ],
)
def test_controller_selection(entries: tuple[str, ...], enabled: set[str]) -> None:
    options = parse("--controllers=" + ",".join(entries))
    assert options.enabled_controllers() == enabled


def test_cert_rotation_is_on_by_default_unlike_upstream() -> None:
    assert ControllerSelection(("*",)).is_enabled("certRotation") is True
    assert parse().cert_rotation_requested is False
    assert parse("--controllers=*,certRotation").cert_rotation_requested is True
    assert "certRotation" not in parse("--controllers=*,-certRotation").enabled_controllers()


def test_endpointslice_collect_needs_the_multiclusterservice_gate() -> None:
    assert "endpointsliceCollect" not in parse().enabled_controllers()
    gated = parse("--feature-gates=MultiClusterService=true")
    assert "endpointsliceCollect" in gated.enabled_controllers()
    assert (
        "endpointsliceCollect"
        not in parse(
            "--feature-gates=MultiClusterService=true", "--controllers=*,-endpointsliceCollect"
        ).enabled_controllers()
    )


def test_bind_addresses() -> None:
    options = parse("--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:9000")
    assert options.metrics_bind is None
    assert options.health_probe_bind == BindAddress("127.0.0.1", 9000)
    assert parse_bind_address(":8080") == BindAddress("", 8080)
    assert parse_bind_address("[::1]:10357") == BindAddress("::1", 10357)


def test_derived_values() -> None:
    options = parse("--cluster-lease-duration=40s", "--cluster-lease-renew-interval-fraction=0.25")
    assert options.cluster_lease_renew_interval == timedelta(seconds=10)
    assert parse("--report-secrets=None").report_kube_credentials is False
    assert parse().report_kube_impersonator is True


def test_klog_flags_are_accepted_and_recorded() -> None:
    options = parse("--logtostderr=true", "--log-file", "/x", "--skip_headers")
    assert options.ignored_flags == ("--logtostderr", "--log-file", "--skip-headers")
    assert parse("--logging-format=json").log_format == "json"


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        ([], "--cluster-name"),
        (["--cluster-name=Member1"], "--cluster-name"),
        (["--cluster-name=" + "a" * 49], "--cluster-name"),
        (["--cluster-name=-a"], "--cluster-name"),
        (["--cluster-name=a", "--cluster-namespace=Bad_NS"], "--cluster-namespace"),
        (
            ["--cluster-name=a", "--cluster-status-update-frequency=-1s"],
            "--cluster-status-update-frequency",
        ),
        (
            ["--cluster-name=a", "--cluster-status-update-frequency=0"],
            "--cluster-status-update-frequency",
        ),
        (["--cluster-name=a", "--cluster-lease-duration=-5s"], "--cluster-lease-duration"),
        (
            ["--cluster-name=a", "--cluster-lease-renew-interval-fraction=0"],
            "--cluster-lease-renew-interval-fraction",
        ),
        (
            ["--cluster-name=a", "--cluster-lease-renew-interval-fraction=1"],
            "--cluster-lease-renew-interval-fraction",
        ),
        (["--cluster-name=a", "--cluster-api-endpoint=10.0.0.1:6443"], "--cluster-api-endpoint"),
        (["--cluster-name=a", "--cluster-api-endpoint=https://"], "--cluster-api-endpoint"),
        (
            ["--cluster-name=a", "--cluster-api-endpoint=https://u:p@h:6443"],
            "--cluster-api-endpoint",
        ),
        (
            ["--cluster-name=a", "--cluster-api-endpoint=https://h:6443/?x=1"],
            "--cluster-api-endpoint",
        ),
        (["--cluster-name=a", "--cluster-api-endpoint=https://h:99999"], "--cluster-api-endpoint"),
        (["--cluster-name=a", "--proxy-server-address=ftp://proxy:21"], "--proxy-server-address"),
        (["--cluster-name=a", "--cluster-provider=not valid"], "--cluster-provider"),
        (["--cluster-name=a", "--cluster-region=" + "r" * 64], "--cluster-region"),
        (["--cluster-name=a", "--cluster-zones=ok,-bad"], "--cluster-zones"),
        (["--cluster-name=a", "--cluster-zones=a,,b"], "--cluster-zones"),
        (["--cluster-name=a", "--report-secrets=KubeCredential"], "--report-secrets"),
        (["--cluster-name=a", "--kube-api-qps=0"], "--kube-api-qps"),
        (["--cluster-name=a", "--kube-api-burst=0"], "--kube-api-burst"),
        (["--cluster-name=a", "--kube-api-qps=-1"], "--kube-api-qps"),
        (["--cluster-name=a", "--cluster-lease-duration=0"], "--cluster-lease-duration"),
        (["--cluster-name=a", "--cluster-cache-sync-timeout=0"], "--cluster-cache-sync-timeout"),
        (
            ["--cluster-name=a", "--cert-rotation-checking-interval=0"],
            "--cert-rotation-checking-interval",
        ),
        (
            ["--cluster-name=a", "--cert-rotation-remaining-time-threshold=0"],
            "--cert-rotation-remaining-time-threshold",
        ),
        (["--cluster-name=a", "--concurrent-work-syncs=0"], "--concurrent-work-syncs"),
        (["--cluster-name=a", "--controllers=*,nope"], "--controllers"),
        (["--cluster-name=a", "--controllers=-*"], "--controllers"),
        (["--cluster-name=a", "--feature-gates=Nope=true"], "--feature-gates"),
        (["--cluster-name=a", "--feature-gates=Failover=maybe"], "--feature-gates"),
        (["--cluster-name=a", "--feature-gates=Failover"], "--feature-gates"),
        (["--cluster-name=a", "--leader-elect-lease-duration=5s"], "--leader-elect-lease-duration"),
        (["--cluster-name=a", "--leader-elect-retry-period=9s"], "--leader-elect-renew-deadline"),
        (["--cluster-name=a", "--leader-elect-retry-period=0s"], "--leader-elect-retry-period"),
        (
            ["--cluster-name=a", "--cert-rotation-remaining-time-threshold=1.5"],
            "--cert-rotation-remaining-time-threshold",
        ),
        (["--cluster-name=a", "--metrics-bind-address=8080"], "--metrics-bind-address"),
        (["--cluster-name=a", "--health-probe-bind-address=:70000"], "--health-probe-bind-address"),
        (["--cluster-name=a", "--health-probe-bind-address=::1:80"], "--health-probe-bind-address"),
        (["--cluster-name=a", "--v=x"], "--v"),
        (["--cluster-name=a", "--log-format=xml"], "--log-format"),
        (["--cluster-name=a", "--leader-elect=maybe"], "--leader-elect"),
        (["--cluster-name=a", "--kube-api-qps=nan"], "--kube-api-qps"),
        (["--cluster-name=a", "--concurrent-work-syncs=1.5"], "--concurrent-work-syncs"),
        (["--cluster-name=a", "--cluster-lease-duration=40"], "--cluster-lease-duration"),
        (["--cluster-name=a", "--cluster-lease-duration"], "--cluster-lease-duration"),
        (["--cluster-name=a", "--bogus=1"], "--bogus"),
        (["--cluster-name=a", "--cluster-nam=b"], "--cluster-nam"),
    ],
)
def test_invalid_values_are_refused_naming_the_flag(argv: list[str], flag: str) -> None:
    problems = problems_of(*argv)
    assert any(p.startswith(flag + ":") or p == f"unknown flag: {flag}" for p in problems), problems


def test_leader_election_timings_are_only_checked_when_electing() -> None:
    options = parse("--leader-elect=false", "--leader-elect-lease-duration=1s")
    assert options.leader_elect is False


def test_every_problem_is_reported_at_once() -> None:
    problems = problems_of("--cluster-name=", "--kube-api-qps=0", "--concurrent-work-syncs=0")
    assert [p.split(":")[0] for p in problems] == [
        "--cluster-name",
        "--kube-api-qps",
        "--concurrent-work-syncs",
    ]


def test_positional_arguments_are_refused() -> None:
    assert problems_of("--cluster-name=a", "extra") == (
        "karmada-agent takes no arguments, got 'extra'",
    )


def test_cluster_name_limits() -> None:
    assert parse_options(["--cluster-name=" + "a" * 48]).cluster_name == "a" * 48
    assert parse_options(["--cluster-name=edge-7"]).cluster_name == "edge-7"


def test_help_lists_every_flag_with_upstream_defaults() -> None:
    with pytest.raises(HelpRequested) as shown:
        parse_options(["--help"])
    text = " ".join(shown.value.text.split())
    for flag in FLAGS:
        assert f"--{flag.name} " in text
    for fragment in (
        "(default 16m40s)",
        "(default 5m0s)",
        "(default 2m0s)",
        '(default "karmada-cluster")',
        "(default [KubeCredentials,KubeImpersonator])",
        "(default [*])",
        '(default ":10357")',
        "(default 0.25)",
        "(default 40)",
    ):
        assert fragment in text, fragment


# --- values upstream accepts ----------------------------------------------------------------


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


def test_every_refusal_of_an_upstream_value_is_documented() -> None:
    doc = (
        Path(__file__).resolve().parents[2] / "docs" / "differences-from-upstream.md"
    ).read_text()
    for case, consequence in REFUSED_WHERE_UPSTREAM_MISBEHAVES.items():
        assert case in doc, case
        assert consequence in " ".join(doc.split()), consequence


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


# --- the real upstream binary ---------------------------------------------------------------

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


def _upstream_help() -> str:
    binary = Path(os.environ.get("KARMADA_UPSTREAM_BIN", "")) / "karmada-agent"
    if not os.environ.get("KARMADA_UPSTREAM_BIN") or not binary.exists():
        pytest.skip("KARMADA_UPSTREAM_BIN is not set (or has no karmada-agent): cannot ask it")
    done = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60)
    return done.stdout + done.stderr


def test_upstream_binary_parses_exactly_our_flag_set() -> None:
    names = {m.group(1) for line in _upstream_help().splitlines() if (m := _HELP_FLAG.match(line))}
    ours = {flag.name for flag in FLAGS} - set(OUR_FLAGS)
    assert names - {"help"} == ours | _UPSTREAM_LOGGING_FLAGS
    parser_flags = {
        option.lstrip("-")
        for action in build_parser()._actions
        for option in action.option_strings
        if option.startswith("--")
    }
    assert names <= parser_flags


def test_upstream_binary_has_our_feature_gate_table() -> None:
    listed = re.findall(
        r"^\s+(\w+)=true\|false \((ALPHA|BETA) - default=(true|false)\)", _upstream_help(), re.M
    )
    gates = {name: (stage, default == "true") for name, stage, default in listed}
    assert gates == {name: (g.stage, g.default) for name, g in FEATURE_GATES.items()}
