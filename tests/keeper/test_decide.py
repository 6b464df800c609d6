"""The keeper's pure core (webhook/keeper/decide.py) on plain data: when it holds the lease, when it
renews, when it stops the JobManager, and which command lines are a JobManager's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from webhook.fencing.protocol import Fence, Heartbeat, Ownership
from webhook.keeper.decide import NEVER, Lease, answered, decide, due, inherited, listed, listing_due, sent
from webhook.keeper.jobmanager import ENTRYPOINTS, is_jobmanager
from webhook.policy.fencing import FencingPolicy, RenewFailure

POLICY = FencingPolicy()  # lease 30, poll 5, renew deadline 10, stop margin 10
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _held(at: float = 100.0) -> Lease:
    lease = listed("member1", Lease(0), Ownership(), at)
    return answered(sent(lease, at), at, ok=True)


def test_a_new_keeper_holds_nothing_and_stops_a_running_jobmanager() -> None:
    """Ready only once it holds the lease; a JobManager running before that is stopped."""
    decision = decide(Lease(0), 0.0, jobmanager_runs=True, policy=POLICY)
    assert (decision.holds, decision.stop) == (False, True)
    assert not decision.renew  # no listing has looked for fences yet


def test_a_listing_then_a_renewal_takes_the_lease() -> None:
    lease = listed("member1", Lease(0), Ownership(), 1.0)
    assert due(lease, 1.0, POLICY)
    lease = answered(sent(lease, 1.0), 1.0, ok=True)
    assert decide(lease, 1.5, True, POLICY).holds


def test_the_lease_ends_at_the_renew_deadline_counted_from_the_renewals_start() -> None:
    lease = _held(100.0)
    assert decide(lease, 100.0 + POLICY.renew_deadline_seconds - 0.01, True, POLICY).holds
    late = decide(lease, 100.0 + POLICY.renew_deadline_seconds, True, POLICY)
    assert (late.holds, late.stop) == (False, True)
    assert "not renewed for 10.0s" in late.reason


def test_a_failed_renewal_keeps_the_deadline_of_the_last_one_that_went_through() -> None:
    lease = answered(sent(_held(100.0), 105.0), 105.0, ok=False)
    assert lease.renewed == 100.0
    assert not due(lease, 105.5, POLICY)  # retried after a fifth of a poll
    assert due(lease, 106.0, POLICY)


def test_keep_running_never_stops_for_a_renewal_failure() -> None:
    policy = FencingPolicy(on_renew_failure=RenewFailure.KEEP_RUNNING)
    assert decide(_held(100.0), 1000.0, True, policy).holds


def test_a_newer_fence_of_another_cluster_ends_the_lease_for_good() -> None:
    fence = Fence("member2", 1, T0)
    lease = listed("member1", _held(100.0), Ownership(fences=(fence,)), 101.0)
    decision = decide(lease, 101.0, True, POLICY)
    assert (decision.holds, decision.renew, decision.stop) == (False, False, True)
    assert "member2 restored the job at epoch 1" in decision.reason
    # a later listing without the fence (deleted, or a listing that missed it) does not bring it back
    assert listed("member1", lease, Ownership(), 102.0).superseded == fence
    assert not due(lease, 200.0, POLICY)


@pytest.mark.parametrize(
    ("fence", "epoch"),
    [
        (Fence("member1", 3, T0), 0),  # this cluster's own fence: its epoch is 3
        (Fence("member2", 2, T0), 2),  # another cluster's at this copy's epoch: the restore that made it
        (Fence("member2", 1, T0), 2),
    ],
)
def test_a_fence_that_is_not_newer_than_the_copy_does_not_supersede(fence: Fence, epoch: int) -> None:
    lease = listed("member1", Lease(epoch), Ownership(fences=(fence,)), 1.0)
    assert lease.superseded is None and lease.confirmed == 1.0


def test_its_own_newest_fence_sets_its_epoch() -> None:
    """member1 restored at epoch 3 (its fence), started with --epoch 0: member2's epoch-2 fence is older."""
    records = Ownership(fences=(Fence("member1", 3, T0), Fence("member2", 2, T0)))
    lease = listed("member1", Lease(0), records, 1.0)
    assert (lease.epoch, lease.superseded) == (3, None)


