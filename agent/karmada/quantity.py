"""Kubernetes resource quantities as Go's resource.Quantity has them: parsing, sums and canonical
strings.

Cluster status carries sums of quantities, and Lua scripts' kube.resourceAdd prints them; the
control plane and `kubectl` read them, so they are written exactly as Go's Quantity.String()
writes them (e.g. 2 CPUs as "2", 1536 MiB as "1536Mi", 1500 bytes as "1500"), its oddities
included (a decimal quantity of 10^21 or more loses its suffix: 1000E prints as "1").
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from decimal import (
    MAX_EMAX,
    MIN_EMIN,
    ROUND_CEILING,
    ROUND_UP,
    Context,
    Decimal,
    InvalidOperation,
    localcontext,
)
from typing import Literal

Format = Literal["DecimalSI", "BinarySI", "DecimalExponent"]

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {v: k for k, v in _DECIMAL.items()}
_BINARY_SUFFIX = {v // 10: k for k, v in _BINARY.items()}
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_NANO = Decimal("1e-9")
_MAX_INT64 = 2**63 - 1
# Exact arithmetic for any quantity a manifest can hold.
_CONTEXT = Context(prec=4000, Emax=MAX_EMAX, Emin=MIN_EMIN, traps=[InvalidOperation])


@dataclass(frozen=True)
class Quantity:
    value: Decimal
    format: Format
    # Go's internal form, value = unscaled * 10**exponent, which AsApproximateFloat64 reads.
    unscaled: int = field(default=0, compare=False)
    exponent: int = field(default=0, compare=False)

    def __add__(self, other: Quantity) -> Quantity:
        # Go's Quantity.Add: the sum takes the operand's format while the running sum is zero.
        fmt = other.format if self.value == 0 else self.format
        with localcontext(_CONTEXT):
            return Quantity(self.value + other.value, fmt)

    def __str__(self) -> str:
        return format_quantity(self.value, self.format)


class QuantityError(ValueError):
    pass


def _scan(text: str) -> tuple[bool, str, str, str, str]:
    """Go's parseQuantityString: sign, then digits (leading zeros dropped), an optional
    fraction, then the suffix. Returns (negative, value, num, denom, suffix)."""
    end, pos, negative = len(text), 0, False
    if text[:1] in ("-", "+"):
        negative, pos = text[0] == "-", 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos == end:
        return negative, "0", "0", "", ""
    start = pos
    while pos < end and text[pos].isascii() and text[pos].isdigit():
        pos += 1
    num = text[start:pos] or "0"
    denom = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos].isascii() and text[pos].isdigit():
            pos += 1
        denom = text[start:pos]
    value, suffix_start = text[:pos], pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos].isascii() and text[pos].isdigit():
        pos += 1
    if pos < end:
        raise QuantityError(f"quantities must match the regular expression: {text!r}")
    return negative, value, num, denom, text[suffix_start:]


def _suffix(suffix: str, text: str) -> tuple[int, int, Format]:
    """(base, exponent, format) of a suffix."""
    if suffix in _DECIMAL:
        return 10, _DECIMAL[suffix], "DecimalSI"
    if suffix in _BINARY:
        return 2, _BINARY[suffix], "BinarySI"
    if len(suffix) > 1 and suffix[0] in "eE":
        # _scan left only an optional sign and digits after the letter.
        digits = suffix[1:]
        if digits.lstrip("+-").isdigit() and -(2**63) <= int(digits) < 2**63:
            # Go keeps the exponent as an int32.
            return 10, (int(digits) + 2**31) % 2**32 - 2**31, "DecimalExponent"
    raise QuantityError(f"unable to parse quantity's suffix: {text!r}")


# A member's Pods repeat a few request strings ("100m", "128Mi") thousands of times, and the
# cluster status sums them every pass; a Quantity is immutable, so one parse serves them all.
@functools.lru_cache(maxsize=1024)
def _parse(text: str) -> Quantity:
    if not text:
        raise QuantityError("quantities must match the regular expression: ''")
    if text == "0":
        return Quantity(Decimal(0), "DecimalSI")
    negative, value, num, denom, suffix = _scan(text)
    base, exponent, fmt = _suffix(suffix, text)
    sign = -1 if negative else 1
    with localcontext(_CONTEXT):
        # Go's fast path: the number fits an int64 at a scale of nano or coarser.
        if fmt == "BinarySI":
            fast = exponent >= 0 and not denom
            precision = 15 - len(num) - int(exponent * 3 / 10) - 1
            mantissa, scale = 1 << exponent if fast else 1, 0
        else:
            precision = 18 - len(num) - len(denom)
            mantissa, scale = 1, exponent - len(denom)
        if (fmt != "BinarySI" or fast) and precision >= 0 and scale >= -9:
            digits = int(num + denom)
            if digits <= _MAX_INT64 and digits * mantissa <= _MAX_INT64:
                unscaled = sign * digits * mantissa
                return Quantity(Decimal(unscaled).scaleb(scale), fmt, unscaled, scale)
        try:
            amount = abs(Decimal(value))
        except InvalidOperation:
            raise QuantityError(f"unable to parse quantity's number: {text!r}") from None
        amount = amount.scaleb(exponent) if base == 10 else amount * (2**exponent)
        if amount == 0:
            return Quantity(Decimal(0), fmt)
        # Rounded up (away from zero) to nano.
        amount = amount.quantize(_NANO, rounding=ROUND_UP)
        unscaled, scale = int(amount.scaleb(9)), -9
        if fmt == "BinarySI" and amount > _MAX_INT64:
            amount, unscaled, scale = Decimal(_MAX_INT64), _MAX_INT64, 0
        if fmt == "BinarySI" and amount < 1:
            fmt = "DecimalSI"
        return Quantity(sign * amount, fmt, sign * unscaled, scale)


def parse_quantity(text: str | int | float) -> Quantity:
    if isinstance(text, int | float):
        return Quantity(Decimal(str(text)), "DecimalSI")
    return _parse(text)


def _pow10(n: int) -> float:
    """Go's math.Pow10, its rounding included."""
    if 0 <= n <= 308:
        return float(f"1e{n // 32 * 32}") * float(f"1e{n % 32}")
    if -323 <= n < 0:
        return float(f"1e-{-n // 32 * 32}") / float(f"1e{-n % 32}")
    return math.inf if n > 0 else 0.0


