"""The fencing agent's own loop (``FencingAgent.run``: polls, rechecks, the heartbeat loop, its lanes) in
a simulated world on virtual time (``tests/support/simulation.py``): what a hung storage may and may not
cost the jobs of one member cluster, counted on the records' storage times, the same on any machine.

Before the heartbeat loop (issue 28), rechecks of held copies waited up to a poll each, one after
another, and heartbeats waited behind them: with four held copies on a hung bucket a healthy job on
another bucket was stepped down 6.5 s after the hang (poll 1 s, renew deadline 4 s), and the holder's
own step-down came later the more copies were held (4.5 s, 6.5 s, 8.5 s for 0, 4, 8).
"""

from __future__ import annotations

import itertools
import random
from dataclasses import replace
from typing import Any

import pytest

from tests.support.simulation import LATENCY, Fault, SimFileSystem, World
from webhook.fencing.renewal import retry_seconds
from webhook.policy.restore import FencingPolicy, RestorePolicy

FENCING = FencingPolicy(lease_seconds=30, poll_seconds=5, renew_deadline_seconds=10, stop_margin_seconds=10)
POLICY = RestorePolicy(default_checkpoint_dir="s3://jobs/checkpoints", fencing=FENCING)
HANG = 40.0  # when the hung bucket stops answering (for the agents of member2)
HEALTHY, HUNG = "s3://healthy/checkpoints", "s3://hung/checkpoints"


def world_with(held: int, healthy: int, replicas: int) -> World:
    """member2 runs ``healthy`` jobs on one bucket and holds ``held`` restores on another, waiting for
    member1, whose copies still run and heartbeat there."""
    world = World(POLICY)
    world.cluster("member1", 3.0)
    world.cluster("member2", 3.0)
    world.replica("member1")
    for _ in range(replicas):
        world.replica("member2", [Fault(HANG, 10_000.0, "hang", "hung")])
    for i in range(healthy):
        world.running_copy("member2", f"healthy-{i}", HEALTHY)
    for i in range(held):
        world.running_copy("member1", f"held-{i}", HUNG)
    return world


def start_all(world: World) -> list[tuple[float, object]]:
    events: list[tuple[float, object]] = []
    for cluster in world.clusters.values():
        for i, replica in enumerate(cluster.replicas):
            events.append((0.5 + 1.7 * i, lambda r=replica, c=cluster.name: world.start(r, c)))
    return events


@pytest.mark.parametrize("replicas", [1, 2])
@pytest.mark.parametrize("held", [0, 4, 16, 64])
def test_held_copies_on_a_hung_bucket_never_delay_another_buckets_heartbeats(
    held: int, replicas: int
) -> None:
    world = world_with(held, healthy=3, replicas=replicas)
    events = start_all(world)
    # The restores reach member2 while its storage answers; member1 keeps heartbeating: they stay held.
    events += [
        (10.0 + i * 0.01, lambda i=i: world.fail_over("member2", 1, "member1", f"held-{i}", HUNG))
        for i in range(held)
    ]
    world.run(200.0, events)  # type: ignore[arg-type]

    assert world.violations == []
    for i in range(held):
        assert world.clusters["member2"].server.get(f"held-{i}")["spec"]["job"]["state"] == "suspended"
    period = FENCING.poll_seconds + retry_seconds(FENCING) + 2 * LATENCY
    for i in range(3):
        beats = world.store.writes[f"{world.folder(f'healthy-{i}', HEALTHY)}/heartbeat-member2.json"]
        after = [t for t in beats if t >= HANG - FENCING.poll_seconds]
        gaps = [b - a for a, b in itertools.pairwise(after)]
        assert len(after) >= (200.0 - HANG) / period, (held, beats)
        assert max(gaps) <= period, (held, max(gaps))  # the period held, storage time
        assert world.clusters["member2"].server.get(f"healthy-{i}")["spec"]["job"]["state"] == "running"
    stepped = [key for _, _, key, body in world.clusters["member2"].server.patches if "healthy" in key[2]]
    assert stepped == []  # no healthy job was touched at all


