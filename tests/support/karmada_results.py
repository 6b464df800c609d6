"""A customization's operation run and its result converted as karmada-controller-manager converts it.

``convert`` calls the operation's entry point in the sandbox (``karmada_lua.py``) with the arguments
Karmada passes, then takes the result the path it takes in Karmada (``luavm/lua.go``, v1.18.2 and
v1.19): a number or a bool is read as it is; a table is encoded by gopher-json (one visited set for
the whole value, ``[]`` for an empty table), repaired by ``convertEmptySliceToEmptyStructPartly``
where Karmada repairs (an empty ``[]`` that was an empty map in an argument becomes ``{}`` again, an
unknown one is dropped) and decoded strictly into the operation's Go type (``karmada_shapes.py``).

The components list gets no repair here: an empty table where a map or struct belongs fails. Where
Karmada's repair may apply, it can only drop such a field, and a component that silently loses its
node selector is placed wrong; a script should never emit one.

Every failure is an exception: the script's own (``KarmadaLua.error``), ``EncodeError`` or
``DecodeError``. That is what makes the suite fail on a result Karmada cannot convert.
"""

from __future__ import annotations

from typing import Any

from tests.support.karmada_lua import KarmadaLua, restore_empty
from tests.support.karmada_shapes import (
    ANY,
    DEPENDENT_OBJECT_REFERENCE,
    REPLICA_REQUIREMENTS,
    DecodeError,
    List,
    decode,
    decode_components,
    decode_unstructured,
)

ENTRY_POINTS = {
    "retention": "Retain",
    "componentResource": "GetComponents",
    "replicaResource": "GetReplicas",
    "replicaRevision": "ReviseReplica",
    "statusReflection": "ReflectStatus",
    "statusAggregation": "AggregateStatus",
    "healthInterpretation": "InterpretHealth",
    "dependencyInterpretation": "GetDependencies",
}


def _lua_type(sandbox: KarmadaLua, value: Any) -> str:
    kind: str = sandbox.runtime.globals().type(value)
    return kind


def _table(sandbox: KarmadaLua, value: Any, what: str) -> Any:
    kind = _lua_type(sandbox, value)
    if kind != "table":
        raise DecodeError(f"{what}: expect the returned type is table but got {kind}")
    return value


def convert(
    sandbox: KarmadaLua,
    operation: str,
    obj: dict[str, Any],
    *,
    observed: dict[str, Any] | None = None,
    replicas: int = 3,
    items: list[dict[str, Any]] | None = None,
) -> Any:
    """Run ``operation`` of the loaded script on ``obj`` as Karmada does; its result as Karmada has it."""
    function = ENTRY_POINTS[operation]
    if operation == "componentResource":
        (raw,) = sandbox.call_raw(function, obj)[:1]
        return decode_components(sandbox.encode(_table(sandbox, raw, function)))
    if operation == "retention":
        (raw,) = sandbox.call_raw(function, obj, observed)[:1]
        encoded = sandbox.encode(_table(sandbox, raw, function))
        return decode_unstructured(restore_empty(encoded if encoded != [] else {}, obj, observed))
    if operation == "replicaResource":
        count, requirements = (*sandbox.call_raw(function, obj), None)[:2]
        if _lua_type(sandbox, count) != "number":
            raise DecodeError(f"{function}: result type {_lua_type(sandbox, count)} is not number")
        if requirements is None:
            return int(count), None
        encoded = sandbox.encode(_table(sandbox, requirements, function))
        return int(count), decode(restore_empty(encoded if encoded != [] else {}), REPLICA_REQUIREMENTS)
    if operation in ("replicaRevision", "statusAggregation"):
        extra: Any = replicas if operation == "replicaRevision" else (items or [])
        (raw,) = sandbox.call_raw(function, obj, extra)[:1]
        encoded = sandbox.encode(_table(sandbox, raw, function))
        return decode_unstructured(restore_empty(encoded if encoded != [] else {}))
    if operation == "statusReflection":
        (raw,) = sandbox.call_raw(function, obj)[:1]
        return decode(restore_empty(sandbox.encode(_table(sandbox, raw, function))), ANY)
    if operation == "healthInterpretation":
        (raw,) = sandbox.call_raw(function, obj)[:1]
        if _lua_type(sandbox, raw) != "boolean":
            raise DecodeError(f"{function}: result type {_lua_type(sandbox, raw)} is not bool")
        return bool(raw)
    if operation == "dependencyInterpretation":
        (raw,) = sandbox.call_raw(function, obj)[:1]
        return decode(sandbox.encode(_table(sandbox, raw, function)), List(DEPENDENT_OBJECT_REFERENCE))
    raise LookupError(f"no conversion known for operation {operation}")
