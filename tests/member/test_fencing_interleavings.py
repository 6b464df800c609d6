"""Property tests over the agent's pure core (``decide``) in a simulated world with production's timing.

Two or three member clusters, each with a Flink object (real dicts, read by ``copies.read_copy`` and
moved by the real patches), an operator that keeps a suspended job RUNNING for its own stop delay, an
agent polling at its own phase, and one storage whose records are read with ``records.parse_listing``.
Hypothesis draws the interleaving: when Karmada fails the job over (once or twice), each cluster's
storage faults (reads and writes fail in drawn windows), the operators' stop delays, the agents'
phases and the admissions' storage faults. The world then runs on until every fault has ended.

Safety: two jobs are never RUNNING by their status at the same instant. Liveness: once every fault
has ended and every operator has stopped what it was asked to, the newest restore runs.

Time is simulated (no sleeps, no threads), so each example takes milliseconds and cannot flake. The
storage's clock is the simulation's clock (monotone): the lease is measured in storage time by the
new side and the renew deadline on each holder's own monotonic clock, as in production.
"""

from __future__ import annotations

import copy as copying
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.kube import merge_patch
from tests.support.objects import JOB_ID, flink_deployment
from tests.support.operator import running_status, stopped_status
from webhook.member.fencing import copies
from webhook.member.fencing.copies import Copy, CopyState
from webhook.member.fencing.decide import (
    Acknowledge,
    Beat,
    Effect,
    MarkStopping,
    Release,
    Resume,
    RewriteHold,
    StepDown,
    Stop,
    StorageHold,
    Supersede,
    Times,
    Unreadable,
    WriteFence,
    decide,
)
from webhook.member.fencing.protocol import HoldOutcome, Ownership, judge_admission
from webhook.member.fencing.records import (
    ack_name,
    fence_name,
    heartbeat_name,
    parse_listing,
    stopping_name,
)
from webhook.member.policy import FencingPolicy, RestorePolicy

P = "flink-failover.io"
T0 = datetime(2026, 12, 1, tzinfo=UTC)
DT = 0.25  # the simulation's step, seconds
FENCING = FencingPolicy(lease_seconds=30, poll_seconds=5, renew_deadline_seconds=15, stop_margin_seconds=10)
POLICY = RestorePolicy(default_checkpoint_dir="/checkpoints", fencing=FENCING)
START_DELAY = 2.0  # the operator takes this long to start a job


@dataclass
class Cluster:
    name: str
    phase: float  # its agent's first poll
    stop_delay: float  # its operator's time to stop a suspended job
    faults: list[tuple[float, float]]  # windows in which its storage reads and writes fail
    obj: dict[str, Any] | None = None
    asked: float | None = None  # when its operator saw the spec ask for a change
    running_since: float | None = None  # RUNNING by status since
    intervals: list[tuple[float, float]] = field(default_factory=list)
    renewed: float = 0.0
    seen_running: bool = False
    next_poll: float = 0.0

    def storage_ok(self, t: float) -> bool:
        return not any(start <= t < end for start, end in self.faults)


@dataclass
class World:
    clusters: dict[str, Cluster]
    records: dict[str, float] = field(default_factory=dict)  # record name -> storage time written
    t: float = 0.0

    def listing(self) -> Ownership:
        entries = [
            {"name": f"x/{n}", "type": "file", "mtime": T0 + timedelta(seconds=m)}
            for n, m in self.records.items()
        ]
        return parse_listing(entries).ownership

    def storage_now(self) -> datetime:
        return T0 + timedelta(seconds=self.t)

    def running(self) -> list[str]:
        return [c.name for c in self.clusters.values() if c.running_since is not None]


def _status(c: Cluster) -> dict[str, Any]:
    assert c.obj is not None
    return dict(c.obj.get("status") or {})


def operator_step(c: Cluster, t: float) -> None:
    """The Flink operator: a change of ``spec.job.state`` takes effect after a delay."""
    if c.obj is None:
        return
    desired = c.obj["spec"]["job"].get("state", "running")
    reported = (_status(c).get("jobStatus") or {}).get("state")
    if desired == "running" and reported != "RUNNING":
        c.asked = t if c.asked is None else c.asked
        if t - c.asked >= START_DELAY:
            c.asked, c.running_since = None, t
            c.obj["status"] = running_status(JOB_ID, c.obj["spec"])
    elif desired == "suspended" and reported == "RUNNING":
        c.asked = t if c.asked is None else c.asked
        if t - c.asked >= c.stop_delay:
            c.asked = None
            assert c.running_since is not None
            c.intervals.append((c.running_since, t))
            c.running_since = None
            c.obj["status"] = stopped_status(c.obj)
    else:
        c.asked = None


