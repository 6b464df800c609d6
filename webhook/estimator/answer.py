"""The estimator's answers, computed from a cluster snapshot: pure functions, no gRPC, no API server.

Sets come from the placement estimate (sound, with a witness; never fewer than Karmada's first fit).
Assumed workloads (in flight, not yet bound) are deducted first the way Karmada's estimator deducts them:
each places one full set first-fit on the free capacity, and that capacity is gone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import heapq
import itertools
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from webhook.placement.estimate import Estimate, estimate
from webhook.placement.firstfit import first_fit
from webhook.placement.model import Cluster, Component, frozen_units
from webhook.placement.prepare import prepare

INT32_MAX = 2**31 - 1  # the answers are int32 on the wire


@dataclass(frozen=True)
class Answer:
    value: int  # what goes on the wire
    estimate: Estimate  # with the witness assignment, for logs and the debug endpoint
    deducted_sets: int  # assumed workloads that were placed (and deducted) before estimating


def deduct(cluster: Cluster, workloads: Sequence[Sequence[Component]]) -> tuple[Cluster, int]:
    """The cluster after one first-fit set of each workload in turn; and how many of them fitted.

    A workload whose set no longer fits deducts nothing (its first fit places no partial set).
    """
    if not workloads:
        return cluster, 0
    nodes = list(cluster.nodes)
    placed_sets = 0
    current = cluster
    for comps in workloads:
        prep = prepare(current, comps)
        sets, placed = first_fit(prep, 1)
        if not sets:
            continue
        placed_sets += 1
        used: dict[int, dict[str, int]] = {}
        for c, per_node in enumerate(placed):
            for i, count in per_node.items():
                row = used.setdefault(i, {})
                for d, dim in enumerate(prep.dims):
                    row[dim] = row.get(dim, 0) + count * prep.requests[c][d]
        for i, take in used.items():
            node = nodes[i]
            free = dict(node.free)
            for dim, amount in take.items():
                if dim in free:
                    free[dim] = max(0, free[dim] - amount)
            nodes[i] = dataclasses.replace(node, free=frozen_units(free))
        current = dataclasses.replace(cluster, nodes=tuple(nodes))
    return current, placed_sets


class _CycleCollectionPause:
    """No cyclic garbage collection while any answer is being computed.

    A full collection walks every object of the process (a 10,000-node snapshot is hundreds of
    thousands), which put tens of milliseconds into some answers (the p99); the estimate creates no
    cycles, so collections wait until no answer is in flight. Reference counting frees as usual.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in_flight = 0
        self._restore = False

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            self._in_flight += 1
            if self._in_flight == 1:
                self._restore = gc.isenabled()
                gc.disable()
        try:
            yield
        finally:
            with self._lock:
                self._in_flight -= 1
                if not self._in_flight and self._restore:
                    gc.enable()


_no_cycle_collection = _CycleCollectionPause()


def component_sets(
    cluster: Cluster, components: Sequence[Component], assumed: Sequence[Sequence[Component]] = ()
) -> Answer:
    """MaxAvailableComponentSets: complete sets of ``components`` that fit after the assumed workloads."""
    with _no_cycle_collection():
        free, deducted = deduct(cluster, assumed)
        result = estimate(free, components, INT32_MAX, selection=False)
    return Answer(min(result.sets, INT32_MAX), result, deducted)


def replicas(cluster: Cluster, component: Component, assumed: Sequence[Sequence[Component]] = ()) -> Answer:
    """MaxAvailableReplicas: replicas of one pod shape that fit, summed over eligible nodes."""
    single = dataclasses.replace(component, replicas=1)
    return component_sets(cluster, (single,), assumed)


def witness_summary(answer: Answer) -> Mapping[str, object]:
    """A log/debug rendering: per component, how many replicas on how many nodes, and the busiest nodes."""
    est = answer.estimate
    per_component = {}
    for comp, nodes in est.assignment.items():
        busiest = _busiest(nodes, 5)
        per_component[comp] = {"replicas": sum(nodes.values()), "nodes": len(nodes), "busiest": dict(busiest)}
    return {
        "sets": est.sets,
        "upperBound": est.upper_bound,
        "firstFitSets": est.first_fit_sets,
        "limit": {"code": est.limit.code.value, "message": est.limit.message},
        "elapsedMs": est.elapsed_ms,
        "deductedAssumedSets": answer.deducted_sets,
        "assignment": per_component,
    }


def _busiest(nodes: Mapping[str, int], k: int) -> list[tuple[str, int]]:
    """The k nodes with the most replicas (ties by name), without sorting thousands of nodes."""
    if len(nodes) > k:
        kth = heapq.nlargest(k, nodes.values())[-1]
        nodes = dict(itertools.compress(nodes.items(), map(kth.__le__, nodes.values())))
    return heapq.nsmallest(k, nodes.items(), key=lambda kv: (-kv[1], kv[0]))
