"""Failovers on real Karmada: each restores the old job's newest checkpoint, counts once, never runs twice."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.e2e.procs import wait_until
from tests.e2e.scenario import (
    NAMESPACE,
    PREFIX,
    Outcome,
    World,
    cleanup,
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


@pytest.fixture
def jobs(karmada_118: World) -> Iterator[list[str]]:
    """Names of the jobs a scenario submits: deleted from Karmada afterwards, every taint removed."""
    names: list[str] = []
    yield names
    cleanup(karmada_118, names)


@pytest.mark.parametrize("purge_mode", ["Directly", "Gracefully"])
def test_cluster_failover_by_a_no_execute_taint(karmada_118: World, jobs: list[str], purge_mode: str) -> None:
    world = karmada_118
    name = f"taint-{purge_mode.lower()}"
    jobs.append(name)
    old_cluster, _ = _start(world, name, "propagationpolicy-cluster-failover.yaml", purge_mode)
    triggered = time.monotonic()
    world.taint(old_cluster)
    outcome = _outcome(world, name, old_cluster, triggered)
    world.record(outcome.line(f"cluster failover by NoExecute taint, {purge_mode}"))
    _assert_restored_newest(outcome)


def test_application_failover(karmada_118: World, jobs: list[str]) -> None:
    """The job stays unhealthy longer than the policy tolerates (the shipped policy, Gracefully, with
    tolerationSeconds lowered from 120 to 20 for the test's sake). The toleration must outlast a restore's
    hold (the old job's stop, a poll, the new job's start): Karmada reads the held copy as unhealthy too,
    and with 5 s it evicted the new cluster as well and left the job nowhere."""
    world = karmada_118
    name = "app-failover"
    jobs.append(name)
    policy = propagation_policy("propagationpolicy-application-failover.yaml", [name])
    policy["spec"]["failover"]["application"]["decisionConditions"]["tolerationSeconds"] = 20
    key = (NAMESPACE, name)
    world.submit([flink_job(name)], policy)
    old_cluster = world.wait_running(key)
    job = world.wait_checkpoints(old_cluster, key, 3)
    world.wait_captured(name, old_cluster, job.job_id)
    triggered = time.monotonic()
    world.operators[old_cluster].fail(*key)
    outcome = _outcome(world, name, old_cluster, triggered)
    world.record(outcome.line("application failover, Gracefully"))
    _assert_restored_newest(outcome)
    assert outcome.annotations.get(f"{PREFIX}/reason") == "ApplicationFailure"


def test_a_move_by_a_policy_change(karmada_118: World, jobs: list[str]) -> None:
    """No eviction task, the old Work deleted at once: Karmada alone would start the job empty."""
    world = karmada_118
    name = "moved"
    jobs.append(name)
    policy = propagation_policy("propagationpolicy-cluster-failover.yaml", [name])
    old_cluster, _ = _start(world, name, "propagationpolicy-cluster-failover.yaml")
    new_cluster = next(c for c in world.operators if c != old_cluster)
    policy["spec"]["placement"]["clusterAffinity"]["clusterNames"] = [new_cluster]
    triggered = time.monotonic()
    world.stack.apply_karmada([policy])
    outcome = _outcome(world, name, old_cluster, triggered)
    world.record(outcome.line("a move by a PropagationPolicy change"))
    _assert_restored_newest(outcome)


def test_a_return_to_a_cluster_the_job_ran_on_before(karmada_118: World, jobs: list[str]) -> None:
    """member A -> B -> A: the return restores the newest checkpoint of the job on B, not A's old one,
    and counts the second failover."""
    world = karmada_118
    name = "returned"
    jobs.append(name)
    key = (NAMESPACE, name)
    first, _ = _start(world, name, "propagationpolicy-cluster-failover.yaml")
    triggered = time.monotonic()
    world.taint(first)
    away = _outcome(world, name, first, triggered)
    _assert_restored_newest(away)
    second = away.new_cluster
    job = world.wait_checkpoints(second, key, away.new.first_id + 2)
    world.wait_captured(name, second, job.job_id)
    world.untaint(first)
    triggered = time.monotonic()
    world.taint(second)
    back = _outcome(world, name, second, triggered)
    world.record(back.line("a return to the cluster the job ran on before (second failover)"))
    assert back.new_cluster == first
    _assert_restored_newest(back, count=2)
