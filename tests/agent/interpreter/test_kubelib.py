"""The `kube` library's quantity helpers answer as upstream's do (go_quantities.yaml: Go's own
answers), called from Lua as scripts call them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.interpreter.kubelib import HELPERS
from agent.interpreter.luavm import LuaScript, ScriptError

FACTS = yaml.safe_load((Path(__file__).parent / "go_quantities.yaml").read_text(encoding="utf-8"))


def lua(source: str, *args: Any) -> Any:
    script = LuaScript('local kube = require("kube")\n' + source, "test", HELPERS)
    return script.call("F", *args)[0]


@pytest.mark.parametrize("case", FACTS["resourceAdd"], ids=lambda c: repr(c["args"]))
def test_resource_add_prints_the_sum_as_go(case: dict[str, Any]) -> None:
    # Exactly as many arguments as the case has, nil ones included.
    script = "function F(a, b, c, n) return kube.resourceAdd(table.unpack({a, b, c}, 1, n)) end"
    args = case["args"]
    assert lua(script, *(args + [None] * (3 - len(args))), len(args)) == case["result"]


@pytest.mark.parametrize("case", FACTS["getResourceQuantity"], ids=lambda c: c["arg"])
def test_get_resource_quantity_approximates_as_go(case: dict[str, Any]) -> None:
    script = "function F(q) return kube.getResourceQuantity(q) end"
    if case["result"] is None:
        with pytest.raises(ScriptError, match="getResourceQuantity"):
            lua(script, case["arg"])
    else:
        assert float(lua(script, case["arg"])) == float(case["result"])


def test_get_resource_quantity_reads_nil_as_zero_and_refuses_other_arguments() -> None:
    assert lua("function F() return kube.getResourceQuantity(nil) end") == 0
    for call in ("kube.getResourceQuantity()", 'kube.getResourceQuantity("1", "2")'):
        with pytest.raises(ScriptError, match="only accepts one argument"):
            lua(f"function F() return {call} end")
    with pytest.raises(ScriptError, match="string expected, got number"):
        lua("function F() return kube.getResourceQuantity(2) end")
    with pytest.raises(ScriptError, match="quantities must match"):
        lua('function F() return kube.getResourceQuantity("two") end')


def test_an_integral_quantity_prints_as_upstreams_number() -> None:
    # gopher-lua prints the float 2 as "2".
    assert lua('function F() return tostring(kube.getResourceQuantity("2")) end') == "2"
    assert lua('function F() return tostring(kube.getResourceQuantity("1500m")) end') == "1.5"
