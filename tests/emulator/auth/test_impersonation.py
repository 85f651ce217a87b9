"""Impersonate-* headers: what must be authorized, what identity results, the errors."""

from __future__ import annotations

import pytest

from emulator.errors import ApiError
from emulator.impersonation import (
    has_impersonation,
    impersonate,
    split_service_account_username,
)
from emulator.rbac import RbacAuthorizer, StaticRbacSource
from emulator.wire import UserInfo

from .helpers import binding, cluster_binding, cluster_role, request, rule, subject

ALICE = UserInfo("alice", ("system:authenticated",))
MALLORY = UserInfo("mallory", ("system:authenticated",))


@pytest.fixture
def authz() -> RbacAuthorizer:
    return RbacAuthorizer(
        StaticRbacSource(
            [
                cluster_role(
                    "impersonator",
                    rule(["impersonate"], [""], ["users", "groups"]),
                    rule(["impersonate"], ["authentication.k8s.io"], ["userextras/scopes", "uids"]),
                ),
                cluster_role(
                    "only-bob",
                    rule(["impersonate"], [""], ["users"], names=["bob"]),
                ),
                cluster_role("sa-impersonator", rule(["impersonate"], [""], ["serviceaccounts"])),
                cluster_binding("impersonator", "impersonator", subject("User", "alice")),
                cluster_binding("only-bob", "only-bob", subject("User", "mallory")),
                binding("sa", "ci", "ClusterRole", "sa-impersonator", subject("User", "mallory")),
            ]
        )
    )


def test_without_headers_the_user_is_unchanged(authz: RbacAuthorizer) -> None:
    req = request(authorization="Bearer x")
    assert not has_impersonation(req)
    assert impersonate(req, ALICE, authz) is ALICE


def test_impersonate_user_and_groups(authz: RbacAuthorizer) -> None:
    req = request(
        impersonate_user="bob",
        impersonate_group="team-a, team-b",
        accept="application/json",
    )
    assert has_impersonation(req)
    user = impersonate(req, ALICE, authz)
    assert user == UserInfo("bob", ("team-a", "team-b", "system:authenticated"))
    assert req.headers == {"accept": "application/json"}  # consumed headers are removed


def test_impersonate_user_only_gets_authenticated_group(authz: RbacAuthorizer) -> None:
    user = impersonate(request(impersonate_user="bob"), MALLORY, authz)
    assert user == UserInfo("bob", ("system:authenticated",))


def test_explicit_unauthenticated_group_is_kept_alone(authz: RbacAuthorizer) -> None:
    user = impersonate(
        request(impersonate_user="bob", impersonate_group="system:unauthenticated"), ALICE, authz
    )
    assert user.groups == ("system:unauthenticated",)


def test_impersonate_anonymous(authz: RbacAuthorizer) -> None:
    user = impersonate(request(impersonate_user="system:anonymous"), ALICE, authz)
    assert user == UserInfo("system:anonymous", ("system:unauthenticated",))


def test_impersonate_extras_and_uid(authz: RbacAuthorizer) -> None:
    user = impersonate(
        request(
            impersonate_user="bob",
            impersonate_uid="1234",
            impersonate_extra_scopes="view, edit",
        ),
        ALICE,
        authz,
    )
    assert user == UserInfo("bob", ("system:authenticated",), "1234", {"scopes": ("view", "edit")})


def test_escaped_extra_key_is_unescaped_and_authorized_as_subresource(
    authz: RbacAuthorizer,
) -> None:
    req = request(impersonate_user="bob")
    req.headers["impersonate-extra-acme.com%2fproject"] = "p1"
    with pytest.raises(ApiError) as caught:
        impersonate(req, ALICE, authz)
    assert caught.value.message == (
        'userextras.authentication.k8s.io "p1" is forbidden: User "alice" cannot impersonate '
        'resource "userextras/acme.com/project" in API group "authentication.k8s.io" at the '
        "cluster scope"
    )


def test_impersonate_service_account(authz: RbacAuthorizer) -> None:
    user = impersonate(request(impersonate_user="system:serviceaccount:ci:builder"), MALLORY, authz)
    assert user == UserInfo(
        "system:serviceaccount:ci:builder",
        ("system:serviceaccounts", "system:serviceaccounts:ci", "system:authenticated"),
    )
    with pytest.raises(ApiError) as caught:
        impersonate(request(impersonate_user="system:serviceaccount:prod:builder"), MALLORY, authz)
    assert caught.value.status() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'serviceaccounts "builder" is forbidden: User "mallory" cannot impersonate '
        'resource "serviceaccounts" in API group "" in the namespace "prod"',
        "reason": "Forbidden",
        "details": {"name": "builder", "kind": "serviceaccounts"},
        "code": 403,
    }


def test_denied_user_is_403(authz: RbacAuthorizer) -> None:
    with pytest.raises(ApiError) as caught:
        impersonate(request(impersonate_user="carol"), MALLORY, authz)
    assert caught.value.status() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'users "carol" is forbidden: User "mallory" cannot impersonate resource '
        '"users" in API group "" at the cluster scope',
        "reason": "Forbidden",
        "details": {"name": "carol", "kind": "users"},
        "code": 403,
    }


def test_each_group_is_authorized(authz: RbacAuthorizer) -> None:
    with pytest.raises(ApiError) as caught:
        impersonate(request(impersonate_user="bob", impersonate_group="admins"), MALLORY, authz)
    assert caught.value.code == 403
    assert caught.value.message.startswith('groups "admins" is forbidden: User "mallory"')


def test_uid_needs_its_own_permission(authz: RbacAuthorizer) -> None:
    with pytest.raises(ApiError) as caught:
        impersonate(request(impersonate_user="bob", impersonate_uid="42"), MALLORY, authz)
    assert caught.value.details == {
        "name": "42",
        "group": "authentication.k8s.io",
        "kind": "uids",
    }


def test_groups_without_user_is_400(authz: RbacAuthorizer) -> None:
    with pytest.raises(ApiError) as caught:
        impersonate(request(impersonate_group="a,b", impersonate_uid="7"), ALICE, authz)
    assert caught.value.status() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "requested [{Group  a    } {Group  b    } "
        "{UID  7  authentication.k8s.io/v1  }] without impersonating a user",
        "reason": "BadRequest",
        "code": 400,
    }


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("system:serviceaccount:ns:sa", ("ns", "sa")),
        ("system:serviceaccount:ns:sa.with.dots", ("ns", "sa.with.dots")),
        ("system:serviceaccount:ns", None),
        ("system:serviceaccount:ns:a:b", None),
        ("system:serviceaccount:Bad:sa", None),
        ("system:serviceaccount::sa", None),
        ("alice", None),
    ],
)
def test_split_service_account_username(name: str, expected: tuple[str, str] | None) -> None:
    assert split_service_account_username(name) == expected
