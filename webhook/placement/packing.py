"""Greedy packings of k sets on a group's node classes, and the search for the largest k that packs.

The search probes the upper bound first, then binary-searches below it, trying several component orders
and node orders; whichever variant worked last is tried first next time.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from webhook.placement.grouping import Group
from webhook.placement.prepare import Prepared, fit_count


class Placement(NamedTuple):
    """``each`` replicas of ``component`` on every node in ``nodes``."""

    component: int
    nodes: list[int]
    each: int


Packing = list[Placement]


class Packed(NamedTuple):
    """The most sets a search packed, and how (None when it packed none beyond its low end)."""

    sets: int
    packing: Packing | None


@dataclass
class _Bucket:
    """Nodes that currently accept exactly the same placements; ``vec`` is one of them, as representative."""

    vec: list[int]
    elig: tuple[bool, ...]
    nodes: list[int]


def _orders(prep: Prepared, group: Group) -> list[list[int]]:
    """Component orders to try, likeliest first: most constrained (fewest sets on its own), largest
    dominant share of the group's free capacity; then every other order for groups of up to 3."""
    idx = list(range(len(group.comps)))
    caps = [prep.totals[c] / max(1, prep.replicas[c]) for c in group.comps]
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


def pack(prep: Prepared, group: Group, k: int, order: list[int], rule: str) -> Packing | None:
    """Greedy packing of k sets on the group's classes; placements (component, nodes, each) or None.

    Components are placed one after another in ``order``, each wholly before the next, on the classes
    ``_ranked`` puts first; ``rule`` names how classes are ranked and how a partly used class is filled
    (``harm``, ``input``, ``big``, ``spread``). None when some component does not fit: the caller tries
    another order or rule, or fewer sets.
    """
    comps = group.comps
    reqs = [prep.requests[c] for c in comps]
    buckets = [_Bucket(list(vec), elig, list(nodes)) for vec, elig, nodes in group.classes]
    need = [k * prep.replicas[c] for c in comps]
    placements: Packing = []
    for pos, j in enumerate(order):
        if not need[j]:
            continue
        left = need[j]
        for b, fit in _ranked(buckets, j, order[pos + 1 :], reqs, need, rule):
            if not left:
                break
            left = _place(placements, buckets, comps[j], reqs[j], b, fit, left, rule)
        if left:
            return None
        need[j] = 0
    return placements


def _ranked(
    buckets: list[_Bucket], j: int, later: list[int], reqs: list[tuple[int, ...]], need: list[int], rule: str
) -> list[tuple[_Bucket, int]]:
    """The classes component ``j`` fits on, with its fit per node there, best first.

    First the classes that fewer of the components still to place can use (placing there takes nothing
    from them), then by the rule's score, then in input order so that equal classes keep a stable order.
    """
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
        else:  # harm (and spread)
            score = _harm(b.vec, req, fit, others, reqs, need)
        scored.append((len(others), score, b.nodes[0], b, fit))
    scored.sort(key=lambda t: (t[0], t[1], t[2]))
    return [(b, fit) for _n, _s, _first, b, fit in scored]


def _harm(
    vec: list[int],
    req: tuple[int, ...],
    fit: int,
    others: list[int],
    reqs: list[tuple[int, ...]],
    need: list[int],
) -> float:
    """Replicas of the components still to place that a node loses per replica placed on it, each loss
    weighed by how many replicas that component still needs: the class that costs the others least wins."""
    after = _less(vec, req, fit)
    harm = 0.0
    for x in others:
        harm += (fit_count(vec, reqs[x]) - fit_count(after, reqs[x])) / need[x]
    return harm / fit


