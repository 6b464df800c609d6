"""Placement by complete sets on Karmada v1.19.0-rc.0: the real scheduler asks the product's estimators."""

from __future__ import annotations

import pytest

from tests.e2e import flows
from tests.e2e.scenario import World


@pytest.mark.parametrize("scheduling", ["Divided-dynamic-weight", "Divided-aggregated"])
def test_divided_placement_goes_where_a_complete_set_fits(
    world: World, jobs: list[str], scheduling: str
) -> None:
    placed, _ = flows.placement(world, jobs, scheduling)
    assert placed == ["member2"]


def test_duplicated_placement_asks_the_estimators(world: World, jobs: list[str]) -> None:
    """Karmada asks the estimators for a Duplicated job too, with the same components, but selects its
    cluster by score alone (seen: member1, where no set fits, in one run; member2 in another);
    docs/placement.md says to use Divided for placement by complete sets."""
    placed, estimates = flows.placement(world, jobs, "Duplicated")
    assert len(placed) == 1 and estimates == {"member1": 0, "member2": 1}
