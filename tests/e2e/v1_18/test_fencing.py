"""One running copy when the fencing agent itself is in trouble (issue 28), and when a job says it stopped
or is gone before it did (issue 45), on Karmada v1.18.2."""

from __future__ import annotations

from tests.e2e import flows
from tests.e2e.scenario import World


def test_a_forged_release_by_an_ordinary_user_keeps_the_job_held(world: World, jobs: list[str]) -> None:
    flows.forged_release(world, jobs)


def test_one_of_two_agent_replicas_killed_mid_failover(world: World, jobs: list[str]) -> None:
    flows.replica_killed(world, jobs)


def test_a_storage_hung_with_held_copies_delays_no_other_heartbeat(world: World, jobs: list[str]) -> None:
    flows.hung_storage(world, jobs)


def test_stopped_means_stopped_and_gone_means_gone(world: World, jobs: list[str]) -> None:
    """Issue 45, through the agents on real Karmada: a copy released and evicted before it ran drops its
    heartbeat (the return released by no-heartbeat, not the lease); a job SUSPENDED while fenced, and a
    FlinkSessionJob being deleted whose job says SUSPENDED, keep theirs until the job has ended."""
    flows.stopped_and_gone(world, jobs)