def _place(
    placements: Packing,
    buckets: list[_Bucket],
    comp: int,
    req: tuple[int, ...],
    b: _Bucket,
    fit: int,
    left: int,
    rule: str,
) -> int:
    """Places up to ``left`` replicas of ``comp`` on class ``b`` (``fit`` per node); returns how many are
    still to place.

    A class that takes fewer than all its nodes can hold is split: the nodes used become classes of their
    own (appended to ``buckets`` with their smaller free capacity) and ``b`` keeps the untouched ones, so
    a class always stands for nodes that accept exactly the same placements.
    """
    count = len(b.nodes)
    if fit * count <= left:  # the whole class, every node full
        placements.append(Placement(comp, b.nodes, fit))
        b.vec = _less(b.vec, req, fit)
        return left - fit * count
    if rule == "spread":  # the rest spread evenly over the class, not filling its first nodes
        base, extra = divmod(left, count)
        untouched: list[int] = []
        for nodes, each in ((b.nodes[:extra], base + 1), (b.nodes[extra:], base)):
            if nodes and each:
                placements.append(Placement(comp, nodes, each))
                buckets.append(_Bucket(_less(b.vec, req, each), b.elig, nodes))
            elif nodes:
                untouched = nodes
        b.nodes = untouched
        return 0
    full, rest = divmod(left, fit)  # the first nodes filled, the one after takes the rest
    if full:
        taken = b.nodes[:full]
        placements.append(Placement(comp, taken, fit))
        buckets.append(_Bucket(_less(b.vec, req, fit), b.elig, taken))
    if rest:
        one = b.nodes[full : full + 1]
        placements.append(Placement(comp, one, rest))
        buckets.append(_Bucket(_less(b.vec, req, rest), b.elig, one))
    b.nodes = b.nodes[full + (1 if rest else 0) :]
    return 0


def _less(vec: list[int], req: tuple[int, ...], count: int) -> list[int]:
    """Free capacity left on a node after ``count`` replicas of ``req`` are placed on it."""
    return [h - count * q for h, q in zip(vec, req, strict=True)]


Clock = Callable[[], float]


@dataclass(frozen=True)
class SearchDeadline:
    """When trying packing variants stops, on ``clock`` (seconds): handed in, so the search stays a
    function of its inputs and a test can set the cut-off exactly."""

    at: float
    clock: Clock

    def passed(self) -> bool:
        return self.clock() > self.at


class Search:
    """Binary search on k with the packing variants; remembers which variant worked last."""

    def __init__(self, prep: Prepared, group: Group, deadline: SearchDeadline) -> None:
        self.prep = prep
        self.group = group
        self.deadline = deadline
        self.variants = [
            (o, rule) for o in _orders(prep, group) for rule in ("harm", "input", "big", "spread")
        ]

    def feasible(self, k: int) -> Packing | None:
        for at, (order, rule) in enumerate(self.variants):
            if at and self.deadline.passed():
                return None  # out of time: only the likeliest variant is still tried
            packing = pack(self.prep, self.group, k, order, rule)
            if packing is not None:
                if at:
                    self.variants.insert(0, self.variants.pop(at))
                return packing
        return None

    def best(self, lo: int, hi: int) -> Packed:
        """Largest k in (lo, hi] with a packing, or (lo, None) if none beats lo."""
        found = Packed(lo, None)
        if hi <= lo:
            return found
        packing = self.feasible(hi)
        if packing is not None:
            return Packed(hi, packing)
        hi -= 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            packing = self.feasible(mid)
            if packing is not None:
                found = Packed(mid, packing)
                lo = mid
            else:
                hi = mid - 1
        return found


def fill(prep: Prepared, c: int, count: int) -> dict[int, int]:
    """Greedy fill of ``count`` replicas of a component that shares no node: exact by construction."""
    if count <= 0:
        return {}
    fits = prep.fits[c]
    # Whole nodes in input order up to the one where the running total reaches ``count`` (C-level
    # accumulate, bisect and compress: this runs over every node of a 10,000-node cluster).
    last = bisect.bisect_left(list(itertools.accumulate(fits)), count)
    used = fits[: last + 1]
    out = dict(zip(itertools.compress(range(len(used)), used), itertools.compress(used, used), strict=True))
    if last < len(fits):
        out[last] = count - sum(fits[:last])
    return out


def trim(placed: dict[int, int], drop: int) -> None:
    """Remove ``drop`` replicas (last nodes first): fewer pods on a node never breaks a valid assignment."""
    if drop <= 0:
        return
    for i in sorted(placed, reverse=True):
        if drop <= 0:
            return
        take = min(drop, placed[i])
        placed[i] -= take
        drop -= take
        if not placed[i]:
            del placed[i]
