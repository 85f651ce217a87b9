"""The Lua sandbox: conversions as Karmada's Lua VM makes them, and hostile scripts contained."""

from __future__ import annotations

import time

import pytest

from agent.interpreter.luavm import LuaScript, ScriptError, restore_empty


def call(source: str, *args: object, function: str = "F") -> object:
    return LuaScript(source, "test").call(function, *args)[0]


def test_objects_and_lists_become_tables_and_come_back() -> None:
    obj = {"spec": {"replicas": 3, "ports": [80, 443], "name": "web", "on": True, "f": 1.5}}
    script = "function F(o) return {n = o.spec.replicas, second = o.spec.ports[2], o = o} end"
    assert call(script, obj) == {"n": 3, "second": 443, "o": obj}


def test_integral_floats_come_back_as_integers_others_as_floats() -> None:
    assert call("function F() return {a = 2.0, b = 2.5, c = 7 // 2, d = 7 / 2} end") == {
        "a": 2,
        "b": 2.5,
        "c": 3,
        "d": 3.5,
    }
    assert isinstance(call("function F() return 4 / 2 end"), int)


def test_integers_beyond_int64_are_floats() -> None:
    script = "function F(o) return {t = math.type(o.big), small = math.type(o.small)} end"
    assert call(script, {"big": 2**70, "small": 2**62}) == {"t": "float", "small": "integer"}


def test_null_fields_are_absent_and_nil_results_are_null() -> None:
    assert call("function F(o) return o.missing == nil end", {"missing": None}) is True
    assert call("function F() return nil end") is None


def test_empty_tables_follow_the_references_or_are_dropped() -> None:
    desired = {"spec": {"selector": {}, "ports": [], "items": [{"tags": []}]}}
    result = call("function F(o) o.spec.extra = {} return o end", desired)
    assert result == {"spec": {"selector": [], "ports": [], "items": [{"tags": []}], "extra": []}}
    assert restore_empty(result, [desired]) == desired
    assert restore_empty([]) == {}


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("function F() return {1, nil, 3} end", "sparse array"),
        ("function F() return {1, a = 2} end", "both list and object keys"),
        ("function F() local t = {} t.self = t return t end", "contains itself"),
        ("function F() return {[true] = 1} end", "boolean key"),
        ("function F() return 0/0 end", "cannot convert"),
        ("function F() return print end", "cannot convert a function"),
    ],
)
def test_unconvertible_results_are_script_errors(source: str, message: str) -> None:
    with pytest.raises(ScriptError, match=message):
        call(source)


def test_missing_function_and_syntax_errors() -> None:
    with pytest.raises(ScriptError, match="defines no function F"):
        call("function G() end")
    with pytest.raises(ScriptError, match="test:1:"):
        call("function F( end")


@pytest.mark.parametrize(
    "source",
    [
        "function F() return os.execute('id') end",
        "function F() return io.open('/etc/passwd') end",
        "function F() return require('os') end",
        "function F() return require('io') end",
        "function F() return load('return 1')() end",
        "function F() return dofile('/etc/passwd') end",
        "function F() return debug.getinfo(1) end",
        "function F() return package.loaded end",
        "function F() return string.dump(F) end",
        "function F() return (''):dump() end",
        "function F() return setmetatable({}, {}) end",
        "function F() return coroutine.create(F) end",
        "function F() return python.eval('1') end",
        "function F() return rawget(_G, 'x') end",
    ],
)
def test_no_file_os_or_loader_access(source: str) -> None:
    with pytest.raises(ScriptError):
        call(source)


def test_python_objects_behind_helpers_are_out_of_reach() -> None:
    script = LuaScript(
        "local kube = require('kube') function F() return kube.add.__globals__ end",
        "test",
        {"add": lambda *a: 1},
    )
    with pytest.raises(ScriptError):
        script.call("F")


@pytest.mark.parametrize(
    "source",
    [
        "function F() while true do end end",
        "function F() while true do pcall(function() while true do end end) end end",
        "while true do end",
    ],
)
def test_loops_end_at_the_budget(source: str) -> None:
    started = time.monotonic()
    with pytest.raises(ScriptError, match="instruction or time budget"):
        call(source)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    "source",
    [
        "function F() local t = {} for i = 1, 1e9 do t[i] = {i} end end",
        "function F() local s = 'x' while true do s = s .. s end end",
        "function F() return string.rep('x', 1e8) end",
    ],
)
def test_memory_bombs_end_at_the_cap(source: str) -> None:
    with pytest.raises(ScriptError, match="memory limit"):
        call(source)


