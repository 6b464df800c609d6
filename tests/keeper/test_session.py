"""The session cluster's keeper's rules (webhook/keeper/session.py) on plain data: which session jobs it
adopts, which jobs Flink runs, and at a lapse whether it cancels one job or kills the JobManager."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from webhook.fencing.protocol import Fence, Ownership
from webhook.keeper.decide import answered, listed, sent
from webhook.keeper.session import (
    Guard,
    SessionJob,
    adopt,
    adoptable,
    answered_job,
    dropped,
    guard,
    observed,
    ready,
    renew_due,
    running,
)
from webhook.policy.fencing import FencingPolicy

POLICY = FencingPolicy()  # lease 30, poll 5, renew deadline 10, stop margin 10
T0 = datetime(2026, 1, 1, tzinfo=UTC)
A, B = "a" * 32, "b" * 32
BODY = {"cluster": "member1", "session": "shared", "jobId": A, "epoch": 2, "workload": "x", "written": "t"}


def _job(name: str, job_id: str, at: float = 100.0) -> SessionJob:
    job = adopt("member1", name, job_id, 0, Ownership(), at, at, POLICY)
    return replace(job, lease=answered(sent(job.lease, at), at, ok=True))


def _failed(job: SessionJob, at: float) -> SessionJob:
    return answered_job(replace(job, lease=sent(job.lease, at)), at, ok=False)


def _renewed(job: SessionJob, at: float) -> SessionJob:
    return answered_job(replace(job, lease=sent(job.lease, at)), at, ok=True)


def test_a_heartbeat_is_adopted_only_when_it_names_this_cluster_this_session_cluster_and_a_job_id() -> None:
    assert adoptable("member1", "shared", BODY) == (A, 2)
    assert adoptable("member1", "shared", {**BODY, "writer": "keeper"}) == (A, 2)
    assert adoptable("member1", "other-session", BODY) is None  # another session cluster's job
    assert adoptable("member2", "shared", BODY) is None  # another cluster's heartbeat
    assert adoptable("member1", "shared", {k: v for k, v in BODY.items() if k != "session"}) is None
    assert adoptable("member1", "shared", {**BODY, "jobId": ""}) is None  # the admission's, before a job
    assert adoptable("member1", "shared", {**BODY, "epoch": True}) is None
    assert adoptable("member1", "shared", None) is None


def test_an_adopted_job_counts_as_renewed_a_poll_before_its_deadline_and_is_judged_by_the_listing() -> None:
    job = adopt("member1", "orders", A, 0, Ownership(), 99.0, 100.0, POLICY)
    assert job.lease.renewed == 100.0 - (POLICY.renew_deadline_seconds - POLICY.poll_seconds)
    assert renew_due(job, frozenset({A}), True, 100.0, POLICY)  # a poll since its stand-in renewal
    own = Ownership(fences=(Fence("member1", 3, T0),))
    assert adopt("member1", "orders", A, 0, own, 99.0, 100.0, POLICY).lease.epoch == 3
    newer = Ownership(fences=(Fence("member2", 1, T0),))
    assert adopt("member1", "orders", A, 0, newer, 99.0, 100.0, POLICY).lease.superseded is not None


def test_running_jobs_are_those_flink_lists_in_a_state_that_runs() -> None:
    answer = {
        "jobs": [
            {"jid": A, "state": "RUNNING"},
            {"jid": B, "state": "CANCELED"},
            {"jid": "c" * 32, "state": "RESTARTING"},
            {"jid": "d" * 32, "state": "SUSPENDED"},
            {"jid": "not-a-job-id", "state": "RUNNING"},
        ]
    }
    assert running(answer) == frozenset({A, "c" * 32})
    assert running({"errors": ["x"]}) is None and running(None) is None


def test_one_job_superseded_is_cancelled_alone_and_the_other_keeps_its_lease() -> None:
    a = _job("orders", A)
    b = _job("payments", B)
    fence = Ownership(fences=(Fence("member2", 1, T0),))
    a = replace(a, lease=listed("member1", a.lease, fence, 101.0))
    found = guard([a, b], frozenset({A, B}), True, 101.5, POLICY)
    assert (found.kill, found.cancel) == (False, (A,)) and "superseded" in found.reason
    assert not renew_due(a, frozenset({A, B}), True, 106.0, POLICY)  # never renewed again
    b = replace(b, lease=listed("member1", b.lease, Ownership(), 105.5))
    assert renew_due(b, frozenset({A, B}), True, 106.0, POLICY)
    # Cancelled: Flink lists it no more; the guard has nothing to do, and it is never dropped.
    assert guard([a, b], frozenset({B}), True, 107.0, POLICY) == Guard()
    assert not dropped(observed(a, frozenset({B}), 120.0), 130.0, POLICY)
    # A JobManager that restarted recovered it: cancelled again, not killed.
    assert guard([a, b], frozenset({A, B}), True, 108.0, POLICY).cancel == (A,)


def test_a_storage_cut_lapses_every_lease_and_kills_the_jobmanager() -> None:
    a, b = _job("orders", A, 100.0), _job("payments", B, 100.2)
    a, b = _failed(a, 105.0), _failed(b, 105.2)  # the cut: every renewal fails
    assert guard([a, b], frozenset({A, B}), True, 109.9, POLICY) == Guard()  # still held
    found = guard([a, b], frozenset({A, B}), True, 110.0, POLICY)
    assert found.kill and not found.cancel
    # Killed: no JobManager, nothing runs, so the leases may be taken again; nothing is dropped meanwhile.
    assert guard([a, b], None, False, 111.0, POLICY) == Guard()
    assert not dropped(observed(a, None, 140.0), 140.0, POLICY)


def test_one_lease_lapsing_first_in_a_cut_kills_rather_than_cancels() -> None:
    """The first lease to lapse in a cut: the other still holds, but nothing went through since this
    one failed, so it is the keeper's lapse, not the job's."""
    a, b = _job("orders", A, 100.0), _job("payments", B, 103.0)
    a = _failed(a, 105.0)
    found = guard([a, b], frozenset({A, B}), True, 110.0, POLICY)
    assert found.kill


def test_a_job_whose_renewal_alone_fails_is_cancelled_while_the_others_run() -> None:
    a, b = _job("orders", A, 100.0), _job("payments", B, 100.0)
    a = _failed(a, 105.0)
    b = _renewed(b, 105.1)  # went through after a's failure: the storage answers
    a = _failed(a, 106.0)
    b = _renewed(b, 109.5)
    found = guard([a, b], frozenset({A, B}), True, 110.0, POLICY)
    assert (found.kill, found.cancel) == (False, (A,))
    assert not renew_due(a, frozenset({A, B}), True, 111.0, POLICY)  # not while it runs unheld
    a = replace(a, lease=listed("member1", a.lease, Ownership(), 110.5))
    assert renew_due(a, frozenset({B}), True, 111.0, POLICY)  # cancelled: it may be taken again


def test_its_retries_do_not_hide_that_another_renewal_went_through_after_its_first_failure() -> None:
    """A failed renewal is retried every fifth of a poll, the other job renewed once a poll: what counts
    is that the other went through after this one's failures began, not after its latest retry."""
    a, b = _job("orders", A, 100.0), _job("payments", B, 100.0)
    a = _failed(a, 105.0)
    b = _renewed(b, 105.5)
    for at in (106.0, 107.0, 108.0, 109.0, 109.9):
        a = _failed(a, at)
    found = guard([a, b], frozenset({A, B}), True, 110.0, POLICY)
    assert (found.kill, found.cancel) == (False, (A,))
    assert _renewed(a, 111.0).failed is None  # a renewal that goes through ends its failures


