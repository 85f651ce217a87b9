"""kube-apiserver's default RBAC objects, and what they grant through the RBAC authorizer."""

from __future__ import annotations

import pytest

from emulator.policy import (
    default_cluster_role_bindings,
    default_cluster_roles,
    default_rbac_objects,
)
from emulator.rbac import RbacAuthorizer, StaticRbacSource
from emulator.wire import UserInfo

from .helpers import attrs, binding, cluster_binding, subject

ANONYMOUS = UserInfo("system:anonymous", ("system:unauthenticated",))
ALICE = UserInfo("alice", ("system:authenticated",))


@pytest.fixture
def source() -> StaticRbacSource:
    return StaticRbacSource(default_rbac_objects())


@pytest.fixture
def authz(source: StaticRbacSource) -> RbacAuthorizer:
    return RbacAuthorizer(source)


def test_objects_carry_kube_bootstrap_markers() -> None:
    objects = default_rbac_objects()
    names = [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objects]
    assert len(names) == len(set(names))
    for obj in objects:
        assert obj["apiVersion"] == "rbac.authorization.k8s.io/v1"
        assert obj["metadata"]["labels"]["kubernetes.io/bootstrapping"] == "rbac-defaults"
        assert obj["metadata"]["annotations"] == {
            "rbac.authorization.kubernetes.io/autoupdate": "true"
        }
    roles = {r["metadata"]["name"] for r in default_cluster_roles()}
    assert {
        "cluster-admin",
        "system:discovery",
        "system:basic-user",
        "system:public-info-viewer",
        "admin",
        "edit",
        "view",
        "system:node-bootstrapper",
        "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
        "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
    } <= roles
    for b in default_cluster_role_bindings():
        assert b["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": b["metadata"]["name"],
        }
        assert b["roleRef"]["name"] in roles


def test_default_bindings_subjects() -> None:
    subjects = {
        b["metadata"]["name"]: [s["name"] for s in b["subjects"]]
        for b in default_cluster_role_bindings()
    }
    assert subjects["cluster-admin"] == ["system:masters"]
    assert subjects["system:discovery"] == ["system:authenticated"]
    assert subjects["system:basic-user"] == ["system:authenticated"]
    assert subjects["system:public-info-viewer"] == [
        "system:authenticated",
        "system:unauthenticated",
    ]


def test_default_objects_are_independent_copies() -> None:
    first = default_cluster_roles()
    first[0]["rules"].clear()
    assert default_cluster_roles()[0]["rules"]


@pytest.mark.parametrize(
    ("user", "method", "target", "expected"),
    [
        (ANONYMOUS, "GET", "/version", True),
        (ANONYMOUS, "GET", "/healthz", True),
        (ANONYMOUS, "GET", "/livez", True),
        (ANONYMOUS, "GET", "/readyz", True),
        (ANONYMOUS, "GET", "/api", False),
        (ANONYMOUS, "GET", "/apis/apps/v1", False),
        (ANONYMOUS, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", False),
        (ALICE, "GET", "/api", True),
        (ALICE, "GET", "/api/v1", True),
        (ALICE, "GET", "/apis", True),
        (ALICE, "GET", "/apis/apps/v1", True),
        (ALICE, "GET", "/openapi/v3/apis/apps/v1", True),
        (ALICE, "GET", "/metrics", False),
        (ALICE, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", True),
        (ALICE, "POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", True),
        (ALICE, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", True),
        (ALICE, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", False),
        (ALICE, "GET", "/api/v1/namespaces/default/pods", False),
    ],
)
def test_what_everyone_gets(
    authz: RbacAuthorizer, user: UserInfo, method: str, target: str, expected: bool
) -> None:
    assert authz.authorize(user, attrs(method, target))[0] is expected


@pytest.mark.parametrize(
    ("role_name", "method", "target", "expected"),
    [
        ("view", "GET", "/api/v1/namespaces/team/pods/p", True),
        ("view", "GET", "/apis/apps/v1/namespaces/team/deployments", True),
        ("view", "GET", "/apis/apps/v1/namespaces/team/deployments/d/status", True),
        ("view", "GET", "/api/v1/namespaces/team/secrets/s", False),
        ("view", "PUT", "/apis/apps/v1/namespaces/team/deployments/d", False),
        ("edit", "POST", "/api/v1/namespaces/team/secrets", True),
        ("edit", "GET", "/api/v1/namespaces/team/secrets/s", True),
        ("edit", "PATCH", "/apis/apps/v1/namespaces/team/deployments/d/scale", True),
        ("edit", "GET", "/api/v1/namespaces/team/configmaps", True),  # from view
        ("edit", "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/team/roles", False),
        ("admin", "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/team/rolebindings", True),
        ("admin", "DELETE", "/api/v1/namespaces/team/pods/p", True),
        ("admin", "DELETE", "/api/v1/namespaces/other/pods/p", False),
    ],
)
def test_user_facing_roles(
    source: StaticRbacSource, role_name: str, method: str, target: str, expected: bool
) -> None:
    source.put(binding("alice", "team", "ClusterRole", role_name, subject("User", "alice")))
    assert RbacAuthorizer(source).authorize(ALICE, attrs(method, target))[0] is expected


def test_node_bootstrapper_creates_csrs(source: StaticRbacSource) -> None:
    bootstrapper = UserInfo(
        "system:bootstrap:abcdef", ("system:bootstrappers", "system:authenticated")
    )
    source.put(
        cluster_binding(
            "agent-bootstrap", "system:node-bootstrapper", subject("Group", "system:bootstrappers")
        )
    )
    authz = RbacAuthorizer(source)
    csrs = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
    assert authz.authorize(bootstrapper, attrs("POST", csrs))[0]
    assert authz.authorize(bootstrapper, attrs("GET", csrs + "/x"))[0]
    assert not authz.authorize(bootstrapper, attrs("DELETE", csrs + "/x"))[0]
    assert not authz.authorize(bootstrapper, attrs("PUT", csrs + "/x/approval"))[0]


def test_masters_see_cluster_admin_rules(authz: RbacAuthorizer) -> None:
    rules = authz.rules_for(UserInfo("root", ("system:masters", "system:authenticated")), "x")
    assert {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]} in rules.resource_rules
    assert {"verbs": ["*"], "nonResourceURLs": ["*"]} in rules.non_resource_rules
