"""Karmada's well-known names: labels, annotations, finalizers, namespaces, reasons.

Every string here is part of the contract with the Karmada control plane and other
Karmada tooling; a change breaks drop-in compatibility with upstream karmada-agent.
"""

from __future__ import annotations

# API groups and versions
CLUSTER_GROUP = "cluster.karmada.io"
CLUSTER_API_VERSION = f"{CLUSTER_GROUP}/v1alpha1"
WORK_GROUP = "work.karmada.io"
WORK_API_VERSION = f"{WORK_GROUP}/v1alpha1"
# Resource interpreter customizations and webhook configurations, and the webhooks' review
CONFIG_GROUP = "config.karmada.io"
CONFIG_API_VERSION = f"{CONFIG_GROUP}/v1alpha1"

# Namespaces on the control plane
EXECUTION_SPACE_PREFIX = "karmada-es-"
CLUSTER_LEASE_NAMESPACE = "karmada-cluster"  # fixed, not --cluster-namespace
DEFAULT_CLUSTER_NAMESPACE = "karmada-cluster"
DEFAULT_AGENT_NAMESPACE = "karmada-system"

# The agent's control-plane kubeconfig on the member, written by register, kept current by
# certRotation: Secret <agent namespace>/karmada-kubeconfig, data key karmada-kubeconfig.
AGENT_KUBECONFIG_SECRET = "karmada-kubeconfig"
AGENT_KUBECONFIG_KEY = "karmada-kubeconfig"

# Field managers on member objects. Upstream's agent writes them with create and GET+PUT and sets
# no field manager, so the API server records its User-Agent's program name ("karmada-agent/<ver>
# (<os>/<arch>) ...") as an Update manager; this agent applies as the Apply manager
# "karmada-agent" and takes the Update manager's fields over (agent.kube.managed_fields).
UPSTREAM_AGENT_FIELD_MANAGERS = ("karmada-agent",)

# Upstream's controller names (each controller's ControllerName constant), by --controllers name:
# the source component of the Events a controller records, and the `controller` and `name`
# labels of its work-queue and reconcile metrics.
CONTROLLER_COMPONENTS = {
    "clusterStatus": "cluster-status-controller",
    "execution": "execution-controller",
    "workStatus": "work-status-controller",
    "serviceExport": "service-export-controller",
    "endpointsliceCollect": "endpointslice-collect-controller",
    "certRotation": "cert-rotation-controller",
}


def controller_component(controller: str) -> str:
    """Upstream's name of the controller `--controllers` calls `controller`."""
    return CONTROLLER_COMPONENTS[controller]


# Labels
MANAGED_LABEL = "karmada.io/managed"
SYSTEM_LABEL = "karmada.io/system"
WORK_PERMANENT_ID_LABEL = "work.karmada.io/permanent-id"
BINDING_PERMANENT_ID_LABEL = "resourcebinding.karmada.io/permanent-id"
CLUSTER_BINDING_PERMANENT_ID_LABEL = "clusterresourcebinding.karmada.io/permanent-id"
PROPAGATION_POLICY_PERMANENT_ID_LABEL = "propagationpolicy.karmada.io/permanent-id"
CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL = "clusterpropagationpolicy.karmada.io/permanent-id"
RETAIN_REPLICAS_LABEL = "resourcetemplate.karmada.io/retain-replicas"

# Annotations
WORK_NAMESPACE_ANNOTATION = "work.karmada.io/namespace"
WORK_NAME_ANNOTATION = "work.karmada.io/name"
CONFLICT_RESOLUTION_ANNOTATION = "work.karmada.io/conflict-resolution"
CONFLICT_OVERWRITE = "overwrite"
RESOURCE_TEMPLATE_UID_ANNOTATION = "resourcetemplate.karmada.io/uid"
RESOURCE_TEMPLATE_GENERATION_ANNOTATION = "resourcetemplate.karmada.io/generation"
MANAGED_LABELS_ANNOTATION = "resourcetemplate.karmada.io/managed-labels"
MANAGED_ANNOTATIONS_ANNOTATION = "resourcetemplate.karmada.io/managed-annotations"
BINDING_NAMESPACE_ANNOTATION = "resourcebinding.karmada.io/namespace"
BINDING_NAME_ANNOTATION = "resourcebinding.karmada.io/name"
CLUSTER_BINDING_NAME_ANNOTATION = "clusterresourcebinding.karmada.io/name"
PROPAGATION_POLICY_NAMESPACE_ANNOTATION = "propagationpolicy.karmada.io/namespace"
PROPAGATION_POLICY_NAME_ANNOTATION = "propagationpolicy.karmada.io/name"
CLUSTER_PROPAGATION_POLICY_NAME_ANNOTATION = "clusterpropagationpolicy.karmada.io/name"

