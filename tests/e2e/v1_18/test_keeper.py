"""The lease keeper in the job's own pod on Karmada v1.18.2 (issue 47)."""

from __future__ import annotations

from tests.e2e import flows_keeper
from tests.e2e.scenario import World


def test_a_job_whose_member_role_is_down_is_stopped_by_its_keeper(world: World) -> None:
    flows_keeper.role_down(world)
