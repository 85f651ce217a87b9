"""Table constructors rewritten for ordered tables: only constructors change, lines stay."""

from __future__ import annotations

import pytest

from agent.interpreter.luasource import ORDERED, SourceError, ordered_constructors
from agent.interpreter.luavm import LuaScript, ScriptError


def rewritten(source: str) -> str:
    out = ordered_constructors(source)
    prefix = f"local {ORDERED} = ...; "
    assert out.startswith(prefix)
    return out[len(prefix) :].replace(ORDERED, "O")


def test_constructors_carry_their_named_fields_in_source_order() -> None:
    assert rewritten("t = {z = 1, [k] = 2, 'v', y = {a = 1}, x == 1}") == (
        't = O({z = 1, [k] = 2, \'v\', y = O({a = 1}, "a"), x == 1}, "z y")'
    )


def test_a_constructor_as_call_argument_stays_an_argument() -> None:
    assert rewritten("f{a = 1} o:m{b = 2} g(h){} s'x'{}") == (
        'f(O({a = 1}, "a")) o:m(O({b = 2}, "b")) g(h)(O({}, "")) s\'x\'(O({}, ""))'
    )
    assert rewritten("return {}") == 'return O({}, "")'


def test_strings_and_comments_are_left_alone() -> None:
    source = 's = \'{a=1}\' .. "}\\"{" .. [==[ {b=2} ]==] -- {c=3}\n--[[ {d=4}\n]] x = 1'
    assert rewritten(source) == source


def test_lines_do_not_move() -> None:
    source = "function F(o)\n  local t = {\n    a = 1,\n  }\n  return o.missing.field\nend"
    assert rewritten(source).count("\n") == source.count("\n")
    with pytest.raises(ScriptError, match=r"^test:5: attempt to index a nil value"):
        LuaScript(source, "test").call("F", {})


@pytest.mark.parametrize("source", ["t = {", "t = }", "s = 'open", "t = {(}", "--[[ open"])
def test_sources_that_do_not_tokenize_are_refused(source: str) -> None:
    with pytest.raises(SourceError):
        ordered_constructors(source)


def test_lua_reports_syntax_errors_in_the_original() -> None:
    with pytest.raises(ScriptError, match=r"^test:2: unexpected symbol near '}'"):
        LuaScript("function F()\n  return }\nend", "test").call("F")
