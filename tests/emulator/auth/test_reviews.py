"""Review kinds: response shapes, validation errors, and answers from the authorizer."""

from __future__ import annotations

from typing import Any

import pytest

from emulator.authn import Authenticator
from emulator.errors import ApiError
from emulator.rbac import AlwaysAllow, RbacAuthorizer, StaticRbacSource
from emulator.reviews import create_review
from emulator.wire import UserInfo

from .helpers import FakeStore, binding, cluster_binding, cluster_role, role, rule, subject

ALICE = UserInfo("alice", ("devs", "system:authenticated"))
AUTHZ_V1 = "authorization.k8s.io/v1"


@pytest.fixture
def authz() -> RbacAuthorizer:
    return RbacAuthorizer(
        StaticRbacSource(
            [
                cluster_role("viewer", rule(["get", "list"], [""], ["pods"])),
                cluster_role("health", rule(["get"], urls=["/healthz"])),
                role("editor", "team", rule(["update"], ["apps"], ["deployments/scale"])),
                cluster_binding("viewer", "viewer", subject("Group", "devs")),
                cluster_binding("health", "health", subject("User", "alice")),
                binding("editor", "team", "Role", "editor", subject("User", "alice")),
            ]
        )
    )


def _ssar(spec: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"apiVersion": AUTHZ_V1, "kind": "SelfSubjectAccessReview", "spec": spec, **extra}


def _status_of(call: Any) -> dict[str, Any]:
    with pytest.raises(ApiError) as caught:
        call()
    status = caught.value.status()
    assert isinstance(status, dict)
    return status


def test_self_subject_access_review_allowed(authz: RbacAuthorizer) -> None:
    body = _ssar(
        {
            "resourceAttributes": {
                "namespace": "team",
                "verb": "update",
                "group": "apps",
                "resource": "deployments",
                "subresource": "scale",
                "name": "web",
            }
        },
        metadata={"creationTimestamp": None},
    )
    out = create_review("SelfSubjectAccessReview", body, user=ALICE, authorizer=authz)
    assert out == {
        "kind": "SelfSubjectAccessReview",
        "apiVersion": AUTHZ_V1,
        "metadata": {"creationTimestamp": None},
        "spec": body["spec"],
        "status": {
            "allowed": True,
            "reason": 'RBAC: allowed by RoleBinding "editor/team" of Role "editor" to User "alice"',
        },
    }


def test_self_subject_access_review_denied(authz: RbacAuthorizer) -> None:
    body = _ssar({"resourceAttributes": {"verb": "delete", "resource": "pods", "version": ""}})
    out = create_review("SelfSubjectAccessReview", body, user=ALICE, authorizer=authz)
    assert out["status"] == {"allowed": False}
    # empty values are dropped, as kube's omitempty round trip does
    assert out["spec"] == {"resourceAttributes": {"verb": "delete", "resource": "pods"}}


def test_self_subject_access_review_non_resource(authz: RbacAuthorizer) -> None:
    body = _ssar({"nonResourceAttributes": {"path": "/healthz", "verb": "get"}})
    out = create_review("SelfSubjectAccessReview", body, user=ALICE, authorizer=authz)
    assert out["status"]["allowed"] is True
    body = _ssar({"nonResourceAttributes": {"path": "/metrics", "verb": "get"}})
    out = create_review("SelfSubjectAccessReview", body, user=ALICE, authorizer=authz)
    assert out["status"] == {"allowed": False}