def execute(world: World, c: Cluster, read: Copy, effect: Effect, mono: float) -> bool:
    """The agent's effects on the simulated world; False when one fails (storage down)."""
    t, ok = world.t, c.storage_ok(world.t)
    assert c.obj is not None
    when = "2026-12-01T00:00:00Z"
    if isinstance(effect, Beat):
        if ok:
            world.records[heartbeat_name(c.name)] = t
            c.renewed = mono
        return ok
    if isinstance(effect, WriteFence):
        if ok:
            world.records[fence_name(effect.epoch, c.name)] = t
        return ok
    if isinstance(effect, MarkStopping):
        if ok:
            world.records[stopping_name(effect.epoch, c.name)] = t
        return ok
    if isinstance(effect, Acknowledge):
        if ok:
            world.records[ack_name(effect.epoch, c.name)] = t
            world.records.pop(heartbeat_name(c.name), None)
        return ok
    if isinstance(effect, Stop):
        patch = copies.stop_patch(read, effect.fence, POLICY, when)
    elif isinstance(effect, StepDown):
        patch = copies.step_down_patch(read, effect.reason, POLICY, when)
    elif isinstance(effect, Resume):
        patch = copies.resume_patch(read, "/checkpoints/x/chk-1", POLICY, when)
    elif isinstance(effect, Release):
        patch = copies.release_patch("/checkpoints/x/chk-1", effect.cause, POLICY, when)
    elif isinstance(effect, Supersede):
        patch = copies.superseded_patch(effect.fence, POLICY, when)
    elif isinstance(effect, RewriteHold | StorageHold):
        return True
    else:  # pragma: no cover
        raise AssertionError(effect)
    c.obj = merge_patch(c.obj, patch)
    return True


def agent_poll(world: World, c: Cluster) -> None:
    if c.obj is None:
        return
    read = copies.read_copy(c.obj, POLICY)
    mono = world.t  # every agent's monotonic clock runs at the storage's rate
    if read.state in (CopyState.RUNNING, CopyState.STEPPED_DOWN):
        if not c.seen_running:
            c.seen_running, c.renewed = True, mono
    else:
        c.seen_running = False
    records: Ownership | Unreadable = world.listing() if c.storage_ok(world.t) else Unreadable("down")
    times = Times(mono, c.renewed, world.storage_now(), None)
    plan = decide(c.name, read, records, times, FENCING)
    for chain in plan.chains:
        for effect in chain:
            if not execute(world, c, read, effect, mono):
                break


def admit(world: World, c: Cluster, epoch: int, source: str) -> None:
    """Karmada creates the workload on ``c``; its webhook writes the fence and lists, as the gate does."""
    obj = flink_deployment(
        labels={f"{P}/failover": "true", f"{P}/job-id": JOB_ID},
        annotations={f"{P}/failover-count": str(epoch), f"{P}/source-cluster": source},
    )
    obj["spec"]["job"]["state"] = "running"
    obj["metadata"]["annotations"][f"{P}/restore-decision"] = "restored"
    obj["metadata"]["annotations"][f"{P}/epoch"] = str(epoch)
    held = True
    if c.storage_ok(world.t):
        world.records[fence_name(epoch, c.name)] = world.t
        verdict = judge_admission(c.name, epoch, world.listing(), FENCING.lease_seconds)
        held = verdict.outcome is not HoldOutcome.RELEASE
        if not held:
            world.records[heartbeat_name(c.name)] = world.t  # the admission's heartbeat
    if held:  # a hold, or the records unusable (onStorageError: hold)
        obj["spec"]["job"]["state"] = "suspended"
        obj["metadata"]["annotations"][f"{P}/hold"] = "held"
    c.obj = obj
    c.seen_running = False


def simulate(world: World, failovers: list[tuple[float, str, str]], until: float) -> None:
    pending = sorted(failovers)
    epoch = 0
    a = world.clusters["member1"]
    a.obj = flink_deployment()
    a.obj["spec"]["job"]["state"] = "running"
    a.obj["status"] = running_status(JOB_ID, a.obj["spec"])
    a.running_since = 0.0
    # It has run (and heartbeated) for long before the simulation starts: a copy that never reached
    # its storage is invisible to fencing (docs/failover.md "Limits").
    world.records[heartbeat_name(a.name)] = 0.0
    a.seen_running, a.renewed = True, 0.0
    for c in world.clusters.values():
        c.next_poll = c.phase
    while world.t <= until:
        while pending and pending[0][0] <= world.t:
            _, target, source = pending.pop(0)
            epoch += 1
            admit(world, world.clusters[target], epoch, source)
        for c in world.clusters.values():
            operator_step(c, world.t)
        for c in world.clusters.values():
            if world.t >= c.next_poll:
                agent_poll(world, c)
                c.next_poll += FENCING.poll_seconds
        for c in world.clusters.values():
            operator_step(c, world.t)
        assert len(world.running()) <= 1, (world.t, world.running(), world.records)
        world.t = round(world.t + DT, 6)


