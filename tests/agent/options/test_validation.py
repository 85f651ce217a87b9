"""Refused values, each named by its flag (agent/options/validation.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.options import parse_options
from agent.options.validation import REFUSED_WHERE_UPSTREAM_MISBEHAVES
from tests.agent.options.support import parse, problems_of


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
    assert any(
        p.startswith(flag + ":")  # a value validation refused
        or p in (f"unknown flag: {flag}", f"flag needs an argument: {flag}")
        or (p.startswith("invalid argument ") and f'{flag}" flag: ' in p)  # pflag's wording
        for p in problems
    ), problems


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


def test_cluster_name_limits() -> None:
    assert parse_options(["--cluster-name=" + "a" * 48]).cluster_name == "a" * 48
    assert parse_options(["--cluster-name=edge-7"]).cluster_name == "edge-7"


def test_every_refusal_of_an_upstream_value_is_documented() -> None:
    doc = (
        Path(__file__).resolve().parents[3] / "docs" / "differences-from-upstream.md"
    ).read_text()
    for case, consequence in REFUSED_WHERE_UPSTREAM_MISBEHAVES.items():
        assert case in doc, case
        assert consequence in " ".join(doc.split()), consequence
