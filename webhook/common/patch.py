"""JSON Patch (RFC 6902) ops that bring an object to the fields a decision requires.

A broken patch becomes an internal error in kube-apiserver even under ``failurePolicy: Ignore``, so
every op is computed against the exact object it will be applied to: missing parents are added whole,
keys are escaped (``~`` -> ``~0``, ``/`` -> ``~1``), unchanged values produce no op.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict


class Op(TypedDict):
    """One JSON Patch operation; only ``add`` and ``replace`` are ever produced."""

    op: Literal["add", "replace"]
    path: str
    value: Any


def escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def set_fields(obj: Mapping[str, Any], path: tuple[str, ...], values: Mapping[str, Any]) -> list[Op]:
    """Ops that make ``obj[path...][k] == v`` for every item; parents that are missing are created."""
    if not values:
        return []
    node: Any = obj
    pointer = ""
    for depth, key in enumerate(path):
        child = node.get(key) if isinstance(node, Mapping) else None
        if not isinstance(child, Mapping):
            # Build the missing (or non-object) remainder in one op.
            value: Any = dict(values)
            for inner in reversed(path[depth + 1 :]):
                value = {inner: value}
            kind: Literal["add", "replace"] = (
                "replace" if isinstance(node, Mapping) and key in node else "add"
            )
            return [{"op": kind, "path": f"{pointer}/{escape(key)}", "value": value}]
        node = child
        pointer += f"/{escape(key)}"
    ops: list[Op] = []
    for key, value in values.items():
        if key in node:
            if node[key] != value:
                ops.append({"op": "replace", "path": f"{pointer}/{escape(key)}", "value": value})
        else:
            ops.append({"op": "add", "path": f"{pointer}/{escape(key)}", "value": value})
    return ops


def object_ops(
    obj: Mapping[str, Any],
    spec_job: Mapping[str, str],
    annotations: Mapping[str, str],
    labels: Mapping[str, str] | None = None,
    job_path: tuple[str, ...] = ("spec", "job"),
) -> list[Op]:
    """The ops that give a Flink object a decision's job fields, annotations and labels (not a fencing
    ``Plan``: those are effects). ``job_path``: where the kind keeps its job (a FlinkBlueGreenDeployment:
    in its template)."""
    return (
        set_fields(obj, job_path, spec_job)
        + set_fields(obj, ("metadata", "annotations"), annotations)
        + set_fields(obj, ("metadata", "labels"), labels or {})
    )
