"""The guide run as written on Karmada v1.19.0-rc.0: it installed what the scenarios here use."""

from __future__ import annotations

from tests.e2e.scenario import World
from tests.support import guide


def test_every_step_of_the_guide_ran_and_its_failover_restored_the_job(world: World) -> None:
    run = world.guide
    assert run is not None
    ran = [where for where, _ in run.outputs]
    expected = [s.where() for s in guide.runnable(guide.steps(run.path)) if not s.prelude]
    assert ran == expected
    # section 8: the job on the other member, restored from the old job's checkpoint, then RUNNING
    failover = run.outputs[-1][1]
    assert "restored " in failover or "held " in failover, failover
    assert "/chk-" in failover, failover
    restored = next(line for line in failover.splitlines() if "/chk-" in line)
    rendered = len(guide.render_only(guide.steps(run.path)))
    world.record(f"the guide as written: {len(ran)} steps run, {rendered} rendered; its failover: {restored}")
