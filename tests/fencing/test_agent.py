"""The fencing agents of two (or three) member clusters against fake API servers and real storage
(local files and moto's S3 server), with the member webhook's gate admitting the restores."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane import fakeapi
from tests.support.agents import Driver, SteppedLoop, admitting
from tests.support.events import Collected
from tests.support.objects import (
    JOB_ID,
    apply,
    decode_patch,
    flink_deployment,
    flink_metadata,
    make_checkpoints,
    review,
    running_deployment,
)
from tests.support.operator import operator_stops, running_status, set_status, stopped_status
from tests.support.production import wait_for
from tests.support.s3 import moto_server, s3_options
from webhook.cli import main
from webhook.common.admission import parse_review
from webhook.common.kubeclient import ClientConfig
from webhook.fencing.agent import FencingAgent
from webhook.fencing.flinkapi import FlinkApi, ThreadedApi
from webhook.fencing.report import Step
from webhook.member.handler import MemberHandler
from webhook.policy.restore import MAX_DEADLINE_SECONDS, FencingPolicy, FencingStorageError, RestorePolicy
from webhook.restore.storage.search import CheckpointStorage

P = "flink-failover.io"
HOLD, RELEASED, FENCED = f"{P}/hold", f"{P}/released", f"{P}/fenced"
BUCKET = "fencing"


@dataclass
class Member:
    """One member cluster: its API server (fake), its agent (driven one poll at a time) and its webhook."""

    name: str
    running: fakeapi.RunningFake
    agent: FencingAgent
    handler: MemberHandler
    kubeconfig: Path
    driver: Driver
    steps: list[list[Step]] = field(default_factory=list)

    def tick(self) -> dict[str, str]:
        steps = self.driver.tick()
        self.steps.append(steps)
        return {s.workload.name: s.action for s in steps}

    def recheck(self) -> list[Step]:
        return self.driver.recheck()

    def put(self, obj: dict[str, Any]) -> None:
        self.running.fake.upsert(obj)

    def obj(self, name: str = "orders") -> dict[str, Any]:
        return self.running.fake.get("analytics", name)

    def operator_stops(self, name: str = "orders") -> None:
        """Its Flink operator reports the suspended job stopped (a suspend is only a request)."""
        operator_stops(self.running.fake, "analytics", name)

    def stop_completes(self, name: str = "orders") -> None:
        """The operator stops the suspended copy and the agent acknowledges it at its next poll."""
        self.operator_stops(name)
        assert self.tick()[name] == "acked"

    def admit(self, obj: dict[str, Any], **kw: Any) -> dict[str, Any]:
        """A CREATE (or UPDATE) through the member webhook, stored as the API server would."""
        response = self.handler(parse_review(review(obj, **kw))).to_review()["response"]
        assert response["allowed"], response
        admitted = apply(obj, decode_patch(response))
        if not kw.get("dry_run"):
            self.put(admitted)
        return admitted


@dataclass
class Site:
    root: str  # the checkpoint directory every cluster's jobs use
    options: dict[str, Any]
    local: Path | None  # the same directory on this machine, for local storage

    def checkpoints(self, ids: list[int]) -> None:
        if self.local is not None:
            make_checkpoints(self.local / JOB_ID, ids)
            return
        import s3fs

        fs = s3fs.S3FileSystem(skip_instance_cache=True, **self.options["s3"])
        for n in ids:
            fs.pipe(f"{self.root.removeprefix('s3://')}/{JOB_ID}/chk-{n}/_metadata", flink_metadata(n))


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with moto_server(tmp_path_factory.mktemp("moto") / "moto.log") as endpoint:
        yield endpoint


@pytest.fixture(params=["file", "s3"])
def site(request: pytest.FixtureRequest, tmp_path: Path) -> Site:
    if request.param == "file":
        root = tmp_path / "checkpoints"
        root.mkdir()
        return Site(str(root), {}, root)
    import s3fs

    endpoint = request.getfixturevalue("moto")
    bucket = f"{BUCKET}-{abs(hash(request.node.name)) % 10**8}"
    s3fs.S3FileSystem(skip_instance_cache=True, **s3_options(endpoint)).mkdir(bucket)
    return Site(f"s3://{bucket}/checkpoints", {"s3": s3_options(endpoint)}, None)


@pytest.fixture
def local_site(tmp_path: Path) -> Site:
    root = tmp_path / "checkpoints"
    root.mkdir()
    return Site(str(root), {}, root)


AGENT = fakeapi.DEFAULT_USER  # who the fake API servers authenticate the agents' requests as
LEASE = 300.0  # far longer than any test takes on a loaded machine: leases run out only when aged


def policy_for(site: Site, **fencing: Any) -> RestorePolicy:
    return RestorePolicy(
        default_checkpoint_dir=site.root,
        storage_options=site.options,
        # The longest admission deadline the API server allows: at a load average of 18 on two cores a
        # failover CREATE's lookup and fence on moto passed the default 10 s, and was (rightly) refused.
        deadline_seconds=MAX_DEADLINE_SECONDS,
        fencing=replace(FencingPolicy(lease_seconds=LEASE), **fencing),
    )


@pytest.fixture
def world(tmp_path: Path) -> Iterator[Any]:
    started: list[Member] = []

    def member(name: str, policy: RestorePolicy) -> Member:
        running = fakeapi.start_member_cluster()
        kubeconfig = running.kubeconfig(tmp_path / f"{name}.kubeconfig")
        api = FlinkApi.connect(ClientConfig(str(kubeconfig)))
        assert isinstance(api, FlinkApi)
        storage = CheckpointStorage(policy.storage_options)
        calls = ThreadedApi(api, policy.fencing.call_timeout)
        loop = SteppedLoop()  # the agent's deadlines count on the driver's clock (tests/support/agents.py)
        lanes = loop.lanes(policy.fencing.call_timeout)
        agent = FencingAgent(name, policy, calls, storage, events=Collected(), lanes=lanes)
        handler = MemberHandler.from_policy(policy, cluster=name, agent_users=frozenset({AGENT}))
        found = Member(name, running, agent, handler, kubeconfig, Driver(agent, loop))
        started.append(found)
        return found

    yield member
    for m in started:
        m.driver.close()
        m.handler.close()
        m.running.stop()


def running_copy(epoch: int = 0, **extra: Any) -> dict[str, Any]:
    """member1's original copy: running job JOB_ID, heartbeating."""
    annotations = {f"{P}/failover-count": str(epoch)} if epoch else {}
    obj = running_deployment(annotations=annotations, **extra)
    obj["spec"]["job"]["upgradeMode"] = "savepoint"
    obj["status"]["lifecycleState"] = "STABLE"
    return obj


def failed_over(count: int, source: str, job_id: str = JOB_ID) -> dict[str, Any]:
    """What Karmada creates on the new cluster: the template, labelled by the control plane."""
    obj = flink_deployment(
        labels={f"{P}/failover": "true", f"{P}/job-id": job_id},
        annotations={f"{P}/failover-count": str(count), f"{P}/source-cluster": source},
    )
    obj["spec"]["job"]["state"] = "running"
    return obj


