"""Karmada v1.18.2's Lua sandbox for resource interpreter customizations, rebuilt on lupa (PUC Lua 5.1).

karmada-controller-manager runs every customization in gopher-lua with a restricted library set
(``pkg/resourceinterpreter/customized/declarative/luavm/lua.go``, ``pkg/util/lifted/lua/``): base,
package (only ``require "kube"``), table, string, math and an ``os`` with only ``time`` and ``date``;
``string.gsub``, ``string.rep`` and ``string.dump`` raise; a string argument over 1,000,000 bytes
raises; no io, debug or coroutine; ``load``, ``setmetatable``, ``rawget`` and their kind raise. A script
that reaches for anything else fails there and no ResourceBinding is built, so the tests run every
shipped script in this sandbox instead of a full PUC Lua.

Beyond the library set, a few gopher-lua behaviours that differ from PUC Lua are reproduced where a
script could depend on them: ``string.match`` returns nothing (not nil) without a match;
``string.format`` goes through Go's ``fmt``, so only the verbs that print the same there are allowed
(``%s %f %e %g %%``; ``%d`` of a Lua number prints ``%!d(lua.LNumber=...)`` in Go); ``tostring`` of
a number prints as Go does (integers as digits, others as the shortest round-trip text). Not
reproduced: concatenating a non-integer number (``"x" .. 0.5`` uses Go's formatting in Karmada) and
gopher-lua's pattern-matching quirks. Karmada's one-second deadline becomes a deterministic
instruction budget per call.

Results are encoded as Karmada encodes them (layeh gopher-json ``Encode``, ``../shared/DESIGN.md`` §10):
one visited set spans the whole result, so a table placed twice anywhere in it fails (not only a
cycle); a table with only keys 1..n is a list, one with only string keys an object, an empty table
``[]``; mixed keys, a gap, a function fail; numbers are float64 written as Go writes them. The JSON
text is then read back, as Karmada decodes it (``tests/support/karmada_shapes.py`` decodes it into
the Go type each operation takes).
"""

from __future__ import annotations

import importlib
import json
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

MAX_STRING = 1_000_000
INSTRUCTION_BUDGET = 50_000_000

# Base functions Karmada replaces with one that raises (lua.go setLib).
BLOCKED_BASE = (
    "collectgarbage", "dofile", "getfenv", "getmetatable", "load", "loadfile", "loadstring",
    "rawequal", "rawget", "rawset", "setfenv", "setmetatable", "module", "newproxy",
)  # fmt: skip
# What gopher-lua's base library (and Karmada's package library) leave usable.
BASE = (
    "assert", "error", "ipairs", "next", "pairs", "pcall", "print", "select", "tonumber", "tostring",
    "type", "unpack", "xpcall", "require", "_G", "_VERSION",
)  # fmt: skip
LIBRARIES = ("package", "table", "string", "math", "os")
STRING = (
    "byte",
    "char",
    "find",
    "format",
    "gmatch",
    "gfind",
    "len",
    "lower",
    "match",
    "reverse",
    "sub",
    "upper",
)
UNSUPPORTED_STRING = ("dump", "gsub", "rep")
TABLE = ("getn", "concat", "insert", "maxn", "remove", "sort")
MATH = (
    "abs", "ceil", "cos", "cosh", "exp", "floor", "fmod", "frexp", "ldexp", "log", "log10", "max", "min",
    "mod", "modf", "pow", "rad", "random", "randomseed", "sin", "sinh", "sqrt", "tan", "tanh", "acos",
    "asin", "atan", "atan2", "deg", "huge", "pi",
)  # fmt: skip
KUBE = ("resourceAdd", "accuratePodRequirements", "getPodDependencies")


def _lua_list(names: tuple[str, ...]) -> str:
    return "{" + ", ".join(f'"{n}"' for n in names) + "}"


