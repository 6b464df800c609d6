"""How many complete component sets fit one cluster: a witness assignment, and a bound nothing can beat.

Method, in order of cost:

1. Components that share no node with any other are independent: for them the count is exact,
   floor(sum of per-node fits / replicas), and a greedy fill is its witness.
2. Components that share nodes form a group. Nodes of a group are merged into classes with the same
   set of feasible (n_1, ..., n_m) pod mixes (the Pareto frontier of what fits), so thousands of nodes
   become a few hundred classes without losing anything: equal frontiers accept exactly the same
   placements. The search probes the upper bound first, then binary-searches below it, running a
   greedy packing (several component orders and node orders) on the classes.
3. When a packing misses the bound, Karmada's own first fit runs too (it also becomes the search's low
   end), and the larger answer is returned with its witness, so the answer is never below Karmada's.

The upper bound is the minimum over groups of weighted capacity bounds: for weights w over the
group's components, k * (w . replicas) <= sum over nodes of max(w . p) over the node's feasible mixes p
(per component, per resource, per pod slot), which no packing can beat.
"""

from __future__ import annotations

import itertools
import math
import operator
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from webhook.placement.firstfit import first_fit
from webhook.placement.model import Cluster, Component
from webhook.placement.prepare import UNLIMITED, Prepared, fit_count, prepare
from webhook.placement.quantity import format_quantity

FRONTIER_LIMIT = 256  # two components: largest smaller fit walked per node for its frontier
FRONTIER_LIMIT_MANY = 48  # three or more: mixes enumerated per node before falling back to raw vectors
SEARCH_BUDGET_S = 1.0  # packing variants stop being tried after this long (the answer stays sound)
FIRST_FIT_LIMIT = 1_000_000  # beyond this many sets the bound is degenerate (no requests, no pod limit)


@dataclass(frozen=True)
class Estimate:
    """One cluster's answer; ``assignment`` (component -> node -> replicas) places exactly ``sets`` sets."""

    cluster: str
    sets: int
    upper_bound: int
    assignment: Mapping[str, Mapping[str, int]]
    elapsed_ms: float
    first_fit_sets: int  # -1 when first fit was not needed (the answer met the bound or the cap)
    capacity_left: float  # sets' worth of the scarcest requested resource left after one set
    limit: str  # what stops one more set (or why none fits)
    not_ready: str = ""
    scarcest: str = ""  # the requested resource with the fewest sets' worth left ("" when none is bounded)
    method: str = field(default="", compare=False)


@dataclass
class _Bucket:
    """Nodes that currently accept exactly the same placements; ``vec`` is one of them, as representative."""

    vec: list[int]
    elig: tuple[bool, ...]
    nodes: list[int]


@dataclass
class _Group:
    comps: list[int]
    classes: list[tuple[tuple[int, ...], tuple[bool, ...], list[int]]]  # (vec, eligible, nodes)
    frontiers: list[list[tuple[int, ...]] | None]


def _groups(prep: Prepared, active: list[int]) -> list[list[int]]:
    """Components linked by a node that can hold both (union-find over shared nodes)."""
    parent = {c: c for c in active}

    def root(c: int) -> int:
        while parent[c] != c:
            parent[c] = parent[parent[c]]
            c = parent[c]
        return c

    for a, b in itertools.combinations(active, 2):
        if any(map(operator.mul, prep.fits[a], prep.fits[b])):
            parent[root(a)] = root(b)
    groups: dict[int, list[int]] = {}
    for c in active:
        groups.setdefault(root(c), []).append(c)
    return list(groups.values())


def _frontier(
    vec: Sequence[int], reqs: list[tuple[int, ...]], fits: list[int]
) -> list[tuple[int, ...]] | None:
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


