"""Reported EndpointSlice Works: several reporters of one slice share one Work."""

from __future__ import annotations

import copy

from agent.karmada import collected


def test_withdrawn_keeps_other_reporters() -> None:
    eps = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": "s", "namespace": "ns", "labels": {"kubernetes.io/service-name": "a"}},
        "addressType": "IPv4",
    }
    first = collected.desired_work(eps, collected.MULTI_CLUSTER_SERVICE, "karmada-es-m", None)
    both = collected.desired_work(
        eps, collected.SERVICE_EXPORT, "karmada-es-m", copy.deepcopy(first)
    )
    assert collected.managers(both) == {"MultiClusterService", "ServiceExport"}
    assert both["metadata"]["finalizers"] == [
        "karmada.io/mcs-endpointslice-dispatch-controller",
        "karmada.io/endpointslice-controller",
    ]
    remaining = collected.withdrawn(both, collected.SERVICE_EXPORT)
    assert remaining is not None
    assert collected.managers(remaining) == {"MultiClusterService"}
    assert collected.withdrawn(first, collected.MULTI_CLUSTER_SERVICE) is None