_PRELUDE = f"""
local MAX = {MAX_STRING}
local G = _G
local sethook = debug.sethook
local s_format, s_match, s_find, s_len = string.format, string.match, string.find, string.len
local floor, huge = math.floor, math.huge
local error_, type_, select_, unpack_, tostring_ = error, type, select, unpack, tostring
local os_time, os_date = os.time, os.date

local function keep(tbl, names)
  local wanted = {{}}
  for _, n in ipairs(names) do wanted[n] = true end
  for k in pairs(tbl) do if not wanted[k] then tbl[k] = nil end end
end

-- tostring of a number, as gopher-lua's LNumber.String prints it (Go's formatting).
local function number_text(v)
  if v ~= v then return "nan" end
  if v == huge then return "+Inf" end
  if v == -huge then return "-Inf" end
  if v == floor(v) and v > -9.2e18 and v < 9.2e18 then return s_format("%.0f", v) end
  for p = 1, 17 do
    local t = s_format("%." .. p .. "g", v)
    if tonumber(t) == v then return t end
  end
  return s_format("%.17g", v)
end
G.tostring = function(v)
  if type_(v) == "number" then return number_text(v) end
  return tostring_(v)
end

local function check(fn, ...)
  for i = 1, select_("#", ...) do
    local v = select_(i, ...)
    if (type_(v) == "string" or type_(v) == "number") and s_len(v) > MAX then
      error_(s_format("string length %s exceeds the maximum allowed input string length %s in Karmada lua "
        .. "string lib, please check your lua script.", number_text(s_len(v)), number_text(MAX)), 3)
    end
  end
end

local S = string
for _, name in ipairs({_lua_list(("byte", "find", "gmatch", "gfind", "lower", "reverse", "sub", "upper"))}) do
  local original = S[name]
  S[name] = function(...) check(name, ...); return original(...) end
end
S.match = function(...)
  check("match", ...)
  local out = {{ s_match(...) }}
  if out[1] == nil then return end  -- gopher-lua returns no value at all without a match
  return unpack_(out)
end
-- Go's fmt prints these verbs of a float64 the way C does; the others differ (or print %!d(...)).
S.format = function(fmt, ...)
  check("format", fmt)
  local args = {{ ... }}
  local i, n, pos = 0, select_("#", ...), 1
  while true do
    local start, stop, verb = s_find(fmt, "%%[-+ #0]*%d*%.?%d*(.)", pos)
    if start == nil then break end
    pos = stop + 1
    if verb ~= "%" then
      i = i + 1
      if verb == "s" then
        if type_(args[i]) == "number" then args[i] = number_text(args[i]) end
      elseif verb ~= "f" and verb ~= "e" and verb ~= "E" and verb ~= "g" and verb ~= "G" then
        error_("string.format verb %" .. verb .. " is not emulated: gopher-lua formats with Go's fmt, "
          .. "which prints it differently (%d of a Lua number is %!d(lua.LNumber=...))", 2)
      end
    end
  end
  return s_format(fmt, unpack_(args, 1, n))
end
for _, name in ipairs({_lua_list(UNSUPPORTED_STRING)}) do
  S[name] = function()
    error_("The Lua function string." .. name .. " is not supported by Karmada. If you believe this "
      .. "function is essential for your use case, please submit an issue to let us know why you need it.", 2)
  end
end
S.gfind = S.gmatch
keep(S, {_lua_list(STRING + UNSUPPORTED_STRING)})

keep(table, {_lua_list(TABLE)})
keep(math, {_lua_list(MATH)})
G.os = {{ time = os_time, date = os_date }}

-- package: only the preload loader, only kube preloaded (loadlib_safe.go).
local kube = {{}}
for _, name in ipairs({_lua_list(KUBE)}) do
  kube[name] = function() error_("kube." .. name .. " is not emulated by the test sandbox", 2) end
end
for i = #package.loaders, 2, -1 do table.remove(package.loaders, i) end
keep(package, {{ "preload", "loaders", "loaded", "loadlib" }})
package.loadlib = function() error_("loadlib is not supported", 2) end
for k in pairs(package.preload) do package.preload[k] = nil end
package.preload.kube = function() return kube end
for k in pairs(package.loaded) do
  local keepit = false
  for _, lib in ipairs({_lua_list(LIBRARIES)}) do if k == lib then keepit = true end end
  if not keepit then package.loaded[k] = nil end
end
package.loaded.os = G.os

for _, name in ipairs({_lua_list(BLOCKED_BASE)}) do
  G[name] = function()
    error_("call function " .. name .. " is not supported in karmada customized resourceinterpreter.", 2)
  end
end
local allowed = {{}}
for _, n in ipairs({_lua_list(BASE + BLOCKED_BASE + LIBRARIES)}) do allowed[n] = true end
for k in pairs(G) do if not allowed[k] then G[k] = nil end end

-- the deadline, as an instruction budget that each call resets
local used = 0
local function reset()
  used = 0
  sethook(function()
    used = used + 10000
    if used > {INSTRUCTION_BUDGET} then error_("context deadline exceeded", 2) end
  end, "", 10000)
end
-- a table's identity (its address), for the encoder's one visited set over a whole result
local function identity(v) return tostring_(v) end
return reset, identity
"""