@pytest.mark.parametrize("replicas", [1, 2])
@pytest.mark.parametrize("held", [0, 4, 16, 64])
def test_the_holder_of_a_hung_bucket_steps_down_within_its_bound_whatever_it_holds(
    held: int, replicas: int
) -> None:
    """member2 runs ``orders`` on the hung bucket and holds ``held`` restores there: when the bucket
    hangs, ``orders`` is suspended by r + renewDeadline + poll, r being the start of its last renewal
    that succeeded (no later than the storage time of that renewal, which is what the test reads)."""
    world = world_with(held, healthy=0, replicas=replicas)
    world.running_copy("member2", "orders", HUNG)
    events = start_all(world)
    events += [
        (10.0 + i * 0.01, lambda i=i: world.fail_over("member2", 1, "member1", f"held-{i}", HUNG))
        for i in range(held)
    ]
    world.run(120.0, events)  # type: ignore[arg-type]

    beats = world.store.writes[f"{world.folder('orders', HUNG)}/heartbeat-member2.json"]
    last = max(t for t in beats if t < HANG)  # the last renewal the storage took
    downs = [t for t, _, key, body in world.clusters["member2"].server.patches if key[2] == "orders"]
    assert downs, "never stepped down"
    stepped = downs[0]
    assert world.clusters["member2"].server.get("orders")["spec"]["job"]["state"] == "suspended"
    # By deadline + one poll from that renewal; not before the deadline of the replica that stepped it
    # down (with two replicas, its own last renewal may be up to a poll before the other's).
    bound = FENCING.renew_deadline_seconds + FENCING.poll_seconds
    earliest = FENCING.renew_deadline_seconds - LATENCY - (FENCING.poll_seconds if replicas > 1 else 0)
    assert earliest <= stepped - last <= bound, (held, stepped - last)
    assert world.violations == []


@pytest.mark.parametrize("seed", range(64))
def test_a_deleted_copy_leaves_no_heartbeat_even_when_a_renewal_was_in_flight(seed: int) -> None:
    """The object is deleted while its heartbeat's renewal may be on its way to the storage, whose calls
    answer out of order (a lane has several threads): the agent removes the heartbeat after that renewal
    has landed, never before. Before, a renewal landing after the removal wrote the heartbeat back and
    nothing renewed or removed it again: the new job on the other cluster waited out a whole lease."""
    chance = random.Random(seed)
    world = World(POLICY)
    world.cluster("member1", 3.0)
    replica = world.replica("member1")
    replica.reach.latencies = iter(lambda: chance.uniform(0.02, 4.0), None)
    world.running_copy("member1", "orders", HEALTHY)
    heartbeat = f"{world.folder('orders', HEALTHY)}/heartbeat-member1.json"
    server = world.clusters["member1"].server

    def delete() -> None:
        server.objects.pop(("FlinkDeployment", "analytics", "orders"))

    deleted_at = 50.0 + chance.uniform(0.0, FENCING.poll_seconds)
    world.run(90.0, [(0.5, lambda: world.start(replica, "member1")), (deleted_at, delete)])

    assert len(world.store.writes[heartbeat]) > 2  # it was renewed while the job ran
    assert heartbeat not in world.store.files, (deleted_at, world.store.writes[heartbeat][-3:])


