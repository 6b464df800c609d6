"""Karmada's estimator messages <-> placement components, read the way Karmada v1.18's server reads them.

Each ``*Bytes`` field wins when it is non-empty; otherwise the deprecated Kubernetes-message field is
used (v1.18's scheduler fills both, older or newer peers may fill only one). The decoded values go
through the placement parsers for a ResourceBinding's ``spec.components``, so a request and a binding
are validated by the same code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError

from webhook.estimator.proto import estimator_pb2 as pb
from webhook.estimator.proto import k8s_core_v1_pb2 as core
from webhook.estimator.proto import k8s_resource_pb2 as resource
from webhook.placement.components import components_from_karmada
from webhook.placement.errors import PlacementInputError
from webhook.placement.model import Component

REPLICA = "replica"  # the one component a MaxAvailableReplicas request describes


@dataclass(frozen=True)
class Invalid:
    """A request we cannot read; the gRPC edge answers it with INVALID_ARGUMENT."""

    message: str


def _quantities(deprecated: Any, raw: Any, where: str) -> dict[str, str]:
    if len(raw):
        out = {}
        for name in sorted(raw):
            try:
                out[name] = resource.Quantity.FromString(raw[name]).string
            except DecodeError as exc:
                raise PlacementInputError(
                    f"{where}.resourceRequestBytes.{name}: not a Quantity: {exc}"
                ) from exc
        return out
    return {name: deprecated[name].string for name in sorted(deprecated)}


def _as_dict(message: Any) -> dict[str, Any]:
    out: dict[str, Any] = json_format.MessageToDict(message, preserving_proto_field_name=True)
    return out


def _node_claim(claim: pb.NodeClaim, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {"nodeSelector": dict(claim.nodeSelector)}
    if claim.nodeAffinityBytes:
        try:
            affinity: Any = core.NodeSelector.FromString(claim.nodeAffinityBytes)
        except DecodeError as exc:
            raise PlacementInputError(f"{where}.nodeAffinityBytes: not a NodeSelector: {exc}") from exc
        out["hardNodeAffinity"] = _as_dict(affinity)
    elif claim.HasField("nodeAffinity"):
        out["hardNodeAffinity"] = _as_dict(claim.nodeAffinity)
    if claim.tolerationsBytes:
        tolerations = []
        for i, raw in enumerate(claim.tolerationsBytes):
            try:
                tolerations.append(core.Toleration.FromString(raw))
            except DecodeError as exc:
                raise PlacementInputError(f"{where}.tolerationsBytes[{i}]: not a Toleration: {exc}") from exc
    else:
        tolerations = list(claim.tolerations)
    out["tolerations"] = [_as_dict(t) for t in tolerations]
    return out


def _requirements(req: Any, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "resourceRequest": _quantities(req.resourceRequest, req.resourceRequestBytes, where),
        "priorityClassName": req.priorityClassName,
    }
    if req.HasField("nodeClaim"):
        out["nodeClaim"] = _node_claim(req.nodeClaim, f"{where}.nodeClaim")
    return out


def _components(items: Sequence[pb.Component], where: str) -> tuple[Component, ...]:
    raw = []
    for i, item in enumerate(items):
        at = f"{where}[{i}]"
        if item.replicas < 0:
            raise PlacementInputError(f"{at}.replicas: must be >= 0, got {item.replicas}")
        comp: dict[str, Any] = {"name": item.name, "replicas": item.replicas}
        if item.HasField("replicaRequirements"):
            comp["replicaRequirements"] = _requirements(item.replicaRequirements, f"{at}.replicaRequirements")
        raw.append(comp)
    return components_from_karmada(raw, where)


def components(items: Sequence[pb.Component], where: str = "components") -> tuple[Component, ...] | Invalid:
    """One workload's components (one set), in request order."""
    try:
        return _components(items, where)
    except PlacementInputError as exc:
        return Invalid(str(exc))


def assumed(workloads: Sequence[pb.AssumedWorkload]) -> list[tuple[Component, ...]] | Invalid:
    """The in-flight workloads whose one set each is deducted first; ones without components are skipped."""
    out = []
    for i, workload in enumerate(workloads):
        if not workload.components:
            continue
        comps = components(workload.components, f"assumedWorkloads[{i}].components")
        if isinstance(comps, Invalid):
            return comps
        out.append(comps)
    return out


def replica_component(req: pb.ReplicaRequirements) -> Component | Invalid:
    """A MaxAvailableReplicas request's requirements as one component of one replica."""
    try:
        raw = {
            "name": REPLICA,
            "replicas": 1,
            "replicaRequirements": _requirements(req, "replicaRequirements"),
        }
        return components_from_karmada([raw], "replicaRequirements")[0]
    except PlacementInputError as exc:
        return Invalid(str(exc))