def state(member: Member) -> str:
    return str(member.obj()["spec"]["job"].get("state", "running"))


def never_both_running(*members: Member) -> None:
    assert sum(state(m) == "running" for m in members) <= 1, [state(m) for m in members]


def test_partition_the_stale_copy_acks_and_the_new_one_starts_from_its_newest_checkpoint(
    site: Site, world: Any
) -> None:
    """The control plane lost member1, member1 and storage stay up, member1's job keeps checkpointing
    (the same holds with purge mode Gracefully: the old copy is healthy and its Work lingers)."""
    policy = policy_for(site)
    m1, m2 = world("member1", policy), world("member2", policy)
    site.checkpoints([1, 2, 3])
    m1.put(running_copy())
    assert m1.tick() == {"orders": "heartbeat"}

    admitted = m2.admit(failed_over(1, "member1"))
    job = admitted["spec"]["job"]
    assert job["state"] == "suspended" and job["initialSavepointPath"].endswith(f"{JOB_ID}/chk-3")
    assert "waiting for member1" in admitted["metadata"]["annotations"][HOLD]
    assert admitted["metadata"]["annotations"][f"{P}/epoch"] == "1"
    never_both_running(m1, m2)

    site.checkpoints([4])  # the stale copy completes another checkpoint before it sees the fence
    assert m2.tick() == {"orders": "held"}
    never_both_running(m1, m2)
    assert m1.tick() == {"orders": "stopping"}
    stale = m1.obj()
    assert stale["spec"]["job"]["state"] == "suspended"
    assert stale["spec"]["job"]["upgradeMode"] == "stateless"  # no HA: cancel, never a savepoint
    assert stale["metadata"]["labels"][FENCED] == "1"
    never_both_running(m1, m2)
    # Asked to stop is not stopped: the operator still reports RUNNING, member1 keeps its heartbeat.
    assert m1.tick() == {"orders": "waiting-for-operator"}
    assert m2.tick() == {"orders": "held"}
    assert "member1 (stopping its job)" in m2.obj()["metadata"]["annotations"][HOLD]
    m1.stop_completes()

    assert m2.tick() == {"orders": "released"}
    restored = m2.obj()
    assert restored["spec"]["job"]["state"] == "running"
    assert restored["spec"]["job"]["initialSavepointPath"].endswith(f"{JOB_ID}/chk-4")  # 0 checkpoints lost
    assert restored["metadata"]["annotations"][RELEASED].startswith("ack at ")
    assert HOLD not in restored["metadata"]["annotations"]
    never_both_running(m1, m2)
    # Later polls change nothing: the fenced copy stays down, the new one heartbeats.
    assert m1.tick() == {"orders": "fenced"} and m2.tick() == {"orders": "heartbeat"}
    never_both_running(m1, m2)


def test_a_stale_copy_with_ha_is_stopped_as_last_state(local_site: Site, world: Any) -> None:
    policy = policy_for(local_site)
    m1, m2 = world("member1", policy), world("member2", policy)
    local_site.checkpoints([1])
    obj = running_copy()
    obj["spec"]["flinkConfiguration"]["high-availability.type"] = "kubernetes"
    m1.put(obj)
    m1.tick()
    m2.admit(failed_over(1, "member1"))
    assert m1.tick() == {"orders": "stopping"}
    assert m1.obj()["spec"]["job"]["upgradeMode"] == "last-state"  # deletes the cluster, keeps HA data
    assert m1.obj()["metadata"]["annotations"][f"{P}/fenced-upgrade-mode"] == "savepoint"


def _age(root: Path, seconds: float) -> None:
    """Storage time passes for the records (local files: their modification times)."""
    for path in (root / "flink-failover").rglob("*.json"):
        stamp = path.stat().st_mtime - seconds
        os.utime(path, (stamp, stamp))


def test_a_dead_stale_side_is_released_by_lease_expiry(local_site: Site, world: Any) -> None:
    policy = policy_for(local_site)
    m1, m2 = world("member1", policy), world("member2", policy)
    local_site.checkpoints([1, 2])
    m1.put(running_copy())
    m1.tick()
    m2.admit(failed_over(1, "member1"))  # member1 dies here: its agent never polls again
    assert m2.tick() == {"orders": "held"}
    _age(local_site.local or Path(), LEASE / 2)
    assert m2.tick() == {"orders": "held"}  # half a lease: not yet
    _age(local_site.local or Path(), LEASE / 2 + 1)
    assert m2.tick() == {"orders": "released"}
    assert m2.obj()["metadata"]["annotations"][RELEASED].startswith("lease-expiry at ")
    assert m2.obj()["spec"]["job"]["initialSavepointPath"].endswith("chk-2")


def test_no_heartbeat_at_all_means_no_hold(site: Site, world: Any) -> None:
    policy = policy_for(site)
    m2 = world("member2", policy)
    site.checkpoints([1])
    admitted = m2.admit(failed_over(1, "member1"))
    assert admitted["spec"]["job"]["state"] == "running"
    assert HOLD not in admitted["metadata"]["annotations"]
    assert admitted["metadata"]["annotations"][f"{P}/epoch"] == "1"  # the fence was written all the same


def test_return_after_an_outage_stops_the_copy_before_any_heartbeat(local_site: Site, world: Any) -> None:
    policy = policy_for(local_site)
    m2 = world("member2", policy)
    local_site.checkpoints([1])
    m2.admit(failed_over(1, "member1"))  # member1 was down: no heartbeat, no hold
    assert m2.tick() == {"orders": "heartbeat"}
    records = (local_site.local or Path()) / "flink-failover" / "analytics" / "flinkdeployment" / "orders"
    # member1 comes back; its operator resumes the old job from HA data; its agent starts.
    m1 = world("member1", policy)
    m1.put(running_copy())
    assert m1.tick() == {"orders": "stopping"}  # checked fences before anything else
    assert not (records / "ack-000000000001-member1.json").exists()  # its operator has not stopped it
    m1.stop_completes()
    assert not (records / "heartbeat-member1.json").exists()
    assert (records / "ack-000000000001-member1.json").exists()


def test_two_failovers_in_a_row_epochs_stop_every_older_copy(local_site: Site, world: Any) -> None:
    policy = policy_for(local_site)
    m1, m2, m3 = world("member1", policy), world("member2", policy), world("member3", policy)
    local_site.checkpoints([1])
    m1.put(running_copy())
    m1.tick()
    m2.admit(failed_over(1, "member1"))
    m1.tick()
    m1.stop_completes()
    m2.tick()
    assert state(m2) == "running" and state(m1) == "suspended"
    m2.tick()  # heartbeats at epoch 1
    admitted = m3.admit(failed_over(2, "member2"))
    assert admitted["spec"]["job"]["state"] == "suspended"
    assert "waiting for member2" in admitted["metadata"]["annotations"][HOLD]
    assert m2.tick() == {"orders": "stopping"}
    assert m2.obj()["metadata"]["labels"][FENCED] == "2"
    assert m3.tick() == {"orders": "held"}
    m2.stop_completes()
    assert m3.tick() == {"orders": "released"}
    assert m1.tick() == {"orders": "fenced"}
    never_both_running(m1, m2, m3)


