"""Which components share nodes, and the shared nodes merged into classes that accept the same mixes.

Components that share no node with any other are independent. Components that share nodes form a group;
its nodes are merged into classes with the same set of feasible (n_1, ..., n_m) pod mixes (the Pareto
frontier of what fits), so thousands of nodes become a few hundred classes without losing anything:
equal frontiers accept exactly the same placements.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from webhook.placement.prepare import Prepared, fit_count

FRONTIER_LIMIT = 256  # two components: largest smaller fit walked per node for its frontier
FRONTIER_LIMIT_MANY = 48  # three or more: mixes enumerated per node before falling back to raw vectors

Mix = tuple[int, ...]  # replicas per component of a group on one node


class NodeClass(NamedTuple):
    """Nodes that accept the same mixes; ``vec`` is the free capacity of the first, as representative."""

    vec: tuple[int, ...]
    eligible: tuple[bool, ...]  # per component of the group
    nodes: list[int]


@dataclass
class Group:
    """Components linked by shared nodes, their node classes and each class's frontier (None: too many)."""

    comps: list[int]
    classes: list[NodeClass]
    frontiers: list[list[Mix] | None]


def component_groups(prep: Prepared, active: list[int]) -> list[list[int]]:
    """Components linked by a node that can hold both (union-find over shared nodes)."""
    parent = {c: c for c in active}

    def root(c: int) -> int:
        while parent[c] != c:
            parent[c] = parent[parent[c]]
            c = parent[c]
        return c

    for a, b in itertools.combinations(active, 2):
        if prep.signatures and not any(map(operator.and_, prep.signatures[a], prep.signatures[b])):
            continue  # no node kind admits both: no shared node, without walking every node
        if any(map(operator.mul, prep.fits[a], prep.fits[b])):
            parent[root(a)] = root(b)
    groups: dict[int, list[int]] = {}
    for c in active:
        groups.setdefault(root(c), []).append(c)
    return list(groups.values())


def _frontier(vec: Sequence[int], reqs: list[tuple[int, ...]], fits: list[int]) -> list[Mix] | None:
    """Pareto-maximal pod mixes that fit ``vec``; None when there are too many to enumerate."""
    m = len(reqs)
    if m == 2:
        return _frontier2(vec, reqs, fits) if min(fits) <= FRONTIER_LIMIT else None
    order = sorted(range(m), key=lambda j: fits[j])  # enumerate the small fits, solve the largest
    last = order[-1]
    ranges = [range(fits[j] + 1) for j in order[:-1]]
    size = 1
    for r in ranges:
        size *= len(r)
        if size > FRONTIER_LIMIT_MANY:
            return None
    points: list[tuple[int, ...]] = []
    dims = len(vec)
    for combo in itertools.product(*ranges):
        rem = list(vec)
        ok = True
        for j, count in zip(order[:-1], combo, strict=True):
            if count:
                req = reqs[j]
                for d in range(dims):
                    rem[d] -= count * req[d]
                    if rem[d] < 0:
                        ok = False
        if not ok:
            continue
        point = [0] * m
        for j, count in zip(order[:-1], combo, strict=True):
            point[j] = count
        point[last] = min(fits[last], fit_count(rem, reqs[last]))
        points.append(tuple(point))
    # keep the maximal ones
    points.sort(reverse=True)
    maximal: list[tuple[int, ...]] = []
    for p in points:
        if not any(all(a >= b for a, b in zip(q, p, strict=True)) for q in maximal):
            maximal.append(p)
    return sorted(maximal)


