"""Label and field selectors with kube-apiserver's grammar and errors."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import errors

JSON = dict[str, Any]

_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!", "gt", "lt"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.op
        if op == "exists":
            return self.key in labels
        if op == "!":
            return self.key not in labels
        value = labels.get(self.key)
        if op in ("=", "in"):
            return value is not None and value in self.values
        if op in ("!=", "notin"):
            return value is None or value not in self.values
        if value is None:
            return False
        try:
            have, want = int(value), int(self.values[0])
        except ValueError:
            return False
        return have > want if op == "gt" else have < want


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    def empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)


def _check_key(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if "/" in key and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return f'prefix part must be a valid DNS subdomain: "{key}"'
    if not name or len(name) > 63 or not _NAME.match(name):
        return (
            f'key: Invalid value: "{key}": name part must consist of alphanumeric characters, '
            "'-', '_' or '.', and must start and end with an alphanumeric character"
        )
    return None


def _check_value(value: str) -> str | None:
    if len(value) > 63 or not _VALUE.match(value):
        return (
            f'values[0]: Invalid value: "{value}": a valid label must be an empty string or '
            "consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
            "an alphanumeric character"
        )
    return None


def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts: list[str] = []
    depth = 0
    cur = ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return parts


_SET_RE = re.compile(r"^\s*(\S+?)\s+(in|notin)\s*\((.*)\)\s*$")
_CMP_RE = re.compile(r"^\s*([^=!<>\s]+)\s*(==|=|!=|>|<)\s*(\S*)\s*$")


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse `?labelSelector=`; errors are 400 BadRequest like kube's labels.Parse."""
    if not text or not text.strip():
        return LabelSelector()
    reqs: list[Requirement] = []
    for raw in _split_top(text):
        part = raw.strip()
        if not part:
            raise errors.bad_request(
                f"unable to parse requirement: found '', expected: identifier in {text!r}"
            )
        m = _SET_RE.match(part)
        if m:
            key, op, inner = m.group(1), m.group(2), m.group(3)
            values = tuple(v.strip() for v in inner.split(",")) if inner.strip() else ()
            if not values and op == "in":
                raise errors.bad_request(
                    f"unable to parse requirement: for 'in', 'notin' operators, "
                    f"values set can't be empty: {part!r}"
                )
            problem = _check_key(key) or next(
                (p for p in (_check_value(v) for v in values) if p), None
            )
            if problem:
                raise errors.bad_request(f"unable to parse requirement: {problem}")
            reqs.append(Requirement(key, op, values))
            continue
        m = _CMP_RE.match(part)
        if m:
            key, op, value = m.group(1), m.group(2), m.group(3)
            problem = _check_key(key)
            if op in (">", "<"):
                if not problem:
                    try:
                        int(value)
                    except ValueError:
                        problem = (
                            f"for 'Gt', 'Lt' operators, the value must be an integer: {part!r}"
                        )
                if problem:
                    raise errors.bad_request(f"unable to parse requirement: {problem}")
                reqs.append(Requirement(key, "gt" if op == ">" else "lt", (value,)))
                continue
            problem = problem or _check_value(value)
            if problem:
                raise errors.bad_request(f"unable to parse requirement: {problem}")
            reqs.append(Requirement(key, "!=" if op == "!=" else "=", (value,)))
            continue
        token = part
        op = "exists"
        if token.startswith("!"):
            op = "!"
            token = token[1:].strip()
        if not token or any(c in token for c in " =()<>!"):
            raise errors.bad_request(
                f"unable to parse requirement: found '{token}', expected: identifier"
            )
        problem = _check_key(token)
        if problem:
            raise errors.bad_request(f"unable to parse requirement: {problem}")
        reqs.append(Requirement(token, op))
    return LabelSelector(tuple(reqs))


