"""Kubernetes resource quantities: exact parsing and Go-canonical formatting.

Cluster status carries sums of quantities; the control plane and `kubectl` read
them, so they are written exactly as Go's resource.Quantity would write them
(e.g. 2 CPUs as "2", 1536 MiB as "1536Mi", 1500 bytes as "1500").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from typing import Literal

Format = Literal["DecimalSI", "BinarySI", "DecimalExponent"]

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {v: k for k, v in _DECIMAL.items()}
_BINARY_SUFFIX = {v // 10: k for k, v in _BINARY.items()}
_PATTERN = re.compile(
    r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)
_NANO = Decimal("1e-9")


@dataclass(frozen=True)
class Quantity:
    value: Decimal
    format: Format

    def __add__(self, other: Quantity) -> Quantity:
        # Like Go's Quantity.Add: the sum keeps the receiver's format.
        return Quantity(self.value + other.value, self.format)

    def __str__(self) -> str:
        return format_quantity(self.value, self.format)


class QuantityError(ValueError):
    pass


def parse_quantity(text: str | int | float) -> Quantity:
    if isinstance(text, int | float):
        return Quantity(Decimal(str(text)), "DecimalSI")
    match = _PATTERN.match(text.strip())
    if not match:
        raise QuantityError(f"quantities must match the regular expression: {text!r}")
    number, exponent, suffix = match.group(1), match.group(2), match.group(3) or ""
    value = Decimal(number)
    if exponent:
        return Quantity(_round_nano(value.scaleb(int(exponent[1:]))), "DecimalExponent")
    if suffix in _BINARY:
        return Quantity(_round_nano(value * (Decimal(2) ** _BINARY[suffix])), "BinarySI")
    return Quantity(_round_nano(value.scaleb(_DECIMAL[suffix])), "DecimalSI")


def _round_nano(value: Decimal) -> Decimal:
    # Go rounds quantities up to nano precision.
    return value.quantize(_NANO, rounding=ROUND_CEILING).normalize()


def format_quantity(value: Decimal, fmt: Format) -> str:
    if value == 0:
        return "0"
    if fmt == "BinarySI":
        if -1024 < value < 1024 or value != value.to_integral_value():
            fmt = "DecimalSI"
        else:
            return _format_binary(int(value))
    return _format_decimal(value, fmt)


def _format_binary(number: int) -> str:
    exponent = 0
    while number % 1024 == 0 and exponent < 6:
        number //= 1024
        exponent += 1
    return f"{number}{_BINARY_SUFFIX.get(exponent, '')}"


def _format_decimal(value: Decimal, fmt: Format) -> str:
    scaled = int((value / _NANO).to_integral_value(rounding=ROUND_CEILING))
    exponent = -9
    while scaled % 10 == 0:
        scaled //= 10
        exponent += 1
    while exponent % 3 != 0 or exponent > 18:
        scaled *= 10
        exponent -= 1
    if fmt == "DecimalExponent":
        return f"{scaled}e{exponent}" if exponent else str(scaled)
    return f"{scaled}{_DECIMAL_SUFFIX[exponent]}"


def milli_value(q: Quantity) -> int:
    """Go's MilliValue: rounded up to an integer number of thousandths."""
    return int((q.value * 1000).to_integral_value(rounding=ROUND_CEILING))


def int_value(q: Quantity) -> int:
    """Go's Value: rounded up to an integer."""
    return int(q.value.to_integral_value(rounding=ROUND_CEILING))