def approximate_float64(q: Quantity) -> float:
    """Go's Quantity.AsApproximateFloat64: the unscaled number as a float times a power of ten
    (so 3.14159 is 3.1415900000000003)."""
    base = float(q.unscaled)
    if q.exponent == 0:
        return base
    return base * _pow10(q.exponent)


def format_quantity(value: Decimal, fmt: Format) -> str:
    """Go's Quantity.String() of `value` in format `fmt`."""
    if value == 0:
        return "0"
    with localcontext(_CONTEXT):
        if fmt == "BinarySI":
            if -1024 < value < 1024 or value != value.to_integral_value():
                fmt = "DecimalSI"
            else:
                return _format_binary(int(value))
        return _format_decimal(value, fmt)


def _format_binary(number: int) -> str:
    exponent, magnitude = 0, abs(number)
    while magnitude >= 1024 and magnitude % 1024 == 0:
        magnitude //= 1024
        exponent += 1
    # Go prints no suffix for a multiple of 1024**7 (there is none).
    suffix = _BINARY_SUFFIX.get(exponent, "")
    return f"{'-' if number < 0 else ''}{magnitude}{suffix}"


def _format_decimal(value: Decimal, fmt: Format) -> str:
    sign, digits, exponent = value.normalize().as_tuple()
    assert isinstance(exponent, int)
    number = int("".join(map(str, digits)))
    while exponent % 3:
        number *= 10
        exponent -= 1
    text = f"{'-' if sign else ''}{number}"
    if fmt == "DecimalExponent":
        return f"{text}e{exponent}" if exponent else text
    # Go prints no suffix for an exponent beyond E (10^18).
    return text + _DECIMAL_SUFFIX.get(exponent, "")


def milli_value(q: Quantity) -> int:
    """Go's MilliValue: rounded up to an integer number of thousandths."""
    with localcontext(_CONTEXT):
        return int((q.value * 1000).to_integral_value(rounding=ROUND_CEILING))


def int_value(q: Quantity) -> int:
    """Go's Value: rounded up to an integer."""
    with localcontext(_CONTEXT):
        return int(q.value.to_integral_value(rounding=ROUND_CEILING))
