"""--feature-gates (agent/options/feature_gates.py): upstream's gates and defaults, parsing."""

from __future__ import annotations

import re

from agent.options.feature_gates import FEATURE_GATES
from tests.agent.options.support import parse, upstream_help

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


def test_feature_gate_defaults_equal_upstream() -> None:
    assert dict(parse().feature_gates) == UPSTREAM_GATE_DEFAULTS
    assert set(FEATURE_GATES) == set(UPSTREAM_GATE_DEFAULTS)


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


def test_upstream_binary_has_our_feature_gate_table() -> None:
    listed = re.findall(
        r"^\s+(\w+)=true\|false \((ALPHA|BETA) - default=(true|false)\)", upstream_help(), re.M
    )
    gates = {name: (stage, default == "true") for name, stage, default in listed}
    assert gates == {name: (g.stage, g.default) for name, g in FEATURE_GATES.items()}
