"""A fleet evicted at once on Karmada v1.18.2: every job restored, none twice, the Work webhook fast."""

from __future__ import annotations

from tests.e2e import flows
from tests.e2e.scenario import World

FLEET = 50
P99_MS = 50.0


def test_a_fleet_evicted_at_once(world: World, jobs: list[str]) -> None:
    _, _, p99 = flows.fleet(world, jobs, FLEET)
    assert p99 < P99_MS, f"the Work webhook's p99 was {p99:.1f} ms with {FLEET} jobs evicted at once"
