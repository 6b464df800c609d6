"""The packing trap on Karmada v1.18.2: the real scheduler asks the product's estimators, which count
by packing where Karmada's own estimator counts by first fit (tests/e2e/flows.py ``placement``,
stack.NODES and LOAD)."""

from __future__ import annotations

import pytest

from tests.e2e import flows
from tests.e2e.scenario import World


@pytest.mark.parametrize("scheduling", ["Divided-dynamic-weight", "Divided-aggregated", "Duplicated"])
def test_placement_follows_the_optimum_where_first_fit_finds_no_set(
    world: World, jobs: list[str], scheduling: str
) -> None:
    """One set fits member2 (the optimum, and the product's answer), none fits member1; Karmada's first
    fit finds none on either, so with its estimator the job would not be placed (Divided) or would go
    by score and name to member1 (Duplicated). The binding goes to member2."""
    flows.placement(world, jobs, scheduling)


def test_a_job_that_fits_nowhere_stays_pending_with_the_reason(world: World, jobs: list[str]) -> None:
    """Divided: no set fits on either member; the binding stays without a cluster, with the reason."""
    flows.unplaceable(world, jobs, "Divided-aggregated")
