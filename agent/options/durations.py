"""Go durations: what time.ParseDuration accepts, printed as Duration.String prints them."""

from __future__ import annotations

import re
from datetime import timedelta

_NS_PER_UNIT = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # micro sign
    "\u03bcs": 1_000,  # Greek small letter mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
}
_DURATION_PART = re.compile(r"(\d*)(?:\.(\d*))?([^\d.]*)")
_MAX_NS = (1 << 63) - 1


def parse_duration(text: str) -> timedelta:
    """Parse a Go duration ("300ms", "1.5h", "2h45m"). Precision below 1 µs is truncated."""
    rest = text
    negative = False
    if rest[:1] in ("-", "+"):
        negative = rest[0] == "-"
        rest = rest[1:]
    if rest == "0":
        return timedelta(0)
    if not rest:
        raise ValueError(f"invalid duration {text!r}")
    total = 0
    while rest:
        match = _DURATION_PART.match(rest)
        assert match is not None  # every group may match empty
        whole, fraction, unit = match.groups()
        if not whole and not fraction:
            raise ValueError(f"invalid duration {text!r}")
        if not unit:
            raise ValueError(f"missing unit in duration {text!r}")
        scale = _NS_PER_UNIT.get(unit)
        if scale is None:
            raise ValueError(f"unknown unit {unit!r} in duration {text!r}")
        total += int(whole or "0") * scale
        if fraction:
            total += int(fraction) * scale // 10 ** len(fraction)
        if total > _MAX_NS:
            raise ValueError(f"invalid duration {text!r}")
        rest = rest[match.end() :]
    return timedelta(microseconds=(-total if negative else total) // 1000)


def format_duration(value: timedelta) -> str:
    """Go's Duration.String: "0s", "5ms", "1.5s", "5m0s", "16m40s", "1h30m0s"."""
    ns = ((value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds) * 1000
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < 1_000_000_000:
        for unit, scale in (("ms", 1_000_000), ("\u00b5s", 1_000), ("ns", 1)):
            if ns >= scale:
                return sign + _decimal(ns, scale) + unit
    hours, ns = divmod(ns, 3600 * 1_000_000_000)
    minutes, ns = divmod(ns, 60 * 1_000_000_000)
    text = _decimal(ns, 1_000_000_000) + "s"
    if hours or minutes:
        text = f"{minutes}m{text}"
    if hours:
        text = f"{hours}h{text}"
    return sign + text


def _decimal(value: int, scale: int) -> str:
    whole, fraction = divmod(value, scale)
    if not fraction:
        return str(whole)
    return f"{whole}.{str(fraction).rjust(len(str(scale)) - 1, '0').rstrip('0')}"