def test_self_subject_access_review_needs_exactly_one_kind_of_attributes(
    authz: RbacAuthorizer,
) -> None:
    status = _status_of(
        lambda: create_review("SelfSubjectAccessReview", _ssar({}), user=ALICE, authorizer=authz)
    )
    assert status == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: '
        'spec.resourceAttributes: Invalid value: "null": exactly one of '
        "nonResourceAttributes or resourceAttributes must be specified",
        "reason": "Invalid",
        "details": {
            "group": "authorization.k8s.io",
            "kind": "SelfSubjectAccessReview",
            "causes": [
                {
                    "reason": "FieldValueInvalid",
                    "message": 'Invalid value: "null": exactly one of nonResourceAttributes '
                    "or resourceAttributes must be specified",
                    "field": "spec.resourceAttributes",
                }
            ],
        },
        "code": 422,
    }
    both = _ssar(
        {
            "resourceAttributes": {"verb": "get", "resource": "pods"},
            "nonResourceAttributes": {"path": "/healthz", "verb": "get"},
        }
    )
    status = _status_of(
        lambda: create_review("SelfSubjectAccessReview", both, user=ALICE, authorizer=authz)
    )
    assert status["code"] == 422
    assert [c["field"] for c in status["details"]["causes"]] == ["spec.nonResourceAttributes"]
    assert status["details"]["causes"][0]["message"] == (
        'Invalid value: authorization.NonResourceAttributes{Path:"/healthz", Verb:"get"}: '
        "cannot be specified in combination with resourceAttributes"
    )


def test_review_metadata_must_be_empty(authz: RbacAuthorizer) -> None:
    body = _ssar({"resourceAttributes": {"verb": "get"}}, metadata={"name": "x"})
    status = _status_of(
        lambda: create_review("SelfSubjectAccessReview", body, user=ALICE, authorizer=authz)
    )
    assert status["reason"] == "Invalid"
    assert [c["field"] for c in status["details"]["causes"]] == ["metadata"]


def test_malformed_spec_is_400(authz: RbacAuthorizer) -> None:
    body = _ssar({"resourceAttributes": "pods"})
    status = _status_of(
        lambda: create_review("SelfSubjectAccessReview", body, user=ALICE, authorizer=authz)
    )
    assert (status["code"], status["reason"]) == (400, "BadRequest")
    assert status["message"].startswith(
        'SelfSubjectAccessReview in version "v1" cannot be handled as a SelfSubjectAccessReview'
    )


def test_subject_access_review_checks_the_named_subject(authz: RbacAuthorizer) -> None:
    body: dict[str, Any] = {
        "apiVersion": AUTHZ_V1,
        "kind": "SubjectAccessReview",
        "spec": {
            "user": "carol",
            "groups": ["devs"],
            "uid": "u-1",
            "extra": {"scopes": ["a"]},
            "resourceAttributes": {"namespace": "x", "verb": "list", "resource": "pods"},
        },
    }
    out = create_review("SubjectAccessReview", body, user=ALICE, authorizer=authz)
    assert out == {
        "kind": "SubjectAccessReview",
        "apiVersion": AUTHZ_V1,
        "metadata": {"creationTimestamp": None},
        "spec": body["spec"],
        "status": {
            "allowed": True,
            "reason": 'RBAC: allowed by ClusterRoleBinding "viewer" of ClusterRole "viewer" '
            'to Group "devs"',
        },
    }
    body["spec"]["groups"] = []
    out = create_review("SubjectAccessReview", body, user=ALICE, authorizer=authz)
    assert out["status"] == {"allowed": False}


def test_subject_access_review_needs_a_subject(authz: RbacAuthorizer) -> None:
    body = {"apiVersion": AUTHZ_V1, "kind": "SubjectAccessReview", "spec": {}}
    status = _status_of(
        lambda: create_review("SubjectAccessReview", body, user=ALICE, authorizer=authz)
    )
    assert status["message"] == (
        'SubjectAccessReview.authorization.k8s.io "" is invalid: [spec.resourceAttributes: '
        'Invalid value: "null": exactly one of nonResourceAttributes or resourceAttributes '
        'must be specified, spec.user: Invalid value: "": at least one of user or group must '
        "be specified]"
    )
    assert [c["field"] for c in status["details"]["causes"]] == [
        "spec.resourceAttributes",
        "spec.user",
    ]


