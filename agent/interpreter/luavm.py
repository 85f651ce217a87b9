"""Untrusted Lua scripts in a sandbox, with the value conversions of Karmada's Lua VM.

Each script gets its own Lua 5.4 state (lupa) with a memory cap. Scripts see only the
base functions that cannot reach outside the state, `string` (without `dump`), `table`, `math`,
a time-only `os` (`time`, `clock`, `date`, `difftime`), and `require("kube")` for the helper
library; no `io`, `debug`, `package`, `load`, `dofile`, `coroutine`, metatables or raw access.
Every call (loading the script included) runs under an instruction and CPU-time budget kept by
a count hook installed before `debug` is taken away.

Conversions, as upstream's VM (gopher-lua, JSON in between) does them: objects and lists become
tables (lists 1-based), null fields are absent; results come back through JSON, so a table
with keys 1..n is a list and one with string keys an object, and a float with an integral value
is an integer. An empty table cannot say whether it was a list or an object: where the callers'
reference objects (Retain's desired and observed objects) have an empty list or object at the
same path it becomes that again, else the field is dropped; an empty top-level result is `{}`.

Iteration, as upstream's: `pairs` and `next` visit positive integer keys in ascending order, then
the other keys in the order they were first set, a constructor's named fields in source order
(luasource rewrites constructors for it); the keys of an object the script is given, which
upstream visits in Go's random map order, in sorted order. `ipairs` takes only a table.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from typing import Any

from lupa import lua54

from .luasource import SourceError, ordered_constructors

JsonValue = Any
# A Python helper callable from Lua: takes the arguments decoded from JSON, returns a JSON value.
Helper = Callable[..., JsonValue]

MAX_MEMORY = 16 * 1024 * 1024
MAX_INSTRUCTIONS = 20_000_000
MAX_SECONDS = 1.0
# The hook runs every HOOK_STEP instructions.
HOOK_STEP = 1000


class ScriptError(Exception):
    """The script failed to load or run, broke a limit, or returned something unusable."""


# Run once per state, as a trusted chunk: it keeps what the sandbox needs in locals, builds the
# scripts' environment, and returns the entry points for Python.
_PRELUDE = r"""
local helpers, limits = ...
local sethook, clock, load_chunk = debug.sethook, os.clock, load
local pcall, error, type, pairs, next = pcall, error, type, pairs, next
local tostring, format, concat, gsub = tostring, string.format, table.concat, string.gsub
local mtype, huge, floor = math.type, math.huge, math.floor

local steps, deadline = 0, 0
local function budget()
  steps = steps + limits.step
  if steps > limits.instructions or clock() > deadline then
    -- From now on every instruction fails, so a script's own pcall cannot swallow this.
    sethook(function() error("script exceeded its instruction or time budget", 0) end, "", 1)
    error("script exceeded its instruction or time budget", 0)
  end
end
local function arm()
  steps, deadline = 0, clock() + limits.seconds
  sethook(budget, "", limits.step)
end

