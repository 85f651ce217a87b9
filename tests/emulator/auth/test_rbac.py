"""RBAC evaluation: the rule-matching matrix, binding scopes, subjects, reasons, caching."""

from __future__ import annotations

from typing import Any

import pytest

from emulator.rbac import (
    AlwaysAllow,
    RbacAuthorizer,
    RulesResult,
    StaticRbacSource,
    forbidden_for,
)
from emulator.requestinfo import RequestAttributes
from emulator.wire import UserInfo

from .helpers import attrs, binding, cluster_binding, cluster_role, role, rule, subject

ALICE = UserInfo("alice", ("devs", "system:authenticated"))
BOB = UserInfo("bob", ("system:authenticated",))
SA = UserInfo(
    "system:serviceaccount:apps:deployer",
    ("system:serviceaccounts", "system:serviceaccounts:apps", "system:authenticated"),
)


def _authorizer(*objects: dict[str, Any]) -> tuple[RbacAuthorizer, StaticRbacSource]:
    source = StaticRbacSource(objects)
    return RbacAuthorizer(source), source


def _allowed(authz: RbacAuthorizer, user: UserInfo, method: str, target: str) -> bool:
    return authz.authorize(user, attrs(method, target))[0]


# --- rule matching -----------------------------------------------------------------------

MATRIX_RULES = [
    rule(["get", "list"], [""], ["pods"]),
    rule(["update"], [""], ["pods/status"]),
    rule(["get", "update"], ["apps", "batch"], ["*/scale"]),
    rule(["*"], ["example.io"], ["*"]),
    rule(["get", "update", "delete", "list", "create"], [""], ["configmaps"], names=["cfg"]),
    rule(["watch"], ["*"], ["leases"]),
]


@pytest.mark.parametrize(
    ("method", "target", "expected"),
    [
        ("GET", "/api/v1/namespaces/ns/pods/p", True),
        ("GET", "/api/v1/namespaces/ns/pods", True),  # list
        ("GET", "/api/v1/namespaces/ns/pods?watch=1", False),  # watch not granted
        ("DELETE", "/api/v1/namespaces/ns/pods/p", False),
        ("GET", "/api/v1/namespaces/ns/pods/p/status", False),  # "pods" excludes subresources
        ("PUT", "/api/v1/namespaces/ns/pods/p/status", True),
        ("PUT", "/api/v1/namespaces/ns/pods/p", False),  # "pods/status" excludes the pod
        ("GET", "/apis/apps/v1/namespaces/ns/deployments/d/scale", True),  # */scale
        ("PUT", "/apis/batch/v1/namespaces/ns/jobs/j/scale", True),
        ("GET", "/apis/apps/v1/namespaces/ns/deployments/d", False),
        ("GET", "/apis/apps/v1/namespaces/ns/deployments/d/status", False),
        ("GET", "/api/v1/namespaces/ns/replicationcontrollers/r/scale", False),  # group ""
        ("DELETE", "/apis/example.io/v1/namespaces/ns/widgets", True),  # deletecollection
        ("PATCH", "/apis/example.io/v1/namespaces/ns/widgets/w/status", True),  # "*" subres
        ("GET", "/apis/other.io/v1/namespaces/ns/widgets/w", False),
        ("GET", "/api/v1/namespaces/ns/configmaps/cfg", True),
        ("PUT", "/api/v1/namespaces/ns/configmaps/cfg", True),
        ("GET", "/api/v1/namespaces/ns/configmaps/other", False),
        ("GET", "/api/v1/namespaces/ns/configmaps", False),  # list has no name
        ("POST", "/api/v1/namespaces/ns/configmaps", False),  # create has no name
        ("GET", "/apis/coordination.k8s.io/v1/namespaces/ns/leases?watch=true", True),
        ("GET", "/apis/coordination.k8s.io/v1/watch/namespaces/ns/leases", True),
    ],
)
def test_rule_matching_matrix(method: str, target: str, expected: bool) -> None:
    authz, _ = _authorizer(
        cluster_role("matrix", *MATRIX_RULES),
        cluster_binding("matrix", "matrix", subject("User", "alice")),
    )
    assert _allowed(authz, ALICE, method, target) is expected


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("GET", "/healthz", True),
        ("GET", "/healthz/etcd", False),
        ("GET", "/logs", True),
        ("GET", "/logs/", True),
        ("GET", "/logs/kube.log", True),
        ("GET", "/logsearch", True),  # "/logs*" is a plain prefix
        ("GET", "/apis", False),  # "/apis/*" needs the slash
        ("GET", "/apis/", True),
        ("GET", "/apis/apps", True),
        ("POST", "/apis/apps", False),
        ("GET", "/api", False),
    ],
)
def test_non_resource_urls(method: str, path: str, expected: bool) -> None:
    authz, _ = _authorizer(
        cluster_role("urls", rule(["get"], urls=["/healthz", "/logs*", "/apis/*"])),
        cluster_binding("urls", "urls", subject("User", "alice")),
    )
    assert _allowed(authz, ALICE, method, path) is expected