windows = st.lists(
    st.tuples(st.floats(0, 120), st.floats(1, 60)).map(lambda w: (w[0], w[0] + w[1])), max_size=3
)


@settings(max_examples=300, deadline=None)
@given(
    phases=st.lists(st.sampled_from([0.0, 1.25, 2.5, 3.75]), min_size=3, max_size=3),
    delays=st.lists(st.sampled_from([0.5, 3.0, 6.0, FENCING.stop_margin_seconds]), min_size=3, max_size=3),
    faults=st.lists(windows, min_size=3, max_size=3),
    first=st.floats(5, 90),
    second=st.one_of(st.none(), st.floats(1, 90)),
)
def test_two_jobs_never_run_at_once_and_the_newest_restore_runs_in_the_end(
    phases: list[float],
    delays: list[float],
    faults: list[list[tuple[float, float]]],
    first: float,
    second: float | None,
) -> None:
    names = ("member1", "member2", "member3")
    world = World({n: Cluster(n, phases[i], delays[i], faults[i]) for i, n in enumerate(names)})
    failovers = [(first, "member2", "member1")]
    if second is not None:
        failovers.append((first + second, "member3", "member2"))
    quiet = max([end for f in faults for _, end in f] + [first + (second or 0)])
    settle = quiet + 3 * FENCING.lease_seconds + max(delays) + START_DELAY + 2 * FENCING.poll_seconds
    simulate(world, failovers, settle)  # asserts one running copy at every step
    newest = failovers[-1][1]
    assert world.running() == [newest], (world.running(), world.records)


def test_an_operator_that_never_reports_keeps_the_new_side_waiting() -> None:
    world = World({n: Cluster(n, 0.0, 10_000.0, []) for n in ("member1", "member2")})
    simulate(world, [(10.0, "member2", "member1")], 400.0)
    assert world.running() == ["member1"]  # asked to stop, still RUNNING by status: nobody else starts
    assert world.clusters["member2"].obj is not None
    assert world.clusters["member2"].obj["spec"]["job"]["state"] == "suspended"
    assert heartbeat_name("member1") in world.records and stopping_name(1, "member1") in world.records
    assert ack_name(1, "member1") not in world.records


def test_a_holder_cut_off_from_storage_steps_down_before_the_lease_and_resumes_if_nobody_took_over() -> None:
    world = World(
        {n: Cluster(n, 0.0, 10.0, [(20.0, 60.0)] if n == "member1" else []) for n in ("member1", "member2")}
    )
    simulate(world, [], 200.0)
    a = world.clusters["member1"]
    assert a.obj is not None
    # Stepped down (last renewal at 15 s: suspended at 30 s, stopped at 40 s), resumed after 60 s.
    assert [round(s) for s, _ in a.intervals] == [0] and 30 <= a.intervals[0][1] <= 30 + 10 + DT
    assert world.running() == ["member1"]
    assert a.obj["spec"]["job"]["savepointRedeployNonce"] == 1


def test_the_same_world_without_stepping_down_runs_two_copies() -> None:
    """The switch trades one running copy for availability, exactly as documented."""
    from dataclasses import replace

    from webhook.member.policy import RenewFailure

    global FENCING
    saved = FENCING
    FENCING = replace(saved, on_renew_failure=RenewFailure.KEEP_RUNNING)
    try:
        world = World(
            {
                n: Cluster(n, 0.0, 3.0, [(20.0, 200.0)] if n == "member1" else [])
                for n in ("member1", "member2")
            }
        )
        try:
            simulate(world, [(25.0, "member2", "member1")], 150.0)
        except AssertionError as exc:
            assert "member1" in str(exc) and "member2" in str(exc)
        else:  # pragma: no cover - the property would be vacuous
            raise AssertionError("keep-running never produced two running copies")
    finally:
        FENCING = saved


def _copy(obj: dict[str, Any]) -> dict[str, Any]:
    return copying.deepcopy(obj)
