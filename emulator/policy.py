"""kube-apiserver's bootstrap RBAC policy: the default roles and bindings clients rely on.

Rules follow kube's bootstrappolicy. admin, edit and view are aggregated roles in
kube; with no aggregation controller here they carry the rules their aggregation
yields (view = aggregate-to-view; edit = aggregate-to-edit + view; admin =
aggregate-to-admin + edit) and keep their aggregationRule for fidelity.
"""

from __future__ import annotations

import copy
from typing import Any

RBAC_API_VERSION = "rbac.authorization.k8s.io/v1"
RBAC_GROUP = "rbac.authorization.k8s.io"
BOOTSTRAP_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
AUTOUPDATE = {"rbac.authorization.kubernetes.io/autoupdate": "true"}

READ = ["get", "list", "watch"]
WRITE = ["create", "delete", "deletecollection", "patch", "update"]
READ_WRITE = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def _rule(verbs: list[str], groups: list[str], resources: list[str]) -> dict[str, Any]:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


def _urls(verbs: list[str], urls: list[str]) -> dict[str, Any]:
    return {"nonResourceURLs": urls, "verbs": verbs}


_AGGREGATE_TO_VIEW = [
    _rule(
        READ,
        [""],
        [
            "configmaps",
            "endpoints",
            "persistentvolumeclaims",
            "persistentvolumeclaims/status",
            "pods",
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "serviceaccounts",
            "services",
            "services/status",
        ],
    ),
    _rule(
        READ,
        [""],
        [
            "bindings",
            "events",
            "limitranges",
            "namespaces/status",
            "pods/log",
            "pods/status",
            "replicationcontrollers/status",
            "resourcequotas",
            "resourcequotas/status",
        ],
    ),
    _rule(READ, [""], ["namespaces"]),
    _rule(READ, ["discovery.k8s.io"], ["endpointslices"]),
    _rule(
        READ,
        ["apps"],
        [
            "controllerrevisions",
            "daemonsets",
            "daemonsets/status",
            "deployments",
            "deployments/scale",
            "deployments/status",
            "replicasets",
            "replicasets/scale",
            "replicasets/status",
            "statefulsets",
            "statefulsets/scale",
            "statefulsets/status",
        ],
    ),
    _rule(READ, ["autoscaling"], ["horizontalpodautoscalers", "horizontalpodautoscalers/status"]),
    _rule(READ, ["batch"], ["cronjobs", "cronjobs/status", "jobs", "jobs/status"]),
    _rule(
        READ,
        ["extensions"],
        [
            "daemonsets",
            "daemonsets/status",
            "deployments",
            "deployments/scale",
            "deployments/status",
            "ingresses",
            "ingresses/status",
            "networkpolicies",
            "replicasets",
            "replicasets/scale",
            "replicasets/status",
            "replicationcontrollers/scale",
        ],
    ),
    _rule(READ, ["policy"], ["poddisruptionbudgets", "poddisruptionbudgets/status"]),
    _rule(READ, ["networking.k8s.io"], ["ingresses", "ingresses/status", "networkpolicies"]),
]

_AGGREGATE_TO_EDIT = [
    _rule(
        READ,
        [""],
        [
            "pods/attach",
            "pods/exec",
            "pods/portforward",
            "pods/proxy",
            "secrets",
            "services/proxy",
        ],
    ),
    _rule(["impersonate"], [""], ["serviceaccounts"]),
    _rule(WRITE, [""], ["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"]),
    _rule(["create"], [""], ["pods/eviction"]),
    _rule(
        WRITE,
        [""],
        [
            "configmaps",
            "events",
            "persistentvolumeclaims",
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "secrets",
            "serviceaccounts",
            "services",
            "services/proxy",
        ],
    ),
    _rule(["create"], [""], ["serviceaccounts/token"]),
    _rule(
        WRITE,
        ["apps"],
        [
            "daemonsets",
            "deployments",
            "deployments/rollback",
            "deployments/scale",
            "replicasets",
            "replicasets/scale",
            "statefulsets",
            "statefulsets/scale",
        ],
    ),
    _rule(WRITE, ["autoscaling"], ["horizontalpodautoscalers"]),
    _rule(WRITE, ["batch"], ["cronjobs", "jobs"]),
    _rule(
        WRITE,
        ["extensions"],
        [
            "daemonsets",
            "deployments",
            "deployments/rollback",
            "deployments/scale",
            "ingresses",
            "networkpolicies",
            "replicasets",
            "replicasets/scale",
            "replicationcontrollers/scale",
        ],
    ),
    _rule(WRITE, ["policy"], ["poddisruptionbudgets"]),
    _rule(WRITE, ["networking.k8s.io"], ["ingresses", "networkpolicies"]),
    _rule(READ_WRITE, ["coordination.k8s.io"], ["leases"]),
]

