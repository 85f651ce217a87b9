"""The Karmada (and multi-cluster Services) resources the agent and its tools use, each defined
once. Built-in Kubernetes resources are in agent.kube.resources."""

from __future__ import annotations

from agent.karmada import names
from agent.kube.client import GVR

CLUSTERS = GVR(names.CLUSTER_GROUP, "v1alpha1", "clusters")
WORKS = GVR(names.WORK_GROUP, "v1alpha1", "works")
SERVICE_EXPORTS = GVR("multicluster.x-k8s.io", "v1alpha1", "serviceexports")
RESOURCE_INTERPRETER_CUSTOMIZATIONS = GVR(
    "config.karmada.io", "v1alpha1", "resourceinterpretercustomizations"
)
RESOURCE_INTERPRETER_WEBHOOK_CONFIGURATIONS = GVR(
    "config.karmada.io", "v1alpha1", "resourceinterpreterwebhookconfigurations"
)
