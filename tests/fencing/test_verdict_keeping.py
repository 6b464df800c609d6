"""The agent of the member where a job runs keeps that job's verdict (fencing/prechecks.py), so a failover
admission checks only the files new since: on every backend's real server, through the agent's own
poll; and ``prechecks.due`` (pure) says whose verdict is due."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane import fakeapi
from tests.support.agents import Driver
from tests.support.backends import BACKEND_NAMES, Running
from tests.support.events import Collected
from tests.support.jobtrees import (
    JOB,
    aged,
    checkpoint,
    chosen,
    lookup,
    names,
    put,
    reader,
    verdict_of,
    verified_job,
)
from tests.support.objects import running_deployment
from webhook.common.kubeclient import ClientConfig
from webhook.fencing import metrics
from webhook.fencing.agent import FencingAgent
from webhook.fencing.copies import Copy, read_copy
from webhook.fencing.flinkapi import FlinkApi, ThreadedApi
from webhook.fencing.prechecks import PRECHECKS_QUEUED, due
from webhook.policy.restore import MAX_DEADLINE_SECONDS, FencingPolicy, RestorePolicy, Verify
from webhook.restore.storage.search import CheckpointStorage
from webhook.restore.verdict import MAX_AGE, VERDICT_NAME, WRITER_MAX_AGE

BACKENDS = pytest.mark.parametrize("storage_backend", BACKEND_NAMES, indirect=True)
POLL = 30.0
EVERY = 60  # two polls


FENCING = FencingPolicy(
    lease_seconds=300.0, poll_seconds=POLL, renew_deadline_seconds=2 * POLL, verdict_seconds=EVERY
)


def policy_for(root: str, options: dict[str, Any], **overrides: Any) -> RestorePolicy:
    return RestorePolicy(
        default_checkpoint_dir=root,
        storage_options=options,
        deadline_seconds=MAX_DEADLINE_SECONDS,
        fencing=FENCING,
        **overrides,
    )


class Member:
    """One member cluster's agent (its runner's storage: it writes verdicts), driven a poll at a time."""

    def __init__(self, policy: RestorePolicy, folder: Path) -> None:
        self.running = fakeapi.start_member_cluster()
        api = FlinkApi.connect(ClientConfig(str(self.running.kubeconfig(folder / "member.kubeconfig"))))
        assert isinstance(api, FlinkApi)
        storage = CheckpointStorage(policy.storage_options, write_verdicts=True)
        self.agent = FencingAgent("member1", policy, ThreadedApi(api, 30.0), storage, events=Collected())
        self.driver = Driver(self.agent)

    def tick(self) -> dict[str, str]:
        """The next poll, one poll later."""
        return {s.workload.name: s.action for s in self.driver.tick()}

    def close(self) -> None:
        self.driver.close()
        self.running.stop()


@pytest.fixture
def member(tmp_path: Path) -> Iterator[Any]:
    started: list[Member] = []

    def start(policy: RestorePolicy) -> Member:
        started.append(Member(policy, tmp_path))
        return started[-1]

    yield start
    for m in started:
        m.close()


def flink23(obj: dict[str, Any]) -> dict[str, Any]:
    obj["spec"]["flinkVersion"] = "v2_3"  # the trees' _metadata is format 6, which 2.1+ reads
    return obj


def checks(result: str) -> float:
    return metrics.VERDICTS.labels(result)._value.get()


@BACKENDS
def test_the_agent_keeps_a_running_jobs_verdict_and_a_failover_then_asks_no_file(
    storage_backend: Running, member: Any
) -> None:
    root = f"{storage_backend.bucket('kept')}/ck"
    job_dir = f"{root}/{JOB}"
    shared = [f"{job_dir}/shared/{n}" for n in names(40)]
    checkpoint(storage_backend, job_dir, 1, shared)
    m = member(policy_for(root, storage_backend.storage_options()))
    m.running.fake.upsert(flink23(running_deployment(job_id=JOB)))
    restorable = checks("restorable")
    assert m.tick() == {"orders": "heartbeat"}
    assert checks("restorable") == restorable + 1
    assert str(verdict_of(storage_backend, job_dir).checkpoint).endswith("/chk-1")

    new = [f"{job_dir}/shared/new-{i}" for i in range(5)]
    checkpoint(storage_backend, job_dir, 2, shared + new)
    assert m.tick() == {"orders": "heartbeat"}  # not due yet: the verdict still says chk-1
    assert str(verdict_of(storage_backend, job_dir).checkpoint).endswith("/chk-1")
    before = lookup(reader(storage_backend), job_dir).trips.requests  # a failover asks the 5 new files

    m.tick()  # due: chk-2 checked (its 5 new files), the verdict now says chk-2
    assert str(verdict_of(storage_backend, job_dir).checkpoint).endswith("/chk-2")
    found = lookup(reader(storage_backend), job_dir)
    # the verdict and the job directory; chk-2's folder and _metadata; no file asked
    assert chosen(found) == f"{job_dir}/chk-2" and found.trips.requests == 4 < before

    lost = f"{job_dir}/shared/never-written"  # chk-3 names a file the storage does not hold
    checkpoint(storage_backend, job_dir, 3, [*shared, *new, lost], write_shared=False)
    passed_over = checks("passed-over")
    m.tick()
    m.tick()
    assert checks("passed-over") == passed_over + 1
    assert str(verdict_of(storage_backend, job_dir).checkpoint).endswith("/chk-2")  # chk-3 not vouched for

    m.running.fake.delete("analytics", "orders")
    assert m.tick() == {}
    assert not m.agent.prechecker.known  # a deleted job leaves nothing behind in the agent


@BACKENDS
def test_the_agent_writes_over_a_verdict_whose_time_has_no_utc_offset(
    storage_backend: Running, member: Any
) -> None:
    """Issue 46: such a verdict denied every failover of the job (a TypeError comparing times, told as a
    storage error) and the agent's check failed on it too, so nothing ever wrote over it. Now it is no
    verdict: the agent's check confirms every file and writes a good one."""
    job_dir, _ = verified_job(storage_backend, 10)
    url = f"{job_dir}/{VERDICT_NAME}"
    odd = json.loads(storage_backend.read(url))
    odd["verifiedAt"] = odd["verifiedAt"].replace("+00:00", "")
    put(storage_backend, {url: json.dumps(odd).encode()})
    assert chosen(lookup(reader(storage_backend), job_dir)).endswith("/chk-1")  # the full check, no error
    m = member(policy_for(job_dir.rsplit("/", 1)[0], storage_backend.storage_options()))
    m.running.fake.upsert(flink23(running_deployment(job_id=JOB)))
    restorable = checks("restorable")
    assert m.tick() == {"orders": "heartbeat"}
    assert checks("restorable") == restorable + 1
    kept = json.loads(storage_backend.read(url))
    assert datetime.fromisoformat(kept["verifiedAt"]).tzinfo is not None
    assert str(verdict_of(storage_backend, job_dir).checkpoint).endswith("/chk-1")


