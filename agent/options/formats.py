"""The forms flag values must have: Kubernetes names and label values, Secret keys, URLs, host:port.

Each check returns what is wrong with a value, or None when it is well formed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")


def dns1123_label_problem(value: str, max_length: int = 63) -> str | None:
    if len(value) > max_length:
        return f"must be no more than {max_length} characters"
    if not _DNS1123_LABEL.fullmatch(value):
        return (
            "must be a DNS-1123 label: lower-case letters, digits and '-', "
            "starting and ending with a letter or digit"
        )
    return None


_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]{1,253}")


def dns1123_subdomain_problem(value: str) -> str | None:
    if len(value) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(value):
        return "must be a valid object name (DNS-1123 subdomain)"
    return None


def secret_key_problem(value: str) -> str | None:
    if not _SECRET_KEY.fullmatch(value):
        return "must consist of letters, digits, '-', '_' or '.' (a Secret data key)"
    return None


def label_value_problem(value: str) -> str | None:
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not _LABEL_VALUE.fullmatch(value):
        return (
            "must be a valid label value: letters, digits, '-', '_' and '.', "
            "starting and ending with a letter or digit"
        )
    return None


def url_problem(value: str, schemes: Iterable[str], example: str) -> str | None:
    try:
        parts = urlsplit(value)
        _ = parts.port  # raises on a malformed port
    except ValueError as exc:
        return f"{value!r} is not a valid URL ({exc})"
    allowed = tuple(schemes)
    if parts.scheme not in allowed:
        return f"{value!r} must be a URL with scheme {' or '.join(allowed)}, like {example}"
    if not parts.hostname:
        return f"{value!r} has no host"
    if parts.query or parts.fragment:
        return f"{value!r} must not have a query or fragment"
    return None


def host_port_problem(value: str) -> str | None:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        return f"{value!r} is not host:port"
    return None
