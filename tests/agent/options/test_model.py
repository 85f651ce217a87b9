"""What follows from the options (agent/options/model.py)."""

from __future__ import annotations

from datetime import timedelta

from tests.agent.options.support import parse


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


def test_derived_values() -> None:
    options = parse("--cluster-lease-duration=40s", "--cluster-lease-renew-interval-fraction=0.25")
    assert options.cluster_lease_renew_interval == timedelta(seconds=10)
    assert parse("--report-secrets=None").report_kube_credentials is False
    assert parse().report_kube_impersonator is True