def test_nothing_is_kept_where_admissions_check_no_files_or_the_policy_says_never(
    tmp_path: Path, member: Any
) -> None:
    root = tmp_path / "ck"
    job_dir = root / JOB
    for policy in (
        policy_for(str(root), {}, verify=Verify.METADATA),
        replace(policy_for(str(root), {}), fencing=replace(FENCING, verdict_seconds=0)),
    ):
        m = member(policy)
        m.running.fake.upsert(running_deployment(job_id=JOB))
        (job_dir / "chk-1").mkdir(parents=True, exist_ok=True)
        assert m.tick() == {"orders": "heartbeat"}
        assert not (job_dir / VERDICT_NAME).exists()


@BACKENDS
def test_the_writer_lists_everything_again_before_readers_stop_trusting_its_verdict(
    storage_backend: Running,
) -> None:
    """A verdict between ``WRITER_MAX_AGE`` and ``MAX_AGE`` old: a reader still trusts it, the writer
    checks every file again and writes a verdict confirmed now (so a kept verdict never expires)."""
    job_dir, _ = verified_job(storage_backend, 20)
    aged(storage_backend, job_dir, (WRITER_MAX_AGE + MAX_AGE) / 2)
    assert lookup(reader(storage_backend), job_dir).trips.requests == 4  # trusted: nothing asked
    writer = CheckpointStorage(storage_backend.storage_options(), write_verdicts=True)
    found = lookup(writer, job_dir)
    writer.settle()
    assert found.trips.requests > 4  # the writer asked the files again
    kept = verdict_of(storage_backend, job_dir)
    assert kept.carried_seen is None and kept.seen is not None and kept.stored_at is not None
    assert kept.stored_at - kept.seen < timedelta(minutes=1)  # its files seen now, on the store's clock


# --- prechecks.due, pure ------------------------------------------------------------------------------


def copies(count: int, policy: RestorePolicy, **overrides: Any) -> list[Copy]:
    found = []
    for i in range(count):
        obj = running_deployment(job_id=f"{i:032x}", name=f"job-{i}", **overrides)
        found.append(read_copy(obj, policy))
    return found


def test_due_orders_the_longest_waiting_first_and_never_twice_at_once() -> None:
    policy = policy_for("s3://b/ck", {})
    found = copies(4, policy)
    w = [c.patched for c in found]
    kept = {w[0]: 100.0, w[1]: 10.0, w[2]: 100.0 - EVERY + 1}
    chosen_now = due(found, kept, frozenset({w[3]}), 100.0 + EVERY, policy)
    # w[3] under way; w[1] kept longest ago, then w[2] and w[0] (both due at 100 + EVERY)
    assert [c.patched for c in chosen_now] == [w[1], w[2], w[0]]
    assert [c.patched for c in due(found, kept, frozenset(), 100.0 + EVERY - 1, policy)] == [w[3], w[1], w[2]]


def test_due_leaves_what_the_queue_has_no_room_for_to_a_later_poll() -> None:
    policy = policy_for("s3://b/ck", {})
    found = copies(PRECHECKS_QUEUED + 10, policy)
    busy = frozenset(c.patched for c in found[:5])
    assert len(due(found, {}, busy, 0.0, policy)) == PRECHECKS_QUEUED - 5


def test_due_takes_only_running_jobs_with_a_job_id_under_verify_files() -> None:
    policy = policy_for("s3://b/ck", {})
    no_id = copies(1, policy)[0]
    no_id = replace(no_id, job_id="")
    assert due([no_id], {}, frozenset(), 0.0, policy) == ()
    assert due(copies(2, policy), {}, frozenset(), 0.0, replace(policy, verify=Verify.METADATA)) == ()
    never = replace(policy, fencing=replace(policy.fencing, verdict_seconds=0))
    assert due(copies(2, policy), {}, frozenset(), 0.0, never) == ()
