"""Property tests over the product's fencing agents, whole (``FencingAgent.run``: polls, rechecks, the
heartbeat loop, the lanes), in a simulated world on virtual time (``tests/support/simulation.py``).

Two or three member clusters, each with one or two replicas of the member role (each runs an agent, as
the chart's two replicas do), an operator that keeps a suspended job RUNNING for its own stop delay,
and one object store. Hypothesis draws the interleaving: when Karmada fails the job over (once or
twice), how each replica reaches the storage (hangs and errors in drawn windows, each replica on its
own), replicas killed and restarted (a lost pod and its replacement, knowing nothing), the replicas'
phases, the operators' stop delays, the admissions' storage faults, and whether the old object is
deleted after the first failover (purge mode ``Directly``: its job runs until the operator's cleanup has
stopped it). The world then runs on until every fault has ended.

Safety: two jobs are never RUNNING by their status at the same instant, and no job starts from a
checkpoint older than one an earlier job completed. Liveness: once every fault has ended and every
operator has stopped what it was asked to, the newest restore runs.

Assumptions, as stated in docs/failover.md: the operator stops a job within ``stopMarginSeconds``, a
cluster is never left with no agent for longer than ``leaseSeconds - stopMarginSeconds - 2 x poll``
(here: two replicas are never down at once, one replica is back within that), and a running copy's
API server answers.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from tests.support.simulation import Fault, World
from webhook.policy.restore import FencingPolicy, RenewFailure, RestorePolicy

FENCING = FencingPolicy(lease_seconds=30, poll_seconds=5, renew_deadline_seconds=10, stop_margin_seconds=10)
POLICY = RestorePolicy(default_checkpoint_dir="s3://jobs/checkpoints", fencing=FENCING)
NAMES = ("member1", "member2", "member3")
# A cluster left without any agent for at most this long keeps the guarantee (docs/failover.md).
ALONE = FENCING.lease_seconds - FENCING.stop_margin_seconds - 2 * FENCING.poll_seconds

windows = st.lists(
    st.tuples(st.floats(0, 120), st.floats(1, 60), st.sampled_from(["hang", "fail"])).map(
        lambda w: Fault(w[0], w[0] + w[1], w[2])
    ),
    max_size=3,
)


@st.composite
def outages(draw: Any, replicas: int) -> list[tuple[int, float, float]]:
    """(replica, killed at, back at): never two replicas of a cluster at once; a lone replica is back
    within ``ALONE`` (the stated assumption); a replica of two may stay away up to a minute."""
    out: list[tuple[int, float, float]] = []
    free = 0.0
    for _ in range(draw(st.integers(0, 2))):
        who = draw(st.integers(0, replicas - 1))
        start = draw(st.floats(free, free + 80))
        gap = draw(st.floats(0.5, ALONE if replicas == 1 else 60))
        out.append((who, start, start + gap))
        free = start + gap + 1
    return out


def build(
    phases: list[float],
    delays: list[float],
    faults: list[list[Fault]],
    webhook_faults: list[list[Fault]],
    replicas: list[int],
) -> World:
    world = World(POLICY)
    index = 0
    for i, name in enumerate(NAMES):
        world.cluster(name, delays[i], webhook_faults[i])
        for _ in range(replicas[i]):
            world.replica(name, faults[index % len(faults)])
            index += 1
    world.running_copy("member1")
    return world


def play(
    world: World, phases: list[float], outages_of: dict[str, list[tuple[int, float, float]]]
) -> list[Any]:
    events: list[Any] = []
    for c, cluster in enumerate(world.clusters.values()):
        for i, replica in enumerate(cluster.replicas):
            events.append(
                (phases[(c + i) % len(phases)] + 0.1, lambda r=replica, n=cluster.name: world.start(r, n))
            )
        for who, down, up in outages_of.get(cluster.name, []):
            replica = cluster.replicas[who]
            events.append((down, lambda r=replica: world.kill(r)))
            events.append((up, lambda r=replica, n=cluster.name: world.start(r, n)))
    return events


@settings(
    max_examples=150,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
    print_blob=True,
)
@given(
    phases=st.lists(st.sampled_from([0.0, 0.7, 1.25, 2.5, 3.75]), min_size=3, max_size=3),
    delays=st.lists(st.sampled_from([0.5, 3.0, 6.0, FENCING.stop_margin_seconds]), min_size=3, max_size=3),
    replicas=st.lists(st.integers(1, 2), min_size=3, max_size=3),
    faults=st.lists(windows, min_size=6, max_size=6),
    webhook_faults=st.lists(windows, min_size=3, max_size=3),
    first=st.floats(5, 90),
    second=st.one_of(st.none(), st.floats(1, 90)),
    purge=st.one_of(st.none(), st.floats(0, 40)),
    data=st.data(),
)
def test_two_jobs_never_run_at_once_and_the_newest_restore_runs_in_the_end(
    phases: list[float],
    delays: list[float],
    replicas: list[int],
    faults: list[list[Fault]],
    webhook_faults: list[list[Fault]],
    first: float,
    second: float | None,
    purge: float | None,
    data: Any,
) -> None:
    world = build(phases, delays, faults, webhook_faults, replicas)
    outages_of = {
        name: data.draw(outages(replicas[i]), label=f"outages {name}") for i, name in enumerate(NAMES)
    }
    failovers = [(first, "member2", "member1", 1)]
    if second is not None:
        failovers.append((first + second, "member3", "member2", 2))
    events = play(world, phases, outages_of)
    events += [(t, lambda t=t, a=a, b=b, e=e: world.fail_over(a, e, b)) for t, a, b, e in failovers]
    if purge is not None:  # Karmada's purge mode Directly: the old object is deleted after the failover
        events.append((first + purge, lambda: world.delete("member1")))
    ends = [f.end for fs in [*faults, *webhook_faults] for f in fs] + [
        up for o in outages_of.values() for *_, up in o
    ]
    quiet = max([*ends, failovers[-1][0]])
    settle = quiet + 3 * FENCING.lease_seconds + max(delays) + 2 * FENCING.poll_seconds
    world.run(settle, events)

    assert world.violations == [], world.violations[:3]  # one running copy at every instant
    assert world.lost_checkpoints() == []
    newest = failovers[-1][1]
    assert world.running() == [newest], world.describe()


def test_an_operator_that_never_reports_keeps_the_new_side_waiting() -> None:
    world = World(POLICY)
    for name in ("member1", "member2"):
        world.cluster(name, 10_000.0)
        world.replica(name)
    world.running_copy("member1")
    events: list[Any] = [(0.5, lambda: world.start(world.clusters["member1"].replicas[0], "member1"))]
    events.append((0.9, lambda: world.start(world.clusters["member2"].replicas[0], "member2")))
    events.append((10.0, lambda: world.fail_over("member2", 1, "member1")))
    world.run(400.0, events)
    assert world.running() == ["member1"]  # asked to stop, still RUNNING by status: nobody else starts
    held = world.clusters["member2"].server.get("orders")
    assert held is not None and held["spec"]["job"]["state"] == "suspended"
    names = {p.rsplit("/", 1)[-1] for p in world.store.files if p.startswith(world.folder() + "/")}
    assert {"heartbeat-member1.json", "stopping-000000000001-member1.json"} <= names
    assert "ack-000000000001-member1.json" not in names


def test_a_holder_cut_off_from_storage_steps_down_before_the_lease_and_resumes_if_nobody_took_over() -> None:
    world = World(POLICY)
    world.cluster("member1", 10.0)
    world.replica("member1", [Fault(20.0, 60.0, "hang")])
    world.running_copy("member1")
    world.run(200.0, [(0.5, lambda: world.start(world.clusters["member1"].replicas[0], "member1"))])
    first, *rest = [j for j in world.jobs if j.cluster == "member1"]
    # Last renewal before 20 s, suspended by its deadline + a poll, stopped within the margin.
    assert (
        first.ended is not None
        and first.ended <= 20 + FENCING.renew_deadline_seconds + FENCING.poll_seconds + 10
    )
    assert len(rest) == 1 and rest[0].ended is None  # resumed once the storage answered
    obj = world.clusters["member1"].server.get("orders")
    assert obj is not None and obj["spec"]["job"]["savepointRedeployNonce"] == 1
    assert rest[0].started_from.endswith(f"/chk-{first.checkpoints[-1][0]}")  # from its own newest


def test_the_same_world_without_stepping_down_runs_two_copies() -> None:
    """The switch trades one running copy for availability, exactly as documented."""
    keep = replace(POLICY, fencing=replace(FENCING, on_renew_failure=RenewFailure.KEEP_RUNNING))
    world = World(keep)
    world.cluster("member1", 3.0)
    world.cluster("member2", 3.0)
    world.replica("member1", [Fault(20.0, 200.0, "hang")])
    world.replica("member2")
    world.running_copy("member1")
    events: list[Any] = [
        (0.5, lambda: world.start(world.clusters["member1"].replicas[0], "member1")),
        (0.6, lambda: world.start(world.clusters["member2"].replicas[0], "member2")),
        (25.0, lambda: world.fail_over("member2", 1, "member1")),
    ]
    world.run(150.0, events)
    assert world.violations, "keep-running never produced two running copies"
    assert {c for _, cs in world.violations for c in cs} == {"member1", "member2"}


def test_losing_one_of_two_replicas_mid_failover_costs_nothing() -> None:
    """member1's replica that asked the operator to stop the stale copy is killed while it stops: the
    other replica acknowledges the stop, member2 starts from the newest checkpoint, never both."""
    world = World(POLICY)
    world.cluster("member1", 6.0)
    world.cluster("member2", 6.0)
    one, other = world.replica("member1"), world.replica("member1")
    world.replica("member2")
    world.running_copy("member1")
    events: list[Any] = [
        (0.5, lambda: world.start(one, "member1")),
        (2.2, lambda: world.start(other, "member1")),
        (0.9, lambda: world.start(world.clusters["member2"].replicas[0], "member2")),
        (20.0, lambda: world.fail_over("member2", 1, "member1")),
    ]

    def kill_the_stopper() -> None:
        stoppers = {
            by
            for _, by, _, body in world.clusters["member1"].server.patches
            if "labels" in body.get("metadata", {})
        }
        world.kill(one if one.name in stoppers or not stoppers else other)

    events.append((23.0, kill_the_stopper))  # after the stop was asked for, before the operator's 6 s
    world.run(120.0, events)
    assert world.violations == []
    assert world.running() == ["member2"] and world.lost_checkpoints() == []
    released = world.clusters["member2"].server.get("orders")
    assert released is not None and released["metadata"]["annotations"][
        f"{'flink-failover.io'}/released"
    ].startswith("ack at ")


def test_two_replicas_that_reach_the_storage_differently_never_run_two_copies() -> None:
    """One replica of member1 cannot reach the storage (its node's network), the other can: the copy
    is stepped down by the first and resumed by the second, again and again (an outage, said in
    docs/failover.md), but the heartbeat the second renews keeps member2 holding: never two copies."""
    world = World(POLICY)
    world.cluster("member1", 3.0)
    world.cluster("member2", 3.0)
    cut, fine = world.replica("member1", [Fault(10.0, 10_000.0, "hang")]), world.replica("member1")
    world.replica("member2")
    world.running_copy("member1")
    events: list[Any] = [
        (0.5, lambda: world.start(cut, "member1")),
        (1.5, lambda: world.start(fine, "member1")),
        (0.9, lambda: world.start(world.clusters["member2"].replicas[0], "member2")),
        (60.0, lambda: world.fail_over("member2", 1, "member1")),
    ]
    world.run(240.0, events)
    assert world.violations == []
    assert world.running() == ["member2"] and world.lost_checkpoints() == []


@pytest.mark.parametrize("how", ["delete", "suspend"])
@pytest.mark.parametrize("stop", [0.5, 6.0, FENCING.stop_margin_seconds])
@pytest.mark.parametrize("after", [0.1, 3.0, 12.0])
def test_a_stale_copy_deleted_or_suspended_by_someone_keeps_its_heartbeat_until_its_job_has_stopped(
    how: str, stop: float, after: float
) -> None:
    """Karmada's purge ``Directly`` (or an engineer) deletes the old copy after the failover: the
    operator's finalizer keeps the object while its cleanup stops the job, which runs meanwhile. The
    agent keeps that copy's heartbeat until the object is gone, so the new side stays held until then;
    the same for an engineer's suspend, until the operator reports the job stopped. Before, a copy
    marked deleted or suspended by someone else was idle at once: its heartbeat was removed and the
    restore released with ``no-heartbeat`` while the old job still ran (two RUNNING for up to the
    stop's length)."""
    world = World(POLICY)
    world.cluster("member1", stop)
    world.cluster("member2", stop)
    world.replica("member1")
    world.replica("member2")
    world.running_copy("member1")
    failover = 20.0
    events: list[Any] = [
        (0.5, lambda: world.start(world.clusters["member1"].replicas[0], "member1")),
        (0.9, lambda: world.start(world.clusters["member2"].replicas[0], "member2")),
        (failover, lambda: world.fail_over("member2", 1, "member1")),
        (failover + after, lambda: world.delete("member1") if how == "delete" else suspend()),
    ]

    def suspend() -> None:
        world.clusters["member1"].server.get("orders")["spec"]["job"]["state"] = "suspended"

    world.run(failover + 4 * FENCING.lease_seconds, events)

    assert world.violations == [], (world.violations[:3], world.describe())
    assert world.lost_checkpoints() == [], world.describe()
    assert world.running() == ["member2"], world.describe()
    if how == "delete":
        assert world.clusters["member1"].server.get("orders") is None  # the operator removed it