class EncodeError(ValueError):
    """A result Karmada could not JSON-encode: gopher-json's own words (``layeh.com/gopher-json``)."""


NESTED = "cannot encode recursively nested tables to JSON"
SPARSE = "cannot encode sparse array"
INVALID_KEYS = "cannot encode mixed or invalid key types"


@dataclass
class KarmadaLua:
    """One sandboxed state; ``run`` loads a script and calls one of its functions, as Karmada does."""

    runtime: Any
    _reset: Any
    _identity: Any

    @property
    def error(self) -> type[Exception]:
        """The exception a failing script raises (lupa.lua51's own LuaError)."""
        cls: type[Exception] = importlib.import_module(type(self.runtime).__module__).LuaError
        return cls

    def load(self, script: str) -> None:
        self._reset()
        self.runtime.execute(script)

    def call_raw(self, function: str, *args: Any) -> tuple[Any, ...]:
        """Call a global function of the loaded script with JSON-shaped arguments; its Lua return values."""
        self._reset()
        fn = self.runtime.globals()[function]
        if fn is None:
            raise LookupError(f"not found function {function}")
        result = fn(*(to_lua(self.runtime, a) for a in args))
        return result if isinstance(result, tuple) else (result,)

    def call(self, function: str, *args: Any) -> Any:
        """Call a global function of the loaded script; each return value as gopher-json encodes it
        (one visited set per value, as Karmada converts each separately), read back as JSON."""
        out = tuple(self.encode(r) for r in self.call_raw(function, *args))
        return out if len(out) > 1 else out[0]  # GetReplicas returns two

    def encode(self, value: Any) -> Any:
        """A Lua value as Karmada's ``luajson.Encode`` writes it, read back by a JSON decoder."""
        return json.loads(self.encode_text(value))

    def encode_text(self, value: Any) -> str:
        return _encode(self.runtime.globals().type, self._identity, value, set())

    def run(self, script: str, function: str, *args: Any) -> Any:
        self.load(script)
        return self.call(function, *args)


def karmada_lua() -> KarmadaLua:
    module = importlib.import_module("lupa.lua51")
    runtime = module.LuaRuntime(unpack_returned_tuples=True, register_eval=False, register_builtins=False)
    assert runtime.eval("_VERSION") == "Lua 5.1"
    reset, identity = runtime.execute(_PRELUDE)
    return KarmadaLua(runtime, reset, identity)


def to_lua(runtime: Any, value: Any) -> Any:
    """JSON-shaped Python data as Karmada hands it to a script (each map and list its own table)."""
    if isinstance(value, dict):
        return runtime.table_from({k: to_lua(runtime, v) for k, v in value.items() if v is not None})
    if isinstance(value, list):
        return runtime.table_from([to_lua(runtime, v) for v in value])
    return value


