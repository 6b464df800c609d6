"""Failovers on real Karmada: each restores the old job's newest checkpoint, counts once, never runs twice."""

from __future__ import annotations

import time

import pytest

from tests.e2e.procs import wait_until
from tests.e2e.scenario import (
    NAMESPACE,
    PREFIX,
    Outcome,
    World,
    flink_job,
    lost_after,
    propagation_policy,
)


def _start(world: World, name: str, shipped: str, purge_mode: str | None = None) -> tuple[str, object]:
    key = (NAMESPACE, name)
    world.submit([flink_job(name)], propagation_policy(shipped, [name], purge_mode))
    cluster = world.wait_running(key)
    job = world.wait_checkpoints(cluster, key, 3)
    world.wait_captured(name, cluster, job.job_id)
    return cluster, job


def _gone(world: World, cluster: str, name: str) -> bool:
    return world.member_object(cluster, name) is None


def _outcome(world: World, name: str, old_cluster: str, triggered: float) -> Outcome:
    key = (NAMESPACE, name)
    new_cluster = next(c for c in world.operators if c != old_cluster)
    world.wait_running(key, new_cluster, timeout=180)
    wait_until(f"{name} gone from {old_cluster}", lambda: _gone(world, old_cluster, name), 120)
    old = world.operators[old_cluster].jobs_of(*key)[-1]
    new = world.operators[new_cluster].jobs_of(*key)[-1]
    started = world.timeline.first_running(key, new_cluster, triggered)
    assert started is not None
    annotations = (world.member_object(new_cluster, name) or {}).get("metadata", {}).get("annotations") or {}
    return Outcome(
        old,
        new,
        old_cluster,
        new_cluster,
        world.timeline.two_running_seconds(key),
        lost_after(old, new),
        started.at - triggered,
        dict(annotations),
    )


def _assert_restored_newest(outcome: Outcome, count: int = 1) -> None:
    newest = outcome.old.checkpoints[-1][0]
    assert outcome.new.started_from.endswith(f"/{outcome.old.job_id}/chk-{newest}"), (
        f"restored {outcome.new.started_from!r}, the old job's newest is chk-{newest}"
    )
    assert outcome.lost == []
    assert outcome.two_running_seconds == 0.0
    assert outcome.annotations.get(f"{PREFIX}/failover-count") == str(count)
    assert outcome.annotations.get(f"{PREFIX}/restored-job-id") == outcome.old.job_id


@pytest.mark.parametrize("purge_mode", ["Directly", "Gracefully"])
def test_cluster_failover_by_a_no_execute_taint(karmada_118: World, purge_mode: str) -> None:
    world = karmada_118
    name = f"taint-{purge_mode.lower()}"
    old_cluster, _ = _start(world, name, "propagationpolicy-cluster-failover.yaml", purge_mode)
    triggered = time.monotonic()
    world.taint(old_cluster)
    try:
        outcome = _outcome(world, name, old_cluster, triggered)
    finally:
        world.untaint(old_cluster)
    world.record(outcome.line(f"cluster failover by NoExecute taint, {purge_mode}"))
    _assert_restored_newest(outcome)
