"""A failover on Karmada v1.19.0-rc.0 (the whole set runs on v1.18.2)."""

from __future__ import annotations

from tests.e2e import flows
from tests.e2e.scenario import World


def test_cluster_failover_by_a_no_execute_taint(world: World, jobs: list[str]) -> None:
    flows.cluster_failover(world, jobs, "Directly")
