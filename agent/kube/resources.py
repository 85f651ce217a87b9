"""The built-in Kubernetes resources the agent and its tools use, each defined once."""

from __future__ import annotations

from agent.kube.client import GVR

NAMESPACES = GVR("", "v1", "namespaces")
SECRETS = GVR("", "v1", "secrets")
CONFIGMAPS = GVR("", "v1", "configmaps")
SERVICE_ACCOUNTS = GVR("", "v1", "serviceaccounts")
EVENTS = GVR("", "v1", "events")
NODES = GVR("", "v1", "nodes")
PODS = GVR("", "v1", "pods")
SERVICES = GVR("", "v1", "services")
DEPLOYMENTS = GVR("apps", "v1", "deployments")
LEASES = GVR("coordination.k8s.io", "v1", "leases")
ENDPOINT_SLICES = GVR("discovery.k8s.io", "v1", "endpointslices")
CLUSTER_ROLES = GVR("rbac.authorization.k8s.io", "v1", "clusterroles")
CLUSTER_ROLE_BINDINGS = GVR("rbac.authorization.k8s.io", "v1", "clusterrolebindings")
ROLES = GVR("rbac.authorization.k8s.io", "v1", "roles")
ROLE_BINDINGS = GVR("rbac.authorization.k8s.io", "v1", "rolebindings")
POD_DISRUPTION_BUDGETS = GVR("policy", "v1", "poddisruptionbudgets")
CUSTOM_RESOURCE_DEFINITIONS = GVR("apiextensions.k8s.io", "v1", "customresourcedefinitions")
CERTIFICATE_SIGNING_REQUESTS = GVR("certificates.k8s.io", "v1", "certificatesigningrequests")
SUBJECT_ACCESS_REVIEWS = GVR("authorization.k8s.io", "v1", "subjectaccessreviews")
SELF_SUBJECT_ACCESS_REVIEWS = GVR("authorization.k8s.io", "v1", "selfsubjectaccessreviews")
SELF_SUBJECT_REVIEWS = GVR("authentication.k8s.io", "v1", "selfsubjectreviews")