def test_storage_unwritable_holds_by_default_and_proceeds_when_told(local_site: Site, world: Any) -> None:
    local_site.checkpoints([1])
    (local_site.local or Path()).joinpath("flink-failover").write_text("not a folder")
    held = world("member2", policy_for(local_site)).admit(failed_over(1, "member1"))
    assert held["spec"]["job"]["state"] == "suspended"
    assert "ownership records" in held["metadata"]["annotations"][HOLD]
    proceeding = policy_for(local_site, on_storage_error=FencingStorageError.PROCEED)
    started = world("member3", proceeding).admit(failed_over(1, "member1"))
    assert started["spec"]["job"]["state"] == "running"


def heartbeating_pair(site: Site, world: Any, **fencing: Any) -> tuple[Member, Member]:
    """member1 runs the job and heartbeats; member2 is where Karmada is about to restore it."""
    policy = policy_for(site, **fencing)
    m1, m2 = world("member1", policy), world("member2", policy)
    site.checkpoints([1])
    m1.put(running_copy())
    assert m1.tick() == {"orders": "heartbeat"}
    return m1, m2


def stopping_pair(site: Site, world: Any, **fencing: Any) -> tuple[Member, Member]:
    """A partition under way: member2 holds the restored job, member1 has asked its operator to stop
    the stale copy (which still reports RUNNING)."""
    m1, m2 = heartbeating_pair(site, world, **fencing)
    m2.admit(failed_over(1, "member1"))
    assert m2.tick() == {"orders": "held"}
    assert m1.tick() == {"orders": "stopping"}
    return m1, m2


