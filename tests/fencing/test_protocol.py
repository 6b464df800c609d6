"""The fencing protocol's pure core: who may run, given heartbeats, fences, acks and storage times."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.objects import JOB_ID, flink_deployment, running_deployment
from tests.support.operator import running_status, stopped_status
from webhook.fencing.copies import Copy, CopyState, read_copy
from webhook.fencing.decide import Times, decide
from webhook.fencing.effects import Action, StorageHold
from webhook.fencing.operator import operator_report
from webhook.fencing.protocol import (
    Ack,
    Fence,
    Heartbeat,
    HoldOutcome,
    Ownership,
    ReleaseCause,
    judge_admission,
    judge_copy,
    judge_hold,
    next_epoch,
    others_heartbeating,
)
from webhook.fencing.records import (
    ack_name,
    clock_name,
    fence_name,
    heartbeat_name,
    parse_listing,
)
from webhook.fencing.renewal import KeepRenewing
from webhook.fencing.starts import (
    StartFrom,
    Unresolved,
    newest_known,
    release_start,
    resume_query,
    resume_start,
)
from webhook.policy.restore import FencingPolicy, RestorePolicy
from webhook.restore.outcome import RestoreDecision, RestoreOutcome
from webhook.restore.snapshots import Snapshots

T0 = datetime(2026, 12, 1, 15, 0, tzinfo=UTC)
LEASE = 30.0


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_a_copy_is_stopped_only_by_a_newer_fence_of_another_cluster() -> None:
    fence = Fence("member2", 1, at(0))
    assert judge_copy("member1", 0, Ownership(fences=(fence,))).stop
    assert judge_copy("member1", 0, Ownership(fences=(fence,))).fence == fence
    assert not judge_copy("member2", 1, Ownership(fences=(fence,))).stop  # its own fence
    assert not judge_copy("member3", 1, Ownership(fences=(fence,))).stop  # same epoch: not newer
    assert not judge_copy("member1", 2, Ownership(fences=(fence,))).stop  # the copy is newer than the fence
    assert not judge_copy("member1", 0, Ownership()).stop


def test_consecutive_failovers_stop_every_older_copy() -> None:
    fences = (Fence("member2", 1, at(0)), Fence("member3", 2, at(50)))
    ownership = Ownership(fences=fences)
    assert ownership.newest_fence() == fences[1]
    assert judge_copy("member1", 0, ownership).fence == fences[1]
    assert judge_copy("member2", 1, ownership).stop
    assert not judge_copy("member3", 2, ownership).stop


def test_a_fresh_heartbeat_holds_and_says_for_how_long() -> None:
    ownership = Ownership((Heartbeat("member1", at(8)),), (Fence("member2", 1, at(10)),))
    verdict = judge_hold("member2", 1, ownership, at(12), LEASE)
    assert verdict.outcome is HoldOutcome.HOLD
    assert [w.cluster for w in verdict.waiting] == ["member1"]
    assert verdict.waiting[0].age == 4.0
    assert verdict.remaining == 28.0  # measured from the fence, the later of the two


def test_an_ack_releases_at_once() -> None:
    ownership = Ownership(
        (Heartbeat("member1", at(8)),), (Fence("member2", 1, at(10)),), (Ack("member1", 1, at(13)),)
    )
    verdict = judge_hold("member2", 1, ownership, at(14), LEASE)
    assert (verdict.outcome, verdict.cause) == (HoldOutcome.RELEASE, ReleaseCause.ACK)
    # An ack of an older failover does not cover this one.
    stale_ack = Ownership(ownership.heartbeats, ownership.fences, (Ack("member1", 0, at(13)),))
    assert judge_hold("member2", 1, stale_ack, at(14), LEASE).outcome is HoldOutcome.HOLD


def test_a_dead_cluster_is_released_after_one_lease_from_the_fence() -> None:
    ownership = Ownership((Heartbeat("member1", at(0)),), (Fence("member2", 1, at(600)),))
    # The heartbeat is ten minutes old, but the cluster may only have lost the storage: it gets one lease
    # after the fence to answer.
    assert judge_hold("member2", 1, ownership, at(601), LEASE).outcome is HoldOutcome.HOLD
    verdict = judge_hold("member2", 1, ownership, at(630), LEASE)
    assert (verdict.outcome, verdict.cause, verdict.expired) == (
        HoldOutcome.RELEASE,
        ReleaseCause.LEASE_EXPIRY,
        ("member1",),
    )


def test_no_heartbeat_no_hold_and_manual_release() -> None:
    ownership = Ownership(fences=(Fence("member2", 1, at(0)),))
    assert judge_hold("member2", 1, ownership, at(1), LEASE).cause is ReleaseCause.NO_HEARTBEAT
    held = Ownership((Heartbeat("member1", at(0)),), ownership.fences)
    assert judge_hold("member2", 1, held, at(1), LEASE, manual=True).cause is ReleaseCause.MANUAL
    assert others_heartbeating("member2", held, 1) == ("member1",)
    assert others_heartbeating("member1", held, 1) == ()


def test_a_superseded_hold_is_never_released_even_by_hand() -> None:
    ownership = Ownership(fences=(Fence("member2", 1, at(0)), Fence("member3", 2, at(5))))
    verdict = judge_hold("member2", 1, ownership, at(100), LEASE, manual=True)
    assert verdict.outcome is HoldOutcome.SUPERSEDED
    assert verdict.superseded_by == Fence("member3", 2, at(5))


def test_next_epoch_without_a_failover_count() -> None:
    assert next_epoch("member2", Ownership()) == 1
    assert next_epoch("member2", Ownership(fences=(Fence("member1", 3, at(0)),))) == 4
    assert next_epoch("member2", Ownership(fences=(Fence("member2", 3, at(0)),))) == 3  # a re-admission


def test_listing_names_round_trip_and_foreign_names_are_ignored() -> None:
    entries = [
        {"name": f"bucket/x/{heartbeat_name('member1')}", "type": "file", "LastModified": at(1)},
        {"name": f"bucket/x/{fence_name(12, 'member-2.eu')}", "type": "file", "mtime": at(2).timestamp()},
        {"name": f"bucket/x/{ack_name(3, 'member1')}", "type": "file", "mtime": at(3).timestamp()},
        {"name": f"bucket/x/{clock_name('member2')}", "type": "file", "mtime": at(4).timestamp()},
        {"name": "bucket/x/notes.txt", "type": "file", "mtime": 1.0},
        {"name": "bucket/x/fence-1-UPPER.json", "type": "file", "mtime": 1.0},
        {"name": "bucket/x/sub", "type": "directory"},
    ]
    listing = parse_listing(entries)
    assert listing.ownership.heartbeats == (Heartbeat("member1", at(1)),)
    assert listing.ownership.fences == (Fence("member-2.eu", 12, at(2)),)
    assert listing.ownership.acks == (Ack("member1", 3, at(3)),)
    assert listing.clocks == {"member2": at(4)}


seconds = st.integers(0, 120)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(("member1", "member3")), seconds), max_size=3),
    st.lists(st.tuples(st.sampled_from(("member1", "member3")), st.integers(0, 3), seconds), max_size=3),
    seconds,
    st.integers(0, 200),
)
def test_a_release_never_leaves_a_fresh_unacked_heartbeat_behind(
    beats: list[tuple[str, int]], acks: list[tuple[str, int, int]], fenced_at: int, now: int
) -> None:
    ownership = Ownership(
        tuple(Heartbeat(c, at(t)) for c, t in beats),
        (Fence("member2", 2, at(fenced_at)),),
        tuple(Ack(c, e, at(t)) for c, e, t in acks),
    )
    verdict = judge_hold("member2", 2, ownership, at(max(now, fenced_at)), LEASE)
    if verdict.outcome is HoldOutcome.RELEASE:
        for beat in ownership.heartbeats:
            fresh = (at(max(now, fenced_at)) - max(beat.modified, at(fenced_at))).total_seconds() < LEASE
            assert not fresh or ownership.acked(beat.cluster, 2) is not None
    else:
        assert verdict.outcome is HoldOutcome.HOLD and verdict.waiting


# --- two agents, every interleaving ----------------------------------------------------------------


@dataclass
class World:
    """Storage as names -> storage time, a logical clock, and the two copies' desired states."""

    now: int = 0
    objects: dict[str, int] = field(default_factory=dict)
    old_running: bool = True  # member1's copy, epoch 0
    new_running: bool = False  # member2's restored copy, epoch 1
    new_admitted: bool = False
    old_alive: bool = True
    old_last_tick: int = 0
    old_seen: Ownership | None = None  # what the old agent listed, acted upon a step later

    def write(self, name: str) -> None:
        self.objects[name] = self.now

    def listing(self) -> Ownership:
        entries = [{"name": n, "type": "file", "mtime": at(t).timestamp()} for n, t in self.objects.items()]
        return parse_listing(entries).ownership


