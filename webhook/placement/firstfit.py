"""Karmada's accurate-estimator baseline: first fit, set by set, components in order, no sorting.

Kept as the floor our answer must never fall below. Karmada re-walks the node list for every replica;
since free capacity only shrinks, a node that cannot hold a component now never will again, so a
per-component cursor finds exactly the same nodes in linear time.
"""

from __future__ import annotations

from webhook.placement.prepare import Prepared


def first_fit(prep: Prepared, max_sets: int) -> tuple[int, list[dict[int, int]]]:
    """Sets completed by Karmada-style first fit (at most ``max_sets``), and per component node -> count."""
    free = [list(v) for v in prep.vecs]
    n = len(free)
    cursor = [0] * len(prep.requests)
    placed: list[dict[int, int]] = [{} for _ in prep.requests]
    sets = 0
    while sets < max_sets:
        this_set: list[tuple[int, int]] = []
        for c, req in enumerate(prep.requests):
            elig = prep.eligible[c]
            for _ in range(prep.replicas[c]):
                i = cursor[c]
                while i < n and not (elig[i] and all(h >= q for h, q in zip(free[i], req, strict=True))):
                    i += 1
                cursor[c] = i
                if i == n:
                    for cc, ii in this_set:  # an incomplete set is not placed
                        row = free[ii]
                        for d, q in enumerate(prep.requests[cc]):
                            row[d] += q
                        placed[cc][ii] -= 1
                        if not placed[cc][ii]:
                            del placed[cc][ii]
                    return sets, placed
                row = free[i]
                for d, q in enumerate(req):
                    row[d] -= q
                placed[c][i] = placed[c].get(i, 0) + 1
                this_set.append((c, i))
        sets += 1
    return sets, placed
