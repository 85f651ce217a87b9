"""Flag values as Go's pflag reads them: booleans, integers, numbers and string lists."""

from __future__ import annotations

import csv
import math

_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_go_bool(text: str) -> bool:
    if text in _GO_TRUE:
        return True
    if text in _GO_FALSE:
        return False
    raise ValueError(f"invalid boolean {text!r} (use true or false)")


def parse_int(text: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise ValueError(f"invalid integer {text!r}") from None


def parse_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"invalid number {text!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"invalid number {text!r}")
    return value


def parse_string_list(text: str) -> list[str]:
    """pflag string slices are one CSV record; an empty value is an empty list."""
    if not text:
        return []
    return [item.strip() for item in next(csv.reader([text]))]