def test_a_poll_lists_a_storage_once_for_all_its_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fleet on one storage: each poll reads every copy's records from one listing of the storage's
    records (a few pages), not one listing per copy (a request per job per poll per replica, which on
    the end-to-end tier's fleet of 50 saturated the S3 server and missed heartbeats); a lone copy on
    another storage is listed by its own folder. Every copy stays renewed and running."""
    calls: list[tuple[str, str]] = []
    real_ls, real_find = SimFileSystem.ls, SimFileSystem.find

    def ls(self: SimFileSystem, path: str, *a: Any, **kw: Any) -> Any:
        calls.append(("ls", path))
        return real_ls(self, path, *a, **kw)

    def find(self: SimFileSystem, path: str, *a: Any, **kw: Any) -> Any:
        calls.append(("find", path))
        return real_find(self, path, *a, **kw)

    monkeypatch.setattr(SimFileSystem, "ls", ls)
    monkeypatch.setattr(SimFileSystem, "find", find)
    # the records' listings alone: verdict checks list checkpoints (test_verdict_keeping.py)
    world = World(replace(POLICY, fencing=replace(POLICY.fencing, verdict_seconds=0)))
    world.cluster("member2", 3.0)
    replica = world.replica("member2")
    fleet = 20
    for i in range(fleet):
        world.running_copy("member2", f"job-{i}", HEALTHY)
    world.running_copy("member2", "alone", HUNG)
    until = 100.0
    world.run(until, [(0.5, lambda: world.start(replica, "member2"))])

    polls = until / FENCING.poll_seconds
    finds = [path for kind, path in calls if kind == "find"]
    listed = [path for kind, path in calls if kind == "ls"]
    assert set(finds) == {"healthy/checkpoints/flink-failover"}
    assert polls - 2 <= len(finds) <= polls + 1
    assert set(listed) == {world.folder("alone", HUNG)}  # the lone copy: its own folder
    assert len(listed) <= polls + 1
    for i in range(fleet):
        beats = world.store.writes[f"{world.folder(f'job-{i}', HEALTHY)}/heartbeat-member2.json"]
        assert len(beats) >= polls - 2, (i, len(beats))
        assert world.clusters["member2"].server.get(f"job-{i}")["spec"]["job"]["state"] == "running"
    assert world.violations == []


def test_a_shared_listing_starts_after_the_storage_time_a_held_copy_counts_from(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A held copy's ages are its "now" (the storage's time, learnt by writing the clock object) minus
    the records' times, so the listing it reads must start after that "now": a listing taken before
    could miss a heartbeat renewed in between and make the old one look older than the lease. The poll's
    one listing of a storage that holds a held copy therefore waits for the clock, whichever copy of that
    storage asked for it first."""
    events: list[tuple[float, str]] = []
    real_info, real_find = SimFileSystem.info, SimFileSystem.find

    def info(self: SimFileSystem, path: str, *a: Any, **kw: Any) -> Any:
        if path.rstrip("/").rsplit("/", 1)[-1].startswith("clock-"):
            events.append((self.store.loop.now, "clock"))
        return real_info(self, path, *a, **kw)

    def find(self: SimFileSystem, path: str, *a: Any, **kw: Any) -> Any:
        events.append((self.store.loop.now, "find"))
        return real_find(self, path, *a, **kw)

    monkeypatch.setattr(SimFileSystem, "info", info)
    monkeypatch.setattr(SimFileSystem, "find", find)
    world = World(POLICY)
    world.cluster("member1", 3.0)
    world.cluster("member2", 3.0)
    replica = world.replica("member2")
    for i in range(3):  # running on member2, beside the held restore on the same storage
        world.running_copy("member2", f"steady-{i}", HEALTHY)
    world.running_copy("member1", "orders", HEALTHY)  # its heartbeat holds the restore (no agent renews it)
    assert world.fail_over("member2", 1, "member1", "orders", HEALTHY)
    world.run(20.0, [(0.5, lambda: world.start(replica, "member2"))])

    assert world.clusters["member2"].server.get("orders")["spec"]["job"]["state"] == "suspended"
    finds = [t for t, kind in events if kind == "find"]
    clocks = [t for t, kind in events if kind == "clock"]
    assert len(finds) >= 3
    for listed in finds:  # this poll's clock read back before the listing ran
        assert any(listed - FENCING.poll_seconds / 2 < c < listed for c in clocks), (listed, clocks)


def test_a_blue_green_child_that_goes_leaves_the_heartbeat_of_the_child_that_runs_on() -> None:
    """After a blue/green transition the operator deletes the old child; both children keep their
    records for the parent, so they renew one heartbeat. The child that goes must not take it along
    (before, its removal deleted the heartbeat the running child renews, until that child's next
    renewal: a failover in between was not held)."""
    from tests.support.objects import running_deployment
    from webhook.fencing.copies import read_copy
    from webhook.fencing.renewer import Renewer

    def child(colour: str) -> Any:
        obj = running_deployment(name=f"orders-{colour}")
        obj["metadata"]["ownerReferences"] = [
            {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkBlueGreenDeployment", "name": "orders"}
        ]
        return read_copy(obj, POLICY)

    async def never(*_: Any) -> bool:
        return False

    renewer = Renewer("member1", FENCING, None, never, lambda: "")  # type: ignore[arg-type]
    green, blue = child("green"), child("blue")
    assert green.folder == blue.folder and green.patched != blue.patched
    assert renewer.observe([green], 0.0) == []
    assert renewer.observe([green, blue], 5.0) == []
    assert renewer.observe([blue], 10.0) == []  # green is gone; blue runs on under the same heartbeat
    assert renewer.observe([], 15.0) == [(blue.patched, blue.folder)]  # the last one: removed


def test_a_stopping_or_ending_copy_whose_job_is_not_active_is_given_no_heartbeat() -> None:
    """The heartbeat loop keeps renewing a copy being stopped or deleted that it renewed already; one it
    first sees stopping or ending gets a heartbeat only if its status shows the job active (an agent
    that restarted mid-stop). A restore superseded while held never ran: a heartbeat for it would hold
    the newer restore for as long as it is listed."""
    from tests.support.objects import flink_deployment, running_deployment
    from webhook.fencing.copies import CopyState, read_copy
    from webhook.fencing.renewer import Renewer

    async def never(*_: Any) -> bool:
        return False

    renewer = Renewer("member1", FENCING, None, never, lambda: "")  # type: ignore[arg-type]
    silent = flink_deployment(name="superseded", checkpoint_dir=HEALTHY)
    silent["metadata"]["labels"] = {"flink-failover.io/fenced": "2"}
    silent["spec"]["job"]["state"] = "suspended"
    stopping = running_deployment(name="stopping", checkpoint_dir=HEALTHY)
    stopping["metadata"]["labels"] = {"flink-failover.io/fenced": "2"}
    stopping["spec"]["job"]["state"] = "suspended"  # asked to stop; its status still says RUNNING
    deleted = flink_deployment(name="deleted", checkpoint_dir=HEALTHY)
    deleted["metadata"]["deletionTimestamp"] = "2026-12-01T15:00:00Z"
    found = [read_copy(o, POLICY) for o in (silent, stopping, deleted)]
    assert [c.state for c in found] == [CopyState.STOPPING, CopyState.STOPPING, CopyState.ENDING]
    renewer.observe(found, 0.0)
    assert renewer.renewed(found[1].patched, -1.0) != -1.0  # the active one has an entry
    assert renewer.renewed(found[0].patched, -1.0) == -1.0
    assert renewer.renewed(found[2].patched, -1.0) == -1.0


def test_a_heartbeat_no_entry_renews_is_removed_once_its_copy_is_gone_and_only_then() -> None:
    """The heartbeats this agent wrote that the loop does not renew: a release's (or a resume's) own
    beat before any poll saw the copy run, and a stepped-down copy's last renewal. Each is removed at
    the first poll that lists no such copy, never at one whose listing of the copy's kind failed.
    Before, only a copy a poll had seen run was ever removed: these were left for the whole lease."""
    import asyncio

    from tests.support.objects import running_deployment
    from webhook.fencing.copies import CopyState, read_copy
    from webhook.fencing.renewer import Renewer

    class Store:  # a beat that always lands
        class lanes:
            @staticmethod
            async def run(call: Any) -> None:
                return None

        @staticmethod
        def beat_call(folder: Any, body: Any) -> None:
            return None

    async def stepped(*_: Any) -> bool:
        return True

    async def scenario() -> None:
        renewer = Renewer("member1", FENCING, Store(), stepped, lambda: "")  # type: ignore[arg-type]
        released = read_copy(running_deployment(name="released", checkpoint_dir=HEALTHY), POLICY)
        await renewer.beat_now(released)  # a release's beat: no poll has seen it run
        held = replace(released, state=CopyState.HELD)
        assert renewer.observe([held], 0.0) == []  # still listed: kept
        assert renewer.observe([], 5.0, kinds={"FlinkSessionJob"}) == []  # its kind not listed: kept
        assert renewer.observe([], 10.0) == [(released.patched, released.folder)]
        assert renewer.observe([], 15.0) == []  # once

        down = read_copy(running_deployment(name="down", checkpoint_dir=HEALTHY), POLICY)
        now = asyncio.get_running_loop().time()
        assert renewer.observe([down], now - 100.0) == []  # seen long ago, never renewed: overdue
        await asyncio.gather(*renewer.tick())  # stepped down
        assert renewer.observe([replace(down, state=CopyState.STEPPED_DOWN)], now) == []
        assert renewer.observe([], now + 5.0) == [(down.patched, down.folder)]

    asyncio.run(scenario())
