"""How many complete component sets fit one cluster: a witness assignment, and a bound nothing can beat.

Method, in order of cost (grouping, bounds and packing each live in their own module):

1. Components that share no node with any other are independent: for them the count is exact,
   floor(sum of per-node fits / replicas), and a greedy fill is its witness.
2. Components that share nodes form a group (``grouping``); the search packs k sets on the group's node
   classes (``packing``), probing the upper bound (``bounds``) first, then binary-searching below it.
3. When a packing misses the bound, Karmada's own first fit runs too (it also becomes the search's low
   end), and the larger answer is returned with its witness, so the answer is never below Karmada's.
"""

from __future__ import annotations

import itertools
import operator
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from webhook.placement.bounds import Limit, cap_reached, capacity_left, group_bound, limit
from webhook.placement.firstfit import first_fit
from webhook.placement.grouping import build_group, component_groups
from webhook.placement.model import Cluster, Component
from webhook.placement.packing import Packed, Search, fill, trim
from webhook.placement.prepare import prepare

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
    limit: Limit  # what stops one more set (or why none fits)
    not_ready: str = ""
    scarcest: str = ""  # the requested resource with the fewest sets' worth left ("" when none is bounded)


def estimate(
    cluster: Cluster,
    components: Sequence[Component],
    max_sets: int | None = None,
    budget_s: float = SEARCH_BUDGET_S,
    selection: bool = True,
) -> Estimate:
    """The number of complete sets of ``components`` that fit ``cluster``, with witness and upper bound.

    ``budget_s`` bounds the time spent trying packing variants on shared nodes; past it only the
    likeliest variant is tried, which can only lower the answer, never make it unsound.
    ``selection=False`` leaves out what only cluster selection uses (``capacity_left``, ``scarcest``).
    """
    started = time.perf_counter()
    prep = prepare(cluster, components)
    active = [c for c, r in enumerate(prep.replicas) if r > 0]
    groups = component_groups(prep, active)
    built = {id(g): build_group(prep, g) for g in groups if len(g) > 1}
    bounds = {}
    for g in groups:
        if len(g) == 1:
            bounds[id(g)] = prep.totals[g[0]] // prep.replicas[g[0]]
        else:
            bounds[id(g)] = group_bound(prep, built[id(g)])
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
    group_result: dict[int, Packed] = {}
    for g in groups:
        if len(g) > 1:
            search = Search(prep, built[id(g)], deadline)
            hi = min(bounds[id(g)], cap)
            packing = search.feasible(hi) if hi > 0 else None
            found = Packed(hi, packing) if packing is not None else search.best(run_first_fit(), hi - 1)
            group_result[id(g)] = found
            sets = min(sets, found.sets)
    placed: list[dict[int, int]] = []
    if sets < cap:
        run_first_fit()
    if ff_placed and ff_sets >= sets:
        sets, placed = ff_sets, ff_placed
    if not placed:
        placed = [{} for _ in prep.requests]
        for g in groups:
            if len(g) == 1:
                placed[g[0]] = fill(prep, g[0], sets * prep.replicas[g[0]])
                continue
            k_g, packing = group_result[id(g)]
            if packing is None:  # only when sets == 0: nothing to place
                continue
            for c, nodes, each in packing:  # a packing places a component at most once per node
                placed[c].update(zip(nodes, itertools.repeat(each)))
            for c in g:
                trim(placed[c], (k_g - sets) * prep.replicas[c])
    assignment = {
        components[c].name: MappingProxyType(_by_name(prep.names, placed[c])) for c in range(len(components))
    }
    # what selection ranks clusters by; the estimator role answers sets only and skips it
    left, scarcest = capacity_left(prep, active) if selection else (0.0, "")
    if max_sets is not None and sets == max_sets < upper:
        stop = cap_reached(max_sets)
    else:
        stop = limit(prep, components, active, sets)
    elapsed = (time.perf_counter() - started) * 1000.0
    return Estimate(
        cluster=cluster.name,
        sets=sets,
        upper_bound=upper,
        assignment=MappingProxyType(assignment),
        elapsed_ms=round(elapsed, 3),
        first_fit_sets=ff_sets,
        capacity_left=left,
        scarcest=scarcest,
        limit=stop,
        not_ready=cluster.not_ready,
    )


def _by_name(names: Sequence[str], placed: Mapping[int, int]) -> dict[str, int]:
    """Node index -> replicas as node name -> replicas, in node order, without empty entries."""
    nodes, counts = list(placed), list(placed.values())
    if any(map(operator.gt, nodes, nodes[1:])):  # a fill is in node order already; a packing is not
        ordered = sorted(placed.items())
        nodes = list(map(operator.itemgetter(0), ordered))
        counts = list(map(operator.itemgetter(1), ordered))
    if not all(counts):
        kept = list(map(bool, counts))
        nodes, counts = list(itertools.compress(nodes, kept)), list(itertools.compress(counts, kept))
    return dict(zip(map(names.__getitem__, nodes), counts, strict=True))