def test_no_rest_answer_kills_a_whole_lapse_at_once_and_waits_a_poll_for_a_single_job() -> None:
    a = _job("orders", A)
    fence = Ownership(fences=(Fence("member2", 1, T0),))
    a = replace(a, lease=listed("member1", a.lease, fence, 101.0))
    # A JobManager that starts answers before it runs a job: the superseded job waits for its cancel...
    assert guard([a], None, True, 102.0, POLICY) == Guard()
    # ...unless one that answered before has been silent for a poll: hung, killed.
    assert guard([a], None, True, 102.0, POLICY, silent=POLICY.poll_seconds).kill
    assert guard([a], None, False, 102.0, POLICY, silent=60.0) == Guard()  # no JobManager: nothing runs
    lapsed = _failed(_job("payments", B, 100.0), 105.0)
    assert guard([lapsed], None, True, 110.0, POLICY).kill  # the keeper renews nothing: at once
    # A job lapsed alone (another renewal went through since) waits for the answer as well.
    other = _renewed(_job("refunds", "c" * 32, 100.0), 105.5)
    assert guard([lapsed, other], None, True, 110.0, POLICY) == Guard()
    assert guard([lapsed, other], frozenset({B}), True, 110.0, POLICY).cancel == (B,)


def test_a_job_flink_no_longer_lists_for_a_poll_is_dropped() -> None:
    a = _job("orders", A, 100.0)
    a = observed(a, frozenset({A}), 101.0)
    a = observed(a, frozenset(), 102.0)
    assert not dropped(a, 105.9, POLICY) and dropped(a, 106.0, POLICY)
    assert not dropped(observed(a, None, 106.0), 106.0, POLICY)  # Flink not answering: not gone


def test_ready_once_listed_and_every_adopted_lease_not_superseded_is_held() -> None:
    assert not ready(False, [], 0.0, POLICY)[0]
    assert ready(True, [], 0.0, POLICY) == (True, "")
    a = _job("orders", A, 100.0)
    assert ready(True, [a], 101.0, POLICY)[0]
    held, reason = ready(True, [a], 110.0, POLICY)
    assert not held and reason.startswith("orders:")
