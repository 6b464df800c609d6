"""Turn a cluster and a workload into integer vectors: the only form the estimators compute on.

Node filters are evaluated once per distinct (labels, taints, unschedulable) signature, because large
clusters repeat a handful of node kinds; free capacity becomes a tuple over the resources the workload
asks for, plus the pod slot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from webhook.placement.model import Cluster, Component, Node
from webhook.placement.quantity import PODS

UNLIMITED = 10**9  # stands in for "no pod limit" (Karmada resource-model nodes), and caps any fit


@dataclass(frozen=True)
class Prepared:
    """Components c and nodes i as plain integer data (``fits[c][i]``: replicas of c node i holds alone)."""

    dims: tuple[str, ...]  # resource names; the last one is always "pods"
    names: tuple[str, ...]  # node names, input order
    vecs: tuple[tuple[int, ...], ...]  # free capacity per node over dims
    requests: tuple[tuple[int, ...], ...]  # per component over dims (pods = 1)
    replicas: tuple[int, ...]
    eligible: tuple[tuple[bool, ...], ...]  # [c][i]: node passes c's filters
    fits: tuple[tuple[int, ...], ...]  # [c][i]


def fit_count(vec: Sequence[int], req: Sequence[int]) -> int:
    """How many pods of request ``req`` fit in free vector ``vec`` (capped at UNLIMITED)."""
    best = UNLIMITED
    for have, need in zip(vec, req, strict=True):
        if need:
            n = have // need
            if n < best:
                best = n
    return best


def _signature(node: Node, by_name: bool) -> tuple[object, ...]:
    # Label order from one source is stable, so no sorting: a different order only misses the cache.
    return (tuple(node.labels.items()), node.taints, node.unschedulable, node.name if by_name else "")


def prepare(cluster: Cluster, components: Sequence[Component]) -> Prepared:
    dims_set = {r for c in components for r, v in c.requests.items() if v > 0 and r != PODS}
    dims = (*sorted(dims_set), PODS)
    requests = tuple(tuple(c.requests.get(d, 0) for d in dims[:-1]) + (1,) for c in components)
    by_name = any(
        req.field for c in components for term in (c.affinity_terms or ()) for req in term.requirements
    )
    resources = dims[:-1]
    cache: dict[tuple[object, ...], tuple[bool, ...]] = {}
    vecs = []
    eligible: list[list[bool]] = [[] for _ in components]
    fits: list[list[int]] = [[] for _ in components]
    for node in cluster.nodes:
        sig = _signature(node, by_name)
        elig = cache.get(sig)
        if elig is None:
            elig = tuple(c.admits(node) for c in components)
            cache[sig] = elig
        free = node.free
        vt = (*[free.get(d, 0) for d in resources], free.get(PODS, UNLIMITED))
        vecs.append(vt)
        for ci, req in enumerate(requests):
            eligible[ci].append(elig[ci])
            fits[ci].append(fit_count(vt, req) if elig[ci] else 0)
    return Prepared(
        dims=dims,
        names=tuple(n.name for n in cluster.nodes),
        vecs=tuple(vecs),
        requests=requests,
        replicas=tuple(c.replicas for c in components),
        eligible=tuple(tuple(e) for e in eligible),
        fits=tuple(tuple(x) for x in fits),
    )
