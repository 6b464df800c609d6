"""The agent's place beside the lease keeper (issue 47): a copy whose JobManager's podTemplate carries the
keeper is renewed by the agent until its heartbeat record shows the keeper writing it for this epoch,
then left to the keeper (no renewal, no step-down), and taken back when the spec drops the keeper or
when the keeper's record stops moving for the renew deadline (a keeper dead for good), and handed over
again once the keeper writes again.

The decisions are pure (``fencing/renewal.py``, ``fencing/decide.py``); the agent's side runs the real
agent, one poll at a time on a stepped clock (``tests/support/agents.py``), against local files and a
fake API server, the keeper's record written as ``flink-failover keeper`` writes it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from prometheus_client import REGISTRY

from tests.fencing import test_agent as harness
from tests.fencing.test_agent import Member, Site, policy_for, running_copy
from tests.support.events import Collected
from tests.support.objects import JOB_ID
from webhook.common.events import Occurrence
from webhook.common.flink import KEEPER_CONTAINER
from webhook.common.paths import StoragePath
from webhook.fencing.copies import read_copy
from webhook.fencing.decide import Times, decide
from webhook.fencing.effects import Action
from webhook.fencing.layout import KEEPER_WRITER, Workload
from webhook.fencing.protocol import Ownership
from webhook.fencing.records import FencingStore, heartbeat_body
from webhook.fencing.renewal import (
    KeepRenewing,
    LookForKeeper,
    Renewal,
    Renewing,
    first_seen,
    keeper_renews,
    renewal,
)
from webhook.keeper.inject import KeeperPod, with_keeper
from webhook.policy.restore import FencingPolicy, RestorePolicy
from webhook.restore.storage.search import CheckpointStorage

world, local_site = harness.world, harness.local_site

P = "flink-failover.io"
WORKLOAD = Workload("FlinkDeployment", "analytics", "orders")
FENCING = FencingPolicy(lease_seconds=30, poll_seconds=5, renew_deadline_seconds=10, stop_margin_seconds=10)


def guarded(obj: dict[str, Any], root: str = "s3://bkt/checkpoints") -> dict[str, Any]:
    """``obj`` with the keeper's sidecar in its JobManager's podTemplate, as the webhook injects it."""
    pod = KeeperPod("flink-failover:test", "member1", root, WORKLOAD, 0, {"leaseSeconds": 30})
    return with_keeper(obj, pod)[0]


def keeper_body(
    cluster: str = "member1", epoch: int = 0, written: str = "2026-12-07T00:00:00Z"
) -> dict[str, Any]:
    """The heartbeat body ``flink-failover keeper`` writes (keeper/keeper.py): ``written`` tells its
    renewals apart."""
    body = heartbeat_body(WORKLOAD, cluster, epoch, JOB_ID, written)
    return {**body, "writer": KEEPER_WRITER, "pod": "orders-jm-0"}


# --- pure ------------------------------------------------------------------------------------------


def test_a_copy_is_guarded_by_its_spec_carrying_the_keeper_sidecar() -> None:
    policy = RestorePolicy(default_checkpoint_dir="s3://bkt/checkpoints")
    assert read_copy(guarded(running_copy()), policy).guarded
    assert not read_copy(running_copy(), policy).guarded
    other = running_copy()
    other["spec"]["jobManager"] = {"podTemplate": {"spec": {"initContainers": [{"name": "setup"}]}}}
    assert not read_copy(other, policy).guarded
    session_job = guarded(running_copy())
    session_job["kind"] = "FlinkSessionJob"  # no JobManager of its own: never guarded
    assert not read_copy(session_job, policy).guarded
    names = [
        c["name"]
        for c in guarded(running_copy())["spec"]["jobManager"]["podTemplate"]["spec"]["initContainers"]
    ]
    assert KEEPER_CONTAINER in names


def test_only_the_keepers_record_for_this_cluster_and_epoch_hands_a_copy_over() -> None:
    assert keeper_renews("member1", 0, keeper_body())
    assert not keeper_renews("member1", 0, None)  # no record (or not JSON)
    agent = heartbeat_body(WORKLOAD, "member1", 0, JOB_ID, "now")  # the agent's own: no writer
    assert not keeper_renews("member1", 0, agent)
    assert not keeper_renews("member1", 1, keeper_body())  # an earlier restore's pod
    assert not keeper_renews("member1", 0, keeper_body(cluster="member2"))
    assert not keeper_renews("member1", 0, {**keeper_body(), "writer": "agent"})


def test_a_copy_its_keeper_renews_is_never_renewed_nor_stepped_down_by_the_agent() -> None:
    now = 1000.0
    overdue = Renewing(renewed=now - 3 * FENCING.renew_deadline_seconds, confirmed=now, may_step_down=True)
    assert renewal(overdue, now, FENCING) is Renewal.STEP_DOWN
    assert renewal(replace(overdue, keeper=True), now, FENCING) is Renewal.WAIT
    due = Renewing(renewed=now - FENCING.poll_seconds, confirmed=now, may_step_down=True)
    assert renewal(due, now, FENCING) is Renewal.BEAT
    assert renewal(replace(due, keeper=True), now, FENCING) is Renewal.WAIT
    fresh = Renewing(renewed=first_seen(now, FENCING), confirmed=now, may_step_down=True, keeper=True)
    assert renewal(fresh, now + 10 * FENCING.lease_seconds, FENCING) is Renewal.WAIT


def test_a_guarded_running_copy_is_looked_at_until_its_keeper_is_seen_writing() -> None:
    policy = RestorePolicy(default_checkpoint_dir="s3://bkt/checkpoints")
    copy = read_copy(guarded(running_copy(epoch=2)), policy)
    times = Times(mono=100.0, renewed=99.0)
    looking = decide("member1", copy, Ownership(), times, FENCING)
    assert looking.action is Action.HEARTBEAT
    assert (KeepRenewing(True),) in looking.chains and (LookForKeeper(2),) in looking.chains
    kept = decide("member1", copy, Ownership(), replace(times, keeper=True), FENCING)
    assert kept.action is Action.HEARTBEAT and "keeper" in kept.detail
    assert not any(isinstance(e, LookForKeeper) for chain in kept.chains for e in chain)
    plain = decide("member1", read_copy(running_copy(), policy), Ownership(), times, FENCING)
    assert not any(isinstance(e, LookForKeeper) for chain in plain.chains for e in chain)


# --- the agent -------------------------------------------------------------------------------------


def _store(site: Site) -> tuple[FencingStore, StoragePath]:
    return FencingStore(CheckpointStorage(site.options), "member1"), WORKLOAD.folder(
        StoragePath.parse(site.root)
    )


def _body(site: Site) -> dict[str, Any] | None:
    store, folder = _store(site)
    return store.lanes.call(store.heartbeat_call(folder), 5.0)


def _stepped_down(m1: Member) -> bool:
    return f"{P}/stepped-down" in m1.obj()["metadata"].get("annotations", {})


def _silent_past_the_deadline(
    m1: Member, policy: RestorePolicy, keeper: Site | None = None, polls: int = 3
) -> None:
    """No poll for ``polls`` polls (no listing vouches for the copy), the heartbeat loop looking every
    second: a copy the agent renews is past its renew deadline and steps down (its storage path as good
    as gone). ``keeper``: a live keeper renews its record there meanwhile, once a poll."""
    for second in range(1, int(polls * policy.fencing.poll_seconds) + 1):
        if keeper is not None and second % int(policy.fencing.poll_seconds) == 0:
            store, folder = _store(keeper)
            store.beat(folder, keeper_body(written=f"t+{second}"), 5.0)
        m1.driver.renew(advance=1.0)


def test_the_agent_renews_a_guarded_copy_until_its_keeper_writes_and_then_leaves_it_to_the_keeper(
    local_site: Site, world: Any
) -> None:
    """The spec carries the keeper while the pod runs the old JobManager (the operator has not rolled
    it): the agent renews and would step down as for any copy. Once the record shows the keeper writing
    it, the agent neither renews it (the keeper's record stays as the keeper wrote it) nor steps it down
    when nothing vouches for it past the renew deadline, while the keeper renews its record."""
    policy = policy_for(local_site, lease_seconds=30, poll_seconds=5, renew_deadline_seconds=10)
    m1 = world("member1", policy)
    m1.put(guarded(running_copy(), local_site.root))
    assert m1.tick() == {"orders": "heartbeat"}
    body = _body(local_site)
    assert body is not None and "writer" not in body  # the agent's
    assert not m1.agent.renewer.kept(WORKLOAD)
    assert m1.tick() == {"orders": "heartbeat"}
    assert not m1.agent.renewer.kept(WORKLOAD)  # still the agent's: no keeper has written

    store, folder = _store(local_site)
    store.beat(folder, keeper_body(), 5.0)  # the rolled pod's keeper renews
    assert m1.tick() == {"orders": "heartbeat"}
    assert m1.agent.renewer.kept(WORKLOAD)
    store.beat(folder, keeper_body(written="its next renewal"), 5.0)  # once a poll
    steps = m1.driver.tick()
    assert [s.detail for s in steps] == ["renewed by the keeper in its pod"]
    assert _body(local_site) == keeper_body(written="its next renewal")  # not written over by the agent
    _silent_past_the_deadline(m1, policy, keeper=local_site)
    assert not _stepped_down(m1) and m1.obj()["spec"]["job"]["state"] == "running"
    assert m1.agent.renewer.kept(WORKLOAD)
    assert _body(local_site) == keeper_body(written="t+15")  # the keeper's last, not the agent's


def test_a_guarded_copy_whose_keeper_never_wrote_steps_down_as_any_copy(local_site: Site, world: Any) -> None:
    policy = policy_for(local_site, lease_seconds=30, poll_seconds=5, renew_deadline_seconds=10)
    m1 = world("member1", policy)
    m1.put(guarded(running_copy(), local_site.root))
    assert m1.tick() == {"orders": "heartbeat"}
    _silent_past_the_deadline(m1, policy)
    assert _stepped_down(m1)


def test_a_keepers_record_of_another_epoch_hands_nothing_over(local_site: Site, world: Any) -> None:
    policy = policy_for(local_site, lease_seconds=30, poll_seconds=5, renew_deadline_seconds=10)
    m1 = world("member1", policy)
    m1.put(guarded(running_copy(), local_site.root))
    store, folder = _store(local_site)
    store.beat(folder, keeper_body(epoch=3), 5.0)
    assert m1.tick() == {"orders": "heartbeat"}
    assert not m1.agent.renewer.kept(WORKLOAD)


def test_a_copy_whose_spec_drops_the_keeper_is_the_agents_again(local_site: Site, world: Any) -> None:
    """The keeper is turned off (the pod will be rolled without it): the agent renews again at once, and
    gives the copy a poll to be renewed (as one first seen), not a step-down for its keeper's silence."""
    policy = policy_for(local_site, lease_seconds=30, poll_seconds=5, renew_deadline_seconds=10)
    m1 = world("member1", policy)
    m1.put(guarded(running_copy(), local_site.root))
    store, folder = _store(local_site)
    store.beat(folder, keeper_body(), 5.0)
    assert m1.tick() == {"orders": "heartbeat"}
    assert m1.agent.renewer.kept(WORKLOAD)
    _silent_past_the_deadline(m1, policy, local_site, polls=5)  # long after the agent's own last renewal
    plain = m1.obj()
    plain["spec"].pop("jobManager")
    m1.put(plain)
    assert m1.tick() == {"orders": "heartbeat"}
    assert not m1.agent.renewer.kept(WORKLOAD) and not _stepped_down(m1)
    body = _body(local_site)
    assert body is not None and "writer" not in body  # the agent renews it again


def test_an_unguarded_copy_never_reads_its_heartbeat(local_site: Site, world: Any) -> None:
    """A copy without the keeper costs no read of its record: a poll lists names and times only."""
    policy = policy_for(local_site)
    m1 = world("member1", policy)
    m1.put(running_copy())
    store, folder = _store(local_site)
    store.beat(folder, keeper_body(), 5.0)  # even a keeper's record (a stale one) is not looked at
    assert m1.tick() == {"orders": "heartbeat"}
    assert not m1.agent.renewer.kept(WORKLOAD)


def _sample(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


def _occurrences(m1: Member) -> list[Occurrence]:
    events = m1.agent.events
    assert isinstance(events, Collected)
    return [o for o in events.occurrences if o.reason.startswith("Keeper")]


def _events(m1: Member) -> list[tuple[str, str]]:
    return [(o.type, o.reason) for o in _occurrences(m1)]


def _until_taken_back(m1: Member) -> int:
    """The heartbeat loop looks every second, a poll every five, until the copy is taken back (at most
    15 s): the seconds it took."""
    for second in range(1, 16):
        m1.driver.renew(advance=1.0)
        if second % 5 == 0:
            m1.driver.tick(advance=0.0)
        if not m1.agent.renewer.kept(WORKLOAD):
            return second
    raise AssertionError("never taken back")


def test_a_copy_whose_keeper_died_for_good_is_taken_back_and_renewed_by_the_agent(
    local_site: Site, world: Any
) -> None:
    """The keeper writes, the agent hands the copy over, the keeper dies (its JobManager runs on): once
    its record has not moved for the renew deadline the agent takes the copy back, renews it at once (no
    step-down), says so in a Warning Event, and its dead keeper's record never hands it over again."""
    policy = policy_for(local_site, lease_seconds=30, poll_seconds=5, renew_deadline_seconds=10)
    m1 = world("member1", policy)
    m1.put(guarded(running_copy(), local_site.root))
    store, folder = _store(local_site)
    takebacks = _sample("flink_failover_fencing_keeper_takebacks_total")
    assert m1.tick() == {"orders": "heartbeat"}
    store.beat(folder, keeper_body(written="its last"), 5.0)
    assert m1.tick() == {"orders": "heartbeat"}
    assert m1.agent.renewer.kept(WORKLOAD)
    assert _events(m1) == [("Normal", "KeeperRenews")]
    second = _until_taken_back(m1)  # the keeper is gone
    assert second <= 11, second  # within a look of the deadline counted from the agent's own last write
    m1.driver.renew(advance=1.0)  # a retry period later (its record read first)
    body = _body(local_site)
    assert body is not None and "writer" not in body  # renewed by the agent at once
    assert not _stepped_down(m1)
    assert _sample("flink_failover_fencing_keeper_takebacks_total") == takebacks + 1
    assert _events(m1) == [("Normal", "KeeperRenews"), ("Warning", "KeeperSilent")]
    note = next(o.note for o in _occurrences(m1) if o.reason == "KeeperSilent")
    assert "has not moved for 1" in note and "steps this copy down if it cannot" in note
    store.beat(folder, keeper_body(written="its last"), 5.0)  # the dead keeper's record, found again
    for _ in range(3):
        assert m1.tick() == {"orders": "heartbeat"}
        assert not m1.agent.renewer.kept(WORKLOAD)  # no renewal: the agent renews on
        assert not _stepped_down(m1)


def test_a_keeper_back_after_a_short_crash_is_handed_the_copy_again(local_site: Site, world: Any) -> None:
    """Taken back from a keeper that crashed, the copy is handed over again as soon as the restarted
    keeper renews (a record it had not seen), with its Event."""
    policy = policy_for(local_site, lease_seconds=30, poll_seconds=5, renew_deadline_seconds=10)
    m1 = world("member1", policy)
    m1.put(guarded(running_copy(), local_site.root))
    store, folder = _store(local_site)
    assert m1.tick() == {"orders": "heartbeat"}
    store.beat(folder, keeper_body(written="before the crash"), 5.0)
    assert m1.tick() == {"orders": "heartbeat"}
    assert m1.agent.renewer.kept(WORKLOAD)
    _until_taken_back(m1)
    m1.driver.renew(advance=1.0)  # the agent renews it
    store.beat(folder, keeper_body(written="restarted"), 5.0)
    assert m1.tick() == {"orders": "heartbeat"}
    assert m1.agent.renewer.kept(WORKLOAD)
    assert _body(local_site) == keeper_body(written="restarted")
    kinds = [("Normal", "KeeperRenews"), ("Warning", "KeeperSilent"), ("Normal", "KeeperRenews")]
    assert _events(m1) == kinds
    store.beat(folder, keeper_body(written="renewing again"), 5.0)
    assert m1.tick() == {"orders": "heartbeat"}
    assert m1.agent.renewer.kept(WORKLOAD) and not _stepped_down(m1)