_AGGREGATE_TO_ADMIN = [
    _rule(["create"], ["authorization.k8s.io"], ["localsubjectaccessreviews"]),
    _rule(READ_WRITE, [RBAC_GROUP], ["rolebindings", "roles"]),
]


def _aggregation(target: str) -> dict[str, Any]:
    label = f"rbac.authorization.k8s.io/aggregate-to-{target}"
    return {"clusterRoleSelectors": [{"matchLabels": {label: "true"}}]}


def _cluster_role(
    name: str,
    rules: list[dict[str, Any]],
    *,
    labels: dict[str, str] | None = None,
    aggregation: dict[str, Any] | None = None,
) -> dict[str, Any]:
    role: dict[str, Any] = {
        "apiVersion": RBAC_API_VERSION,
        "kind": "ClusterRole",
        "metadata": {
            "name": name,
            "labels": {**BOOTSTRAP_LABELS, **(labels or {})},
            "annotations": dict(AUTOUPDATE),
        },
        "rules": copy.deepcopy(rules),
    }
    if aggregation is not None:
        role["aggregationRule"] = aggregation
    return role


def _cluster_role_binding(
    name: str, *, groups: tuple[str, ...] = (), users: tuple[str, ...] = ()
) -> dict[str, Any]:
    subjects = [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": g} for g in groups]
    subjects += [{"apiGroup": RBAC_GROUP, "kind": "User", "name": u} for u in users]
    return {
        "apiVersion": RBAC_API_VERSION,
        "kind": "ClusterRoleBinding",
        "metadata": {
            "name": name,
            "labels": dict(BOOTSTRAP_LABELS),
            "annotations": dict(AUTOUPDATE),
        },
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name},
        "subjects": subjects,
    }


