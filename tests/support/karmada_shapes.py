"""A script's encoded result decoded into the Go type Karmada decodes it into, strictly.

karmada-controller-manager turns a script's result into JSON (gopher-json, ``karmada_lua.py``), then
``json.Unmarshal``s it into the Go type of the operation (``luavm/lua.go``). Go refuses a JSON array
where a struct or map is expected (an empty Lua table is ``[]``), a number with a fraction or out of
range for an int32, a string for a number and a number for a string. This decoder refuses the same,
and more: a field the Go type does not have, or one spelled in another case (Go would drop it, or
match it case-insensitively, and the script would have a silent bug). ``null`` is accepted anywhere,
as Go leaves the field at its zero value.

The shapes are Karmada v1.18.2's and v1.19's (unchanged between them; ``../shared/DESIGN.md`` §10):
``workv1alpha2.Component`` for ``GetComponents``, ``ReplicaRequirements`` for ``GetReplicas``, an
``unstructured.Unstructured`` (an object with ``kind``) for ``Retain``, ``ReviseReplica`` and
``AggregateStatus``, a ``runtime.RawExtension`` for ``ReflectStatus``, a bool for ``InterpretHealth``,
``[]DependentObjectReference`` for ``GetDependencies``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.support.karmada_quantity import parse as parse_quantity


class DecodeError(ValueError):
    """What Go's json.Unmarshal (made strict) says about a result, with the field's path."""


@dataclass(frozen=True)
class Scalar:
    go: str  # string, bool, int32, int64, quantity, any


@dataclass(frozen=True)
class Map:
    value: Any


@dataclass(frozen=True)
class List:
    item: Any


@dataclass(frozen=True)
class Struct:
    go: str
    fields: dict[str, Any]


STRING, BOOL, INT32, INT64, QUANTITY, ANY = (
    Scalar(n) for n in ("string", "bool", "int32", "int64", "quantity", "any")
)

LABEL_SELECTOR_REQUIREMENT = Struct(
    "metav1.LabelSelectorRequirement", {"key": STRING, "operator": STRING, "values": List(STRING)}
)
LABEL_SELECTOR = Struct(
    "metav1.LabelSelector", {"matchLabels": Map(STRING), "matchExpressions": List(LABEL_SELECTOR_REQUIREMENT)}
)
NODE_SELECTOR_REQUIREMENT = Struct(
    "corev1.NodeSelectorRequirement", {"key": STRING, "operator": STRING, "values": List(STRING)}
)
NODE_SELECTOR = Struct(
    "corev1.NodeSelector",
    {
        "nodeSelectorTerms": List(
            Struct(
                "corev1.NodeSelectorTerm",
                {
                    "matchExpressions": List(NODE_SELECTOR_REQUIREMENT),
                    "matchFields": List(NODE_SELECTOR_REQUIREMENT),
                },
            )
        )
    },
)
TOLERATION = Struct(
    "corev1.Toleration",
    {"key": STRING, "operator": STRING, "value": STRING, "effect": STRING, "tolerationSeconds": INT64},
)
NODE_CLAIM = Struct(
    "workv1alpha2.NodeClaim",
    {"hardNodeAffinity": NODE_SELECTOR, "nodeSelector": Map(STRING), "tolerations": List(TOLERATION)},
)
REPLICA_REQUIREMENTS = Struct(
    "workv1alpha2.ReplicaRequirements",
    {
        "nodeClaim": NODE_CLAIM,
        "resourceRequest": Map(QUANTITY),
        "namespace": STRING,
        "priorityClassName": STRING,
    },
)
COMPONENT = Struct(
    "workv1alpha2.Component",
    {"name": STRING, "replicas": INT32, "replicaRequirements": REPLICA_REQUIREMENTS},
)
DEPENDENT_OBJECT_REFERENCE = Struct(
    "configv1alpha1.DependentObjectReference",
    {
        "apiVersion": STRING,
        "kind": STRING,
        "namespace": STRING,
        "name": STRING,
        "labelSelector": LABEL_SELECTOR,
    },
)

_JSON_KIND = {dict: "object", list: "array", str: "string", bool: "bool", int: "number", float: "number"}


def _kind(value: Any) -> str:
    return _JSON_KIND.get(type(value), type(value).__name__)


def decode(value: Any, shape: Any, path: str = "") -> Any:
    """``value`` (as read back from the encoded JSON) decoded into ``shape``; DecodeError otherwise."""
    if value is None:
        return None
    where = path or "(result)"
    if isinstance(shape, Struct | Map):
        go = shape.go if isinstance(shape, Struct) else f"map[string]{_go_name(shape.value)}"
        if not isinstance(value, dict):
            hint = " (an empty Lua table is encoded as [])" if value == [] else ""
            raise DecodeError(f"{where}: cannot unmarshal {_kind(value)} into Go value of type {go}{hint}")
        if isinstance(shape, Map):
            return {k: decode(v, shape.value, f"{path}.{k}" if path else k) for k, v in value.items()}
        for key in value:
            if key not in shape.fields:
                near = [f for f in shape.fields if f.lower() == key.lower()]
                detail = f" (Go would read it as {near[0]!r})" if near else " (Go would drop it)"
                raise DecodeError(f"{where}: unknown field {key!r} in {go}{detail}")
        return {k: decode(v, shape.fields[k], f"{path}.{k}" if path else k) for k, v in value.items()}
    if isinstance(shape, List):
        if not isinstance(value, list):
            raise DecodeError(
                f"{where}: cannot unmarshal {_kind(value)} into Go value of type []{_go_name(shape.item)}"
            )
        return [decode(v, shape.item, f"{path}[{i}]") for i, v in enumerate(value)]
    return _scalar(value, shape, where)


def _scalar(value: Any, shape: Scalar, where: str) -> Any:
    go = shape.go
    if go == "any":
        return value
    if go == "string" and isinstance(value, str):
        return value
    if go == "bool" and isinstance(value, bool):
        return value
    if go in ("int32", "int64") and isinstance(value, int) and not isinstance(value, bool):
        bits = 31 if go == "int32" else 63
        if -(1 << bits) <= value < (1 << bits):
            return value
        raise DecodeError(f"{where}: cannot unmarshal number {value} into Go value of type {go}")
    if go in ("int32", "int64") and isinstance(value, float):
        raise DecodeError(f"{where}: cannot unmarshal number {value!r} into Go value of type {go}")
    if go == "quantity" and isinstance(value, str | int | float) and not isinstance(value, bool):
        try:
            parse_quantity(str(value).strip())
        except ValueError as exc:
            raise DecodeError(f"{where}: {exc}") from None
        return value
    raise DecodeError(f"{where}: cannot unmarshal {_kind(value)} into Go value of type {_go_name(shape)}")


def _go_name(shape: Any) -> str:
    if isinstance(shape, Struct):
        return shape.go
    if isinstance(shape, Map):
        return f"map[string]{_go_name(shape.value)}"
    if isinstance(shape, List):
        return f"[]{_go_name(shape.item)}"
    return {"quantity": "resource.Quantity", "any": "interface {}"}.get(shape.go, shape.go)


def decode_unstructured(value: Any, path: str = "") -> dict[str, Any]:
    """``unstructured.Unstructured.UnmarshalJSON``: an object that names its kind."""
    if not isinstance(value, dict):
        raise DecodeError(f"{path or '(result)'}: cannot unmarshal {_kind(value)} into an object")
    if not isinstance(value.get("kind"), str) or not value["kind"]:
        raise DecodeError(f"{path or '(result)'}: Object 'Kind' is missing")
    return value


def decode_components(value: Any) -> list[dict[str, Any]]:
    """``[]workv1alpha2.Component``, plus what Karmada then requires of the list (a name each, unique)."""
    out: list[dict[str, Any]] = decode(value, List(COMPONENT))
    names = [c.get("name") for c in out]
    if not names or any(not n for n in names) or len(set(names)) != len(names):
        raise DecodeError(f"(result): components need a unique, non-empty name each: {names}")
    return out