def test_a_script_serves_again_after_a_failure() -> None:
    script = LuaScript(
        "n = 0 function F(bad) n = n + 1 if bad then while true do end end return n end", "test"
    )
    assert script.call("F", False) == [1]
    with pytest.raises(ScriptError):
        script.call("F", True)
    # A fresh state: globals the failed call left are gone.
    assert script.call("F", False) == [1]


def test_helpers_get_json_values_and_return_tables() -> None:
    seen: list[object] = []

    def helper(*args: object) -> object:
        seen.append(args)
        return {"got": list(args)}

    script = LuaScript(
        "local kube = require('kube') function F(o) return kube.h(o.spec, 'x', nil) end",
        "test",
        {"h": helper},
    )
    # A trailing nil cannot be stored in a Lua list.
    assert script.call("F", {"spec": {"a": [1]}}) == [{"got": [{"a": [1]}, "x"]}]
    assert seen == [({"a": [1]}, "x", None)]


# --- iteration order, as upstream's Lua (gopher-lua) iterates -----------------------------------


def keys(script: str, *args: object) -> object:
    return call(
        script + "\nfunction F(...) local out = {} for k in pairs(T(...)) do "
        "out[#out + 1] = tostring(k) end return table.concat(out, ',') end",
        *args,
    )


def test_pairs_visits_a_scripts_keys_in_the_order_first_set() -> None:
    # Found by running upstream's Lua VM: integer keys 1.. first, then the others as first set.
    script = """function T()
      local t = {}
      t.zeta = 1; t.alpha = 2; t.mid = 3; t[3] = "c"; t[1] = "a"; t[-1] = "neg"; t.beta = 4
      t.alpha = nil; t.alpha = 5; t.new = 6
      return t
    end"""
    assert keys(script) == "1,3,zeta,alpha,mid,-1,beta,new"


def test_pairs_visits_a_constructors_named_fields_in_source_order() -> None:
    assert keys("function T() return {z = 1, y = 2, x = 3, [10] = 1, w = {}} end") == "10,z,y,x,w"
    assert keys("function T() local t = {b = 1, 'one', a = 2, 'two'} t.c = 3 return t end") == (
        "1,2,b,a,c"
    )


def test_pairs_visits_a_maps_keys_in_the_order_a_loop_set_them() -> None:
    script = """function T(o)
      local by_type = {}
      for _, c in ipairs(o.conditions) do by_type[c.type] = c end
      return by_type
    end"""
    conditions = [{"type": t} for t in ("Ready", "Available", "Progressing", "Zeta", "Alpha")]
    assert keys(script, {"conditions": conditions}) == "Ready,Available,Progressing,Zeta,Alpha"


def test_pairs_visits_an_objects_keys_sorted_then_those_the_script_added() -> None:
    # Upstream's order for a converted object is Go's randomised map order; ours is one of its
    # orders, the same every time.
    script = "function T(o) o.status.added = 1 o.status.another = 2 return o.status end"
    status = {"y": 1, "conditions": [1], "x": 2, "b": {"c": 1}}
    assert keys(script, {"status": status}) == "b,conditions,x,y,added,another"


def test_next_steps_through_the_same_order() -> None:
    script = """function F(o)
      local t = {c = 1, a = 2, b = 3}
      local out, k = {}, next(t)
      while k ~= nil do out[#out + 1] = k; k = next(t, k) end
      return {table.concat(out, ","), next({}) == nil, next(o.empty) == nil, (next(o.list))}
    end"""
    assert call(script, {"empty": {"x": None}, "list": [7, 8]}) == ["c,a,b", True, True, 1]


def test_ordered_tables_behave_as_tables() -> None:
    script = """function F(o)
      local list = {}
      for i, v in ipairs(o.items) do table.insert(list, v * 10) end
      table.insert(list, 1, 5)
      table.remove(list)
      table.sort(list, function(a, b) return a > b end)
      local same = o.spec == o.spec and type(o.spec) == "table"
      return {list = list, n = #o.items, joined = table.concat(o.names, "-"), same = same,
        first = unpack(o.items), copy = o.spec}
    end"""
    obj = {"items": [1, 2, 3], "names": ["a", "b"], "spec": {"k": {"v": [1, {}]}}}
    assert call(script, obj) == {
        "list": [20, 10, 5],
        "n": 3,
        "joined": "a-b",
        "same": True,
        "first": 1,
        "copy": {"k": {"v": [1, []]}},
    }


def test_ipairs_takes_only_a_table_as_in_lua_51() -> None:
    with pytest.raises(
        ScriptError, match="bad argument #1 to 'ipairs' \\(table expected, got string"
    ):
        call("function F(o) for _ in ipairs(o.s) do end end", {"s": "text"})
    with pytest.raises(ScriptError, match="bad argument #1 to 'pairs' \\(table expected, got nil"):
        call("function F(o) for _ in pairs(o.missing) do end end", {})
