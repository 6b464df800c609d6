"""The agent's place beside a session cluster's keeper (docs/keeper.md, "FlinkSessionJobs"): a
FlinkSessionJob copy is guarded when its session cluster's JobManager pod runs the keeper; the agent's
heartbeat names the session cluster (so that keeper finds the job), the keeper's record hands the copy
over only for the copy's jobId, and a copy whose jobId changes is the agent's again.

Pure decisions first, then the real agent one poll at a time on local files and a fake API server
(``tests/fencing/test_agent.py``'s harness)."""

from __future__ import annotations

from typing import Any

from tests.fencing import test_agent as harness
from tests.fencing.test_agent import SESSION_JOBS, Site, policy_for, session_job
from tests.support.objects import JOB_ID, flink_deployment
from webhook.common.flink import FlinkResource
from webhook.common.paths import StoragePath
from webhook.fencing.copies import read_copy
from webhook.fencing.layout import KEEPER_WRITER, Workload
from webhook.fencing.records import FencingStore, heartbeat_body
from webhook.fencing.renewal import keeper_renews
from webhook.keeper.inject import KeeperPod, with_keeper
from webhook.policy.restore import RestorePolicy
from webhook.restore.storage.search import CheckpointStorage

world, local_site = harness.world, harness.local_site

ORDERS = Workload("FlinkSessionJob", "analytics", "orders")
OTHER_JOB = "f" * 32


def session_cluster(guarded: bool = True, root: str = "s3://bkt/checkpoints") -> dict[str, Any]:
    """The session cluster ``session`` (a FlinkDeployment without a job), with the keeper's sidecar."""
    obj = flink_deployment(name="session", job=None)
    if not guarded:
        return obj
    pod = KeeperPod(
        "flink-failover:test", "member1", root, Workload("FlinkDeployment", "analytics", "session"), 0, {}
    )
    return with_keeper(obj, pod)[0]


def keeper_body(job_id: str = JOB_ID, second: int = 0) -> dict[str, Any]:
    """What the session cluster's keeper writes for a job it keeps (keeper/session_keeper.py); each
    renewal its own time."""
    body = heartbeat_body(ORDERS, "member1", 0, job_id, f"2026-12-07T00:00:{second:02d}Z", "session")
    return {**body, "writer": KEEPER_WRITER, "pod": "session-jm-0"}


def test_a_session_job_is_guarded_by_its_session_clusters_keeper() -> None:
    policy = RestorePolicy(default_checkpoint_dir="s3://bkt/checkpoints")
    guarded = {("analytics", "session"): FlinkResource.from_object(session_cluster())}
    plain = {("analytics", "session"): FlinkResource.from_object(session_cluster(guarded=False))}
    assert guarded[("analytics", "session")].session_keeper
    assert read_copy(session_job("orders"), policy, guarded).guarded
    assert not read_copy(session_job("orders"), policy, plain).guarded
    assert not read_copy(session_job("orders"), policy).guarded  # its cluster not listed: unknown
    elsewhere = session_job("orders")
    elsewhere["spec"]["deploymentName"] = "another-session"
    assert not read_copy(elsewhere, policy, guarded).guarded


def test_the_keepers_record_hands_a_session_job_over_only_for_its_job_id() -> None:
    assert keeper_renews("member1", 0, keeper_body(), JOB_ID)
    assert not keeper_renews("member1", 0, keeper_body(OTHER_JOB), JOB_ID)
    assert keeper_renews("member1", 0, keeper_body(OTHER_JOB))  # a FlinkDeployment's: any jobId


def _body(site: Site) -> dict[str, Any] | None:
    store = FencingStore(CheckpointStorage(site.options), "member1")
    return store.lanes.call(store.heartbeat_call(ORDERS.folder(StoragePath.parse(site.root))), 5.0)


def test_the_agent_names_the_session_cluster_hands_the_job_over_and_takes_it_back_at_a_new_job_id(
    local_site: Site, world: Any
) -> None:
    # polls of 2 s: the harness moves time a poll at a time, the keeper renews once each (a keeper
    # whose record stands still for the renew deadline has its copy taken back: fencing/takeback.py)
    policy = policy_for(local_site, lease_seconds=30, poll_seconds=2, renew_deadline_seconds=10)
    m1 = world("member1", policy)
    m1.put(session_cluster(root=local_site.root))
    jobs = m1.running.server.stores[SESSION_JOBS]
    jobs.upsert(session_job("orders"))
    assert m1.tick()["orders"] == "heartbeat"
    body = _body(local_site)
    assert body is not None and "writer" not in body  # the agent's, naming what the keeper needs
    assert (body["session"], body["jobId"], body["epoch"]) == ("session", JOB_ID, 0)

    store = FencingStore(CheckpointStorage(local_site.options), "member1")
    folder = ORDERS.folder(StoragePath.parse(local_site.root))
    store.beat(folder, keeper_body(), 5.0)  # the session cluster's keeper adopted it and renews
    assert m1.tick()["orders"] == "heartbeat"
    assert m1.agent.renewer.kept(ORDERS)
    store.beat(folder, keeper_body(second=2), 5.0)  # once a poll
    m1.driver.tick()
    assert _body(local_site) == keeper_body(second=2)  # not written over
    store.beat(folder, keeper_body(second=4), 5.0)

    upgraded = jobs.get("analytics", "orders")
    upgraded["status"]["jobStatus"]["jobId"] = OTHER_JOB  # resubmitted under a new jobId
    jobs.upsert(upgraded)
    m1.driver.renew(advance=policy.fencing.poll_seconds)
    assert m1.tick()["orders"] == "heartbeat"
    assert not m1.agent.renewer.kept(ORDERS)
    m1.driver.renew(advance=policy.fencing.poll_seconds)
    body = _body(local_site)
    assert body is not None and "writer" not in body and body["jobId"] == OTHER_JOB  # the agent's again