def default_cluster_roles() -> list[dict[str, Any]]:
    view_label = {"rbac.authorization.k8s.io/aggregate-to-view": "true"}
    edit_label = {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}
    admin_label = {"rbac.authorization.k8s.io/aggregate-to-admin": "true"}
    return [
        _cluster_role(
            "cluster-admin",
            [_rule(["*"], ["*"], ["*"]), _urls(["*"], ["*"])],
        ),
        _cluster_role(
            "system:discovery",
            [
                _urls(
                    ["get"],
                    [
                        "/api",
                        "/api/*",
                        "/apis",
                        "/apis/*",
                        "/healthz",
                        "/livez",
                        "/openapi",
                        "/openapi/*",
                        "/readyz",
                        "/version",
                        "/version/",
                    ],
                )
            ],
        ),
        _cluster_role(
            "system:basic-user",
            [
                _rule(
                    ["create"],
                    ["authorization.k8s.io"],
                    ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
                _rule(["create"], ["authentication.k8s.io"], ["selfsubjectreviews"]),
            ],
        ),
        _cluster_role(
            "system:public-info-viewer",
            [_urls(["get"], ["/healthz", "/livez", "/readyz", "/version", "/version/"])],
        ),
        _cluster_role(
            "system:monitoring",
            [
                _urls(
                    ["get"],
                    [
                        "/healthz",
                        "/healthz/*",
                        "/livez",
                        "/livez/*",
                        "/metrics",
                        "/metrics/slis",
                        "/readyz",
                        "/readyz/*",
                    ],
                )
            ],
        ),
        _cluster_role(
            "system:service-account-issuer-discovery",
            [_urls(["get"], ["/.well-known/openid-configuration", "/openid/v1/jwks"])],
        ),
        _cluster_role(
            "admin",
            _AGGREGATE_TO_ADMIN + _AGGREGATE_TO_EDIT + _AGGREGATE_TO_VIEW,
            aggregation=_aggregation("admin"),
        ),
        _cluster_role(
            "edit",
            _AGGREGATE_TO_EDIT + _AGGREGATE_TO_VIEW,
            labels=admin_label,
            aggregation=_aggregation("edit"),
        ),
        _cluster_role(
            "view",
            _AGGREGATE_TO_VIEW,
            labels=edit_label,
            aggregation=_aggregation("view"),
        ),
        _cluster_role("system:aggregate-to-admin", _AGGREGATE_TO_ADMIN, labels=admin_label),
        _cluster_role("system:aggregate-to-edit", _AGGREGATE_TO_EDIT, labels=edit_label),
        _cluster_role("system:aggregate-to-view", _AGGREGATE_TO_VIEW, labels=view_label),
        _cluster_role(
            "system:auth-delegator",
            [
                _rule(["create"], ["authentication.k8s.io"], ["tokenreviews"]),
                _rule(["create"], ["authorization.k8s.io"], ["subjectaccessreviews"]),
            ],
        ),
        _cluster_role(
            "system:node-bootstrapper",
            [
                _rule(
                    ["create", "get", "list", "watch"],
                    ["certificates.k8s.io"],
                    ["certificatesigningrequests"],
                )
            ],
        ),
        _cluster_role(
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            [_rule(["create"], ["certificates.k8s.io"], ["certificatesigningrequests/nodeclient"])],
        ),
        _cluster_role(
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            [
                _rule(
                    ["create"],
                    ["certificates.k8s.io"],
                    ["certificatesigningrequests/selfnodeclient"],
                )
            ],
        ),
        _cluster_role(
            "system:certificates.k8s.io:kube-apiserver-client-approver",
            [
                {
                    "apiGroups": ["certificates.k8s.io"],
                    "resourceNames": ["kubernetes.io/kube-apiserver-client"],
                    "resources": ["signers"],
                    "verbs": ["approve"],
                }
            ],
        ),
    ]


def default_cluster_role_bindings() -> list[dict[str, Any]]:
    return [
        _cluster_role_binding("cluster-admin", groups=("system:masters",)),
        _cluster_role_binding("system:discovery", groups=("system:authenticated",)),
        _cluster_role_binding("system:basic-user", groups=("system:authenticated",)),
        _cluster_role_binding(
            "system:public-info-viewer",
            groups=("system:authenticated", "system:unauthenticated"),
        ),
        _cluster_role_binding("system:monitoring", groups=("system:monitoring",)),
        _cluster_role_binding(
            "system:service-account-issuer-discovery", groups=("system:serviceaccounts",)
        ),
    ]


def _role(namespace: str, name: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": RBAC_API_VERSION,
        "kind": "Role",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(BOOTSTRAP_LABELS),
            "annotations": dict(AUTOUPDATE),
        },
        "rules": copy.deepcopy(rules),
    }


def _role_binding(
    namespace: str,
    name: str,
    role: str,
    *,
    users: tuple[str, ...] = (),
    service_accounts: tuple[str, ...] = (),
) -> dict[str, Any]:
    subjects = [{"apiGroup": RBAC_GROUP, "kind": "User", "name": u} for u in users]
    subjects += [
        {"kind": "ServiceAccount", "name": sa, "namespace": "kube-system"}
        for sa in service_accounts
    ]
    return {
        "apiVersion": RBAC_API_VERSION,
        "kind": "RoleBinding",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(BOOTSTRAP_LABELS),
            "annotations": dict(AUTOUPDATE),
        },
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": role},
        "subjects": subjects,
    }


AUTHENTICATION_READER = "extension-apiserver-authentication-reader"
_EVENTS = _rule(["create", "update", "patch"], ["", "events.k8s.io"], ["events"])
_BOOTSTRAP_SIGNER = "system:controller:bootstrap-signer"
_CLOUD_PROVIDER = "system:controller:cloud-provider"
_TOKEN_CLEANER = "system:controller:token-cleaner"
_LOCK_KCM = "system::leader-locking-kube-controller-manager"
_LOCK_SCHEDULER = "system::leader-locking-kube-scheduler"


