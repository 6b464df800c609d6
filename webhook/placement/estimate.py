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
from typing import NamedTuple

from webhook.placement.bounds import Limit, cap_reached, capacity_left, group_bound, limit
from webhook.placement.firstfit import first_fit
from webhook.placement.grouping import Group, build_group, component_groups
from webhook.placement.model import Cluster, Component
from webhook.placement.packing import Clock, Packed, Search, SearchDeadline, fill, trim
from webhook.placement.prepare import Prepared, prepare

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
    clock: Clock = time.perf_counter,
) -> Estimate:
    """The number of complete sets of ``components`` that fit ``cluster``, with witness and upper bound.

    ``budget_s`` bounds the time spent trying packing variants on shared nodes; past it only the
    likeliest variant is tried, which can only lower the answer, never make it unsound.
    ``selection=False`` leaves out what only cluster selection uses (``capacity_left``, ``scarcest``).
    ``clock`` is the only input that is not data: the budget's (and ``elapsed_ms``'s) seconds; a test hands
    one in to make the search's cut-off exact.
    """
    started = clock()
    prep = prepare(cluster, components)
    active = [c for c, r in enumerate(prep.replicas) if r > 0]
    alone, shared = _groups(prep, active)
    upper = min([prep.totals[c] // prep.replicas[c] for c in alone] + [s.bound for s in shared], default=0)
    cap = upper if max_sets is None else min(upper, max_sets)
    floor = _KarmadaFloor(prep, cap)
    packed = _pack_shared(prep, shared, cap, floor, SearchDeadline(started + budget_s, clock))
    sets = min([cap, *(p.sets for p in packed)])
    if sets < cap:
        floor.sets_at_least()
    if floor.placed and floor.sets >= sets:
        sets, placed = floor.sets, floor.placed
    else:
        placed = _witness(prep, alone, shared, packed, sets)
    assignment = {
        components[c].name: MappingProxyType(_by_name(prep.names, placed[c])) for c in range(len(components))
    }
    # what selection ranks clusters by; the estimator role answers sets only and skips it
    left, scarcest = capacity_left(prep, active) if selection else (0.0, "")
    if max_sets is not None and sets == max_sets < upper:
        stop = cap_reached(max_sets)
    else:
        stop = limit(prep, components, active, sets)
    elapsed = (clock() - started) * 1000.0
    return Estimate(
        cluster=cluster.name,
        sets=sets,
        upper_bound=upper,
        assignment=MappingProxyType(assignment),
        elapsed_ms=round(elapsed, 3),
        first_fit_sets=floor.sets,
        capacity_left=left,
        scarcest=scarcest,
        limit=stop,
        not_ready=cluster.not_ready,
    )


class _Shared(NamedTuple):
    """Components that share nodes, merged into node classes, and the most sets the group could hold."""

    group: Group
    bound: int


def _groups(prep: Prepared, active: list[int]) -> tuple[list[int], list[_Shared]]:
    """The components that share no node (their count is exact from their own fits, so they need no
    search), and the groups that do, each with its node classes built once and its upper bound."""
    alone: list[int] = []
    shared: list[_Shared] = []
    for comps in component_groups(prep, active):
        if len(comps) == 1:
            alone.append(comps[0])
        else:
            group = build_group(prep, comps)
            shared.append(_Shared(group, group_bound(prep, group)))
    return alone, shared


class _KarmadaFloor:
    """Karmada's own first fit, the answer's floor, run at most once and only when asked.

    It cannot beat an answer that already meets the cap or the bound, so it runs only when a group's
    packing misses its bound; then it also narrows that group's search from below.
    """

    def __init__(self, prep: Prepared, cap: int) -> None:
        self._prep = prep
        self._cap = cap
        self.sets = -1  # -1 while it has not run (or the cap is too large for it to be worth running)
        self.placed: list[dict[int, int]] = []

    def sets_at_least(self) -> int:
        """Runs first fit once (unless the cap is degenerate) and returns its count, 0 when it did not run."""
        if self.sets < 0 and self._cap <= FIRST_FIT_LIMIT:
            self.sets, self.placed = first_fit(self._prep, self._cap)
        return max(self.sets, 0)


def _pack_shared(
    prep: Prepared, shared: Sequence[_Shared], cap: int, floor: _KarmadaFloor, deadline: SearchDeadline
) -> list[Packed]:
    """The most sets each group packs, one packing per group: its bound is probed first (the usual case:
    one packing, no search), and only a miss pays for first fit and a binary search above it."""
    packed = []
    for s in shared:
        search = Search(prep, s.group, deadline)
        hi = min(s.bound, cap)
        packing = search.feasible(hi) if hi > 0 else None
        packed.append(
            Packed(hi, packing) if packing is not None else search.best(floor.sets_at_least(), hi - 1)
        )
    return packed


def _witness(
    prep: Prepared, alone: Sequence[int], shared: Sequence[_Shared], packed: Sequence[Packed], sets: int
) -> list[dict[int, int]]:
    """Component -> node -> replicas placing exactly ``sets`` sets: a greedy fill for each component that
    shares no node, each group's packing trimmed down to ``sets`` (fewer pods never break a placement)."""
    placed: list[dict[int, int]] = [{} for _ in prep.requests]
    for c in alone:
        placed[c] = fill(prep, c, sets * prep.replicas[c])
    for s, (k_g, packing) in zip(shared, packed, strict=True):
        if packing is None:  # only when sets == 0: nothing to place
            continue
        for c, nodes, each in packing:  # a packing places a component at most once per node
            placed[c].update(zip(nodes, itertools.repeat(each)))
        for c in s.group.comps:
            trim(placed[c], (k_g - sets) * prep.replicas[c])
    return placed


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
