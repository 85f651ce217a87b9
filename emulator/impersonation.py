"""User impersonation (Impersonate-* headers), as kube-apiserver's impersonation filter.

Each thing asked for is authorized separately with verb "impersonate": users,
groups and service accounts in the core group (service accounts in their
namespace), user extras (subresource = the extra key) and uids in
authentication.k8s.io. The first refusal ends the request with 403.

Repeated headers reach us joined with ", " (the fronts merge them), so list-valued
headers are split on commas.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from . import errors
from .rbac import Authorizer, forbidden_for
from .requestinfo import RequestAttributes
from .wire import ApiRequest, UserInfo

USER_HEADER = "impersonate-user"
GROUP_HEADER = "impersonate-group"
UID_HEADER = "impersonate-uid"
EXTRA_PREFIX = "impersonate-extra-"
AUTHENTICATION_GROUP = "authentication.k8s.io"

_DNS_LABEL = re.compile(r"\A[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_DNS_SUBDOMAIN = re.compile(r"\A[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")


def split_service_account_username(username: str) -> tuple[str, str] | None:
    """(namespace, name) of "system:serviceaccount:<ns>:<name>", None for any other name."""
    prefix = "system:serviceaccount:"
    if not username.startswith(prefix):
        return None
    parts = username[len(prefix) :].split(":")
    if len(parts) != 2:
        return None
    namespace, name = parts
    if len(namespace) > 63 or not _DNS_LABEL.match(namespace):
        return None
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        return None
    return namespace, name


def _values(raw: str) -> list[str]:
    return [v.strip() for v in raw.split(",") if v.strip()]


def _reference(kind: str, name: str, api_version: str = "", field_path: str = "") -> str:
    """Go's %v of the v1.ObjectReference kube lists in its error message."""
    return "{" + " ".join([kind, "", name, "", api_version, "", field_path]) + "}"


def has_impersonation(req: ApiRequest) -> bool:
    return any(
        h in (USER_HEADER, GROUP_HEADER, UID_HEADER) or h.startswith(EXTRA_PREFIX)
        for h in req.headers
    )


def impersonate(req: ApiRequest, user: UserInfo, authorizer: Authorizer) -> UserInfo:
    """The identity the request acts as (`user` itself without Impersonate-* headers).

    Raises 400 BadRequest for groups, extras or uid without a user, and 403 Forbidden
    for anything `user` may not impersonate. Removes the headers it consumed.
    """
    requested_user = req.headers.get(USER_HEADER, "")
    groups_requested = _values(req.headers.get(GROUP_HEADER, ""))
    requested_uid = req.headers.get(UID_HEADER, "")
    extras: dict[str, list[str]] = {}
    for header, raw in req.headers.items():
        if header.startswith(EXTRA_PREFIX):
            key = unquote(header[len(EXTRA_PREFIX) :])
            extras.setdefault(key, []).extend(_values(raw))

    checks: list[RequestAttributes] = []
    sa = split_service_account_username(requested_user) if requested_user else None
    if requested_user:
        if sa is not None:
            checks.append(_attrs(req, "serviceaccounts", sa[1], namespace=sa[0]))
        else:
            checks.append(_attrs(req, "users", requested_user))
    for group in groups_requested:
        checks.append(_attrs(req, "groups", group))
    for key, values in extras.items():
        for value in values:
            checks.append(
                _attrs(req, "userextras", value, group=AUTHENTICATION_GROUP, subresource=key)
            )
    if requested_uid:
        checks.append(_attrs(req, "uids", requested_uid, group=AUTHENTICATION_GROUP))
    if not checks:
        return user

    if not requested_user:
        version = f"{AUTHENTICATION_GROUP}/v1"
        refs = [_reference("Group", g) for g in groups_requested]
        refs += [_reference("UserExtra", v, version, k) for k, vs in extras.items() for v in vs]
        if requested_uid:
            refs.append(_reference("UID", requested_uid, version))
        raise errors.bad_request(f"requested [{' '.join(refs)}] without impersonating a user")

    for attrs in checks:
        allowed, reason = authorizer.authorize(user, attrs)
        if not allowed:
            raise forbidden_for(user.name, attrs, reason)

    groups = list(groups_requested)
    if sa is not None and not groups_requested:
        groups = ["system:serviceaccounts", f"system:serviceaccounts:{sa[0]}"]
    if requested_user != "system:anonymous":
        if "system:authenticated" not in groups and "system:unauthenticated" not in groups:
            groups.append("system:authenticated")
    elif "system:unauthenticated" not in groups:
        groups.append("system:unauthenticated")

    for header in [h for h in req.headers if h.startswith("impersonate-")]:
        del req.headers[header]
    return UserInfo(
        requested_user,
        tuple(groups),
        requested_uid,
        {k: tuple(v) for k, v in extras.items()},
    )


def _attrs(
    req: ApiRequest,
    resource: str,
    name: str,
    *,
    namespace: str = "",
    group: str = "",
    subresource: str = "",
) -> RequestAttributes:
    return RequestAttributes(
        True,
        req.path,
        "impersonate",
        api_group=group,
        api_version="v1",
        namespace=namespace,
        resource=resource,
        subresource=subresource,
        name=name,
    )
