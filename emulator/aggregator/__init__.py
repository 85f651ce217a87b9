"""The aggregation layer (kube-aggregator) of the emulator.

apiservice     the apiregistration.k8s.io/v1 APIService type, its rules and order
layer          the Aggregator: where each group version is served, routing, discovery
proxy          carrying a request to a backend (streams and upgrades included)
documents      the backends' discovery documents, kept for aggregated discovery
availability   the controller keeping each APIService's Available condition
registration   the local APIServices kube-apiserver registers for its own group versions
"""

from __future__ import annotations

from .layer import Aggregator

__all__ = ["Aggregator"]