def test_star_verb_and_star_url() -> None:
    authz, _ = _authorizer(
        cluster_role("all", rule(["*"], ["*"], ["*"]), rule(["*"], urls=["*"])),
        cluster_binding("all", "all", subject("User", "alice")),
    )
    assert _allowed(authz, ALICE, "DELETE", "/apis/x.io/v1/things/t")
    assert _allowed(authz, ALICE, "POST", "/anything/at/all")
    assert not _allowed(authz, BOB, "GET", "/anything")


def test_resource_rules_do_not_grant_urls_and_back() -> None:
    authz, _ = _authorizer(
        cluster_role("mixed", rule(["get"], ["*"], ["*"])),
        cluster_binding("mixed", "mixed", subject("User", "alice")),
    )
    assert _allowed(authz, ALICE, "GET", "/api/v1/nodes/n1")
    assert not _allowed(authz, ALICE, "GET", "/version")


# --- binding scopes and subjects ---------------------------------------------------------


def test_role_binding_is_confined_to_its_namespace() -> None:
    authz, _ = _authorizer(
        role("reader", "team", rule(["get", "list"], [""], ["secrets"])),
        binding("reader", "team", "Role", "reader", subject("User", "alice")),
    )
    assert _allowed(authz, ALICE, "GET", "/api/v1/namespaces/team/secrets/s")
    assert not _allowed(authz, ALICE, "GET", "/api/v1/namespaces/other/secrets/s")
    assert not _allowed(authz, ALICE, "GET", "/api/v1/secrets")  # all namespaces


def test_role_binding_to_cluster_role_is_scoped_to_the_namespace() -> None:
    authz, _ = _authorizer(
        cluster_role("pod-reader", rule(["get"], [""], ["pods", "namespaces"])),
        binding("read-pods", "team", "ClusterRole", "pod-reader", subject("Group", "devs")),
    )
    assert _allowed(authz, ALICE, "GET", "/api/v1/namespaces/team/pods/p")
    assert not _allowed(authz, ALICE, "GET", "/api/v1/namespaces/prod/pods/p")
    # The namespace object itself is in its own namespace, as kube sees it.
    assert _allowed(authz, ALICE, "GET", "/api/v1/namespaces/team")
    assert not _allowed(authz, ALICE, "GET", "/api/v1/namespaces/prod")


def test_role_binding_cannot_use_a_role_from_another_namespace() -> None:
    authz, _ = _authorizer(
        role("reader", "other", rule(["get"], [""], ["pods"])),
        binding("reader", "team", "Role", "reader", subject("User", "alice")),
    )
    assert authz.authorize(ALICE, attrs("GET", "/api/v1/namespaces/team/pods/p")) == (
        False,
        'RBAC: role.rbac.authorization.k8s.io "reader" not found',
    )


def test_cluster_role_binding_applies_everywhere() -> None:
    authz, _ = _authorizer(
        cluster_role("node-reader", rule(["get", "list"], [""], ["nodes", "pods"])),
        cluster_binding("node-reader", "node-reader", subject("Group", "devs")),
    )
    assert _allowed(authz, ALICE, "GET", "/api/v1/nodes/n1")
    assert _allowed(authz, ALICE, "GET", "/api/v1/pods")
    assert _allowed(authz, ALICE, "GET", "/api/v1/namespaces/any/pods")
    assert not _allowed(authz, BOB, "GET", "/api/v1/nodes/n1")


