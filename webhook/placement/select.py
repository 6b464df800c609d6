"""Pick the cluster for a workload from per-cluster estimates, and say why every other one lost."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from webhook.placement.estimate import Estimate


@dataclass(frozen=True)
class Selection:
    selected: str | None
    reasons: dict[str, str]  # cluster -> why it was not selected (absent for the winner)


def select(estimates: Sequence[Estimate]) -> Selection:
    """Most sets wins; ties go to the most capacity left after one set, then to the smaller name.

    A cluster with no complete set, or one its control plane reports as not Ready, is never picked.
    """
    candidates = [e for e in estimates if e.sets >= 1 and not e.not_ready]
    ranked = sorted(candidates, key=lambda e: (-e.sets, -e.capacity_left, e.cluster))
    winner = ranked[0] if ranked else None
    reasons: dict[str, str] = {}
    for e in estimates:
        if winner is not None and e is winner:
            continue
        if e.not_ready:
            reasons[e.cluster] = e.not_ready
        elif e.sets < 1:
            reasons[e.cluster] = f"no complete set fits: {e.limit.message}"
        elif winner is None:  # pragma: no cover - a candidate exists whenever this cluster qualifies
            continue
        elif e.sets < winner.sets:
            reasons[e.cluster] = f"fewer sets than {winner.cluster} ({e.sets} < {winner.sets})"
        elif e.capacity_left < winner.capacity_left:
            reasons[e.cluster] = (
                f"same sets as {winner.cluster} ({e.sets}) but less capacity left after one set "
                f"({e.capacity_left:g} < {winner.capacity_left:g} sets of the scarcest resource)"
            )
        else:
            reasons[e.cluster] = (
                f"tied with {winner.cluster} on sets ({e.sets}) and capacity left ({e.capacity_left:g}); "
                "name sorts later"
            )
    return Selection(winner.cluster if winner else None, reasons)