def _frontier2(vec: Sequence[int], reqs: list[tuple[int, ...]], fits: list[int]) -> list[tuple[int, ...]]:
    """Two components: walk the smaller fit down; the other's fit only grows, each rise is a maximal mix."""
    a, b = (0, 1) if fits[0] <= fits[1] else (1, 0)
    qa, qb = reqs[a], reqs[b]
    dims = [(vec[d], qa[d], qb[d]) for d in range(len(vec)) if qb[d]]
    points = []
    previous = -1
    for n in range(fits[a], -1, -1):
        other = min([(have - n * need_a) // need_b for have, need_a, need_b in dims])
        if other > previous:
            points.append((n, other) if a == 0 else (other, n))
            previous = other
    return sorted(points)


def build_group(prep: Prepared, comps: list[int]) -> Group:
    """The group of ``comps`` with its nodes merged into classes that accept the same mixes.

    Two passes, cheap first: nodes are bucketed by what describes them exactly (their fits and their free
    capacity at the requests' resolution), over whole columns; then buckets with equal frontiers merge
    into one class, so the frontier, the costly part, is computed once per bucket, not per node.
    """
    sub_reqs, per_dim = _resolution([prep.requests[c] for c in comps], len(prep.dims))
    buckets = _buckets(prep, comps, per_dim)
    classes, frontiers = _classes(prep, buckets, sub_reqs, len(comps))
    return Group(comps, classes, frontiers)


Resolution = list[tuple[int, int, list[int]]]  # (resource, step, each component's request in steps)


def _resolution(reqs: list[tuple[int, ...]], dims: int) -> tuple[list[tuple[int, ...]], Resolution]:
    """The requests in the resources some component of the group requests, divided by their gcd, and
    per such resource that step and the divided requests.

    Lossless: in each resource every mix uses a multiple of the requests' gcd, so free capacity divided
    by the gcd accepts exactly the same mixes, and nodes that differ only below that resolution share
    one frontier.
    """
    relevant = [d for d in range(dims) if any(r[d] for r in reqs)]
    step = [math.gcd(*(r[d] for r in reqs)) for d in relevant]
    sub_reqs = [tuple(r[d] // g for d, g in zip(relevant, step, strict=True)) for r in reqs]
    per_dim = [(d, g, [r[k] for r in sub_reqs]) for k, (d, g) in enumerate(zip(relevant, step, strict=True))]
    return sub_reqs, per_dim


def _buckets(prep: Prepared, comps: list[int], per_dim: Resolution) -> dict[tuple[int, ...], list[int]]:
    """The nodes some component of the group can use, by (fits, canonical free vector), in input order.

    Column by column (map over whole columns runs in C, which matters at 10,000 nodes). A node one
    component alone holds is described by its fit alone; a node two or more hold also by its free
    capacity in steps, clamped at what all its fits together could use (never more is used, so the
    clamp loses nothing and merges more nodes).
    """
    columns = [prep.fits[c] for c in comps]
    n = len(prep.names)
    holders = functools.reduce(
        lambda acc, col: list(map(operator.add, acc, map(bool, col))), columns, [0] * n
    )
    used = list(itertools.compress(range(n), holders))
    held = list(itertools.compress(holders, holders))
    fits = [list(map(col.__getitem__, used)) for col in columns]
    buckets: dict[tuple[int, ...], list[int]] = {}
    single = list(map((1).__eq__, held))
    _bucket(
        buckets,
        itertools.compress(used, single),
        zip(*(itertools.compress(f, single) for f in fits), strict=True),
    )
    shared = list(map((1).__lt__, held))
    nodes2 = list(itertools.compress(used, shared))
    picked = [list(itertools.compress(f, shared)) for f in fits]
    size = len(nodes2)
    sub_columns = []
    for d, g, needs in per_dim:
        most: Iterable[int] | None = None  # never more than all the node's fits together
        for col, need in zip(picked, needs, strict=True):
            if need:
                term = col if need == 1 else map(operator.mul, col, itertools.repeat(need, size))
                most = term if most is None else map(operator.add, most, term)
        free: Iterable[int] = map(prep.columns[d].__getitem__, nodes2)
        if g != 1:
            free = map(operator.floordiv, free, itertools.repeat(g, size))
        sub_columns.append(list(map(min, free, most)) if most is not None else [0] * size)
    _bucket(buckets, nodes2, zip(*picked, *sub_columns, strict=True))
    return buckets


def _classes(
    prep: Prepared, buckets: dict[tuple[int, ...], list[int]], sub_reqs: list[tuple[int, ...]], m: int
) -> tuple[list[NodeClass], list[list[Mix] | None]]:
    """Buckets merged by their frontier (by their exact row when it is too large to enumerate), in
    order of first node, each class's nodes in input order, and each class's frontier."""
    keyed: dict[object, int] = {}
    classes: list[NodeClass] = []
    frontiers: list[list[Mix] | None] = []
    merged: set[int] = set()  # classes that got several buckets: their nodes are sorted afterwards
    for row, nodes in sorted(buckets.items(), key=lambda item: item[1][0]):  # in order of first node
        fit_row, sub = row[:m], row[m:]
        holding = m - fit_row.count(0)
        front = [fit_row] if holding == 1 else _frontier(sub, sub_reqs, list(fit_row))
        key = ("f", tuple(front)) if front is not None else ("v", (sub, fit_row))
        at = keyed.get(key)
        if at is None:
            at = keyed[key] = len(classes)
            vec = tuple(col[nodes[0]] for col in prep.columns)  # the first node stands for the class
            classes.append(NodeClass(vec, tuple(x > 0 for x in fit_row), nodes))
            frontiers.append(front)
        else:
            classes[at].nodes.extend(nodes)
            merged.add(at)
    for at in merged:
        classes[at].nodes.sort()  # input order, as if appended node by node
    return classes, frontiers


def _bucket(
    buckets: dict[tuple[int, ...], list[int]], nodes: Iterable[int], rows: Iterable[tuple[int, ...]]
) -> None:
    """Appends each node to the bucket of its row (a new bucket for a row not seen yet)."""
    for i, row in zip(nodes, rows, strict=True):
        got = buckets.get(row)
        if got is None:
            buckets[row] = [i]
        else:
            got.append(i)