def test_service_account_subjects() -> None:
    authz, _ = _authorizer(
        cluster_role("cm", rule(["get"], [""], ["configmaps"])),
        # RoleBinding: a ServiceAccount without namespace means the binding's namespace.
        binding("local-sa", "apps", "ClusterRole", "cm", subject("ServiceAccount", "deployer")),
        # ClusterRoleBinding: a ServiceAccount needs its namespace, else it matches nobody.
        cluster_binding("no-ns", "cm", subject("ServiceAccount", "deployer")),
        cluster_binding("with-ns", "cm", subject("ServiceAccount", "deployer", "apps")),
    )
    assert authz.authorize(SA, attrs("GET", "/api/v1/namespaces/apps/configmaps/c")) == (
        True,
        'RBAC: allowed by ClusterRoleBinding "with-ns" of ClusterRole "cm" to '
        'ServiceAccount "deployer/apps"',
    )
    authz2, _ = _authorizer(
        cluster_role("cm", rule(["get"], [""], ["configmaps"])),
        binding("local-sa", "apps", "ClusterRole", "cm", subject("ServiceAccount", "deployer")),
        cluster_binding("no-ns", "cm", subject("ServiceAccount", "deployer")),
    )
    assert authz2.authorize(SA, attrs("GET", "/api/v1/namespaces/apps/configmaps/c")) == (
        True,
        'RBAC: allowed by RoleBinding "local-sa/apps" of ClusterRole "cm" to '
        'ServiceAccount "deployer/apps"',
    )
    assert not _allowed(authz2, SA, "GET", "/api/v1/namespaces/other/configmaps/c")
    other_sa = UserInfo("system:serviceaccount:other:deployer", ("system:serviceaccounts",))
    assert not _allowed(authz2, other_sa, "GET", "/api/v1/namespaces/apps/configmaps/c")
    # The SA's own groups work as Group subjects.
    authz3, _ = _authorizer(
        cluster_role("cm", rule(["get"], [""], ["configmaps"])),
        cluster_binding("all-sas", "cm", subject("Group", "system:serviceaccounts:apps")),
    )
    assert _allowed(authz3, SA, "GET", "/api/v1/namespaces/x/configmaps/c")


def test_unknown_subject_kind_matches_nobody() -> None:
    authz, _ = _authorizer(
        cluster_role("cm", rule(["get"], [""], ["configmaps"])),
        cluster_binding("weird", "cm", {"kind": "Robot", "name": "alice"}),
    )
    assert not _allowed(authz, ALICE, "GET", "/api/v1/configmaps")


def test_system_masters_is_always_allowed() -> None:
    authz, _ = _authorizer()
    admin = UserInfo("root", ("system:masters",))
    assert authz.authorize(admin, attrs("DELETE", "/api/v1/namespaces/x")) == (True, "")
    assert authz.authorize(admin, attrs("GET", "/metrics")) == (True, "")


# --- reasons -----------------------------------------------------------------------------


def test_allowed_reasons_name_binding_role_and_subject() -> None:
    authz, _ = _authorizer(
        cluster_role("viewer", rule(["get"], [""], ["pods"])),
        role("editor", "team", rule(["update"], [""], ["pods"])),
        cluster_binding("view-all", "viewer", subject("User", "bob"), subject("Group", "devs")),
        binding("edit-team", "team", "Role", "editor", subject("User", "alice")),
    )
    assert authz.authorize(ALICE, attrs("GET", "/api/v1/namespaces/team/pods/p")) == (
        True,
        'RBAC: allowed by ClusterRoleBinding "view-all" of ClusterRole "viewer" to Group "devs"',
    )
    assert authz.authorize(ALICE, attrs("PUT", "/api/v1/namespaces/team/pods/p")) == (
        True,
        'RBAC: allowed by RoleBinding "edit-team/team" of Role "editor" to User "alice"',
    )


def test_denial_reason_is_empty_or_lists_unresolvable_roles() -> None:
    authz, _ = _authorizer(
        cluster_role("viewer", rule(["get"], [""], ["pods"])),
        cluster_binding("view", "viewer", subject("User", "alice")),
    )
    assert authz.authorize(ALICE, attrs("DELETE", "/api/v1/namespaces/t/pods/p")) == (False, "")
    authz, _ = _authorizer(
        cluster_binding("a", "missing-a", subject("User", "alice")),
        cluster_binding("b", "missing-b", subject("User", "alice")),
        cluster_binding("c", "missing-a", subject("User", "alice")),
        cluster_binding("d", "not-for-alice", subject("User", "bob")),
    )
    assert authz.authorize(ALICE, attrs("GET", "/api/v1/pods")) == (
        False,
        'RBAC: [clusterrole.rbac.authorization.k8s.io "missing-a" not found, '
        'clusterrole.rbac.authorization.k8s.io "missing-b" not found]',
    )


# --- revisions and caching ---------------------------------------------------------------