def _build_group(prep: Prepared, comps: list[int]) -> _Group:
    reqs = [prep.requests[c] for c in comps]
    relevant = [d for d in range(len(prep.dims)) if any(r[d] for r in reqs)]
    keyed: dict[object, int] = {}
    classes: list[tuple[tuple[int, ...], tuple[bool, ...], list[int]]] = []
    frontiers: list[list[tuple[int, ...]] | None] = []
    # Lossless canonical form: in each resource every mix uses a multiple of the requests' gcd, and never
    # more than all the node's fits together, so free capacity is divided by the gcd and clamped there.
    # Nodes that differ only below that resolution share one frontier, computed once.
    step = [math.gcd(*(r[d] for r in reqs)) for d in relevant]
    sub_reqs = [tuple(r[d] // g for d, g in zip(relevant, step, strict=True)) for r in reqs]
    memo: dict[tuple[tuple[int, ...], ...], int] = {}  # canonical node -> class
    per_dim = [(d, g, [r[k] for r in sub_reqs]) for k, (d, g) in enumerate(zip(relevant, step, strict=True))]
    columns = [prep.fits[c] for c in comps]
    for i, fit_row in enumerate(zip(*columns, strict=True)):
        holders = len(fit_row) - fit_row.count(0)
        if not holders:
            continue
        vec = prep.vecs[i]
        if holders == 1:  # one component only: its fit says everything
            memo_key: tuple[tuple[int, ...], ...] = (fit_row,)
        else:
            fits = list(fit_row)
            sub = tuple(min(vec[d] // g, sum(map(operator.mul, fits, needs))) for d, g, needs in per_dim)
            memo_key = (sub, fit_row)
        at = memo.get(memo_key)
        if at is None:
            front = [fit_row] if holders == 1 else _frontier(memo_key[0], sub_reqs, list(fit_row))
            key = ("f", tuple(front)) if front is not None else ("v", memo_key)
            at = keyed.get(key)
            if at is None:
                at = keyed[key] = len(classes)
                classes.append((vec, tuple(x > 0 for x in fit_row), []))
                frontiers.append(front)
            memo[memo_key] = at
        classes[at][2].append(i)
    return _Group(comps, classes, frontiers)


def _group_bound(prep: Prepared, group: _Group) -> int:
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


def _orders(prep: Prepared, group: _Group) -> list[list[int]]:
    """Component orders to try, likeliest first: most constrained (fewest sets on its own), largest
    dominant share of the group's free capacity; then every other order for groups of up to 3."""
    idx = list(range(len(group.comps)))
    caps = [sum(prep.fits[c]) / max(1, prep.replicas[c]) for c in group.comps]
    totals = [0] * len(prep.dims)
    for vec, _elig, nodes in group.classes:
        for d, have in enumerate(vec):
            totals[d] += have * len(nodes)
    share = [
        max((q / totals[d] for d, q in enumerate(prep.requests[c]) if q and totals[d]), default=0.0)
        for c in group.comps
    ]
    orders = [sorted(idx, key=lambda j: caps[j]), sorted(idx, key=lambda j: -share[j]), idx]
    if len(idx) <= 3:
        orders += [list(p) for p in itertools.permutations(idx)]
    unique: list[list[int]] = []
    for o in orders:
        if o not in unique:
            unique.append(o)
    return unique


def _pack(
    prep: Prepared, group: _Group, k: int, order: list[int], rule: str
) -> list[tuple[int, list[int], int]] | None:
    """Greedy packing of k sets on the group's classes; placements (component, nodes, each) or None."""
    comps = group.comps
    reqs = [prep.requests[c] for c in comps]
    buckets = [_Bucket(list(vec), elig, list(nodes)) for vec, elig, nodes in group.classes]
    need = [k * prep.replicas[c] for c in comps]
    placements: list[tuple[int, list[int], int]] = []
    for pos, j in enumerate(order):
        if not need[j]:
            continue
        later = order[pos + 1 :]
        req = reqs[j]
        scored = []
        for b in buckets:
            if not b.elig[j] or not b.nodes:
                continue
            fit = fit_count(b.vec, req)
            if not fit:
                continue
            others = [x for x in later if b.elig[x] and need[x]]
            score: float
            if rule == "input":
                score = b.nodes[0]
            elif rule == "big":
                score = -fit
            else:  # harm: replicas of the components still to place lost per replica placed here
                after = [h - fit * q for h, q in zip(b.vec, req, strict=True)]
                harm = 0.0
                for x in others:
                    harm += (fit_count(b.vec, reqs[x]) - fit_count(after, reqs[x])) / need[x]
                score = harm / fit
            scored.append((len(others), score, b.nodes[0], b, fit))
        scored.sort(key=lambda t: (t[0], t[1], t[2]))
        left = need[j]
        for _n, _s, _first, b, fit in scored:
            if not left:
                break
            count = len(b.nodes)
            if fit * count <= left:
                placements.append((comps[j], b.nodes, fit))
                b.vec = [h - fit * q for h, q in zip(b.vec, req, strict=True)]
                left -= fit * count
                continue
            full, rest = divmod(left, fit)
            if full:
                taken = b.nodes[:full]
                placements.append((comps[j], taken, fit))
                buckets.append(_Bucket([h - fit * q for h, q in zip(b.vec, req, strict=True)], b.elig, taken))
            if rest:
                one = b.nodes[full : full + 1]
                placements.append((comps[j], one, rest))
                buckets.append(_Bucket([h - rest * q for h, q in zip(b.vec, req, strict=True)], b.elig, one))
            b.nodes = b.nodes[full + (1 if rest else 0) :]
            left = 0
        if left:
            return None
        need[j] = 0
    return placements


class _Search:
    """Binary search on k with the packing variants; remembers which variant worked last."""

    def __init__(self, prep: Prepared, group: _Group, deadline: float) -> None:
        self.prep = prep
        self.group = group
        self.deadline = deadline
        self.variants = [(o, rule) for o in _orders(prep, group) for rule in ("harm", "input", "big")]

    def feasible(self, k: int) -> list[tuple[int, list[int], int]] | None:
        for at, (order, rule) in enumerate(self.variants):
            if at and time.perf_counter() > self.deadline:
                return None  # out of time: only the likeliest variant is still tried
            packing = _pack(self.prep, self.group, k, order, rule)
            if packing is not None:
                if at:
                    self.variants.insert(0, self.variants.pop(at))
                return packing
        return None

    def best(self, lo: int, hi: int) -> tuple[int, list[tuple[int, list[int], int]] | None]:
        """Largest k in (lo, hi] with a packing, or (lo, None) if none beats lo."""
        found: tuple[int, list[tuple[int, list[int], int]] | None] = (lo, None)
        if hi <= lo:
            return found
        packing = self.feasible(hi)
        if packing is not None:
            return hi, packing
        hi -= 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            packing = self.feasible(mid)
            if packing is not None:
                found = (mid, packing)
                lo = mid
            else:
                hi = mid - 1
        return found


def _fill(prep: Prepared, c: int, count: int) -> dict[int, int]:
    """Greedy fill of ``count`` replicas of a component that shares no node: exact by construction."""
    out: dict[int, int] = {}
    for i, fit in enumerate(prep.fits[c]):
        if count <= 0:
            break
        if fit:
            take = min(fit, count)
            out[i] = take
            count -= take
    return out


def _trim(placed: dict[int, int], drop: int) -> None:
    """Remove ``drop`` replicas (last nodes first): fewer pods on a node never breaks a valid assignment."""
    for i in sorted(placed, reverse=True):
        if drop <= 0:
            return
        take = min(drop, placed[i])
        placed[i] -= take
        drop -= take
        if not placed[i]:
            del placed[i]


def _capacity_left(prep: Prepared, active: list[int]) -> tuple[float, str]:
    """Sets' worth of the scarcest requested resource left after one set, on nodes any component may use,
    and that resource's name."""
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


def _limit_text(prep: Prepared, components: Sequence[Component], active: list[int], sets: int) -> str:
    """Which component runs out first (single-component capacity), or which one has nowhere to go."""
    if not prep.names:
        return "the cluster has no nodes (or its resource models count none)"
    notes = []
    for c in active:
        comp = components[c]
        if not any(prep.eligible[c]):
            notes.append(
                f"component {comp.name}: no node passes its filters (selector, affinity, taints, cordon)"
            )
        elif not any(prep.fits[c]):
            req = (
                ", ".join(f"{k}={format_quantity(k, v)}" for k, v in sorted(comp.requests.items()))
                or "a pod slot"
            )
            notes.append(f"component {comp.name}: no eligible node has room for one replica ({req})")
    if notes:
        return "; ".join(notes)
    ratios = sorted((sum(prep.fits[c]) // prep.replicas[c], components[c].name, c) for c in active)
    per, name, c = ratios[0]
    if per <= sets:
        return (
            f"component {name}: eligible nodes hold {sum(prep.fits[c])} replicas alone, "
            f"{prep.replicas[c]} per set"
        )
    return "components share nodes: the best packing found leaves no room for another full set"


def estimate(
    cluster: Cluster,
    components: Sequence[Component],
    max_sets: int | None = None,
    budget_s: float = SEARCH_BUDGET_S,
) -> Estimate:
    """The number of complete sets of ``components`` that fit ``cluster``, with witness and upper bound.

    ``budget_s`` bounds the time spent trying packing variants on shared nodes; past it only the
    likeliest variant is tried, which can only lower the answer, never make it unsound.
    """
    started = time.perf_counter()
    prep = prepare(cluster, components)
    active = [c for c, r in enumerate(prep.replicas) if r > 0]
    groups = _groups(prep, active)
    built = {id(g): _build_group(prep, g) for g in groups if len(g) > 1}
    bounds = {}
    for g in groups:
        if len(g) == 1:
            bounds[id(g)] = sum(prep.fits[g[0]]) // prep.replicas[g[0]]
        else:
            bounds[id(g)] = _group_bound(prep, built[id(g)])
    upper = min(bounds.values(), default=0)
    cap = upper if max_sets is None else min(upper, max_sets)

    # Karmada's first fit is the floor. It cannot beat an answer that already meets the cap or the bound,
    # so it runs only when a group's packing misses its bound; then it also narrows the search.
    ff_sets = -1
    ff_placed: list[dict[int, int]] = []

    def run_first_fit() -> int:
        nonlocal ff_sets, ff_placed
        if ff_sets < 0 and cap <= FIRST_FIT_LIMIT:
            ff_sets, ff_placed = first_fit(prep, cap)
        return max(ff_sets, 0)

    deadline = started + budget_s
    sets = cap
    group_result: dict[int, tuple[int, list[tuple[int, list[int], int]] | None]] = {}
    for g in groups:
        if len(g) > 1:
            search = _Search(prep, built[id(g)], deadline)
            hi = min(bounds[id(g)], cap)
            packing = search.feasible(hi) if hi > 0 else None
            found = (hi, packing) if packing is not None else search.best(run_first_fit(), hi - 1)
            group_result[id(g)] = found
            sets = min(sets, found[0])
    placed: list[dict[int, int]] = []
    method = "exact" if not built or sets == upper else "packing"
    if sets < cap:
        run_first_fit()
    if ff_placed and ff_sets >= sets:
        sets, placed, method = ff_sets, ff_placed, "first-fit"
    if not placed:
        placed = [{} for _ in prep.requests]
        for g in groups:
            if len(g) == 1:
                placed[g[0]] = _fill(prep, g[0], sets * prep.replicas[g[0]])
                continue
            k_g, packing = group_result[id(g)]
            if packing is None:  # only when sets == 0: nothing to place
                continue
            for c, nodes, each in packing:
                for i in nodes:
                    placed[c][i] = placed[c].get(i, 0) + each
            for c in g:
                _trim(placed[c], (k_g - sets) * prep.replicas[c])
    assignment = {
        components[c].name: MappingProxyType({prep.names[i]: n for i, n in sorted(placed[c].items()) if n})
        for c in range(len(components))
    }
    capacity_left, scarcest = _capacity_left(prep, active)
    if max_sets is not None and sets == max_sets < upper:
        limit = f"stopped at the cap of {max_sets} sets"
    else:
        limit = _limit_text(prep, components, active, sets)
    elapsed = (time.perf_counter() - started) * 1000.0
    return Estimate(
        cluster=cluster.name,
        sets=sets,
        upper_bound=upper,
        assignment=MappingProxyType(assignment),
        elapsed_ms=round(elapsed, 3),
        first_fit_sets=ff_sets,
        capacity_left=capacity_left,
        limit=limit,
        not_ready=cluster.not_ready,
        method=method,
        scarcest=scarcest,
    )
