"""The review kinds: create-only resources answered from the request alone, never stored.

authorization.k8s.io: SubjectAccessReview, LocalSubjectAccessReview,
SelfSubjectAccessReview, SelfSubjectRulesReview; authentication.k8s.io:
SelfSubjectReview (`kubectl auth whoami`) and TokenReview. Validation failures and
response shapes follow kube-apiserver's REST storage for these kinds.
"""

from __future__ import annotations

import json
from typing import Any

from . import errors
from .authn import Authenticator, TokenRejectedError
from .rbac import Authorizer
from .requestinfo import RequestAttributes
from .wire import UserInfo

AUTHORIZATION_GROUP = "authorization.k8s.io"
AUTHENTICATION_GROUP = "authentication.k8s.io"

REVIEW_KINDS = {
    "SubjectAccessReview": AUTHORIZATION_GROUP,
    "LocalSubjectAccessReview": AUTHORIZATION_GROUP,
    "SelfSubjectAccessReview": AUTHORIZATION_GROUP,
    "SelfSubjectRulesReview": AUTHORIZATION_GROUP,
    "SelfSubjectReview": AUTHENTICATION_GROUP,
    "TokenReview": AUTHENTICATION_GROUP,
}

_RESOURCE_ATTRIBUTE_FIELDS = (
    "namespace",
    "verb",
    "group",
    "version",
    "resource",
    "subresource",
    "name",
)
_GO_FIELD_NAMES = {"path": "Path", "verb": "Verb"}


def create_review(
    kind: str,
    body: dict[str, Any],
    *,
    user: UserInfo,
    authorizer: Authorizer,
    authenticator: Authenticator | None = None,
    namespace: str = "",
) -> dict[str, Any]:
    """The response object for a POSTed review of `kind`; raises ApiError on bad input.

    `namespace` is the request path's namespace (LocalSubjectAccessReview only).
    """
    group = REVIEW_KINDS.get(kind)
    if group is None:
        raise errors.bad_request(f"not a review kind: {kind}")
    api_version = body.get("apiVersion")
    if not isinstance(api_version, str) or not api_version.startswith(group + "/"):
        api_version = f"{group}/v1"
    if not isinstance(body.get("spec", {}), dict) and kind != "SelfSubjectReview":
        raise _undecodable(kind, api_version, "spec", "object")
    if kind == "SelfSubjectReview":
        return _self_subject_review(api_version, user)
    if kind == "TokenReview":
        return _token_review(api_version, body, authenticator)
    if kind == "SelfSubjectRulesReview":
        return _rules_review(api_version, body, user, authorizer)
    return _access_review(kind, api_version, body, user, authorizer, namespace)


def _undecodable(kind: str, api_version: str, path: str, want: str) -> errors.ApiError:
    version = api_version.split("/", 1)[-1]
    return errors.bad_request(
        f'{kind} in version "{version}" cannot be handled as a {kind}: '
        f"json: cannot unmarshal {path} into a value of type {want}"
    )


def _fresh_metadata() -> dict[str, Any]:
    return {"creationTimestamp": None}


def _go_value(value: Any, type_name: str = "") -> str:
    """How field.Invalid renders a bad value in the message (Go's formatting)."""
    if value is None:
        return '"null"'
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict) and type_name:
        fields = ", ".join(f"{_GO_FIELD_NAMES.get(k, k)}:{json.dumps(v)}" for k, v in value.items())
        return f"authorization.{type_name}{{{fields}}}"
    return json.dumps(value, separators=(",", ":"))


def _invalid(field: str, value: str, detail: str) -> dict[str, Any]:
    return errors.field_cause("FieldValueInvalid", field, f"Invalid value: {value}: {detail}")