def test_changes_are_seen_on_the_next_decision() -> None:
    authz, source = _authorizer(cluster_role("reader", rule(["get"], [""], ["pods"])))
    target = "/api/v1/namespaces/t/pods/p"
    assert not _allowed(authz, ALICE, "GET", target)
    source.put(cluster_binding("reader", "reader", subject("User", "alice")))
    assert _allowed(authz, ALICE, "GET", target)
    source.put(cluster_role("reader", rule(["list"], [""], ["pods"])))
    assert not _allowed(authz, ALICE, "GET", target)
    source.put(cluster_role("reader", rule(["get"], [""], ["pods"])))
    assert _allowed(authz, ALICE, "GET", target)
    source.remove("ClusterRoleBinding", "reader")
    assert not _allowed(authz, ALICE, "GET", target)


class CountingSource(StaticRbacSource):
    def __init__(self, *objects: dict[str, Any]) -> None:
        super().__init__(objects)
        self.lists = 0

    def list(self, group: str, resource: str, namespace: str | None) -> list[dict[str, Any]]:
        self.lists += 1
        return super().list(group, resource, namespace)


def test_objects_are_listed_once_per_revision() -> None:
    source = CountingSource(
        cluster_role("reader", rule(["get"], [""], ["pods"])),
        cluster_binding("reader", "reader", subject("User", "alice")),
    )
    authz = RbacAuthorizer(source)
    for _ in range(50):
        assert _allowed(authz, ALICE, "GET", "/api/v1/namespaces/t/pods/p")
        assert not _allowed(authz, BOB, "GET", "/api/v1/namespaces/t/pods/p")
    assert source.lists == 4  # the four RBAC kinds, once
    source.put(role("r", "t", rule(["get"], [""], ["secrets"])))
    assert _allowed(authz, ALICE, "GET", "/api/v1/namespaces/t/pods/p")
    assert source.lists == 8


# --- rules_for ---------------------------------------------------------------------------


def test_rules_for_collects_cluster_and_namespace_rules() -> None:
    authz, _ = _authorizer(
        cluster_role(
            "base",
            rule(["create"], ["authorization.k8s.io"], ["selfsubjectaccessreviews"]),
            rule(["get"], urls=["/version"]),
        ),
        role("team", "team", rule(["get", "list"], [""], ["pods"], names=["a"])),
        role("prod", "prod", rule(["*"], ["*"], ["*"])),
        cluster_binding("base", "base", subject("Group", "system:authenticated")),
        binding("team", "team", "Role", "team", subject("User", "alice")),
        binding("prod", "prod", "Role", "prod", subject("User", "alice")),
        binding("broken", "team", "ClusterRole", "gone", subject("User", "alice")),
    )
    assert authz.rules_for(ALICE, "team") == RulesResult(
        [
            {
                "verbs": ["create"],
                "apiGroups": ["authorization.k8s.io"],
                "resources": ["selfsubjectaccessreviews"],
            },
            {
                "verbs": ["get", "list"],
                "apiGroups": [""],
                "resources": ["pods"],
                "resourceNames": ["a"],
            },
        ],
        [{"verbs": ["get"], "nonResourceURLs": ["/version"]}],
        False,
        'clusterrole.rbac.authorization.k8s.io "gone" not found',
    )


def test_always_allow() -> None:
    allow = AlwaysAllow()
    assert allow.authorize(BOB, attrs("DELETE", "/api/v1/nodes/n")) == (True, "")
    assert allow.rules_for(BOB, "x") == RulesResult(
        [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
        [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
    )


# --- 403 bodies --------------------------------------------------------------------------


def test_forbidden_bodies() -> None:
    assert forbidden_for("bob", attrs("GET", "/api/v1/namespaces/ns/pods/p")).status() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "p" is forbidden: User "bob" cannot get resource "pods" in API group ""'
        ' in the namespace "ns"',
        "reason": "Forbidden",
        "details": {"name": "p", "kind": "pods"},
        "code": 403,
    }
    err = forbidden_for("bob", attrs("PUT", "/apis/apps/v1/namespaces/ns/deployments/d/scale"))
    assert err.message == (
        'deployments.apps "d" is forbidden: User "bob" cannot update resource '
        '"deployments/scale" in API group "apps" in the namespace "ns"'
    )
    assert err.details == {"name": "d", "group": "apps", "kind": "deployments"}
    err = forbidden_for("bob", attrs("GET", "/api/v1/nodes"), "RBAC: something")
    assert err.message == (
        'nodes is forbidden: User "bob" cannot list resource "nodes" in API group "" at the '
        "cluster scope: RBAC: something"
    )
    err = forbidden_for("system:anonymous", RequestAttributes(False, "/metrics", "get"))
    assert (err.code, err.reason, err.message) == (
        403,
        "Forbidden",
        'forbidden: User "system:anonymous" cannot get path "/metrics"',
    )
