"""One running copy decided from what the restore recorded (issue 45), through the fencing agents of two
member clusters (fake API servers, the member webhook's handler) on real storage (local files and moto's
S3 server): a FlinkSessionJob whose checkpoint directory is its session cluster's is fenced, held and
released from the newest checkpoint; a held copy whose checkpoint directory or job-id label is edited
behind the webhook's back is still judged, released and resolved where its restore looked."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from tests.controlplane import fakeapi
from tests.fencing import test_agent as harness
from tests.fencing.test_agent import AGENT, Member, Site, failed_over, policy_for, running_copy
from tests.support.objects import JOB_ID, apply, decode_patch, flink_deployment, make_checkpoints, review
from tests.support.operator import set_status, stopped_status
from webhook.common.admission import parse_review
from webhook.common.kubeclient import ClientConfig
from webhook.member.handler import MemberHandler
from webhook.member.sessions import KubeSessionClusters
from webhook.restore.record import RestoreRecord, decode

P = "flink-failover.io"
HOLD, RELEASED, RECORD = f"{P}/hold", f"{P}/released", f"{P}/restore-record"
SESSION_JOBS = "/apis/flink.apache.org/v1beta1/flinksessionjobs"
OTHER_JOB = "b" * 32

# The two-member harness of the fencing agent's tests (fake API servers, the webhook's handler, storage).
world, site, local_site, moto = harness.world, harness.site, harness.local_site, harness.moto


def _jobs(member: Member) -> fakeapi.FakeKarmada:
    store: fakeapi.FakeKarmada = member.running.server.stores[SESSION_JOBS]
    return store


def _session_cluster(root: str) -> dict[str, Any]:
    """The session cluster: no job of its own, the checkpoint directory its jobs inherit."""
    return flink_deployment(name="session", checkpoint_dir=root, job=False)


def _session_job(**kw: Any) -> dict[str, Any]:
    return flink_deployment(kind="FlinkSessionJob", **kw)


def _running_session_job() -> dict[str, Any]:
    obj = _session_job()
    obj["spec"]["job"].update(state="running", upgradeMode="savepoint")
    obj["status"] = {"jobStatus": {"jobId": JOB_ID, "state": "RUNNING"}, "lifecycleState": "STABLE"}
    return obj


def _handler_reading_sessions(member: Member, policy: Any) -> MemberHandler:
    """The member role as served with ``--cluster``: it reads session clusters from its own API."""
    sessions = KubeSessionClusters(ClientConfig(str(member.kubeconfig)))
    return MemberHandler.from_policy(policy, sessions, cluster=member.name, agent_users=frozenset({AGENT}))


def _admit_job(member: Member, handler: MemberHandler, obj: dict[str, Any]) -> dict[str, Any]:
    response = handler(parse_review(review(obj))).to_review()["response"]
    assert response["allowed"], response
    admitted = apply(obj, decode_patch(response))
    _jobs(member).upsert(admitted)
    return admitted


def _session_failover(count: int) -> dict[str, Any]:
    obj = _session_job(
        labels={f"{P}/failover": "true", f"{P}/job-id": JOB_ID},
        annotations={f"{P}/failover-count": str(count), f"{P}/source-cluster": "member1"},
    )
    obj["spec"]["job"]["state"] = "running"
    return obj


def _no_default(site: Site) -> Any:
    """A policy without defaultCheckpointDir: the directory is the session cluster's alone."""
    return replace(policy_for(site), default_checkpoint_dir="")


def test_a_session_job_whose_directory_is_its_clusters_is_fenced_held_and_released(
    site: Site, world: Any
) -> None:
    """Before: member1's agent skipped the running session job ('no checkpoint directory'), member2's
    failover CREATE was restored running with no epoch and no fence: two copies."""
    policy = _no_default(site)
    m1, m2 = world("member1", policy), world("member2", policy)
    site.checkpoints([1, 2])
    for m in (m1, m2):
        m.put(_session_cluster(site.root))
    _jobs(m1).upsert(_running_session_job())
    assert m1.tick() == {"session": "skipped", "orders": "heartbeat"}

    handler = _handler_reading_sessions(m2, policy)
    try:
        admitted = _admit_job(m2, handler, _session_failover(1))
    finally:
        handler.close()
    job, annotations = admitted["spec"]["job"], admitted["metadata"]["annotations"]
    assert job["state"] == "suspended", annotations
    assert job["initialSavepointPath"].endswith(f"{JOB_ID}/chk-2")
    assert annotations[f"{P}/epoch"] == "1" and "waiting for member1" in annotations[HOLD]
    record = decode(annotations[RECORD])
    assert isinstance(record, RestoreRecord)
    assert (record.kind, record.session_cluster, record.checkpoint_dir) == (
        "FlinkSessionJob",
        "session",
        site.root,
    )

    site.checkpoints([3])  # the stale copy checkpoints once more before it sees the fence
    assert m2.tick()["orders"] == "held"
    assert m1.tick()["orders"] == "stopping"
    assert _jobs(m1).get("analytics", "orders")["spec"]["job"]["state"] == "suspended"
    set_status(_jobs(m1), "analytics", "orders", stopped_status(_jobs(m1).get("analytics", "orders")))
    assert m1.tick()["orders"] == "acked"
    assert m2.tick()["orders"] == "released"
    restored = _jobs(m2).get("analytics", "orders")
    assert restored["spec"]["job"]["state"] == "running"
    assert restored["spec"]["job"]["initialSavepointPath"].endswith(f"{JOB_ID}/chk-3")  # nothing lost


