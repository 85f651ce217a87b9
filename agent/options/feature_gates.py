"""`--feature-gates`: the gates karmada-agent registers, and how their settings resolve."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from agent.options.flag_values import parse_go_bool, parse_string_list


@dataclass(frozen=True)
class FeatureGate:
    name: str
    default: bool
    stage: Literal["ALPHA", "BETA"]
    # False: accepted for compatibility with upstream command lines, no effect on this agent.
    affects_agent: bool = False


# The gates karmada-agent registers: karmada's pkg/features DefaultFeatureGates (names, stages
# and defaults as there) plus the AllAlpha/AllBeta switches every Kubernetes gate set has.
FEATURE_GATES: Mapping[str, FeatureGate] = {
    gate.name: gate
    for gate in (
        FeatureGate("AllAlpha", False, "ALPHA"),
        FeatureGate("AllBeta", False, "BETA"),
        FeatureGate("ContextualLogging", True, "BETA"),
        FeatureGate("ControllerPriorityQueue", True, "BETA"),
        FeatureGate("CustomizedClusterResourceModeling", True, "BETA", affects_agent=True),
        FeatureGate("Failover", False, "BETA"),
        FeatureGate("FederatedQuotaEnforcement", False, "ALPHA"),
        FeatureGate("GracefulEviction", True, "BETA"),
        FeatureGate("LoggingAlphaOptions", False, "ALPHA"),
        FeatureGate("LoggingBetaOptions", True, "BETA"),
        FeatureGate("MultiClusterService", False, "ALPHA", affects_agent=True),
        FeatureGate("MultiplePodTemplatesScheduling", False, "ALPHA"),
        FeatureGate("PriorityBasedScheduling", True, "BETA"),
        FeatureGate("PropagateDeps", True, "BETA"),
        FeatureGate("PropagationPolicyPreemption", False, "ALPHA"),
        FeatureGate("ResourceQuotaEstimate", False, "ALPHA"),
        FeatureGate("SchedulingOvercommitProtection", False, "ALPHA"),
        FeatureGate("StatefulFailoverInjection", False, "ALPHA"),
        FeatureGate("WorkloadAffinity", False, "ALPHA"),
    )
}


def resolve_feature_gates(overrides: Mapping[str, bool]) -> dict[str, bool]:
    """Defaults, then AllAlpha/AllBeta for gates not set explicitly, then the explicit settings."""
    resolved = {name: gate.default for name, gate in FEATURE_GATES.items()}
    for stage, switch in (("ALPHA", "AllAlpha"), ("BETA", "AllBeta")):
        if switch in overrides:
            for name, gate in FEATURE_GATES.items():
                if gate.stage == stage and name not in ("AllAlpha", "AllBeta"):
                    resolved[name] = overrides[switch]
    resolved.update(overrides)
    return resolved


def parse_feature_gates(text: str) -> dict[str, bool]:
    gates: dict[str, bool] = {}
    for item in parse_string_list(text):
        if not item:
            continue
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep:
            raise ValueError(f"missing bool value for {name}")
        if name not in FEATURE_GATES:
            raise ValueError(f"unrecognized feature gate: {name}")
        try:
            gates[name] = parse_go_bool(value.strip())
        except ValueError:
            raise ValueError(f"invalid value of {name}={value.strip()}, err: not a bool") from None
    return gates
