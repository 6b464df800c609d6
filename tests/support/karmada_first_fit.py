"""Karmada's own scheduler-estimator's count of complete component sets, transcribed for tests: the
baseline the packing trap (tests/e2e ``flows.placement``) must beat, kept apart from the product's
linear-time equivalent (``webhook/placement/firstfit.py``) so each checks the other.

Karmada v1.18.2 and v1.19 answer ``MaxAvailableComponentSets`` in
``pkg/estimator/server/framework/plugins/noderesource`` ``EstimateComponents``: every node's free
capacity (allocatable minus the requests of its pods, pod slots minus its pods), then
``pkg/estimator`` ``SchedulingSimulator.SimulateScheduling``, a first fit: set after set, each
component in the request's order (``scheduleComponentSet``), and for a component
(``scheduleComponent``) the nodes in snapshot order, skipping those ``MatchNode`` refuses (node affinity
with the node selector, NoSchedule/NoExecute taints against the tolerations), putting on each as many
of the replicas still to place as it holds (``MaxDivided`` of its free capacity by the request plus one
pod slot) and taking them off its capacity. The first component that cannot be placed in full ends the
count. No sorting, no backtracking. The snapshot's order is the scheduler cache's node tree: zone by
zone, round robin, each zone's nodes in the order the informer added them.
"""

from __future__ import annotations

from collections.abc import Sequence

from webhook.placement.model import UNLIMITED_PODS, Cluster, Component
from webhook.placement.quantity import PODS

INT32_MAX = 2**31 - 1  # SimulateScheduling's upper bound as EstimateComponents passes it


def _max_divided(free: dict[str, int], request: dict[str, int]) -> int:
    """Karmada's ``Resource.MaxDivided``: how many requests fit in ``free`` (a resource it lacks: none)."""
    fits = INT32_MAX
    for resource, need in request.items():
        if need > 0:
            fits = min(fits, free.get(resource, 0) // need)
    return fits


def karmada_first_fit(cluster: Cluster, components: Sequence[Component], upper_bound: int = INT32_MAX) -> int:
    """Complete sets of ``components`` Karmada's estimator counts on ``cluster``, its nodes in order."""
    free = [
        {**node.free, PODS: node.free.get(PODS, UNLIMITED_PODS)} for node in cluster.nodes
    ]  # a node without a pod limit only comes from resource models, never from the simulator
    sets = 0
    while sets < upper_bound:
        for component in components:
            per_replica = {**component.requests, PODS: 1}
            remaining = component.replicas
            for node, room in zip(cluster.nodes, free, strict=True):
                if remaining == 0:
                    break
                if not component.admits(node):
                    continue
                placed = min(remaining, _max_divided(room, per_replica))
                for resource, need in per_replica.items():
                    room[resource] = room.get(resource, 0) - need * placed
                remaining -= placed
            if remaining:
                return sets
        sets += 1
    return sets