def old_step(world: World) -> None:
    """member1's agent, split where another actor may come between: list, then act on that listing."""
    if world.old_seen is None:
        world.old_seen = world.listing()
        return
    seen, world.old_seen = world.old_seen, None
    world.old_last_tick = world.now
    if not world.old_running:
        return
    verdict = judge_copy("member1", 0, seen)
    if verdict.stop and verdict.fence is not None:
        world.old_running = False  # the suspend patch
        world.write(ack_name(verdict.fence.epoch, "member1"))
        world.objects.pop(heartbeat_name("member1"), None)
    else:
        world.write(heartbeat_name("member1"))


def new_step(world: World) -> None:
    """member2: the webhook's CREATE (fence, then list), then the agent's polls (clock, then list)."""
    if world.new_running:
        return
    if not world.new_admitted:
        world.new_admitted = True
        world.write(fence_name(1, "member2"))
        now = at(world.objects[fence_name(1, "member2")])
    else:
        world.write(clock_name("member2"))
        now = at(world.objects[clock_name("member2")])
    verdict = judge_hold("member2", 1, world.listing(), now, LEASE)
    if verdict.outcome is HoldOutcome.RELEASE:
        world.new_running = True


POLL = 10  # the old agent polls at most this far apart while it lives: at most lease / 2 (policy rule)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(("old", "new", "tick", "tick", "die")), min_size=1, max_size=60),
    st.integers(0, 40),
)
def test_two_copies_never_both_run(schedule: list[str], start_beat: int) -> None:
    world = World(now=start_beat)
    world.write(heartbeat_name("member1"))  # member1 has been running and heartbeating
    for actor in schedule:
        if actor == "die" and world.old_alive:
            world.old_alive = False
            world.old_running = False  # a dead cluster runs nothing (its API server down is a stated limit)
        elif actor == "old" and world.old_alive:
            old_step(world)
        elif actor == "new":
            new_step(world)
        elif actor == "tick":
            if world.old_alive and world.now + 1 - world.old_last_tick > POLL:
                old_step(world)  # a live agent cannot fall a poll behind: it acts before time moves on
                old_step(world)
            world.now += 1
        assert not (world.old_running and world.new_running), schedule
    # Liveness: with the old side alive, enough polls on both sides always end with one running copy.
    for _ in range(200):
        old_step(world) if world.old_alive else None
        new_step(world)
        world.now += 1
    assert world.new_running and not world.old_running


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(("member1", "member2", "member3")), seconds), max_size=3),
    st.lists(st.tuples(st.sampled_from(("member1", "member3")), st.integers(0, 3)), max_size=3),
    st.lists(st.tuples(st.sampled_from(("member1", "member3")), st.integers(0, 3)), max_size=2),
    st.integers(1, 3),
    st.integers(0, 60),
)
def test_the_webhook_judges_as_the_agent_would_at_the_moment_of_its_fence(
    beats: list[tuple[str, int]],
    acks: list[tuple[str, int]],
    fences: list[tuple[str, int]],
    epoch: int,
    later: int,
) -> None:
    """judge_admission needs no storage time: it is judge_hold with "now" the fence's own time, which is
    newer than every record listed beside it."""
    ownership = Ownership(
        tuple(Heartbeat(c, at(t)) for c, t in beats),
        tuple(Fence(c, e, at(0)) for c, e in fences),
        tuple(Ack(c, e, at(0)) for c, e in acks),
    )
    written = at(120 + later)
    with_fence = Ownership(
        ownership.heartbeats, (*ownership.fences, Fence("member2", epoch, written)), ownership.acks
    )
    fast = judge_admission("member2", epoch, ownership, LEASE)
    slow = judge_hold("member2", epoch, with_fence, written, LEASE)
    assert fast.outcome == slow.outcome
    assert [w.cluster for w in fast.waiting] == [w.cluster for w in slow.waiting]
    assert fast.superseded_by == slow.superseded_by