# Finalizers
EXECUTION_CONTROLLER_FINALIZER = "karmada.io/execution-controller"
CLUSTER_CONTROLLER_FINALIZER = "karmada.io/cluster-controller"

# Condition types
CONDITION_READY = "Ready"
CONDITION_COMPLETE_API_ENABLEMENTS = "CompleteAPIEnablements"
WORK_APPLIED = "Applied"
WORK_DISPATCHING = "Dispatching"

# Reasons
REASON_CLUSTER_READY = "ClusterReady"
REASON_CLUSTER_NOT_READY = "ClusterNotReady"
REASON_CLUSTER_NOT_REACHABLE = "ClusterNotReachable"
REASON_STATUS_COLLECTION_FAILED = "StatusCollectionFailed"
REASON_API_ENABLEMENTS_COMPLETE = "Complete"
REASON_API_ENABLEMENTS_PARTIAL = "Partial"
REASON_API_ENABLEMENTS_EMPTY = "Empty"
REASON_APPLIED_SUCCESSFUL = "AppliedSuccessful"
REASON_APPLIED_FAILED = "AppliedFailed"
REASON_DISPATCHING = "Dispatching"
REASON_SUSPEND_DISPATCHING = "SuspendDispatching"

# Event reasons
EVENT_WORK_DISPATCHING = "WorkDispatching"
EVENT_SYNC_SUCCEED = "SyncSucceed"
EVENT_SYNC_FAILED = "SyncFailed"
EVENT_REFLECT_STATUS_SUCCEED = "ReflectStatusSucceed"
EVENT_REFLECT_STATUS_FAILED = "ReflectStatusFailed"
EVENT_INTERPRET_HEALTH_SUCCEED = "InterpretHealthSucceed"
EVENT_INTERPRET_HEALTH_FAILED = "InterpretHealthFailed"
# Upstream's, for a Work whose member objects could not be deleted.
EVENT_CLEANUP_WORK_FAILED = "CleanupWorkFailed"
# Ours: a Work deleted without our cleanup, a Work deletion held after a long outage, an object
# something keeps undoing re-applied with backoff, a status too large to write at all.
EVENT_WORK_ORPHANED = "WorkOrphaned"
EVENT_WORK_DELETION_HELD = "WorkDeletionHeld"
EVENT_REAPPLY_THROTTLED = "ReapplyThrottled"
EVENT_STATUS_TOO_LARGE = "StatusTooLarge"
# Ours, on the Cluster: a rotated client certificate not yet written into the kubeconfig Secret;
# the client certificate in use outside its validity period.
EVENT_ROTATED_CERTIFICATE_UNSAVED = "RotatedCertificateUnsaved"
EVENT_CLIENT_CERTIFICATE_EXPIRED = "ClientCertificateExpired"
EVENT_CLIENT_CERTIFICATE_NOT_YET_VALID = "ClientCertificateNotYetValid"

