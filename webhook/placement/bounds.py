"""What no packing can beat, and what stops one more set: the upper bound, capacity left and the limit.

The upper bound is the minimum over groups of weighted capacity bounds: for weights w over the
group's components, k * (w . replicas) <= sum over nodes of max(w . p) over the node's feasible mixes p
(per component, per resource, per pod slot).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from webhook.placement.grouping import Group
from webhook.placement.model import Component
from webhook.placement.prepare import UNLIMITED, Prepared
from webhook.placement.quantity import format_quantity


class LimitCode(StrEnum):
    """Why a cluster holds no more sets than it does (as Karmada's estimator framework answers a code)."""

    NO_NODES = "NoNodes"  # the cluster has no nodes, or its resource models count none
    NO_ELIGIBLE_NODE = "NoEligibleNode"  # a component's filters rule out every node
    NO_ROOM = "NoRoom"  # eligible nodes exist, but none has room for one replica
    COMPONENT_CAPACITY = "ComponentCapacity"  # one component alone runs out first
    SHARED_NODES = "SharedNodes"  # components compete for the same nodes
    MAX_SETS = "MaxSets"  # the caller's cap stopped the count


@dataclass(frozen=True)
class Limit:
    """What stops one more set: a code to act on and the reasons, one per component concerned."""

    code: LimitCode
    reasons: tuple[str, ...]

    @property
    def message(self) -> str:
        return "; ".join(self.reasons)

    def __str__(self) -> str:
        return self.message


def group_bound(prep: Prepared, group: Group) -> int:
    """min over weight vectors w of floor(sum_nodes max_mix(w . p) / (w . replicas))."""
    comps = group.comps
    m = len(comps)
    reps = [prep.replicas[c] for c in comps]
    weights: list[tuple[tuple[int, ...], int | None]] = []
    for j in range(m):
        weights.append((tuple(1 if x == j else 0 for x in range(m)), None))
    # per resource: all components together, and (for small groups) every subset of two or more
    sizes = range(2, m + 1) if m <= 3 else (m,)
    for size in sizes:
        for subset in itertools.combinations(range(m), size):
            for d in range(len(prep.dims)):
                w = tuple(prep.requests[comps[j]][d] if j in subset else 0 for j in range(m))
                if any(w):
                    weights.append((w, d))
    best = UNLIMITED
    for w, dim in weights:
        need = sum(a * b for a, b in zip(w, reps, strict=True))
        if not need:
            continue
        total = 0
        for (vec, _elig, nodes), front in zip(group.classes, group.frontiers, strict=True):
            if front is not None:
                per = max([sum(map(operator.mul, w, p)) for p in front])
            else:
                i = nodes[0]
                per = sum(w[j] * prep.fits[comps[j]][i] for j in range(m))
                if dim is not None:
                    per = min(per, vec[dim])
            total += per * len(nodes)
        best = min(best, total // need)
    return best


def capacity_left(prep: Prepared, active: list[int]) -> tuple[float, str]:
    """Sets' worth of the scarcest requested resource left after one set, on nodes any component may use,
    and that resource's name ("" when no requested resource is bounded)."""
    usable: Sequence[bool] = prep.eligible[active[0]] if active else ()
    for c in active[1:]:
        usable = list(map(operator.or_, usable, prep.eligible[c]))
    best, scarcest = float("inf"), ""
    for d in range(len(prep.dims)):
        need = sum(prep.requests[c][d] * prep.replicas[c] for c in active)
        if not need:
            continue
        have = sum(itertools.compress(prep.columns[d], usable))
        if have >= UNLIMITED:
            continue
        if (have - need) / need < best:
            best, scarcest = (have - need) / need, prep.dims[d]
    return (0.0, "") if best == float("inf") else (round(best, 3), scarcest)


def cap_reached(max_sets: int) -> Limit:
    return Limit(LimitCode.MAX_SETS, (f"stopped at the cap of {max_sets} sets",))


def limit(prep: Prepared, components: Sequence[Component], active: list[int], sets: int) -> Limit:
    """Which component runs out first (single-component capacity), or which one has nowhere to go."""
    if not prep.names:
        return Limit(LimitCode.NO_NODES, ("the cluster has no nodes (or its resource models count none)",))
    notes: list[tuple[LimitCode, str]] = []
    for c in active:
        comp = components[c]
        if not any(prep.eligible[c]):
            notes.append(
                (
                    LimitCode.NO_ELIGIBLE_NODE,
                    f"component {comp.name}: no node passes its filters (selector, affinity, taints, cordon)",
                )
            )
        elif not any(prep.fits[c]):
            req = (
                ", ".join(f"{k}={format_quantity(k, v)}" for k, v in sorted(comp.requests.items()))
                or "a pod slot"
            )
            notes.append(
                (
                    LimitCode.NO_ROOM,
                    f"component {comp.name}: no eligible node has room for one replica ({req})",
                )
            )
    if notes:
        return Limit(notes[0][0], tuple(text for _code, text in notes))
    ratios = sorted((prep.totals[c] // prep.replicas[c], components[c].name, c) for c in active)
    per, name, c = ratios[0]
    if per <= sets:
        alone = f"eligible nodes hold {prep.totals[c]} replicas alone, {prep.replicas[c]} per set"
        return Limit(LimitCode.COMPONENT_CAPACITY, (f"component {name}: {alone}",))
    return Limit(
        LimitCode.SHARED_NODES,
        ("components share nodes: the best packing found leaves no room for another full set",),
    )