-- Tables whose pairs()/next() order is upstream's (gopher-lua's): positive integer keys below
-- 2^26 (its array part) in ascending order, then the other keys in the order they were first set.
-- A script's tables and the objects it is given are proxies: empty tables whose metatable reads
-- and writes a store and records the order. Objects converted from JSON (whose order upstream
-- takes from Go's randomised map iteration) are ordered by key, and wrapped lazily as they are
-- read. Scripts cannot tell a proxy from a table: the metatable functions are out of their reach.
local setmetatable, rawnext, tointeger, sort = setmetatable, next, math.tointeger, table.sort
local gmatch, ipairs, pack, unpack = string.gmatch, ipairs, table.pack, table.unpack
local records = setmetatable({}, {__mode = "k"})
local ordered_meta = {}
local ARRAY_LIMIT = 67108864
local function array_key(k)
  return mtype(k) == "integer" and k >= 1 and k < ARRAY_LIMIT
end
local function before(a, b)
  local ta, tb = type(a), type(b)
  if ta ~= tb then return ta < tb end
  if ta == "string" or ta == "number" then return a < b end
  return tostring(a) < tostring(b)
end
-- The keys' order, computed when first needed: the constructor's named fields as written, then
-- the remaining keys sorted.
local function materialize(r)
  if r.order ~= nil then return end
  local order, index, rest, maxint = {}, {}, {}, 0
  for k in rawnext, r.store do
    if array_key(k) then
      if k > maxint then maxint = k end
    else
      rest[#rest + 1] = k
    end
  end
  if r.hint ~= nil then
    for k in string.gmatch(r.hint, "%S+") do
      if r.store[k] ~= nil and index[k] == nil then
        order[#order + 1] = k
        index[k] = #order
      end
    end
  end
  sort(rest, before)
  for _, k in ipairs(rest) do
    if index[k] == nil then
      order[#order + 1] = k
      index[k] = #order
    end
  end
  r.order, r.index, r.maxint = order, index, maxint
end
local function wrap(store, hint)
  local proxy = setmetatable({}, ordered_meta)
  records[proxy] = {store = store, hint = hint}
  return proxy
end
local function value_of(store, k)
  local v = store[k]
  if type(v) == "table" and records[v] == nil then
    v = wrap(v)
    store[k] = v
  end
  return v
end
ordered_meta.__index = function(proxy, k)
  return value_of(records[proxy].store, k)
end
ordered_meta.__newindex = function(proxy, k, v)
  local r = records[proxy]
  if mtype(k) == "float" then k = tointeger(k) or k end
  materialize(r)
  if array_key(k) then
    if v ~= nil and k > r.maxint then r.maxint = k end
  elseif v ~= nil and k ~= nil and k == k and r.index[k] == nil then
    r.order[#r.order + 1] = k
    r.index[k] = #r.order
  end
  r.store[k] = v
end
ordered_meta.__len = function(proxy) return #records[proxy].store end
local function ordered_next(t, k)
  local r = records[t]
  if r == nil then return rawnext(t, k) end
  materialize(r)
  local store, position = r.store, 1
  if k == nil or array_key(k) then
    for i = (k or 0) + 1, r.maxint do
      if store[i] ~= nil then return i, value_of(store, i) end
    end
  else
    position = r.index[k]
    if position == nil then error("invalid key to 'next'", 2) end
    position = position + 1
  end
  local order = r.order
  for i = position, #order do
    local key = order[i]
    if store[key] ~= nil then return key, value_of(store, key) end
  end
  return nil
end
local function ordered_pairs(t)
  if type(t) ~= "table" then
    error("bad argument #1 to 'pairs' (table expected, got " .. type(t) .. ")", 2)
  end
  return ordered_next, t, nil
end
local function ordered(store, hint) return wrap(store, hint) end

local escapes = { ['"'] = '\\"', ['\\'] = '\\\\', ['\b'] = '\\b', ['\f'] = '\\f',
  ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t' }
local function escape(c) return escapes[c] or format("\\u%04x", c:byte()) end

local encode
local function encode_table(t, out, visiting)
  local r = records[t]
  if r ~= nil then t = r.store end
  if visiting[t] then error("cannot convert a table that contains itself", 0) end
  visiting[t] = true
  local n, strings, integers = 0, 0, 0
  for k in pairs(t) do
    n = n + 1
    if type(k) == "string" then strings = strings + 1
    elseif mtype(k) == "integer" or (mtype(k) == "float" and k == floor(k)) then
      integers = integers + 1
    else error("cannot convert a table with a " .. type(k) .. " key", 0) end
  end
  if n == 0 then
    out[#out + 1] = "[]"
  elseif integers == n then
    for i = 1, n do
      if t[i] == nil then error("cannot convert a sparse array", 0) end
    end
    out[#out + 1] = "["
    for i = 1, n do
      if i > 1 then out[#out + 1] = "," end
      encode(t[i], out, visiting)
    end
    out[#out + 1] = "]"
  elseif strings == n then
    out[#out + 1] = "{"
    local first = true
    for k, v in pairs(t) do
      if not first then out[#out + 1] = "," end
      first = false
      out[#out + 1] = '"' .. gsub(k, '[%c"\\]', escape) .. '":'
      encode(v, out, visiting)
    end
    out[#out + 1] = "}"
  else
    error("cannot convert a table with both list and object keys", 0)
  end
  visiting[t] = nil
end
encode = function(v, out, visiting)
  local tv = type(v)
  if tv == "nil" then out[#out + 1] = "null"
  elseif tv == "boolean" then out[#out + 1] = tostring(v)
  elseif tv == "number" then
    if v ~= v or v == huge or v == -huge then error("cannot convert " .. tostring(v), 0) end
    if mtype(v) == "integer" then out[#out + 1] = format("%d", v)
    elseif v == floor(v) and v > -2^63 and v < 2^63 then out[#out + 1] = format("%d", floor(v))
    else out[#out + 1] = format("%.17g", v) end
  elseif tv == "string" then out[#out + 1] = '"' .. gsub(v, '[%c"\\]', escape) .. '"'
  elseif tv == "table" then encode_table(v, out, visiting)
  else error("cannot convert a " .. tv .. " value", 0) end
end
local function to_json(...)
  local out = { "[" }
  for i = 1, select("#", ...) do
    if i > 1 then out[#out + 1] = "," end
    encode((select(i, ...)), out, {})
  end
  out[#out + 1] = "]"
  return concat(out)
end

local function readonly_copy(lib, without)
  local copy = {}
  for k, v in pairs(lib) do if k ~= without then copy[k] = v end end
  return copy
end
string.dump = nil
local kube = {}
for name, fn in pairs(helpers) do
  kube[name] = function(...)
    local ok, result = pcall(fn, to_json(...))
    if not ok then error("kube." .. name .. ": " .. tostring(result), 2) end
    if type(result) == "table" then result = wrap(result) end
    return result
  end
end
local ipairs_any = ipairs
-- As Lua 5.1 (upstream's), ipairs takes only a table.
local function ipairs_table(t)
  if type(t) ~= "table" then
    error("bad argument #1 to 'ipairs' (table expected, got " .. type(t) .. ")", 2)
  end
  return ipairs_any(t)
end
local env = {
  assert = assert, error = error, ipairs = ipairs_table, next = ordered_next,
  pairs = ordered_pairs, pcall = pcall,
  select = select, tonumber = tonumber, tostring = tostring, type = type, xpcall = xpcall,
  unpack = table.unpack, print = function() end, _VERSION = _VERSION,
  string = readonly_copy(string), table = readonly_copy(table), math = readonly_copy(math),
  os = { time = os.time, clock = os.clock, date = os.date, difftime = os.difftime },
  require = function(name)
    if name == "kube" then return kube end
    error("module '" .. tostring(name) .. "' is not available to interpreter scripts", 2)
  end,
}
env._G = env
for _, name in ipairs({ "debug", "io", "os", "package", "require", "load", "loadfile",
    "dofile", "collectgarbage", "coroutine", "rawget", "rawset", "rawequal", "rawlen",
    "setmetatable", "getmetatable", "python", "utf8" }) do
  _G[name] = nil
end

local function finish(ok, ...)
  sethook()
  if not ok then return false, tostring((...)) end
  arm()
  local encoded_ok, encoded = pcall(to_json, ...)
  sethook()
  return encoded_ok, encoded
end

local function load_script(source, name)
  local chunk, err = load_chunk(source, "=" .. name, "t", env)
  if not chunk then return false, err end
  arm()
  -- A rewritten script (luasource) takes the constructor of ordered tables as its argument.
  return finish(pcall(chunk, ordered))
end

local function call(fn_name, ...)
  local fn = env[fn_name]
  if type(fn) ~= "function" then
    return false, "the script defines no function " .. fn_name
  end
  local args = pack(...)
  for i = 1, args.n do
    if type(args[i]) == "table" then args[i] = wrap(args[i]) end
  end
  arm()
  return finish(pcall(fn, unpack(args, 1, args.n)))
end

return load_script, call
"""


def _deny_attributes(obj: Any, name: Any, is_setting: bool) -> Any:
    raise AttributeError("Python objects are not accessible to interpreter scripts")


class LuaScript:
    """One script loaded into its own sandboxed state; its functions called by name."""

    def __init__(
        self,
        source: str,
        name: str,
        helpers: dict[str, Helper] | None = None,
        *,
        max_memory: int = MAX_MEMORY,
        max_instructions: int = MAX_INSTRUCTIONS,
        max_seconds: float = MAX_SECONDS,
    ) -> None:
        self.source = source
        self.name = name
        self._helpers = helpers or {}
        self._max_memory = max_memory
        self._limits = {
            "instructions": max_instructions,
            "seconds": max_seconds,
            "step": HOOK_STEP,
        }
        self._runtime: Any = None
        self._call: Any = None
        self._lock = threading.Lock()

    def _start(self) -> None:
        runtime = lua54.LuaRuntime(
            max_memory=self._max_memory,
            register_eval=False,
            register_builtins=False,
            attribute_filter=_deny_attributes,
            unpack_returned_tuples=True,
            # Beyond int64 a JSON number is a float to Go as well.
            overflow_handler=float,
        )
        helpers = runtime.table_from(
            {name: self._wrap(runtime, fn) for name, fn in self._helpers.items()}
        )
        limits = runtime.table_from(self._limits)
        load_script, call = runtime.execute(_PRELUDE, helpers, limits)
        try:
            source = ordered_constructors(self.source)
        except SourceError:
            # Lua reports what is wrong with it.
            source = self.source
        ok, result = load_script(source, self.name)
        if not ok:
            raise ScriptError(str(result))
        self._runtime, self._call = runtime, call

    @staticmethod
    def _wrap(runtime: Any, fn: Helper) -> Callable[[str], Any]:
        def helper(encoded: str) -> Any:
            result = fn(*json.loads(encoded))
            if isinstance(result, dict | list):
                return runtime.table_from(result, recursive=True)
            return result

        return helper

    def call(self, function: str, *args: JsonValue) -> list[JsonValue]:
        """Call `function` with `args` (JSON values); its return values as JSON values, empty
        tables as `[]`. Raises ScriptError; after a failure the next call starts a fresh state.
        Callable from any thread; calls of one script take turns."""
        with self._lock:
            result = self._call_locked(function, args)
        try:
            values = json.loads(result)
        except ValueError as exc:
            raise ScriptError(f"the result is not convertible: {exc}") from None
        return list(values)

    def _call_locked(self, function: str, args: tuple[JsonValue, ...]) -> str:
        try:
            if self._runtime is None:
                self._start()
            runtime = self._runtime
            lua_args = [
                runtime.table_from(a, recursive=True) if isinstance(a, dict | list) else a
                for a in args
            ]
            ok, result = self._call(function, *lua_args)
        except ScriptError:
            self._runtime = None
            raise
        except (lua54.LuaError, MemoryError, ValueError, TypeError, OverflowError) as exc:
            self._runtime = None
            raise ScriptError(_describe(exc)) from None
        if not ok:
            self._runtime = None
            raise ScriptError(_describe_message(str(result)))
        return str(result)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, lua54.LuaMemoryError | MemoryError):
        return "script exceeded its memory limit"
    return _describe_message(str(exc))


def _describe_message(message: str) -> str:
    if message in ("not enough memory", "error in error handling"):
        return "script exceeded its memory limit"
    return message


# --- empty tables ------------------------------------------------------------------------------

_Path = tuple[str, ...]


def _empty_paths(value: JsonValue, path: _Path, lists: set[_Path], objects: set[_Path]) -> None:
    """Record where `value` has empty lists and objects; list indices are not part of a path."""
    if isinstance(value, dict):
        items: Iterable[tuple[_Path, JsonValue]] = (((*path, k), v) for k, v in value.items())
    elif isinstance(value, list):
        items = ((path, v) for v in value)
    else:
        return
    for child_path, child in items:
        if child == [] and isinstance(child, list):
            lists.add(child_path)
        elif child == {} and isinstance(child, dict):
            objects.add(child_path)
        else:
            _empty_paths(child, child_path, lists, objects)


def restore_empty(result: JsonValue, references: Iterable[JsonValue] = ()) -> JsonValue:
    """`result` as decoded from a script, its empty tables (`[]`) turned back into what the
    references hold at the same path, or dropped when they hold nothing there."""
    if result == [] and isinstance(result, list):
        return {}
    lists: set[_Path] = set()
    objects: set[_Path] = set()
    for reference in references:
        _empty_paths(reference, (), lists, objects)
    return _restore(result, (), lists, objects)


def _restore(value: JsonValue, path: _Path, lists: set[_Path], objects: set[_Path]) -> JsonValue:
    if isinstance(value, dict):
        out: dict[str, JsonValue] = {}
        for key, child in value.items():
            child_path = (*path, key)
            if child == [] and isinstance(child, list):
                if child_path in objects:
                    out[key] = {}
                elif child_path in lists:
                    out[key] = []
                continue
            out[key] = _restore(child, child_path, lists, objects)
        return out
    if isinstance(value, list):
        restored: list[JsonValue] = []
        for child in value:
            if child == [] and isinstance(child, list):
                if path in objects:
                    restored.append({})
                elif path in lists:
                    restored.append([])
                continue
            restored.append(_restore(child, path, lists, objects))
        return restored
    return value
