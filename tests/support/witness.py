"""Check a witness against the cluster it claims to fit: the proof behind every reported set count."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from webhook.placement.model import Cluster, Component, Node
from webhook.placement.quantity import PODS


def witness_problems(
    cluster: Cluster, components: Sequence[Component], sets: int, assignment: Mapping[str, Mapping[str, int]]
) -> list[str]:
    """Everything wrong with ``assignment`` as a placement of ``sets`` complete sets (empty: valid)."""
    problems = []
    nodes = {n.name: n for n in cluster.nodes}
    used: dict[str, dict[str, int]] = {}
    for comp in components:
        placed = assignment.get(comp.name, {})
        total = sum(placed.values())
        if total != sets * comp.replicas:
            problems.append(f"{comp.name}: {total} replicas placed, {sets} sets need {sets * comp.replicas}")
        for node_name, count in placed.items():
            node = nodes.get(node_name)
            if node is None:
                problems.append(f"{comp.name}: unknown node {node_name!r}")
                continue
            if count < 0:
                problems.append(f"{comp.name}: negative count on {node_name}")
            if count and not comp.admits(node):
                problems.append(f"{comp.name}: node {node_name} fails its filters")
            slot = used.setdefault(node_name, {})
            for resource, amount in comp.requests.items():
                slot[resource] = slot.get(resource, 0) + amount * count
            slot[PODS] = slot.get(PODS, 0) + count
    for extra in set(assignment) - {c.name for c in components}:
        problems.append(f"unknown component {extra!r} in assignment")
    for node_name, slot in used.items():
        node = nodes[node_name]
        for resource, amount in slot.items():
            have = free_of(node, resource)
            if have is not None and amount > have:
                problems.append(f"{node_name}: {resource} over capacity ({amount} > {have})")
    return problems


def free_of(node: Node, resource: str) -> int | None:
    """What ``node`` has free of ``resource``; None: unlimited (only ``pods``, on resource-model nodes)."""
    if resource == PODS and PODS not in node.free:
        return None
    return node.free.get(resource, 0)