# Which upstream controller records each Event (its source and reporting component): the
# execution controller applies, the workStatus controller reflects status and health.
EVENT_SOURCES = {
    EVENT_WORK_DISPATCHING: CONTROLLER_COMPONENTS["execution"],
    EVENT_SYNC_SUCCEED: CONTROLLER_COMPONENTS["execution"],
    EVENT_SYNC_FAILED: CONTROLLER_COMPONENTS["execution"],
    EVENT_WORK_ORPHANED: CONTROLLER_COMPONENTS["execution"],
    EVENT_WORK_DELETION_HELD: CONTROLLER_COMPONENTS["execution"],
    EVENT_CLEANUP_WORK_FAILED: CONTROLLER_COMPONENTS["execution"],
    EVENT_REAPPLY_THROTTLED: CONTROLLER_COMPONENTS["execution"],
    # Whichever controller's write it is; the conditions (the first write) are execution's.
    EVENT_STATUS_TOO_LARGE: CONTROLLER_COMPONENTS["execution"],
    EVENT_REFLECT_STATUS_SUCCEED: CONTROLLER_COMPONENTS["workStatus"],
    EVENT_REFLECT_STATUS_FAILED: CONTROLLER_COMPONENTS["workStatus"],
    EVENT_INTERPRET_HEALTH_SUCCEED: CONTROLLER_COMPONENTS["workStatus"],
    EVENT_INTERPRET_HEALTH_FAILED: CONTROLLER_COMPONENTS["workStatus"],
    EVENT_ROTATED_CERTIFICATE_UNSAVED: CONTROLLER_COMPONENTS["certRotation"],
    EVENT_CLIENT_CERTIFICATE_EXPIRED: CONTROLLER_COMPONENTS["certRotation"],
    EVENT_CLIENT_CERTIFICATE_NOT_YET_VALID: CONTROLLER_COMPONENTS["certRotation"],
}

# Health values in Work.status.manifestStatuses[].health
HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"
UNKNOWN = "Unknown"

# Labels and annotations stripped from member objects when a Work is deleted with
# preserveResourcesOnDeletion, so that they are no longer recognised as Karmada's.
MANAGED_RESOURCE_LABELS = (
    BINDING_PERMANENT_ID_LABEL,
    CLUSTER_BINDING_PERMANENT_ID_LABEL,
    WORK_PERMANENT_ID_LABEL,
    MANAGED_LABEL,
    PROPAGATION_POLICY_PERMANENT_ID_LABEL,
    CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL,
)
MANAGED_RESOURCE_ANNOTATIONS = (
    MANAGED_ANNOTATIONS_ANNOTATION,
    MANAGED_LABELS_ANNOTATION,
    BINDING_NAMESPACE_ANNOTATION,
    BINDING_NAME_ANNOTATION,
    CLUSTER_BINDING_NAME_ANNOTATION,
    RESOURCE_TEMPLATE_UID_ANNOTATION,
    RESOURCE_TEMPLATE_GENERATION_ANNOTATION,
    WORK_NAME_ANNOTATION,
    WORK_NAMESPACE_ANNOTATION,
    PROPAGATION_POLICY_NAMESPACE_ANNOTATION,
    PROPAGATION_POLICY_NAME_ANNOTATION,
    CLUSTER_PROPAGATION_POLICY_NAME_ANNOTATION,
)


def system_labels() -> dict[str, str]:
    """The labels of what registration creates for Karmada itself (namespaces, CSRs)."""
    return {SYSTEM_LABEL: "true"}


def execution_namespace(cluster: str) -> str:
    return EXECUTION_SPACE_PREFIX + cluster


def cluster_of_execution_namespace(namespace: str) -> str | None:
    if namespace.startswith(EXECUTION_SPACE_PREFIX):
        return namespace[len(EXECUTION_SPACE_PREFIX) :]
    return None


# What registration creates on the member cluster for the control plane (upstream's names).
IMPERSONATOR_SERVICE_ACCOUNT = "karmada-impersonator"


def credentials_service_account(cluster: str) -> str:
    return f"karmada-{cluster}"


def controller_manager_role(cluster: str) -> str:
    return f"karmada-controller-manager:{credentials_service_account(cluster)}"


def leader_election_id(cluster: str) -> str:
    return f"karmada-agent-{cluster}"


def agent_user(cluster: str) -> str:
    return f"system:karmada:agent:{cluster}"


AGENT_GROUP = "system:karmada:agents"
AGENT_USER_PREFIX = "system:karmada:agent:"

_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def _fnv1a_32(data: bytes) -> int:
    h = 0x811C9DC5
    for byte in data:
        h ^= byte
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


def generate_work_name(kind: str, name: str, namespace: str) -> str:
    """The Work name the control plane derives for an object (upstream names.GenerateWorkName)."""
    name = name.replace(":", ".").lower()
    key = f"{namespace}-{name}-{kind}" if namespace else f"{name}-{kind}"
    digest = str(_fnv1a_32(key.lower().encode()))
    suffix = "".join(_SAFE_ALPHABET[ord(c) % len(_SAFE_ALPHABET)] for c in digest)
    return f"{name}-{suffix}"