def _strings(kind: str, api_version: str, value: Any, path: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _undecodable(kind, api_version, path, "[]string")
    return list(value)


def _text(kind: str, api_version: str, value: Any, path: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _undecodable(kind, api_version, path, "string")
    return value


def _resource_attributes(kind: str, api_version: str, raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise _undecodable(kind, api_version, "spec.resourceAttributes", "ResourceAttributes")
    out: dict[str, Any] = {}
    for key in _RESOURCE_ATTRIBUTE_FIELDS:
        value = _text(kind, api_version, raw.get(key), f"spec.resourceAttributes.{key}")
        if value:
            out[key] = value
    for key in ("fieldSelector", "labelSelector"):
        if isinstance(raw.get(key), dict):
            out[key] = raw[key]
    return out


def _non_resource_attributes(kind: str, api_version: str, raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise _undecodable(kind, api_version, "spec.nonResourceAttributes", "NonResourceAttributes")
    out: dict[str, Any] = {}
    for key in ("path", "verb"):
        value = _text(kind, api_version, raw.get(key), f"spec.nonResourceAttributes.{key}")
        if value:
            out[key] = value
    return out


def _metadata_is_empty(metadata: Any, *, allow_namespace: bool = False) -> bool:
    if metadata is None:
        return True
    if not isinstance(metadata, dict):
        return False
    ignored = {"creationTimestamp", "managedFields"}
    if allow_namespace:
        ignored.add("namespace")
    return not any(v for k, v in metadata.items() if k not in ignored)


def attributes_for(
    resource: dict[str, Any] | None, non_resource: dict[str, Any] | None
) -> RequestAttributes:
    """Authorization attributes of a review spec (kube's ResourceAttributesFrom et al.)."""
    if resource is not None:
        return RequestAttributes(
            True,
            "",
            resource.get("verb", ""),
            api_group=resource.get("group", ""),
            api_version=resource.get("version") or "*",
            namespace=resource.get("namespace", ""),
            resource=resource.get("resource", ""),
            subresource=resource.get("subresource", ""),
            name=resource.get("name", ""),
        )
    assert non_resource is not None
    return RequestAttributes(False, non_resource.get("path", ""), non_resource.get("verb", ""))


def _access_review(
    kind: str,
    api_version: str,
    body: dict[str, Any],
    user: UserInfo,
    authorizer: Authorizer,
    path_namespace: str,
) -> dict[str, Any]:
    spec_in: dict[str, Any] = body.get("spec") or {}
    resource = _resource_attributes(kind, api_version, spec_in.get("resourceAttributes"))
    non_resource = _non_resource_attributes(kind, api_version, spec_in.get("nonResourceAttributes"))
    spec: dict[str, Any] = {}
    if resource is not None:
        spec["resourceAttributes"] = resource
    if non_resource is not None:
        spec["nonResourceAttributes"] = non_resource

    causes: list[dict[str, Any]] = []
    if resource is not None and non_resource is not None:
        causes.append(
            _invalid(
                "spec.nonResourceAttributes",
                _go_value(non_resource, "NonResourceAttributes"),
                "cannot be specified in combination with resourceAttributes",
            )
        )
    if resource is None and non_resource is None:
        causes.append(
            _invalid(
                "spec.resourceAttributes",
                _go_value(None),
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            )
        )

    subject = user
    metadata_out = _fresh_metadata()
    if kind in ("SubjectAccessReview", "LocalSubjectAccessReview"):
        name = _text(kind, api_version, spec_in.get("user"), "spec.user")
        groups = _strings(kind, api_version, spec_in.get("groups"), "spec.groups")
        uid = _text(kind, api_version, spec_in.get("uid"), "spec.uid")
        extra_in = spec_in.get("extra") or {}
        if not isinstance(extra_in, dict):
            raise _undecodable(kind, api_version, "spec.extra", "map[string]ExtraValue")
        extra = {
            str(k): tuple(_strings(kind, api_version, v, f"spec.extra.{k}"))
            for k, v in extra_in.items()
        }
        if not name and not groups:
            causes.append(
                _invalid(
                    "spec.user", _go_value(name), "at least one of user or group must be specified"
                )
            )
        for key, value in (("user", name), ("groups", groups), ("uid", uid)):
            if value:
                spec[key] = value
        if extra:
            spec["extra"] = {k: list(v) for k, v in extra.items()}
        subject = UserInfo(name, tuple(groups), uid, extra)

    metadata = body.get("metadata")
    if kind == "LocalSubjectAccessReview":
        if not isinstance(metadata, dict):
            metadata = {}
        meta_ns = metadata.get("namespace") or path_namespace
        if not path_namespace:
            raise errors.bad_request("namespace is required on this type: ")
        if meta_ns != path_namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
        if not _metadata_is_empty(metadata, allow_namespace=True):
            causes.append(
                _invalid("metadata", _go_value(metadata), "must be empty except for namespace")
            )
        if resource is not None and resource.get("namespace", "") != meta_ns:
            causes.append(
                _invalid(
                    "spec.resourceAttributes.namespace",
                    _go_value(resource.get("namespace", "")),
                    "must match metadata.namespace",
                )
            )
        if non_resource is not None:
            causes.append(
                _invalid(
                    "spec.nonResourceAttributes",
                    _go_value(non_resource, "NonResourceAttributes"),
                    "disallowed on this kind of request",
                )
            )
        metadata_out["namespace"] = meta_ns
    elif not _metadata_is_empty(metadata):
        causes.append(_invalid("metadata", _go_value(metadata), "must be empty"))

    if causes:
        raise errors.invalid(AUTHORIZATION_GROUP, kind, "", causes)

    allowed, reason = authorizer.authorize(subject, attributes_for(resource, non_resource))
    status: dict[str, Any] = {"allowed": allowed}
    if reason:
        status["reason"] = reason
    return {
        "kind": kind,
        "apiVersion": api_version,
        "metadata": metadata_out,
        "spec": spec,
        "status": status,
    }


def _rules_review(
    api_version: str, body: dict[str, Any], user: UserInfo, authorizer: Authorizer
) -> dict[str, Any]:
    spec_in = body.get("spec") or {}
    namespace = _text(
        "SelfSubjectRulesReview", api_version, spec_in.get("namespace"), "spec.namespace"
    )
    if not namespace:
        raise errors.bad_request("no namespace on request")
    result = authorizer.rules_for(user, namespace)
    status: dict[str, Any] = {
        "resourceRules": result.resource_rules,
        "nonResourceRules": result.non_resource_rules,
        "incomplete": result.incomplete,
    }
    if result.evaluation_error:
        status["evaluationError"] = result.evaluation_error
    # kube answers with a new object: the spec is not echoed.
    return {
        "kind": "SelfSubjectRulesReview",
        "apiVersion": api_version,
        "metadata": _fresh_metadata(),
        "spec": {},
        "status": status,
    }


def _self_subject_review(api_version: str, user: UserInfo) -> dict[str, Any]:
    return {
        "kind": "SelfSubjectReview",
        "apiVersion": api_version,
        "metadata": _fresh_metadata(),
        "status": {"userInfo": user.to_dict()},
    }


def _token_review(
    api_version: str, body: dict[str, Any], authenticator: Authenticator | None
) -> dict[str, Any]:
    spec_in = body.get("spec") or {}
    token = _text("TokenReview", api_version, spec_in.get("token"), "spec.token")
    audiences = _strings("TokenReview", api_version, spec_in.get("audiences"), "spec.audiences")
    if not token:
        raise errors.bad_request("token is required for TokenReview in authentication")
    if authenticator is None:
        raise errors.service_unavailable("token authentication is not configured")
    spec: dict[str, Any] = {"token": token}
    if audiences:
        spec["audiences"] = audiences
    status: dict[str, Any]
    try:
        found = authenticator.authenticate_token(token, tuple(audiences or ()))
    except TokenRejectedError as e:
        status = {"user": {}, "error": str(e)}
    else:
        status = {"authenticated": True, "user": found.to_dict()}
        if audiences:
            status["audiences"] = audiences
    return {
        "kind": "TokenReview",
        "apiVersion": api_version,
        "metadata": _fresh_metadata(),
        "spec": spec,
        "status": status,
    }