def test_a_stale_copy_reads_high_availability_as_flink_and_the_restore_do() -> None:
    """One reading of HA (``FlinkResource.high_availability``): the newer key wins when both are set, as
    in Flink. Before issue 28 the stop read "either key", so `type: NONE` beside the deprecated
    `high-availability: kubernetes` stopped the copy as last-state while the restore read it as no HA."""
    from tests.support.objects import flink_deployment
    from webhook.common.flink import FlinkResource
    from webhook.fencing.patches import stop_mode

    def mode(conf: dict[str, str]) -> str:
        obj = flink_deployment()
        obj["spec"]["flinkConfiguration"].update(conf)
        return stop_mode(FlinkResource.from_object(obj))

    assert mode({"high-availability.type": "kubernetes"}) == "last-state"
    assert mode({"high-availability": "kubernetes"}) == "last-state"
    assert mode({"high-availability.type": "NONE", "high-availability": "kubernetes"}) == "stateless"
    assert mode({"high-availability.type": "kubernetes", "high-availability": "NONE"}) == "last-state"
    assert mode({}) == "stateless"


# --- what a copy is, and what a release may start from (decide's pure parts) -----------------------


def _copy_of(obj: dict[str, Any]) -> Copy:
    return read_copy(obj, RestorePolicy(default_checkpoint_dir="s3://jobs/checkpoints"))