def test_a_manual_release_is_honoured_and_a_leftover_request_never_releases_a_later_hold(
    local_site: Site, world: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, m2 = heartbeating_pair(local_site, world)
    m2.running.fake.admit = admitting(m2.handler)  # the member webhook on every PATCH, as in a cluster
    alice = m2.running.user_kubeconfig(tmp_path / "alice.kubeconfig", "alice")
    cli = ["release", "analytics/orders", "--kubeconfig", str(alice)]
    assert main(cli) == 1  # not there yet
    assert "not found" in capsys.readouterr().err
    m2.put(running_copy())
    assert main(cli) == 1  # there, but not held
    assert "is not held" in capsys.readouterr().err
    assert main([*cli, "--force"]) == 0  # set anyway: a request for no hold
    assert "nothing is released" in capsys.readouterr().out
    m2.running.fake.delete("analytics", "orders")
    leftover = failed_over(1, "member1")  # Karmada's next object carries it in the template
    leftover["metadata"]["annotations"][f"{P}/release"] = "true"
    leftover["metadata"]["annotations"][f"{P}/release-requested-by"] = "mallory"
    held = m2.admit(leftover)
    assert held["metadata"]["annotations"][f"{P}/release-requested-by"] == ""  # not the template's word
    assert m2.tick() == {"orders": "held"}
    assert m2.tick() == {"orders": "held"}  # before this change: released by the leftover request
    assert main(cli) == 0
    assert "release requested" in capsys.readouterr().out
    annotations = m2.obj()["metadata"]["annotations"]
    assert annotations[f"{P}/release-requested-by"] == "alice"  # recorded by the webhook, while held
    assert main(["release", "orders", "--kubeconfig", str(alice)]) == 2
    assert m2.tick() == {"orders": "released"}
    annotations = m2.obj()["metadata"]["annotations"]
    assert annotations[RELEASED] == annotations[RELEASED].split(" (")[0] + " (asked by alice)"
    assert annotations[RELEASED].startswith("manual at ") and f"{P}/release" not in annotations
    assert m2.obj()["spec"]["job"]["state"] == "running"  # the agent's release got through its webhook


def test_karmada_reapplying_its_template_during_a_hold_does_not_start_the_job(
    local_site: Site, world: Any
) -> None:
    m1, m2 = heartbeating_pair(local_site, world)
    held = m2.admit(failed_over(1, "member1"))
    template = failed_over(1, "member1")  # Karmada's re-apply: running, none of our fields
    again = m2.admit(template, operation="UPDATE", old=held)
    assert again["spec"]["job"]["state"] == "suspended"
    assert again["metadata"]["annotations"][HOLD] == held["metadata"]["annotations"][HOLD]
    assert again["spec"]["job"]["initialSavepointPath"] == held["spec"]["job"]["initialSavepointPath"]
    # The agent's release is an UPDATE too, and the webhook lets it through.
    m1.tick()
    m1.stop_completes()
    assert m2.tick() == {"orders": "released"}
    released = m2.obj()
    assert m2.admit(released, operation="UPDATE", old=again, user=AGENT)["spec"]["job"]["state"] == "running"
    # From anyone else the same markers keep it held.
    assert m2.admit(released, operation="UPDATE", old=again)["spec"]["job"]["state"] == "suspended"
    # A re-apply over the stale copy keeps it stopped.
    stale = m1.obj()
    template_1 = running_copy()
    assert m1.admit(template_1, operation="UPDATE", old=stale)["spec"]["job"]["state"] == "suspended"


def test_a_dry_run_writes_nothing_and_still_holds(local_site: Site, world: Any) -> None:
    _, m2 = heartbeating_pair(local_site, world)
    dry = m2.admit(failed_over(1, "member1"), dry_run=True)
    assert dry["spec"]["job"]["state"] == "suspended"
    records = (local_site.local or Path()) / "flink-failover" / "analytics" / "flinkdeployment" / "orders"
    assert sorted(p.name for p in records.iterdir()) == ["heartbeat-member1.json"]


def test_a_whole_fleet_fails_over_at_once_and_every_job_runs_exactly_once(
    local_site: Site, world: Any
) -> None:
    jobs = 30
    policy = policy_for(local_site)
    m1, m2 = world("member1", policy), world("member2", policy)
    root = local_site.local or Path()
    ids = [f"{i:032x}" for i in range(1, jobs + 1)]
    for i, job in enumerate(ids):
        make_checkpoints(root / job, [1, 2])
        obj = running_copy(name=f"orders-{i}")
        obj["status"]["jobStatus"]["jobId"] = job
        m1.put(obj)
    assert set(m1.tick().values()) == {"heartbeat"}
    for i, job in enumerate(ids):
        obj = failed_over(1, "member1", job)
        obj["metadata"]["name"] = f"orders-{i}"
        assert m2.admit(obj)["spec"]["job"]["state"] == "suspended"

    def running_twice() -> list[str]:
        return [
            f"orders-{i}"
            for i in range(jobs)
            if state_of(m1, f"orders-{i}") == "running" and state_of(m2, f"orders-{i}") == "running"
        ]

    assert set(m2.tick().values()) == {"held"} and running_twice() == []
    stops = m1.tick()
    assert set(stops.values()) == {"stopping"}, [s for s in m1.steps[-1] if s.action != "stopping"][:3]
    assert running_twice() == []
    assert set(m2.tick().values()) == {"held"} and running_twice() == []
    for i in range(jobs):
        m1.operator_stops(f"orders-{i}")
    acks = m1.tick()
    assert set(acks.values()) == {"acked"}, [s for s in m1.steps[-1] if s.action != "acked"][:3]
    assert running_twice() == []
    assert set(m2.tick().values()) == {"released"} and running_twice() == []
    for i, job in enumerate(ids):
        assert state_of(m2, f"orders-{i}") == "running"
        assert m2.obj(f"orders-{i}")["spec"]["job"]["initialSavepointPath"] == str(root / job / "chk-2")


def state_of(member: Member, name: str) -> str:
    return str(member.obj(name)["spec"]["job"].get("state", "running"))


def test_gracefully_the_healthy_old_copy_is_stopped_and_stays_stopped_while_its_work_lingers(
    local_site: Site, world: Any
) -> None:
    """Purge mode Gracefully: Karmada keeps member1's Work until member2's copy is healthy, and it may
    re-apply its template there meanwhile. The held copy never becomes healthy by waiting, so fencing must
    stop the old one first; the re-applied template must not start it again."""
    m1, m2 = heartbeating_pair(local_site, world)
    m2.admit(failed_over(1, "member1"))
    assert m2.tick() == {"orders": "held"}
    assert m1.tick() == {"orders": "stopping"}
    stale = m1.obj()
    reapplied = m1.admit(running_copy(), operation="UPDATE", old=stale)  # through member1's webhook
    assert reapplied["spec"]["job"]["state"] == "suspended"
    m1.stop_completes()
    assert m1.tick() == {"orders": "fenced"}
    # Had the re-apply got through anyway (no webhook there), the agent stops the copy again.
    m1.running.fake.patch("analytics", "orders", {"spec": {"job": {"state": "running"}}})
    assert m1.tick() == {"orders": "stopping"}
    assert m2.tick() == {"orders": "released"}  # the ack of the completed stop still stands
    never_both_running(m1, m2)


def test_a_failover_back_onto_a_fenced_copy_keeps_it_stopped_and_says_what_to_do(
    local_site: Site, world: Any
) -> None:
    m1, m2 = heartbeating_pair(local_site, world)
    m2.admit(failed_over(1, "member1"))
    assert m1.tick() == {"orders": "stopping"}
    back = failed_over(2, "member2")  # Karmada moves it back to member1 before deleting the old object
    response = m1.handler(parse_review(review(back, operation="UPDATE", old=m1.obj()))).to_review()[
        "response"
    ]
    assert apply(back, decode_patch(response))["spec"]["job"]["state"] == "suspended"
    assert any("delete it" in w for w in response.get("warnings", [])), response


def test_a_held_copy_is_patched_only_when_whom_it_waits_for_changes(local_site: Site, world: Any) -> None:
    m1, m2 = heartbeating_pair(local_site, world)
    m2.admit(failed_over(1, "member1"))
    m1.running.fake.fail_next_patches = 10  # member1 cannot stop its copy, so it keeps saying it runs
    for _ in range(3):  # member1 renews every poll: ages and times move, the subject does not
        assert m1.tick() == {"orders": "error"}
        assert m2.tick() == {"orders": "held"}
    # Once: the agent's first poll writes the storage ages the admission could not know.
    assert len(m2.running.fake.patches) == 1
    assert "s old" in m2.obj()["metadata"]["annotations"][HOLD]
    m3 = world("member3", policy_for(local_site))  # a third cluster starts heartbeating a copy
    m3.put(running_copy())
    m3.running.fake.fail_next_patches = 10  # and cannot stop it either
    assert m3.tick() == {"orders": "error"}
    assert m2.tick() == {"orders": "held"}
    hold = m2.obj()["metadata"]["annotations"][HOLD]
    assert hold.startswith("epoch 1: waiting for member1, member3 to stop;"), hold
    assert len(m2.running.fake.patches) == 2


def test_a_hung_bucket_never_delays_the_heartbeats_of_jobs_in_another_storage(
    local_site: Site, world: Any
) -> None:
    """Every storage call has a deadline and each storage its own lane: while one S3 endpoint accepts
    connections and never answers, the job on local storage is renewed at every poll."""
    from tests.faults.loopback import blackhole

    with blackhole() as port:
        policy = RestorePolicy(
            default_checkpoint_dir=local_site.root,
            storage_options={"s3": {"endpoint_url": f"http://127.0.0.1:{port}", "key": "k", "secret": "s"}},
            fencing=FencingPolicy(lease_seconds=LEASE, poll_seconds=0.5),
        )
        m1 = world("member1", policy)
        local_site.checkpoints([1])
        m1.put(running_copy())
        hung = running_copy(name="payments", checkpoint_dir="s3://hung-bucket/checkpoints")
        m1.put(hung)
        records = (local_site.local or Path()) / "flink-failover/analytics/flinkdeployment/orders"
        beat = records / "heartbeat-member1.json"
        seen = []
        for _ in range(4):
            steps = m1.tick()
            assert steps["orders"] == "heartbeat", steps
            # its storage never answers: never renewed, it steps down at its first-sight deadline
            assert steps["payments"] in ("error", "pending", "stepped-down"), steps
            seen.append(beat.stat().st_mtime_ns)
        assert len(set(seen)) == 4  # renewed at every poll
        assert m1.obj()["spec"]["job"]["state"] == "running"  # the healthy job never steps down
        assert m1.obj("payments")["spec"]["job"]["state"] == "suspended"
        metrics = generate_latest_text()
        assert "flink_failover_fencing_poll_seconds_count" in metrics


def generate_latest_text() -> str:
    from prometheus_client import REGISTRY, generate_latest

    return generate_latest(REGISTRY).decode()


def test_between_polls_the_agents_look_again_at_what_a_failover_waits_on(
    local_site: Site, world: Any
) -> None:
    """A stopping copy is acknowledged, and a held one released, without waiting for the next full poll."""
    m1, m2 = stopping_pair(local_site, world)
    assert [s.action for s in m1.recheck()] == ["waiting-for-operator"]
    m1.operator_stops()
    assert [s.action for s in m1.recheck()] == ["acked"]
    assert [s.action for s in m2.recheck()] == ["released"]
    assert state(m2) == "running"
    assert m1.recheck() == [] and m2.recheck() == []  # nothing left to wait on until a poll


def test_a_forged_release_cannot_start_a_held_job_and_a_manual_one_names_who_asked(
    local_site: Site, world: Any
) -> None:
    """Only the agent's own identity may set the release markers; a person asks with release=true."""
    _, m2 = heartbeating_pair(local_site, world)
    told = Collected()
    gate = MemberHandler.from_policy(
        policy_for(local_site), cluster="member2", agent_users=frozenset({AGENT}), events=told
    )
    try:
        answer = gate(parse_review(review(failed_over(1, "member1")))).to_review()["response"]
        held = apply(failed_over(1, "member1"), decode_patch(answer))
        assert held["spec"]["job"]["state"] == "suspended"
        assert held["metadata"]["annotations"][f"{P}/restore-decision"] == "held"
        m2.put(held)

        forged = copy_of(held)
        forged["spec"]["job"]["state"] = "running"
        forged["metadata"]["annotations"][RELEASED] = "ack at 2026-12-01T00:00:00Z"
        answer = gate(parse_review(review(forged, operation="UPDATE", old=held, user="alice"))).to_review()
        response = answer["response"]
        kept = apply(forged, decode_patch(response))
        assert kept["spec"]["job"]["state"] == "suspended"  # before this change: running, unchanged
        assert kept["metadata"]["annotations"][HOLD] == held["metadata"]["annotations"][HOLD]
        assert any("set by alice ignored" in w for w in response.get("warnings", [])), response
        assert told.reasons() == ["Held", "ReleaseIgnored"]  # the admission's Events
        assert "member1" in told.occurrences[0].note and "alice" in told.occurrences[1].note

        by_agent = apply(
            forged,
            decode_patch(
                gate(parse_review(review(forged, operation="UPDATE", old=held, user=AGENT))).to_review()[
                    "response"
                ]
            ),
        )
        assert by_agent["spec"]["job"]["state"] == "running"  # the agent's own release goes through
        assert by_agent["metadata"]["annotations"][f"{P}/restore-decision"] == "restored"

        asking = copy_of(held)
        asking["metadata"]["annotations"][f"{P}/release"] = "true"
        answer = gate(parse_review(review(asking, operation="UPDATE", old=held, user="alice"))).to_review()
        asked = apply(asking, decode_patch(answer["response"]))
        assert asked["spec"]["job"]["state"] == "suspended"
        assert asked["metadata"]["annotations"][f"{P}/release-requested-by"] == "alice"
        assert told.reasons()[-1] == "ReleaseRequested" and "alice" in told.occurrences[-1].note
        m2.put(asked)
        assert m2.tick() == {"orders": "released"}
        released = m2.obj()["metadata"]["annotations"]
        assert released[RELEASED].startswith("manual at ") and released[RELEASED].endswith("(asked by alice)")
        assert f"{P}/release-requested-by" not in released
        assert released[f"{P}/restore-decision"] == "restored"
    finally:
        gate.close()


def copy_of(obj: dict[str, Any]) -> dict[str, Any]:
    import copy

    return copy.deepcopy(obj)


def test_a_fenced_hold_is_an_audited_warning(local_site: Site, world: Any) -> None:
    """The admission line of a job held for fencing is a warning, like one held for want of state
    (before: info, and restore-decision said restored)."""
    _, m2 = heartbeating_pair(local_site, world)
    request = parse_review(review(failed_over(1, "member1")))
    answer = m2.handler(request)
    assert answer.audit is not None and answer.audit.warns()
    admitted = apply(failed_over(1, "member1"), decode_patch(answer.to_review()["response"]))
    assert admitted["metadata"]["annotations"][f"{P}/restore-decision"] == "held"


def test_every_decision_that_changes_what_runs_is_an_event_on_the_object(
    local_site: Site, world: Any
) -> None:
    """What `kubectl describe flinkdeployment` shows on each side of a partition, in order."""
    m1, m2 = stopping_pair(local_site, world)
    assert m1.tick() == {"orders": "waiting-for-operator"}
    assert m1.tick() == {"orders": "waiting-for-operator"}  # the same series, not a second event
    m1.stop_completes()
    assert m2.tick() == {"orders": "released"}
    events1, events2 = m1.agent.events, m2.agent.events
    assert isinstance(events1, Collected) and isinstance(events2, Collected)
    assert events1.reasons() == ["Stopping", "WaitingForOperator", "WaitingForOperator", "Stopped"]
    assert events2.reasons() == ["Held", "Released"]
    stopping = events1.occurrences[0]
    assert stopping.type == "Warning" and "member2 at epoch 1" in stopping.note
    assert stopping.regarding.uid == m1.obj()["metadata"]["uid"]  # so describe finds it
    assert "ack" in events2.occurrences[1].note and JOB_ID in events2.occurrences[1].note


def test_review_for_a_cluster_holds_as_its_server_would_and_writes_nothing(
    local_site: Site, world: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: review showed `restored` and `state: running` where the served webhook holds the job."""
    import json

    m1, _ = heartbeating_pair(local_site, world)
    records = (local_site.local or Path()) / "flink-failover/analytics/flinkdeployment/orders"
    before = sorted(p.name for p in records.iterdir())
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(f"defaultCheckpointDir: {local_site.root}\n", encoding="utf-8")
    request = tmp_path / "failover.json"
    request.write_text(json.dumps(review(failed_over(1, "member1"))), encoding="utf-8")

    assert main(["review", str(request), "--policy", str(policy_file), "--print-object"]) == 0
    assert json.loads(capsys.readouterr().out)["spec"]["job"]["state"] == "running"  # fencing not asked for
    assert (
        main(["review", str(request), "--policy", str(policy_file), "--cluster", "member2", "--print-object"])
        == 0
    )
    held = json.loads(capsys.readouterr().out)
    assert held["spec"]["job"]["state"] == "suspended"
    assert held["metadata"]["annotations"][HOLD].startswith("epoch 1: waiting for member1 to stop;")
    assert held["metadata"]["annotations"][f"{P}/restore-decision"] == "held"
    assert sorted(p.name for p in records.iterdir()) == before  # no fence, no heartbeat written
    assert m1.tick() == {"orders": "heartbeat"}  # and member1 is not fenced by a review


def test_status_lists_every_held_job_with_whom_it_waits_for(
    local_site: Site, world: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    m1, m2 = heartbeating_pair(local_site, world)
    m2.admit(failed_over(1, "member1"))
    m2.put(running_copy(name="payments"))  # runs here, not held
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(f"defaultCheckpointDir: {local_site.root}\n", encoding="utf-8")
    base = [
        "status",
        "--cluster",
        "member2",
        "--kubeconfig",
        str(m2.kubeconfig),
        "--policy",
        str(policy_file),
    ]

    assert main([*base, "--held"]) == 0
    text = capsys.readouterr().out
    assert "FlinkDeployment analytics/orders: held, epoch 1, decision held" in text, text
    assert "waits for member1; lease runs out in" in text
    assert "heartbeat member1: written " in text and "s old" in text
    assert "fence member2 epoch 1: written " in text
    assert "payments" not in text  # --held: only held jobs

    assert main([*base, "-o", "json"]) == 0
    jobs = {j["name"]: j for j in json.loads(capsys.readouterr().out)["jobs"]}
    assert jobs["orders"]["state"] == "held" and jobs["orders"]["waiting_for"] == ["member1"]
    assert jobs["payments"]["state"] == "running" and jobs["payments"]["waiting_for"] == []
    assert {r["name"] for r in jobs["orders"]["records"]} == {"heartbeat", "fence"}

    assert main([*base, "analytics/missing"]) == 1
    assert "not found" in capsys.readouterr().err
    assert m1.tick() == {"orders": "stopping"}  # status wrote nothing that fences anybody


def test_a_blue_green_deployment_is_fenced_through_its_children(local_site: Site, world: Any) -> None:
    """The operator runs a FlinkBlueGreenDeployment's job in a child FlinkDeployment (-blue, -green) that
    carries none of the parent's labels. Its records are kept for the parent (what Karmada moves); the
    stale child is stopped, the restored parent held in its template, and its child released."""
    from tests.support.objects import flink_deployment

    policy = policy_for(local_site)
    m1, m2 = world("member1", policy), world("member2", policy)
    local_site.checkpoints([1, 2])
    bg = "/apis/flink.apache.org/v1beta1/flinkbluegreendeployments"
    parents = {m.name: m.running.server.stores[bg] for m in (m1, m2)}

    def blue_green(labels: dict[str, str], annotations: dict[str, str]) -> dict[str, Any]:
        template = flink_deployment(labels=labels, annotations=annotations)
        return {
            "apiVersion": "flink.apache.org/v1beta1",
            "kind": "FlinkBlueGreenDeployment",
            "metadata": {**template["metadata"]},
            "spec": {"template": {"spec": template["spec"]}},
        }

    def child(of: dict[str, Any], colour: str, job_state: str) -> dict[str, Any]:
        obj = (
            running_copy(name=f"orders-{colour}")
            if job_state == "running"
            else flink_deployment(name=f"orders-{colour}")
        )
        obj["metadata"]["labels"] = {"DeploymentType": colour.upper()}
        obj["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "flink.apache.org/v1beta1",
                "kind": "FlinkBlueGreenDeployment",
                "name": "orders",
                "uid": "p",
            }
        ]
        obj["spec"] = {**copy_of(of["spec"]["template"]["spec"])}
        obj["spec"]["job"]["state"] = job_state
        return obj

    # member1 runs the job in orders-green; its records are the parent's.
    parents["member1"].upsert(blue_green({}, {}))
    m1.put(child(blue_green({}, {}), "green", "running"))
    assert m1.tick() == {"orders": "skipped", "orders-green": "heartbeat"}
    records = (local_site.local or Path()) / "flink-failover/analytics/flinkbluegreendeployment/orders"
    assert (records / "heartbeat-member1.json").exists()

    # Karmada moves the parent to member2: restored through its template, held there.
    restored = failed_over(1, "member1")
    parent = blue_green(restored["metadata"]["labels"], restored["metadata"]["annotations"])
    answer = m2.handler(parse_review(review(parent))).to_review()["response"]
    held = apply(parent, decode_patch(answer))
    template_job = held["spec"]["template"]["spec"]["job"]
    assert template_job["state"] == "suspended" and template_job["initialSavepointPath"].endswith("chk-2")
    assert "waiting for member1" in held["metadata"]["annotations"][HOLD]
    parents["member2"].upsert(held)
    assert m2.tick() == {"orders": "held"}  # no child yet: the operator has not created it
    m2.put(child(held, "blue", "suspended"))  # the operator creates blue from the held template

    assert m1.tick()["orders-green"] == "stopping"  # the stale child, patched directly
    assert m1.obj("orders-green")["spec"]["job"]["state"] == "suspended"
    local_site.checkpoints([3])  # it checkpoints while its operator stops it
    assert m2.tick()["orders"] == "held"
    m1.stop_completes("orders-green")
    assert m2.tick()["orders"] == "released"
    blue = m2.obj("orders-blue")
    assert blue["spec"]["job"]["state"] == "running"
    assert blue["spec"]["job"]["initialSavepointPath"].endswith(f"{JOB_ID}/chk-3")  # 0 checkpoints lost
    released_parent = parents["member2"].get("analytics", "orders")
    assert HOLD not in released_parent["metadata"]["annotations"]
    assert released_parent["metadata"]["annotations"][RELEASED].startswith("ack at ")
    # The template is not touched by the release (a change there would start a blue/green transition).
    assert released_parent["spec"] == held["spec"]


def test_a_stepped_down_copy_resumes_where_the_restore_would_look_create_subdir_false(
    local_site: Site, world: Any
) -> None:
    """With ``state.checkpoints.create-subdir: false`` a job writes ``<dir>/chk-N``: the resume looks
    there, as the restore does (before issue 28 it looked in ``<dir>/<jobId>`` and found nothing)."""
    m1 = world("member1", policy_for(local_site))
    root = local_site.local or Path()
    make_checkpoints(root, [1, 2, 3])
    obj = running_copy()
    obj["spec"]["flinkConfiguration"]["state.checkpoints.create-subdir"] = "false"
    obj["spec"]["job"]["state"] = "suspended"  # stepped down earlier, its storage answers again
    obj["metadata"]["annotations"] = {f"{P}/stepped-down": "heartbeat not renewed for 15s; stopped ..."}
    m1.put(obj)
    assert m1.tick() == {"orders": "resumed"}
    job = m1.obj()["spec"]["job"]
    assert job["state"] == "running" and job["initialSavepointPath"] == str(root / "chk-3")


def test_storage_trouble_is_told_from_its_cause_not_from_words_in_a_message(
    local_site: Site, world: Any
) -> None:
    """Events come from the step's typed trouble: a patch the API server refuses is no StorageTrouble,
    even when its message speaks of storage (before: any error whose text held the word)."""
    m1, m2 = heartbeating_pair(local_site, world)
    m2.admit(failed_over(1, "member1"))
    m1.running.fake.fail_next_patches = 1  # "etcdserver: request timed out": the stop cannot be patched
    steps = m1.driver.tick()
    assert [(s.action, s.trouble) for s in steps] == [("error", "api")], steps
    events = m1.agent.events
    assert isinstance(events, Collected) and "StorageTrouble" not in events.reasons()
    root = local_site.local or Path()
    (root / "flink-failover").rename(root / "moved")
    (root / "flink-failover").write_text("not a folder")  # the records cannot be listed now
    steps = m1.driver.tick()
    assert [(s.action, s.trouble) for s in steps] == [("error", "storage")], steps
    assert "StorageTrouble" in events.reasons()


@pytest.mark.parametrize("why", ["budget", "labels"])
def test_a_release_that_cannot_check_the_newest_checkpoint_stays_held_says_why_and_retries(
    site: Site, world: Any, why: str
) -> None:
    """The old copy stopped and acked, but the release's lookup of the newest checkpoint cannot run to
    its end: it outgrew ``verifyBudget`` (the stale copy kept checkpointing), or the held object no
    longer carries the labels it is resolved by (an edit dropped them from an object restored before
    restore records existed: with a record the release reads it, tests/fencing/test_restore_record.py).
    It stays held, the hold says
    why, and the next poll tries again; once the lookup can run, it starts from chk-4, which the stale
    copy completed after the admission. Before, anything but a restore read as "nothing newer" and the
    job started from the admitted chk-3: chk-4 was lost."""
    policy = policy_for(site)
    m1, m2 = world("member1", policy), world("member2", policy)
    site.checkpoints([1, 2, 3])
    m1.put(running_copy())
    assert m1.tick() == {"orders": "heartbeat"}
    admitted = m2.admit(failed_over(1, "member1"))
    assert admitted["spec"]["job"]["initialSavepointPath"].endswith(f"{JOB_ID}/chk-3")
    site.checkpoints([4])
    assert m2.tick() == {"orders": "held"}
    assert m1.tick() == {"orders": "stopping"}
    m1.stop_completes()

    labels = dict(m2.obj()["metadata"]["labels"])
    if why == "budget":
        m2.agent.policy = replace(policy, verify_budget=1)
    else:  # an object restored before restore records existed (none to read): its labels are all there is
        edited = m2.obj()
        edited["metadata"]["labels"] = {}
        del edited["metadata"]["annotations"][f"{P}/restore-record"]
        with m2.running.fake.cond:  # stored as is (the fake's upsert keeps the annotations it had)
            m2.running.fake._store(("analytics", "orders"), edited, "MODIFIED")
    for _ in range(2):  # it waits, and tries again at the next poll
        steps = m2.driver.tick()
        assert [(s.action, s.trouble) for s in steps] == [("error", "storage")], steps
        held = m2.obj()
        assert held["spec"]["job"]["state"] == "suspended"
        assert held["metadata"]["annotations"][HOLD].startswith(
            "epoch 1: release waits until the newest checkpoint can be checked"
        ), held["metadata"]["annotations"][HOLD]
        # Between polls a recheck does not look it up again (a lookup may cost verifyBudget requests).
        rechecked = m2.recheck()
        assert [(s.action, s.detail) for s in rechecked] == [
            ("held", "release waits until the newest checkpoint can be checked (next poll)")
        ]
    events = m2.agent.events
    assert isinstance(events, Collected) and "StorageTrouble" in events.reasons()

    if why == "budget":
        m2.agent.policy = policy
    else:
        edited = m2.obj()
        edited["metadata"]["labels"] = labels
        m2.put(edited)
    assert m2.tick() == {"orders": "released"}
    job = m2.obj()["spec"]["job"]
    assert job["state"] == "running" and job["initialSavepointPath"].endswith(f"{JOB_ID}/chk-4")


def test_a_deleted_copy_keeps_its_heartbeat_until_its_operator_has_stopped_the_job(
    site: Site, world: Any
) -> None:
    """Purge mode ``Directly`` (or ``kubectl delete``) on the old copy while the restore is held: the
    operator's finalizer keeps the object while it stops the job, its status RUNNING. The heartbeat
    stays, so the restore stays held; it goes once the object is gone. Before, the first poll that
    saw the deletionTimestamp removed the heartbeat and the restore was released with no-heartbeat
    while the old job still ran."""
    m1, m2 = heartbeating_pair(site, world)
    m2.admit(failed_over(1, "member1"))
    deleting = m1.obj()
    deleting["metadata"]["deletionTimestamp"] = "2026-12-01T15:00:00Z"
    deleting["metadata"]["finalizers"] = ["flinkdeployments.flink.apache.org/finalizer"]
    m1.put(deleting)
    for _ in range(2):
        ending = m1.tick()
        assert m2.tick() == {"orders": "held"}
        assert "waiting for member1" in m2.obj()["metadata"]["annotations"][HOLD]
        assert ending == {"orders": "ending"}
    never_both_running(m1, m2)
    m1.running.fake.delete("analytics", "orders")  # the cleanup completed, the finalizer removed
    m1.tick()
    assert m2.tick() == {"orders": "released"}
    assert m2.obj()["metadata"]["annotations"][RELEASED].startswith("no-heartbeat at ")


def test_a_stepped_down_copy_that_cannot_check_its_newest_checkpoint_stays_stopped_and_retries(
    local_site: Site, world: Any
) -> None:
    """Its lookup outgrows ``verifyBudget``: it stays stepped down (an Event says why) and the next
    poll tries again; once it can check, it resumes from its own newest checkpoint. Before, a lookup
    that did not finish read as "nothing of its own" and the copy resumed without a path (its HA data
    or, without HA, its last savepoint): the checkpoints after that savepoint were lost."""
    policy = policy_for(local_site)
    m1 = world("member1", policy)
    make_checkpoints((local_site.local or Path()) / JOB_ID, [1, 2, 3])
    obj = running_copy()
    obj["spec"]["job"]["state"] = "suspended"  # stepped down earlier, its storage answers again
    obj["metadata"]["annotations"] = {f"{P}/stepped-down": "heartbeat not renewed for 15s; stopped ..."}
    m1.put(obj)
    m1.agent.policy = replace(policy, verify_budget=1)
    for _ in range(2):
        steps = m1.driver.tick()
        assert [(s.action, s.trouble) for s in steps] == [("error", "storage")], steps
        assert "resume waits" in steps[0].detail
        assert m1.obj()["spec"]["job"]["state"] == "suspended"
    events = m1.agent.events
    assert isinstance(events, Collected) and "StorageTrouble" in events.reasons()
    m1.agent.policy = policy
    assert m1.tick() == {"orders": "resumed"}
    job = m1.obj()["spec"]["job"]
    assert job["state"] == "running" and job["initialSavepointPath"].endswith(f"{JOB_ID}/chk-3")


# --- stopped means stopped, and gone means gone (issue 45) -----------------------------------------

SESSION_JOBS = "/apis/flink.apache.org/v1beta1/flinksessionjobs"
HEARTBEAT1, HEARTBEAT2 = "heartbeat-member1.json", "heartbeat-member2.json"


def record_names(site: Site, kind: str = "flinkdeployment", name: str = "orders") -> list[str]:
    """The ownership records of one workload, as the storage lists them now."""
    folder = f"{site.root}/flink-failover/analytics/{kind}/{name}"
    if site.local is not None:
        path = Path(folder)
        return sorted(p.name for p in path.iterdir()) if path.is_dir() else []
    import s3fs

    fs = s3fs.S3FileSystem(skip_instance_cache=True, **site.options["s3"])
    try:
        listed = fs.ls(folder.removeprefix("s3://"), detail=False, refresh=True)
    except FileNotFoundError:
        return []
    return sorted(str(p).rstrip("/").rsplit("/", 1)[-1] for p in listed)


def test_a_stale_copy_whose_job_is_suspended_keeps_its_heartbeat_and_is_not_acknowledged(
    site: Site, world: Any
) -> None:
    """Flink's SUSPENDED is only locally terminal: the JobManager lost its leadership, and a new HA
    leader resumes the job. A stale copy whose status says SUSPENDED (JobManager MISSING, the suspend
    reconciled) has not stopped: it keeps its heartbeat, writes no ack, and the restore stays held
    until the job is FINISHED. Before, it was acknowledged and the restore released."""
    m1, m2 = stopping_pair(site, world)
    suspended = stopped_status(m1.obj())
    suspended["jobStatus"]["state"] = "SUSPENDED"
    set_status(m1.running.fake, "analytics", "orders", suspended)
    for _ in range(2):
        assert m1.tick() == {"orders": "waiting-for-operator"}
        assert m2.tick() == {"orders": "held"}
        names = record_names(site)
        assert HEARTBEAT1 in names and "ack-000000000001-member1.json" not in names, names
    never_both_running(m1, m2)
    m1.stop_completes()  # FINISHED: globally terminal
    assert m2.tick() == {"orders": "released"}
    assert m2.obj()["metadata"]["annotations"][RELEASED].startswith("ack at ")


def session_job(name: str) -> dict[str, Any]:
    """A running FlinkSessionJob (no JobManager of its own: it runs in its session cluster's)."""
    job = flink_deployment(kind="FlinkSessionJob", name=name)
    job["spec"]["job"]["state"] = "running"
    job["status"] = {
        k: v for k, v in running_status(JOB_ID, job["spec"]).items() if k != "jobManagerDeploymentStatus"
    }
    return job


def test_a_session_job_being_deleted_keeps_its_heartbeat_until_its_job_has_ended_or_it_is_gone(
    site: Site, world: Any
) -> None:
    """A FlinkSessionJob being deleted (the operator's finalizer kept) has no jobManagerDeploymentStatus:
    only its job's state says whether the job still runs in the session cluster. It stays ``ending``
    (its heartbeat renewed) until that state is globally terminal, or the object is gone. Before, a
    deleted session job with SUSPENDED or no job state (the reconciled spec beside it) was idle at once
    and its heartbeat removed while its job could still run."""
    m1 = world("member1", policy_for(site))
    sessions = m1.running.server.stores[SESSION_JOBS]
    for name in ("orders", "payments"):
        sessions.upsert(session_job(name))
    assert m1.tick() == {"orders": "heartbeat", "payments": "heartbeat"}
    for state in ("RUNNING", "CANCELLING", "SUSPENDED", ""):
        for name in ("orders", "payments"):
            deleting = sessions.get("analytics", name)
            deleting["metadata"]["deletionTimestamp"] = "2026-12-01T15:00:00Z"
            deleting["metadata"]["finalizers"] = ["flinksessionjobs.flink.apache.org/finalizer"]
            deleting["status"]["jobStatus"] = {"jobId": JOB_ID, "state": state} if state else {}
            sessions.upsert(deleting)
        assert m1.tick() == {"orders": "ending", "payments": "ending"}, state
        for name in ("orders", "payments"):
            assert HEARTBEAT1 in record_names(site, "flinksessionjob", name), (state, name)
    ended = sessions.get("analytics", "orders")
    ended["status"]["jobStatus"] = {"jobId": JOB_ID, "state": "CANCELED"}
    sessions.upsert(ended)  # the operator reports the job cancelled
    sessions.delete("analytics", "payments")  # the cleanup completed, the finalizer removed
    m1.tick()
    for name in ("orders", "payments"):
        assert wait_for(lambda n=name: HEARTBEAT1 not in record_names(site, "flinksessionjob", n), 30)


def test_a_released_copy_gone_before_any_poll_saw_it_run_drops_its_heartbeat(site: Site, world: Any) -> None:
    """Measured on Karmada v1.18.2: the job failed over to member2, was released there (the release
    writes member2's heartbeat first), then evicted by Karmada (purge mode Directly: the object
    deleted) before any poll saw it run. Its heartbeat must go at member2's next poll, so the return
    to member1 is released by no-heartbeat. Before, only the copies a poll had seen run were removed:
    the heartbeat stayed, and the return waited for the whole lease (released by lease-expiry)."""
    m1, m2 = stopping_pair(site, world)
    m1.stop_completes()
    assert m2.tick() == {"orders": "released"}
    assert HEARTBEAT2 in record_names(site)
    m2.running.fake.delete("analytics", "orders")  # evicted before member2's agent polls again
    # The workload returns to member1: Karmada deletes the fenced copy there and creates it anew.
    m1.running.fake.delete("analytics", "orders")
    assert m1.tick() == {}
    back = m1.admit(failed_over(2, "member2"))
    assert back["spec"]["job"]["state"] == "suspended"
    assert "waiting for member2" in back["metadata"]["annotations"][HOLD]  # its heartbeat is still there
    assert m2.tick() == {}
    assert wait_for(lambda: HEARTBEAT2 not in record_names(site), 30), record_names(site)
    assert m1.tick() == {"orders": "released"}
    assert m1.obj()["metadata"]["annotations"][RELEASED].startswith("no-heartbeat at ")


def test_a_resumed_copy_gone_before_any_poll_saw_it_run_drops_its_heartbeat(site: Site, world: Any) -> None:
    """A stepped-down copy resumes after its own heartbeat (a resume's beat), and is deleted before
    the next poll sees it run: that heartbeat goes at the next poll too."""
    m1 = world("member1", policy_for(site))
    site.checkpoints([1, 2])
    obj = running_copy()
    obj["spec"]["job"]["state"] = "suspended"
    obj["metadata"]["annotations"] = {f"{P}/stepped-down": "heartbeat not renewed for 15s; stopped ..."}
    m1.put(obj)
    assert m1.tick() == {"orders": "resumed"}
    assert HEARTBEAT1 in record_names(site)
    m1.running.fake.delete("analytics", "orders")
    assert m1.tick() == {}
    assert wait_for(lambda: HEARTBEAT1 not in record_names(site), 30), record_names(site)


def test_a_kind_whose_listing_failed_is_not_gone(site: Site, world: Any) -> None:
    """The FlinkDeployments cannot be listed (the API server answers 503) while the other kinds can:
    none of their copies counts as gone, so no heartbeat of theirs is removed, neither one the
    heartbeat loop renews nor one a release wrote. Before, a poll whose FlinkDeployment listing failed
    removed the heartbeat of every running FlinkDeployment."""
    # Unlisted for two polls, a copy is not renewed (no listing vouches for it): a renew deadline far
    # past what the test's polls take on a loaded machine keeps it from stepping down meanwhile.
    m1, m2 = stopping_pair(site, world, renew_deadline_seconds=100.0)
    m1.stop_completes()
    assert m2.tick() == {"orders": "released"}  # its heartbeat written by the release
    m2.running.fake.fail_next_lists = 10**6
    for _ in range(2):
        assert m2.tick() == {}
        assert HEARTBEAT2 in record_names(site)
    m2.running.fake.fail_next_lists = 0
    # Seen running: renewed by the heartbeat loop from now on (a poll whose records read failed under
    # load says "error" and is followed by the next).
    assert beats_again(m2), m2.steps[-3:]
    m2.running.fake.fail_next_lists = 10**6
    for _ in range(2):
        assert m2.tick() == {}
        assert HEARTBEAT2 in record_names(site)
    m2.running.fake.fail_next_lists = 0
    assert beats_again(m2), m2.steps[-3:]
    never_both_running(m1, m2)


def beats_again(member: Member, name: str = "orders") -> bool:
    """A poll says the copy heartbeats, within a few polls (a bound, never a timing)."""
    return any(member.tick().get(name) == "heartbeat" for _ in range(3))
