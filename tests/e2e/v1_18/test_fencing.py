"""One running copy when the fencing agent itself is in trouble, on Karmada v1.18.2 (issue 28)."""

from __future__ import annotations

from tests.e2e import flows
from tests.e2e.scenario import World


def test_a_forged_release_by_an_ordinary_user_keeps_the_job_held(world: World, jobs: list[str]) -> None:
    flows.forged_release(world, jobs)


def test_one_of_two_agent_replicas_killed_mid_failover(world: World, jobs: list[str]) -> None:
    flows.replica_killed(world, jobs)


def test_a_storage_hung_with_held_copies_delays_no_other_heartbeat(world: World, jobs: list[str]) -> None:
    flows.hung_storage(world, jobs)
