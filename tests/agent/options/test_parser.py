"""The command line to Options (agent/options/parser.py, with pflag_argparse.py): pflag syntax,
parsed defaults, errors and help."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agent.options import HelpRequested, Options, parse_options
from agent.options.flags import FLAGS
from tests.agent.options.support import parse, problems_of


def test_parsed_defaults_equal_the_dataclass_defaults() -> None:
    parsed = parse()
    defaults = Options()
    for flag in FLAGS:
        if flag.name == "cluster-name":
            continue
        assert getattr(parsed, flag.attribute) == getattr(defaults, flag.attribute), flag.name


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


def test_klog_flags_are_accepted_and_recorded() -> None:
    options = parse("--logtostderr=true", "--log-file", "/x", "--skip_headers")
    assert options.ignored_flags == ("--logtostderr", "--log-file", "--skip-headers")
    assert parse("--logging-format=json").log_format == "json"


def test_positional_arguments_are_refused() -> None:
    assert problems_of("--cluster-name=a", "extra") == (
        "karmada-agent takes no arguments, got 'extra'",
    )


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
