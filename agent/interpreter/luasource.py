"""Table constructors rewritten so that pairs() can visit keys in the order a script wrote them.

Upstream's Lua (gopher-lua) visits a table's positive integer keys in ascending order, then its
other keys in the order they were first set, the constructor's named fields in source order.
Lua 5.4 keeps no such order, so every table constructor `{...}` of a script becomes
`ORDERED({...}, "name1 name2")`: a call that turns the constructed table into one that records
its keys' order (luavm's prelude), given the named fields in source order. In a call's argument
position (`f{...}`) the call is parenthesised: `f(ORDERED({...}, "..."))`. Nothing else changes
and no line moves, so error messages keep their line numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

ORDERED = "__karmada_ordered"

_KEYWORDS = frozenset(
    [
        "and",
        "break",
        "do",
        "else",
        "elseif",
        "end",
        "false",
        "for",
        "function",
        "goto",
        "if",
        "in",
        "local",
        "nil",
        "not",
        "or",
        "repeat",
        "return",
        "then",
        "true",
        "until",
        "while",
    ]
)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"0[xX](?:[0-9a-fA-F.]|[pP][+-]?)*|(?:[0-9.]|[eE][+-]?)+[0-9a-zA-Z_]*")
_LONG_OPEN = re.compile(r"\[(=*)\[")
_OPERATORS = ("...", "..", "==", "~=", "<=", ">=", "//", "::", "<<", ">>")


class SourceError(ValueError):
    """The source does not tokenize (Lua will report why when it loads the original)."""


@dataclass
class _Constructor:
    call: bool
    keys: list[str] = field(default_factory=list)
    depth: int = 0
    expect_field: bool = True
    pending: str | None = None


def _long_bracket_end(source: str, start: int, level: str) -> int:
    end = source.find("]" + level + "]", start)
    if end < 0:
        raise SourceError("unfinished long string or comment")
    return end + len(level) + 2


def _string_end(source: str, start: int) -> int:
    quote, i = source[start], start + 1
    while i < len(source):
        char = source[i]
        if char == "\\":
            i += 2
            continue
        if char == quote:
            return i + 1
        if char == "\n":
            break
        i += 1
    raise SourceError("unfinished string")


def ordered_constructors(source: str) -> str:
    """`source` with its table constructors rewritten; raises SourceError when it does not
    tokenize."""
    out: list[str] = [f"local {ORDERED} = ...; "]
    stack: list[_Constructor] = []
    # What ended the previous token: a name, a closing bracket or a string make `{` a call.
    prev_ends_expression = False
    i, n = 0, len(source)
    while i < n:
        char = source[i]
        if char.isspace():
            out.append(char)
            i += 1
            continue
        if source.startswith("--", i):
            opened = _LONG_OPEN.match(source, i + 2)
            if opened:
                end = _long_bracket_end(source, opened.end(), opened.group(1))
            else:
                newline = source.find("\n", i)
                end = n if newline < 0 else newline
            out.append(source[i:end])
            i = end
            continue
        frame = stack[-1] if stack else None
        token_start = i
        name: str | None = None
        if char in "\"'":
            i = _string_end(source, i)
            ends_expression = True
        elif (opened := _LONG_OPEN.match(source, i)) is not None:
            i = _long_bracket_end(source, opened.end(), opened.group(1))
            ends_expression = True
        elif (word := _NAME.match(source, i)) is not None:
            i = word.end()
            name = word.group()
            ends_expression = name not in _KEYWORDS
        elif char.isdigit() or (char == "." and source[i + 1 : i + 2].isdigit()):
            number = _NUMBER.match(source, i)
            assert number is not None
            i = number.end()
            ends_expression = False
        elif char == "{":
            if frame is not None and frame.depth == 0:
                frame.expect_field = False
                frame.pending = None
            call = prev_ends_expression
            out.append(("(" if call else "") + ORDERED + "({")
            stack.append(_Constructor(call))
            prev_ends_expression = False
            i += 1
            continue
        elif char == "}":
            if frame is None or frame.depth != 0:
                raise SourceError("unbalanced braces")
            stack.pop()
            out.append('}, "' + " ".join(frame.keys) + '")' + (")" if frame.call else ""))
            prev_ends_expression = True
            i += 1
            continue
        else:
            operator = next((op for op in _OPERATORS if source.startswith(op, i)), char)
            i += len(operator)
            ends_expression = operator in (")", "]")
        text = source[token_start:i]
        out.append(text)
        prev_ends_expression = ends_expression
        if frame is not None:
            if text in (")", "]"):
                frame.depth -= 1
                if frame.depth < 0:
                    raise SourceError("unbalanced brackets")
            if frame.depth == 0:
                _field_token(frame, text, name)
            if text in ("(", "["):
                frame.depth += 1
    if stack:
        raise SourceError("unbalanced braces")
    return "".join(out)


def _field_token(frame: _Constructor, text: str, name: str | None) -> None:
    """Follow a constructor's fields at its own level: `name =` starts a named field."""
    if text in (",", ";"):
        frame.expect_field, frame.pending = True, None
        return
    if frame.expect_field:
        frame.expect_field = False
        frame.pending = name if name is not None and name not in _KEYWORDS else None
        return
    if text == "=" and frame.pending is not None and frame.pending not in frame.keys:
        frame.keys.append(frame.pending)
    frame.pending = None