def test_local_subject_access_review(authz: RbacAuthorizer) -> None:
    body: dict[str, Any] = {
        "apiVersion": AUTHZ_V1,
        "kind": "LocalSubjectAccessReview",
        "metadata": {"namespace": "team"},
        "spec": {
            "user": "alice",
            "resourceAttributes": {
                "namespace": "team",
                "verb": "update",
                "group": "apps",
                "resource": "deployments",
                "subresource": "scale",
            },
        },
    }
    out = create_review(
        "LocalSubjectAccessReview", body, user=ALICE, authorizer=authz, namespace="team"
    )
    assert out["metadata"] == {"creationTimestamp": None, "namespace": "team"}
    assert out["status"]["allowed"] is True
    body["spec"]["resourceAttributes"]["namespace"] = "other"
    status = _status_of(
        lambda: create_review(
            "LocalSubjectAccessReview", body, user=ALICE, authorizer=authz, namespace="team"
        )
    )
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "other": must match metadata.namespace',
            "field": "spec.resourceAttributes.namespace",
        }
    ]


def test_self_subject_rules_review(authz: RbacAuthorizer) -> None:
    body = {"apiVersion": AUTHZ_V1, "kind": "SelfSubjectRulesReview", "spec": {"namespace": "team"}}
    out = create_review("SelfSubjectRulesReview", body, user=ALICE, authorizer=authz)
    assert out == {
        "kind": "SelfSubjectRulesReview",
        "apiVersion": AUTHZ_V1,
        "metadata": {"creationTimestamp": None},
        "spec": {},
        "status": {
            "resourceRules": [
                {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]},
                {"verbs": ["update"], "apiGroups": ["apps"], "resources": ["deployments/scale"]},
            ],
            "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}],
            "incomplete": False,
        },
    }
    empty = create_review(
        "SelfSubjectRulesReview",
        {"spec": {"namespace": "team"}},
        user=UserInfo("nobody"),
        authorizer=authz,
    )
    assert empty["status"] == {"resourceRules": [], "nonResourceRules": [], "incomplete": False}


def test_self_subject_rules_review_needs_a_namespace(authz: RbacAuthorizer) -> None:
    status = _status_of(
        lambda: create_review("SelfSubjectRulesReview", {"spec": {}}, user=ALICE, authorizer=authz)
    )
    assert status == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "no namespace on request",
        "reason": "BadRequest",
        "code": 400,
    }


def test_self_subject_review_is_whoami() -> None:
    user = UserInfo("alice", ("devs", "system:authenticated"), "u1", {"scopes": ("a", "b")})
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    assert create_review("SelfSubjectReview", body, user=user, authorizer=AlwaysAllow()) == {
        "kind": "SelfSubjectReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": None},
        "status": {
            "userInfo": {
                "username": "alice",
                "groups": ["devs", "system:authenticated"],
                "uid": "u1",
                "extra": {"scopes": ["a", "b"]},
            }
        },
    }
    beta = create_review(
        "SelfSubjectReview",
        {"apiVersion": "authentication.k8s.io/v1beta1"},
        user=user,
        authorizer=AlwaysAllow(),
    )
    assert beta["apiVersion"] == "authentication.k8s.io/v1beta1"


def test_token_review() -> None:
    authn = Authenticator(
        static_tokens={"t0k3n": UserInfo("admin", ("system:masters",))},
        sa_tokens=None,
        lookup=FakeStore().lookup,
    )
    body: dict[str, Any] = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": "t0k3n"},
    }
    out = create_review(
        "TokenReview", body, user=ALICE, authorizer=AlwaysAllow(), authenticator=authn
    )
    assert out["status"] == {
        "authenticated": True,
        "user": {"username": "admin", "groups": ["system:masters", "system:authenticated"]},
    }
    body["spec"]["token"] = "wrong"
    out = create_review(
        "TokenReview", body, user=ALICE, authorizer=AlwaysAllow(), authenticator=authn
    )
    assert out["status"] == {"user": {}, "error": "invalid bearer token"}
    status = _status_of(
        lambda: create_review(
            "TokenReview", {"spec": {}}, user=ALICE, authorizer=AlwaysAllow(), authenticator=authn
        )
    )
    assert (status["code"], status["message"]) == (
        400,
        "token is required for TokenReview in authentication",
    )


def test_always_allow_answers_yes_without_reason() -> None:
    out = create_review(
        "SelfSubjectAccessReview",
        _ssar({"resourceAttributes": {"verb": "delete", "resource": "nodes"}}),
        user=UserInfo("anyone"),
        authorizer=AlwaysAllow(),
    )
    assert out["status"] == {"allowed": True}
