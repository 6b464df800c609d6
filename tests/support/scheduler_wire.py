"""Components encoded as Karmada's scheduler sends them to an estimator (what ``webhook.estimator.wire``
reads), for the estimator's tests and ``bench/estimator.py``."""

from __future__ import annotations

from webhook.estimator.proto import estimator_pb2 as pb
from webhook.estimator.proto import k8s_core_v1_pb2 as core
from webhook.estimator.proto import k8s_resource_pb2 as resource
from webhook.placement.model import Component
from webhook.placement.quantity import format_quantity


def _claim_pb(comp: Component, claim: pb.NodeClaim) -> None:
    claim.nodeSelector.update(comp.node_selector)
    for tol in comp.tolerations:
        message = core.Toleration(key=tol.key, operator=tol.operator, value=tol.value, effect=tol.effect)
        claim.tolerations.append(message)
        claim.tolerationsBytes.append(message.SerializeToString())
    if comp.affinity_terms is not None:
        selector = core.NodeSelector()
        for term in comp.affinity_terms:
            out = selector.nodeSelectorTerms.add()
            for req in term.requirements:
                target = out.matchFields if req.field else out.matchExpressions
                target.add(key=req.key, operator=req.operator, values=list(req.values))
        claim.nodeAffinity.CopyFrom(selector)
        claim.nodeAffinityBytes = selector.SerializeToString()


def component_pb(comp: Component) -> pb.Component:
    """A component as Karmada v1.18's scheduler sends it: deprecated and ``*Bytes`` fields both filled."""
    out = pb.Component(name=comp.name, replicas=comp.replicas)
    req = out.replicaRequirements
    req.priorityClassName = comp.priority_class
    for name, units in sorted(comp.requests.items()):
        quantity = resource.Quantity(string=format_quantity(name, units))
        req.resourceRequest[name].CopyFrom(quantity)
        req.resourceRequestBytes[name] = quantity.SerializeToString()
    if comp.node_selector or comp.tolerations or comp.affinity_terms is not None:
        _claim_pb(comp, req.nodeClaim)
    return out