def _deleted(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"]["deletionTimestamp"] = "2026-12-01T15:00:00Z"
    obj["metadata"]["finalizers"] = ["flinkdeployments.flink.apache.org/finalizer"]
    return obj


def test_an_empty_status_is_no_stop() -> None:
    """The operator has reported nothing yet, or the status was wiped: before, every check passed on
    the empty values and a fenced copy with such a status was acknowledged stopped."""
    suspended = flink_deployment()
    suspended["spec"]["job"]["state"] = "suspended"
    for status in (None, {}, {"jobStatus": {}}, {"jobStatus": {"jobId": JOB_ID}}):
        obj = {**suspended, "status": status} if status is not None else suspended
        assert not operator_report(obj).stopped, status
    stopped = {**suspended, "status": stopped_status(suspended)}
    assert operator_report(stopped).stopped
    fenced = {**suspended, "status": {}}
    fenced["metadata"] = {**suspended["metadata"], "labels": {"flink-failover.io/fenced": "1"}}
    assert _copy_of(fenced).state is CopyState.STOPPING  # not FENCED: nothing was acknowledged
    # A restore superseded while it was held never ran: the operator never deployed it, so its silence
    # is no pending stop (it is acknowledged and leaves the newer restore free).
    fenced["metadata"]["annotations"] = {"flink-failover.io/restore-decision": "held"}
    assert _copy_of(fenced).state is CopyState.FENCED


def test_a_copy_being_deleted_keeps_its_heartbeat_until_the_operator_has_stopped_its_job() -> None:
    """A deleted object with the operator's finalizer: the job runs until the cleanup completes. Before,
    any deletionTimestamp made the copy idle (its heartbeat removed at once)."""
    running = _deleted(running_deployment(checkpoint_dir="s3://jobs/checkpoints"))
    copy = _copy_of(running)
    assert copy.state is CopyState.ENDING and copy.operator.active
    step = decide("member1", copy, Ownership(), Times(mono=100.0, renewed=99.0), FencingPolicy())
    assert step.action is Action.ENDING
    assert step.chains == ((KeepRenewing(True, False),),)  # kept renewing, never stepped down
    # The cleanup stopped the job (JobManager gone, job FINISHED; the reconciled spec still says
    # running, a deletion reconciles no suspend): now it is idle and its heartbeat goes.
    reconciled = running_status(JOB_ID, running["spec"])["reconciliationStatus"]
    running["status"] = {**stopped_status(running), "reconciliationStatus": reconciled}
    assert _copy_of(running).state is CopyState.IDLE
    # A deleted copy with an empty status was never seen stopped: not idle (and never given a heartbeat
    # by the renewer, its job being inactive by its status).
    blank = _deleted(flink_deployment(checkpoint_dir="s3://jobs/checkpoints"))
    assert _copy_of(blank).state is CopyState.ENDING and not _copy_of(blank).operator.active


def _with_job_state(obj: dict[str, Any], state: str) -> dict[str, Any]:
    """The status the operator writes once a stop has completed, but with job state ``state``."""
    status = stopped_status(obj)
    status["jobStatus"] = {**status["jobStatus"], "state": state} if state else {"jobId": JOB_ID}
    return {**obj, "status": status}


def test_only_a_globally_terminal_job_state_is_a_stop() -> None:
    """Flink's SUSPENDED is terminal only for the JobManager that wrote it (it lost its leadership): a
    new HA leader resumes the job. Only FINISHED, CANCELED and FAILED (``isGloballyTerminalState``)
    with the rest of a stop's status say stopped; SUSPENDED, a state this code does not know and no
    state at all say the job may still run. Before, SUSPENDED or a missing job state with the JobManager
    MISSING and the suspend reconciled was acknowledged as a stop."""
    for kind in ("FlinkDeployment", "FlinkSessionJob"):
        suspended = flink_deployment(kind=kind, checkpoint_dir="s3://jobs/checkpoints")
        suspended["spec"]["job"]["state"] = "suspended"
        for state in ("FINISHED", "CANCELED", "FAILED", "finished"):
            assert operator_report(_with_job_state(suspended, state)).stopped, (kind, state)
        for state in ("SUSPENDED", "RECONCILING", "RESTARTING", "A_STATE_OF_LATER_FLINK", ""):
            report = operator_report(_with_job_state(suspended, state))
            assert not report.stopped, (kind, state)
            assert report.active == bool(state), (kind, state)  # a job that may still run, or resume
        # A stale copy we asked to stop stays STOPPING (heartbeat kept, no ack) while it says SUSPENDED.
        fenced = _with_job_state(suspended, "SUSPENDED")
        fenced["metadata"]["labels"] = {"flink-failover.io/fenced": "1"}
        assert _copy_of(fenced).state is CopyState.STOPPING, kind
        assert _copy_of(_with_job_state(fenced, "FINISHED")).state is CopyState.FENCED, kind


def test_a_session_job_being_deleted_ends_only_with_a_globally_terminal_job_state() -> None:
    """A FlinkSessionJob has no JobManager of its own (it runs in its session cluster's): while it is
    being deleted only its job's state says whether the job still runs. Before, any state not in the
    active list (SUSPENDED, none at all beside the reconciled spec) made it idle at once."""
    job = _deleted(flink_deployment(kind="FlinkSessionJob", checkpoint_dir="s3://jobs/checkpoints"))
    job["spec"]["job"]["state"] = "running"
    job["metadata"]["finalizers"] = ["flinksessionjobs.flink.apache.org/finalizer"]
    reported = running_status(JOB_ID, job["spec"])
    del reported["jobManagerDeploymentStatus"]  # a session job has no JobManager of its own

    def state_of(state: str) -> CopyState:
        return _copy_of({**job, "status": {**reported, "jobStatus": {"state": state}}}).state

    for state in ("RUNNING", "CANCELLING", "SUSPENDED", ""):
        assert state_of(state) is CopyState.ENDING, state
    for state in ("CANCELED", "FINISHED", "FAILED"):
        assert state_of(state) is CopyState.IDLE, state


def test_a_copy_suspended_by_someone_else_is_idle_only_once_its_operator_reports_the_stop() -> None:
    obj = running_deployment(checkpoint_dir="s3://jobs/checkpoints")
    obj["spec"]["job"]["state"] = "suspended"  # kubectl patch: the job still runs by its status
    assert _copy_of(obj).state is CopyState.ENDING
    obj["status"] = stopped_status(obj)
    assert _copy_of(obj).state is CopyState.IDLE


def _decision(outcome: RestoreOutcome, path: str = "", storage_error: bool = False) -> RestoreDecision:
    return RestoreDecision(outcome, "why", path=path, storage_error=storage_error)


ADMITTED = "s3://jobs/checkpoints/job/chk-42"


def test_only_a_lookup_that_ran_to_its_end_may_keep_the_admitted_path() -> None:
    """``newest_known``: the release starts from the newest restorable path; "" (the admitted path)
    only when the lookup answered and nothing restorable was found; every other outcome is unresolved
    and holds. Before, anything but RESTORED read as "" (a budget run out, no labels left, ...)."""
    listed = Snapshots(None, None)
    newer = "s3://jobs/checkpoints/job/chk-43"
    assert newest_known(_decision(RestoreOutcome.RESTORED, newer), listed, ADMITTED) == newer
    assert newest_known(_decision(RestoreOutcome.SUSPENDED), listed, ADMITTED) == ""  # nothing at all
    assert newest_known(_decision(RestoreOutcome.STATELESS), listed, ADMITTED) == ""
    assert newest_known(_decision(RestoreOutcome.SKIP), None, "") == ""  # nothing admitted, nothing lost
    unchecked = Snapshots(None, None, unchecked="budget")
    unresolved = [
        newest_known(_decision(RestoreOutcome.SUSPENDED, storage_error=True), None, ADMITTED),
        newest_known(_decision(RestoreOutcome.SUSPENDED), unchecked, ADMITTED),
        newest_known(_decision(RestoreOutcome.SKIP), None, ADMITTED),  # no failover label left
        newest_known(_decision(RestoreOutcome.DENIED), None, ADMITTED),
        # a restorable checkpoint older than the admitted one: that one is gone or unreadable now
        newest_known(_decision(RestoreOutcome.RESTORED, ADMITTED[:-1] + "1"), listed, ADMITTED),
    ]
    assert all(isinstance(u, Unresolved) for u in unresolved), unresolved
    held = release_start(ReleaseCause.ACK, unresolved[1])
    assert isinstance(held, StorageHold) and held.checkpoint and "budget" in held.problem
    proceed = release_start(ReleaseCause.STORAGE_ERROR, unresolved[0])  # onStorageError: proceed
    assert proceed == StartFrom("")
    # another job directory, or a savepoint: not comparable by id, the restore's order stands
    savepoint = "s3://jobs/savepoints/savepoint-0a1b2c-000000000001"
    assert newest_known(_decision(RestoreOutcome.RESTORED, savepoint), listed, ADMITTED) == savepoint


def test_a_resume_that_cannot_check_its_newest_checkpoint_waits() -> None:
    policy = RestorePolicy(default_checkpoint_dir="s3://jobs/checkpoints")
    obj = running_deployment(checkpoint_dir="s3://jobs/checkpoints")
    obj["spec"]["job"]["state"] = "suspended"
    obj["metadata"]["annotations"] = {"flink-failover.io/stepped-down": "heartbeat not renewed for 15s"}
    obj["status"] = stopped_status(obj)
    copy = read_copy(obj, policy)
    query = resume_query(copy, policy)
    assert copy.state is CopyState.STEPPED_DOWN and query is not None
    unchecked = Snapshots(None, None, unchecked="budget")
    assert isinstance(resume_start(copy, query, unchecked, policy), Unresolved)
    assert resume_start(copy, query, Snapshots(None, None), policy) == StartFrom("")  # it has none
    obj["status"]["jobStatus"] = {"state": "FINISHED"}  # its jobId lost: its checkpoints cannot be found
    nameless = read_copy(obj, policy)
    assert isinstance(resume_start(nameless, resume_query(nameless, policy), None, policy), Unresolved)


def test_a_release_that_waited_is_tried_again_at_the_next_poll_not_at_every_recheck() -> None:
    policy = FencingPolicy(lease_seconds=30, poll_seconds=5)
    obj = flink_deployment(checkpoint_dir="s3://jobs/checkpoints")
    obj["spec"]["job"]["state"] = "suspended"
    obj["metadata"]["annotations"] = {
        "flink-failover.io/hold": "epoch 1: ...",
        "flink-failover.io/epoch": "1",
    }
    copy = _copy_of(obj)
    records = Ownership(fences=(Fence("member2", 1, at(0)),))
    now = at(100)
    assert (
        decide("member2", copy, records, Times(mono=10.0, renewed=0.0, storage_now=now), policy).action
        is Action.RELEASED
    )
    waited = Times(
        mono=10.0, renewed=0.0, storage_now=now, release_waited=9.0
    )  # a recheck a second after the release waited
    assert decide("member2", copy, records, waited, policy).action is Action.HELD
    next_poll = Times(mono=14.1, renewed=0.0, storage_now=now, release_waited=9.0)
    assert decide("member2", copy, records, next_poll, policy).action is Action.RELEASED
