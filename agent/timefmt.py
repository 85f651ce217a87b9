"""Kubernetes' time formats, written and read as the API server and Go clients do: metav1.Time
(RFC 3339 in UTC, whole seconds) and metav1.MicroTime (six fractional digits).

A leaf: it imports nothing of the agent, so every layer (kube, karmada, the controllers,
bootstrap) uses this one module.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

# Go's time.RFC3339 as time.Parse takes it: a full date and time, any fraction, a zone.
_RFC3339 = re.compile(r"\A(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})\Z")


def rfc3339(moment: datetime | None = None) -> str:
    """metav1.Time, "2006-01-02T15:04:05Z": `moment`, or now."""
    return (moment or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(moment: datetime | None = None) -> str:
    """metav1.MicroTime, "2006-01-02T15:04:05.000000Z", as Leases carry it: `moment`, or now."""
    return (moment or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: object) -> datetime | None:
    """A metav1.Time or MicroTime (any RFC 3339 date-time) in UTC; None when `text` is not one."""
    found = _RFC3339.match(text) if isinstance(text, str) else None
    if not found:
        return None
    date, clock, fraction, zone = found.groups()
    fraction = (fraction or "")[:7]  # Python keeps microseconds only
    zone = "+00:00" if zone == "Z" else zone
    return datetime.fromisoformat(f"{date}T{clock}{fraction}{zone}").astimezone(UTC)