def _held_on_member2(site: Site, world: Any) -> tuple[Member, Member]:
    policy = policy_for(site)
    m1, m2 = world("member1", policy), world("member2", policy)
    site.checkpoints([1, 2])
    m1.put(running_copy())
    assert m1.tick() == {"orders": "heartbeat"}
    admitted = m2.admit(failed_over(1, "member1"))
    assert admitted["spec"]["job"]["state"] == "suspended"
    return m1, m2


def _edited_behind_the_webhook(member: Member, edit: Any) -> None:
    obj = member.obj()
    edit(obj)
    with member.running.fake.cond:  # as stored by an API server the webhook did not guard
        member.running.fake._store(("analytics", "orders"), obj, "MODIFIED")


def _stop_member1(m1: Member) -> None:
    assert m1.tick() == {"orders": "stopping"}
    m1.stop_completes()


def test_a_held_copy_whose_checkpoint_dir_is_edited_waits_where_its_restore_looked(
    local_site: Site, world: Any, tmp_path: Path
) -> None:
    """Before: the agent read the records in the new folder, where member1's heartbeat is not, wrote
    its fence there and released with no-heartbeat while member1 ran; the release started from chk-2
    though member1 had written chk-3."""
    m1, m2 = _held_on_member2(local_site, world)
    elsewhere = tmp_path / "elsewhere"
    make_checkpoints(elsewhere / JOB_ID, [1])

    def move(obj: dict[str, Any]) -> None:
        obj["spec"]["flinkConfiguration"]["execution.checkpointing.dir"] = str(elsewhere)

    _edited_behind_the_webhook(m2, move)
    assert m2.tick() == {"orders": "held"}
    assert m2.tick() == {"orders": "held"}  # member1 still heartbeats where the restore fenced
    assert not (elsewhere / "flink-failover").exists()
    local_site.checkpoints([3])
    _stop_member1(m1)
    assert m2.tick() == {"orders": "released"}
    released = m2.obj()
    assert released["metadata"]["annotations"][RELEASED].startswith("ack at ")
    assert released["spec"]["job"]["initialSavepointPath"] == f"{local_site.root}/{JOB_ID}/chk-3"


def test_a_held_copy_whose_job_id_label_is_edited_is_released_from_the_job_it_restored(
    local_site: Site, world: Any
) -> None:
    """Before: the label's new value was kept and the release resolved under it: another job's
    checkpoint (chk-9 of OTHER_JOB) started in this job's place."""
    m1, m2 = _held_on_member2(local_site, world)
    assert local_site.local is not None
    make_checkpoints(local_site.local / OTHER_JOB, [9])

    def relabel(obj: dict[str, Any]) -> None:
        obj["metadata"]["labels"][f"{P}/job-id"] = OTHER_JOB

    _edited_behind_the_webhook(m2, relabel)
    local_site.checkpoints([3])
    _stop_member1(m1)
    assert m2.tick() == {"orders": "released"}
    assert m2.obj()["spec"]["job"]["initialSavepointPath"] == f"{local_site.root}/{JOB_ID}/chk-3"


def test_the_record_is_written_at_the_restore_and_read_as_it_was(local_site: Site, world: Any) -> None:
    _, m2 = _held_on_member2(local_site, world)
    raw = m2.obj()["metadata"]["annotations"][RECORD]
    record = decode(raw)
    assert isinstance(record, RestoreRecord)
    assert (record.kind, record.job_id, record.checkpoint_dir) == ("FlinkDeployment", JOB_ID, local_site.root)
    assert record.flink_version == "v1_20" and record.job_subdir
    assert json.loads(raw)["v"] == 1
    assert decode(raw.replace('"v":1', '"v":2')).__class__.__name__ == "RestoreRecordError"
    assert "unknown field" in str(decode(raw.replace('"kind"', '"surprise":1,"kind"')))
