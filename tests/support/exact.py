"""The true optimum by exhaustive search, for small instances only: the yardstick for tests and the bench.

Depth-first over nodes, trying every pod mix each node can hold, memoised on (node, demand left); the
number of sets is monotone (drop one set from a packing of k and k - 1 remain), so a binary search on
k finds the largest feasible one.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from functools import cache

from webhook.placement.model import Cluster, Component
from webhook.placement.prepare import prepare


def exact_sets(cluster: Cluster, components: Sequence[Component], max_sets: int | None = None) -> int:
    """The largest k such that k complete sets can be assigned (exponential: keep instances tiny)."""
    prep = prepare(cluster, components)
    comps = [c for c, r in enumerate(prep.replicas) if r > 0]
    if not comps:
        return 0
    n = len(prep.vecs)
    reqs = [prep.requests[c] for c in comps]
    fits = [[prep.fits[c][i] for c in comps] for i in range(n)]
    suffix = [[0] * len(comps) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        suffix[i] = [a + b for a, b in zip(suffix[i + 1], fits[i], strict=True)]

    @cache
    def place(i: int, need: tuple[int, ...]) -> bool:
        if not any(need):
            return True
        if i == n or any(a > b for a, b in zip(need, suffix[i], strict=True)):
            return False
        ranges = [range(min(f, q), -1, -1) for f, q in zip(fits[i], need, strict=True)]
        vec = prep.vecs[i]
        for mix in itertools.product(*ranges):
            used = [0] * len(vec)
            for count, req in zip(mix, reqs, strict=True):
                if count:
                    for d, q in enumerate(req):
                        used[d] += count * q
            if any(u > h for u, h in zip(used, vec, strict=True)):
                continue
            if place(i + 1, tuple(a - b for a, b in zip(need, mix, strict=True))):
                return True
        return False

    hi = min(sum(fits[i][j] for i in range(n)) // prep.replicas[c] for j, c in enumerate(comps))
    if max_sets is not None:
        hi = min(hi, max_sets)
    lo = 0
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if place(0, tuple(mid * prep.replicas[c] for c in comps)):
            lo = mid
        else:
            hi = mid - 1
    return lo
