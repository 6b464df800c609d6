"""Every failover kind on Karmada v1.18.2 restores the old job's newest checkpoint, counts once, runs once."""

from __future__ import annotations

import pytest

from tests.e2e import flows
from tests.e2e.scenario import World


@pytest.mark.parametrize("purge_mode", ["Directly", "Gracefully"])
def test_cluster_failover_by_a_no_execute_taint(world: World, jobs: list[str], purge_mode: str) -> None:
    flows.cluster_failover(world, jobs, purge_mode)


def test_application_failover(world: World, jobs: list[str]) -> None:
    flows.application_failover(world, jobs)


def test_a_move_by_a_policy_change(world: World, jobs: list[str]) -> None:
    flows.policy_move(world, jobs)


def test_a_return_to_a_cluster_the_job_ran_on_before(world: World, jobs: list[str]) -> None:
    flows.return_to_previous(world, jobs)
