"""Kubernetes Status errors, built the way kube-apiserver builds them.

Every failure leaves the emulator as an `ApiError`, whose `status()` is the
metav1.Status body a real API server would send for the same mistake
(`k8s.io/apimachinery/pkg/api/errors`).
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:  # kube omits StatusReasonUnknown ("")
            body["reason"] = self.reason
        body["code"] = self.code
        if self.details is not None:
            body["details"] = self.details
        return body


def _qualified(group: str, resource: str) -> str:
    return f"{resource}.{group}" if group else resource


def _details(group: str, resource: str, name: str | None, **extra: Any) -> dict[str, Any]:
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    details["kind"] = resource
    details.update(extra)
    return details


def not_found(group: str, resource: str, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{_qualified(group, resource)} "{name}" not found',
        _details(group, resource, name),
    )


def already_exists(group: str, resource: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{_qualified(group, resource)} "{name}" already exists',
        _details(group, resource, name),
    )


def conflict(group: str, resource: str, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(group, resource)} "{name}": {why}',
        _details(group, resource, name),
    )


STALE_OBJECT = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def invalid(group: str, kind: str, name: str, causes: list[dict[str, Any]]) -> ApiError:
    """422 Invalid. Each cause: {"reason": "FieldValueInvalid", "message": ..., "field": ...}."""
    qualified = f"{kind}.{group}" if group else kind
    summary = ", ".join(
        f"{c['field']}: {c['message']}" if c.get("field") else c["message"] for c in causes
    )
    if len(causes) > 1:
        summary = "[" + summary + "]"
    return ApiError(
        422,
        "Invalid",
        f'{qualified} "{name}" is invalid: {summary}',
        _details(group, kind, name, causes=causes),
    )


def field_cause(reason: str, field: str, message: str) -> dict[str, Any]:
    return {"reason": reason, "message": message, "field": field}


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def forbidden(
    user: str,
    verb: str,
    group: str,
    resource: str,
    namespace: str,
    name: str = "",
    reason: str = "",
) -> ApiError:
    scope = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
    message = (
        f'{_qualified(group, resource)} "{name}" is forbidden: '
        if name
        else f"{_qualified(group, resource)} is forbidden: "
    )
    message += f'User "{user}" cannot {verb} resource "{resource}" in API group "{group}"{scope}'
    if reason:
        message += f": {reason}"
    return ApiError(403, "Forbidden", message, _details(group, resource, name))


def forbidden_path(user: str, verb: str, path: str) -> ApiError:
    return ApiError(
        403,
        "Forbidden",
        f'forbidden: User "{user}" cannot {verb} path "{path}"',
        {},
    )


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def not_acceptable(message: str) -> ApiError:
    return ApiError(406, "NotAcceptable", message)


PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
    "application/strategic-merge-patch+json",
)


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{', '.join(PATCH_TYPES)} (got {content_type!r})",
    )


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def resource_expired(rv: int | str) -> ApiError:
    return gone(f"too old resource version: {rv}")


def too_many_requests(retry_after: int) -> ApiError:
    return ApiError(
        429,
        "TooManyRequests",
        "Too many requests, please try again later.",
        {"retryAfterSeconds": retry_after},
        {"Retry-After": str(retry_after)},
    )


def internal(message: str) -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {message}")


def service_unavailable(
    message: str = "the server is currently unable to handle the request",
) -> ApiError:
    return ApiError(503, "ServiceUnavailable", message)


def timeout(
    message: str = "the server was unable to return a response in the time allotted",
) -> ApiError:
    return ApiError(504, "Timeout", message)
