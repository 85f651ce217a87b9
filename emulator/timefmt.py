"""Kubernetes' time formats as kube-apiserver writes and reads them: metav1.Time (RFC 3339 in UTC,
whole seconds) and metav1.MicroTime (six fractional digits)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

# Go's time.RFC3339 as time.Parse takes it: a full date and time, any fraction, a zone.
_RFC3339 = re.compile(r"\A(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})\Z")


def rfc3339(moment: datetime) -> str:
    """metav1.Time: "2006-01-02T15:04:05Z"."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(moment: datetime) -> str:
    """metav1.MicroTime, as Leases and Events carry it: "2006-01-02T15:04:05.000000Z"."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime:
    """metav1.Time or MicroTime (any RFC 3339 date-time) in UTC; ValueError when it is not one."""
    found = _RFC3339.match(text)
    if not found:
        raise ValueError(f"not an RFC 3339 time: {text!r}")
    date, clock, fraction, zone = found.groups()
    fraction = (fraction or "")[:7]  # Python keeps microseconds only
    zone = "+00:00" if zone == "Z" else zone
    return datetime.fromisoformat(f"{date}T{clock}{fraction}{zone}").astimezone(UTC)
