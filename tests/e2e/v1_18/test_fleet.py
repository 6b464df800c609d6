"""A fleet evicted at once on Karmada v1.18.2: every job restored from its newest checkpoint, none twice.

The Work webhook's p50/p99 are recorded among the figures, not asserted (speed is bench/'s:
``python -m bench karmada_fleet`` runs the same fleet at thousands of jobs, docs/performance.md).
"""

from __future__ import annotations

from tests.e2e import flows
from tests.e2e.scenario import World

FLEET = 50


def test_a_fleet_evicted_at_once(world: World, jobs: list[str]) -> None:
    flows.fleet(world, jobs, FLEET)
