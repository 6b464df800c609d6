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
    result = flows.placement(world, jobs, scheduling)
    assert result.placed == ["member2"] == result.fits("ours")


def test_a_job_that_fits_nowhere_stays_pending_with_the_reason(world: World, jobs: list[str]) -> None:
    scheduled, counts = flows.unplaceable(world, jobs, "Divided-aggregated")
    assert world.placed_on("placed-nowhere") == []
    assert scheduled["status"] == "False" and scheduled.get("message"), scheduled
    # the estimators' reason names what stops a set: three task managers where two fit
    assert all("taskmanager" in n.reason for n in counts.values()), counts