def default_namespace_roles() -> list[dict[str, Any]]:
    """The Roles kube's bootstrap policy puts into kube-system and kube-public."""
    return [
        # Who may read the front-proxy and client trust an aggregated API server configures
        # itself from (kube-system/extension-apiserver-authentication).
        _role(
            "kube-system",
            AUTHENTICATION_READER,
            [
                {
                    **_rule(READ, [""], ["configmaps"]),
                    "resourceNames": ["extension-apiserver-authentication"],
                }
            ],
        ),
        _role("kube-system", _BOOTSTRAP_SIGNER, [_rule(READ, [""], ["secrets"])]),
        _role(
            "kube-system",
            _CLOUD_PROVIDER,
            [_rule(["create", "get", "list", "watch"], [""], ["configmaps"])],
        ),
        _role(
            "kube-system",
            _TOKEN_CLEANER,
            [_rule(["get", "list", "watch", "delete"], [""], ["secrets"]), _EVENTS],
        ),
        _role(
            "kube-system",
            _LOCK_KCM,
            [
                _rule(["watch"], [""], ["configmaps"]),
                {
                    **_rule(["get", "update"], [""], ["configmaps"]),
                    "resourceNames": ["kube-controller-manager"],
                },
                _rule(
                    ["get", "watch", "list", "create", "update"],
                    ["coordination.k8s.io"],
                    ["leases"],
                ),
            ],
        ),
        _role(
            "kube-system",
            _LOCK_SCHEDULER,
            [
                _rule(["watch"], [""], ["configmaps"]),
                {
                    **_rule(["get", "update"], [""], ["configmaps"]),
                    "resourceNames": ["kube-scheduler"],
                },
            ],
        ),
        _role(
            "kube-public",
            _BOOTSTRAP_SIGNER,
            [
                _rule(READ, [""], ["configmaps"]),
                {**_rule(["update"], [""], ["configmaps"]), "resourceNames": ["cluster-info"]},
                _EVENTS,
            ],
        ),
    ]


def default_namespace_role_bindings() -> list[dict[str, Any]]:
    """The RoleBindings of kube's bootstrap policy (the authentication reader's binding is
    named with the "system::" prefix; its Role is not)."""
    return [
        _role_binding(
            "kube-system",
            "system::" + AUTHENTICATION_READER,
            AUTHENTICATION_READER,
            users=("system:kube-controller-manager", "system:kube-scheduler"),
        ),
        _role_binding(
            "kube-system",
            _LOCK_KCM,
            _LOCK_KCM,
            users=("system:kube-controller-manager",),
            service_accounts=("kube-controller-manager", "leader-election-controller"),
        ),
        _role_binding(
            "kube-system",
            _LOCK_SCHEDULER,
            _LOCK_SCHEDULER,
            users=("system:kube-scheduler",),
            service_accounts=("kube-scheduler",),
        ),
        _role_binding(
            "kube-system",
            _BOOTSTRAP_SIGNER,
            _BOOTSTRAP_SIGNER,
            service_accounts=("bootstrap-signer",),
        ),
        _role_binding(
            "kube-system", _CLOUD_PROVIDER, _CLOUD_PROVIDER, service_accounts=("cloud-provider",)
        ),
        _role_binding(
            "kube-system", _TOKEN_CLEANER, _TOKEN_CLEANER, service_accounts=("token-cleaner",)
        ),
        _role_binding(
            "kube-public",
            _BOOTSTRAP_SIGNER,
            _BOOTSTRAP_SIGNER,
            service_accounts=("bootstrap-signer",),
        ),
    ]


def default_rbac_objects() -> list[dict[str, Any]]:
    """Roles first, then bindings: the order to create them in."""
    return (
        default_cluster_roles()
        + default_namespace_roles()
        + default_cluster_role_bindings()
        + default_namespace_role_bindings()
    )
