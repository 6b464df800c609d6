"""A partition between Karmada and a member whose job keeps running, on Karmada v1.18.2."""

from __future__ import annotations

from tests.e2e import flows
from tests.e2e.scenario import World


def test_a_partition_never_runs_two_copies(world: World, jobs: list[str]) -> None:
    flows.partition(world, jobs)
