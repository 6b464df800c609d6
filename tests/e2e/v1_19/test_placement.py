"""Placement by complete sets on Karmada v1.19.0-rc.0: the real scheduler asks the product's estimators."""

from __future__ import annotations

import pytest

from tests.e2e import flows
from tests.e2e.scenario import World


@pytest.mark.parametrize("scheduling", ["Duplicated", "Divided"])
def test_a_multi_template_job_goes_where_a_complete_set_fits(
    world: World, jobs: list[str], scheduling: str
) -> None:
    flows.placement(world, jobs, scheduling)
