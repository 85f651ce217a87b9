"""Errors of the API client: one class per metav1.Status reason, plus transport failures.

Every `ApiError` carries the server's Status dict; bodies that are not a Status (proxies, load
balancers) get a synthesized Status, as client-go does, so callers can always read `.status`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

JsonDict = dict[str, Any]


class KubeError(Exception):
    """Base class of everything agent.kube raises on purpose."""


class InvalidNameError(ValueError):
    """A name or namespace that kube-apiserver would refuse as a path segment (`.`, `..`, or
    containing `/` or `%`): refused before any URL is built, since `.` and `..` would be
    collapsed as dot-segments and address another resource."""

    def __init__(self, field: str, value: str, reasons: list[str]) -> None:
        super().__init__(f'{field}: Invalid value: "{value}": {", ".join(reasons)}')
        self.field = field
        self.value = value


# kube-apiserver's path-segment rules (apimachinery's IsValidPathSegmentName).
_NOT_PATH_SEGMENTS = (".", "..")
_NOT_IN_PATH_SEGMENTS = ("/", "%")


def path_segment_errors(value: str) -> list[str]:
    """Why `value` cannot be a name in a request path; empty when it can."""
    if value in _NOT_PATH_SEGMENTS:
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in _NOT_IN_PATH_SEGMENTS if c in value]


def check_path_segment(field: str, value: str) -> str:
    """`value` if it is a valid path segment; else InvalidNameError naming `field`."""
    reasons = path_segment_errors(value)
    if reasons:
        raise InvalidNameError(field, value, reasons)
    return value


class TransportError(KubeError):
    """The request never produced an HTTP response (connect, TLS, reset, timeout)."""

    def __init__(self, message: str, *, method: str = "", url: str = "") -> None:
        super().__init__(message)
        self.method = method
        self.url = url


class WatchTimeoutError(TransportError):
    """A stream was silent for longer than the client read timeout."""


class ApiError(KubeError):
    """The server answered with an error status."""

    def __init__(self, status: JsonDict, *, retry_after: float | None = None) -> None:
        self.status: JsonDict = status
        self.code: int = int(status.get("code") or 0)
        self.reason: str = str(status.get("reason") or "")
        self.message: str = str(status.get("message") or "")
        details = status.get("details")
        self.details: JsonDict = details if isinstance(details, dict) else {}
        if retry_after is None and "retryAfterSeconds" in self.details:
            retry_after = float(self.details["retryAfterSeconds"])
        self.retry_after = retry_after
        super().__init__(f"{self.code} {self.reason}: {self.message}")

    @property
    def causes(self) -> list[JsonDict]:
        causes = self.details.get("causes")
        return list(causes) if isinstance(causes, list) else []


class BadRequestError(ApiError):
    pass


class UnauthorizedError(ApiError):
    pass


class ForbiddenError(ApiError):
    pass


class NotFoundError(ApiError):
    pass


class MethodNotAllowedError(ApiError):
    pass


class ConflictError(ApiError):
    """409 Conflict (stale resourceVersion, apply conflicts)."""


class AlreadyExistsError(ApiError):
    pass


class GoneError(ApiError):
    """410: the requested resourceVersion is no longer available."""


class ExpiredError(GoneError):
    """410 with reason Expired (too old resource version, expired continue token)."""


class InvalidError(ApiError):
    pass


class UnsupportedMediaTypeError(ApiError):
    pass


class TooManyRequestsError(ApiError):
    pass


class ServerError(ApiError):
    """5xx: InternalError, ServiceUnavailable, Timeout, ServerTimeout."""


_BY_REASON: dict[str, type[ApiError]] = {
    "BadRequest": BadRequestError,
    "Unauthorized": UnauthorizedError,
    "Forbidden": ForbiddenError,
    "NotFound": NotFoundError,
    "MethodNotAllowed": MethodNotAllowedError,
    "AlreadyExists": AlreadyExistsError,
    "Conflict": ConflictError,
    "Gone": GoneError,
    "Expired": ExpiredError,
    "Invalid": InvalidError,
    "UnsupportedMediaType": UnsupportedMediaTypeError,
    "TooManyRequests": TooManyRequestsError,
    "InternalError": ServerError,
    "ServiceUnavailable": ServerError,
    "Timeout": ServerError,
    "ServerTimeout": ServerError,
}

_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    405: MethodNotAllowedError,
    409: ConflictError,
    410: GoneError,
    415: UnsupportedMediaTypeError,
    422: InvalidError,
    429: TooManyRequestsError,
}

_GENERIC_REASON: dict[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Gone",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def error_class(code: int, reason: str) -> type[ApiError]:
    cls = _BY_REASON.get(reason)
    if cls is not None:
        return cls
    cls = _BY_CODE.get(code)
    if cls is not None:
        return cls
    return ServerError if code >= 500 else ApiError


def from_status(status: JsonDict, *, retry_after: float | None = None) -> ApiError:
    """The typed error for a Status dict (as found in a watch ERROR event, for example)."""
    return error_class(int(status.get("code") or 0), str(status.get("reason") or ""))(
        status, retry_after=retry_after
    )


def from_response(code: int, body: bytes, headers: Mapping[str, str] | None = None) -> ApiError:
    """Map an HTTP error response to a typed error, synthesizing a Status when needed."""
    retry_after = parse_retry_after((headers or {}).get("retry-after"))
    status: JsonDict | None = None
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and parsed.get("kind") == "Status":
        status = parsed
        status.setdefault("code", code)
    if status is None:
        reason = _GENERIC_REASON.get(code, "InternalError" if code >= 500 else "")
        text = body.decode("utf-8", "replace").strip() if body else ""
        message = text or f"the server responded with the status code {code}"
        status = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }
        if retry_after is not None:
            status["details"] = {"retryAfterSeconds": int(retry_after)}
    return from_status(status, retry_after=retry_after)


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After in whole seconds, as the apiserver sends it; other forms are ignored."""
    if value is None:
        return None
    try:
        seconds = int(value.strip())
    except ValueError:
        return None
    return float(max(seconds, 0))


def is_not_found(err: BaseException) -> bool:
    return isinstance(err, NotFoundError)


def is_conflict(err: BaseException) -> bool:
    return isinstance(err, ConflictError)


def is_already_exists(err: BaseException) -> bool:
    return isinstance(err, AlreadyExistsError)


def is_gone(err: BaseException) -> bool:
    return isinstance(err, GoneError)


# etcd's answer to a write larger than its --max-request-bytes, passed on by kube-apiserver as a
# 500 with etcd's message.
ETCD_REQUEST_TOO_LARGE = "etcdserver: request is too large"


def is_request_too_large(err: BaseException) -> bool:
    """The API server refused a write for its size: the request body (413, kube-apiserver's
    own limit) or the object it would store (500 with etcd's message)."""
    if not isinstance(err, ApiError):
        return False
    return err.code == 413 or (err.code == 500 and ETCD_REQUEST_TOO_LARGE in err.message)