def selector_from_label_selector(sel: JSON | None) -> LabelSelector:
    """A metav1.LabelSelector (matchLabels/matchExpressions) as a matcher."""
    if not sel:
        return LabelSelector()
    reqs = [Requirement(k, "=", (str(v),)) for k, v in (sel.get("matchLabels") or {}).items()]
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expr in sel.get("matchExpressions") or []:
        reqs.append(
            Requirement(
                expr["key"], ops.get(expr["operator"], "in"), tuple(expr.get("values") or ())
            )
        )
    return LabelSelector(tuple(reqs))


def label_selector_string(sel: JSON | None) -> str:
    """Render a metav1.LabelSelector as kube's string form (Scale.status.selector)."""
    if not sel:
        return ""
    parts: list[str] = []
    items: list[tuple[str, str]] = []
    for k, v in (sel.get("matchLabels") or {}).items():
        items.append((k, f"{k}={v}"))
    for expr in sel.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], sorted(expr.get("values") or [])
        if op == "In":
            items.append((key, f"{key} in ({','.join(values)})"))
        elif op == "NotIn":
            items.append((key, f"{key} notin ({','.join(values)})"))
        elif op == "Exists":
            items.append((key, key))
        elif op == "DoesNotExist":
            items.append((key, f"!{key}"))
    for _, text in sorted(items, key=lambda kv: kv[0]):
        parts.append(text)
    return ",".join(parts)


# --- field selectors ---


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    value: str
    negate: bool


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def empty(self) -> bool:
        return not self.requirements

    def matches(self, fields: Mapping[str, str]) -> bool:
        for r in self.requirements:
            have = fields.get(r.field, "")
            if (have == r.value) == r.negate:
                return False
        return True

    def only_name(self) -> str | None:
        """The name when the selector is exactly metadata.name=<x> (single-object watch)."""
        if len(self.requirements) == 1:
            r = self.requirements[0]
            if r.field == "metadata.name" and not r.negate:
                return r.value
        return None


def _split_unescaped(text: str, sep: str) -> list[str]:
    out: list[str] = []
    cur = ""
    escaped = False
    for ch in text:
        if escaped:
            cur += "\\" + ch
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == sep:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if escaped:
        cur += "\\"
    out.append(cur)
    return out


def _unescape(value: str) -> str:
    out = ""
    i = 0
    while i < len(value):
        ch = value[i]
        if ch == "\\" and i + 1 < len(value) and value[i + 1] in "\\,=":
            out += value[i + 1]
            i += 2
            continue
        if ch == "\\":
            raise errors.bad_request(f"invalid field selector: invalid escape sequence in {value}")
        out += ch
        i += 1
    return out


def parse_field_selector(
    text: str | None, supported: Callable[[str], bool], custom_labels: bool
) -> FieldSelector:
    """Parse `?fieldSelector=`; an unsupported field label is a 400 BadRequest.

    `custom_labels` says whether the type registers its own field label conversion
    (kube's message differs between those and the default metadata-only one).
    """
    if not text:
        return FieldSelector()
    reqs: list[FieldRequirement] = []
    for part in _split_unescaped(text, ","):
        if not part:
            continue
        for op in ("!=", "==", "="):
            idx = _find_unescaped(part, op)
            if idx >= 0:
                field_name = part[:idx]
                value = _unescape(part[idx + len(op) :])
                negate = op == "!="
                break
        else:
            raise errors.bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        if not supported(field_name):
            if custom_labels:
                raise errors.bad_request(f"field label not supported: {field_name}")
            raise errors.bad_request(
                f'"{field_name}" is not a known field selector: only "metadata.name", '
                '"metadata.namespace"'
            )
        reqs.append(FieldRequirement(field_name, value, negate))
    return FieldSelector(tuple(reqs))


def _find_unescaped(text: str, token: str) -> int:
    i = 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text.startswith(token, i):
            return i
        i += 1
    return -1


def get_path(obj: Any, dotted: str) -> Any:
    """Value at a dotted path ("spec.nodeName"), None when absent."""
    cur = obj
    for key in dotted.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(key)
    return cur