def test_renewals_wait_for_a_listing_of_the_last_two_polls() -> None:
    lease = _held(100.0)
    assert due(lease, 105.0, POLICY)
    assert not due(lease, 100.0 + 2 * POLICY.poll_seconds + 0.01, POLICY)


def test_listing_is_once_a_poll_while_held_and_every_retry_period_while_not() -> None:
    assert not listing_due(0.0, 1.0, True, POLICY) and listing_due(0.0, 5.0, True, POLICY)
    assert listing_due(0.0, 1.0, False, POLICY)


def test_a_jobmanager_found_at_start_counts_as_renewed_a_poll_before_its_deadline() -> None:
    lease = inherited(Lease(0), "member1", Ownership(), None, 50.0, 50.0, POLICY)
    assert lease.renewed == 50.0 - (POLICY.renew_deadline_seconds - POLICY.poll_seconds)
    assert decide(lease, 54.99, True, POLICY).holds and decide(lease, 55.0, True, POLICY).stop


def test_the_storage_time_can_only_shorten_what_a_jobmanager_found_at_start_is_given() -> None:
    """This cluster's heartbeat is 8 s old in storage time: no renewal began in the last 8 s."""
    records = Ownership(heartbeats=(Heartbeat("member1", T0),))
    now = T0 + timedelta(seconds=8)
    lease = inherited(Lease(0), "member1", records, now, 49.0, 50.0, POLICY)
    assert lease.renewed == 41.0
    assert decide(lease, 51.0, True, POLICY).stop
    coarse = inherited(Lease(0), "member1", records, now, 49.0, 50.0, POLICY, coarse=True)
    assert coarse.renewed == 39.0
    fresh = inherited(Lease(0), "member1", records, T0 + timedelta(seconds=1), 49.0, 50.0, POLICY)
    assert fresh.renewed == 45.0  # never later than first sight allows


def test_a_lease_never_taken_says_so() -> None:
    assert decide(Lease(0), 0.0, False, POLICY).reason == "the lease has not been taken yet"
    assert Lease(0).renewed == NEVER


@pytest.mark.parametrize("entrypoint", ENTRYPOINTS)
def test_each_entrypoint_is_a_jobmanager(entrypoint: str) -> None:
    argv = ["/opt/java/bin/java", "-Xmx1g", "-classpath", "/opt/flink/lib/*", entrypoint, "-D", "x=y"]
    assert is_jobmanager(argv) == entrypoint


def test_other_command_lines_are_not() -> None:
    taskmanager = ["java", "org.apache.flink.kubernetes.taskmanager.KubernetesTaskExecutorRunner"]
    assert is_jobmanager(taskmanager) == ""
    assert is_jobmanager(["grep", f"x{ENTRYPOINTS[0]}"]) == ""  # a mention is not the main class
    assert is_jobmanager(["java", ENTRYPOINTS[0]], marker="test-7") == ""
    assert is_jobmanager(["java", ENTRYPOINTS[0], "--marker=test-7"], marker="test-7") == ENTRYPOINTS[0]


def test_a_lapsed_lease_is_renewed_only_once_its_jobmanager_is_stopped() -> None:
    """The deadline passed with the JobManager running: stop it first, renew after (never the other way,
    which would keep a JobManager that ran through the lapse)."""
    now = 100.0 + POLICY.renew_deadline_seconds + 0.01
    lapsed = listed("member1", _held(100.0), Ownership(), now - 1.0)  # a recent listing vouches
    assert due(lapsed, now, POLICY)
    running = decide(lapsed, now, True, POLICY)
    assert (running.stop, running.renew) == (True, False)
    stopped = decide(lapsed, now, False, POLICY)
    assert (stopped.stop, stopped.renew) == (False, True)