def go_float(value: float) -> str:
    """``json.Marshal(float64)``: the shortest text that reads back, plain for 1e-6 <= |v| < 1e21, else
    with an exponent of at least one digit (``1e+21``, ``1e-7``)."""
    if math.isnan(value) or math.isinf(value):
        raise EncodeError(f"json: unsupported value: {go_float_name(value)}")
    magnitude = abs(value)
    if magnitude == 0 or 1e-6 <= magnitude < 1e21:
        text = format(Decimal(repr(value)), "f")
        return text[:-2] if text.endswith(".0") else text
    text = repr(value)  # Python's shortest repr uses an exponent here, with at least two digits as Go's
    return text.replace("e-0", "e-")  # Go writes e-7 where Python writes e-07 (and keeps e+21)


def go_float_name(value: float) -> str:
    return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")


def _encode(lua_type: Any, identity: Any, value: Any, visited: set[str]) -> str:
    """gopher-json's ``jsonValue.MarshalJSON``: ONE visited set for the whole value, never emptied, so a
    table met twice anywhere fails (not only a cycle); no keys: ``[]``; number keys: a list that must
    run 1, 2, ... without a gap; string keys: an object; mixed keys fail; numbers are float64."""
    kind = lua_type(value)
    if kind == "nil":
        return "null"
    if kind == "boolean":
        return "true" if value else "false"
    if kind == "string":
        return json.dumps(value if isinstance(value, str) else bytes(value).decode("utf-8", "replace"))
    if kind == "number":
        return go_float(float(value))
    if kind != "table":
        raise EncodeError(f"cannot encode {kind} to JSON")
    key_of = identity(value)
    if key_of in visited:
        raise EncodeError(NESTED)
    visited.add(key_of)
    keys = list(value.keys())
    if not keys:
        return "[]"
    if lua_type(keys[0]) == "number":
        if not all(lua_type(k) == "number" for k in keys):
            raise EncodeError(INVALID_KEYS)
        if sorted(float(k) for k in keys) != [float(i) for i in range(1, len(keys) + 1)]:
            raise EncodeError(SPARSE)
        items = [_encode(lua_type, identity, value[i], visited) for i in range(1, len(keys) + 1)]
        return "[" + ",".join(items) + "]"
    if lua_type(keys[0]) == "string":
        if not all(lua_type(k) == "string" for k in keys):
            raise EncodeError(INVALID_KEYS)
        fields = {str(k): _encode(lua_type, identity, value[k], visited) for k in keys}
        return "{" + ",".join(f"{json.dumps(k)}:{fields[k]}" for k in sorted(fields)) + "}"
    raise EncodeError(f"cannot encode {lua_type(keys[0])} to JSON")


def _empty_fields(value: Any, path: tuple[str, ...], lists: set[str], maps: set[str]) -> None:
    items = value.items() if isinstance(value, dict) else ((None, v) for v in value)
    for key, child in items:
        at = (*path, str(key)) if key is not None else path
        if isinstance(child, list | dict) and not child:
            (lists if isinstance(child, list) else maps).add(".".join(at))
        elif isinstance(child, list | dict):
            _empty_fields(child, at, lists, maps)


def restore_empty(result: Any, *references: Any) -> Any:
    """Karmada's repair of an encoded result (``convertEmptySliceToEmptyStructPartly``): an empty ``[]``
    that was an empty map in a reference object becomes ``{}`` again, one found in neither is dropped."""
    lists: set[str] = set()
    maps: set[str] = set()
    for ref in references:
        if isinstance(ref, dict | list):
            _empty_fields(ref, (), lists, maps)

    def walk(value: Any, path: tuple[str, ...]) -> Any:
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                at = ".".join((*path, k))
                if v == [] and at in maps:
                    out[k] = {}
                elif v == [] and at not in lists:
                    continue
                else:
                    out[k] = walk(v, (*path, k))
            return out
        if isinstance(value, list):
            return [walk(v, path) for v in value]
        return value

    return walk(result, ())
