"""The Karmada (and multi-cluster Services) resources the agent and its tools use, each defined
once. Built-in Kubernetes resources are in agent.kube.resources."""

from __future__ import annotations

from agent.karmada import collected, names
from agent.kube.client import GVR

CLUSTERS = GVR.of(names.CLUSTER_API_VERSION, "clusters")
WORKS = GVR.of(names.WORK_API_VERSION, "works")
SERVICE_EXPORTS = GVR.of(collected.SERVICE_EXPORT_API_VERSION, "serviceexports")
RESOURCE_INTERPRETER_CUSTOMIZATIONS = GVR.of(
    names.CONFIG_API_VERSION, "resourceinterpretercustomizations"
)
RESOURCE_INTERPRETER_WEBHOOK_CONFIGURATIONS = GVR.of(
    names.CONFIG_API_VERSION, "resourceinterpreterwebhookconfigurations"
)
