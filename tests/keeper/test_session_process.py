"""``flink-failover keeper --mode session`` run for real against real storage (local files; S3 on moto
through a TCP proxy that can be cut) beside a stand-in session cluster JobManager that serves Flink's
REST calls and recovers its jobs from its own HA data when restarted (tests/support/flinksession.py).
Each test asserts the order of events (the keeper's log, the stand-in's deaths and HA data, the
storage's own times), never a duration; every wait is bounded."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.support.backends import Running
from tests.support.flinksession import free_port, read_jobs, session_argv, write_jobs
from tests.support.keeper import (
    FAST,
    KeeperProcess,
    Supervised,
    new_marker,
    policy_text,
    running_keeper,
    standin,
    wait_for,
)
from tests.support.tcpproxy import TcpProxy
from webhook.common.paths import StoragePath
from webhook.fencing.lanes import Lanes
from webhook.fencing.layout import Workload, heartbeat_name
from webhook.fencing.records import FencingStore, fence_body, heartbeat_body
from webhook.restore.storage.backends import modified_time
from webhook.restore.storage.search import CheckpointStorage

pytestmark = [pytest.mark.slow]

A, B, C = "a" * 32, "b" * 32, "c" * 32
ORDERS = Workload("FlinkSessionJob", "analytics", "orders")
PAYMENTS = Workload("FlinkSessionJob", "analytics", "payments")
ELSEWHERE = Workload("FlinkSessionJob", "analytics", "elsewhere")  # another session cluster's job
LEASE = float(FAST["leaseSeconds"])


def _store(running: Running, cluster: str) -> FencingStore:
    return FencingStore(CheckpointStorage(running.storage_options()), cluster, Lanes(5.0))


def _agent_beats(running: Running, ckpt: str) -> None:
    """member1's agent renewed its session job copies once (its body names the session cluster)."""
    store = _store(running, "member1")
    root = StoragePath.parse(ckpt)
    for workload, job_id, session in (
        (ORDERS, A, "shared"),
        (PAYMENTS, B, "shared"),
        (ELSEWHERE, C, "other"),
    ):
        body = heartbeat_body(workload, "member1", 0, job_id, "test", session)
        store.beat(workload.folder(root), body)


def _heartbeat(running: Running, ckpt: str, workload: Workload) -> tuple[datetime, dict[str, object]]:
    """member1's heartbeat: its storage time and body. A local file is written in place, so a read that
    meets a write in flight (no JSON yet) reads again."""
    path = workload.folder(StoragePath.parse(ckpt)).child(heartbeat_name("member1")).fs_path

    def read() -> tuple[datetime, dict[str, object]] | None:
        modified = modified_time(running.fs.info(path))
        assert modified is not None
        if running.backend.scheme == "s3" and modified.microsecond == 0:  # the end of its second
            modified = datetime.fromtimestamp(modified.timestamp() + 1, UTC)
        try:
            return modified, json.loads(running.fs.cat_file(path))
        except ValueError:
            return None

    found: tuple[datetime, dict[str, object]] = wait_for(read, 5, "a whole heartbeat record")
    return found


def _session_args(port: int) -> list[str]:
    return ["--mode", "session", "--rest", f"http://127.0.0.1:{port}"]


@dataclass
class Session:
    keeper: KeeperProcess
    jm: Supervised
    ckpt: str
    ha: Path  # the stand-in JobManager's HA data


@contextmanager
def _session(running: Running, tmp_path: Path, policy: str, restart_after: float = 0.2) -> Iterator[Session]:
    """The session cluster ``shared``: orders (A) and payments (B) running, member1's agent heartbeats
    naming it, its keeper ready, then its JobManager started and both jobs' records renewed by the keeper."""
    ckpt = running.bucket() + "/checkpoints"
    _agent_beats(running, ckpt)
    marker, port, ha = new_marker(), free_port(), tmp_path / "ha.json"
    write_jobs(ha, {A: "RUNNING", B: "RUNNING"})
    workload = "FlinkDeployment/analytics/shared"
    with running_keeper(
        tmp_path, policy, ckpt, marker, workload=workload, extra=_session_args(port)
    ) as keeper:
        keeper.wait_event("held", 30)
        argv = session_argv(sys.executable, marker, port, ha)
        with standin(marker, argv=argv, restart_after=restart_after) as jm:
            for each in (ORDERS, PAYMENTS):
                wait_for(
                    lambda w=each: _heartbeat(running, ckpt, w)[1].get("writer") == "keeper", 15, "beats"
                )
            yield Session(keeper, jm, ckpt, ha)


def test_one_job_superseded_is_cancelled_alone_and_again_when_a_restarted_jobmanager_recovers_it(
    storage_servers: object, tmp_path: Path
) -> None:
    """Two fenced session jobs in one session cluster: member2 restores one (fence epoch 1); the keeper
    cancels that job alone through the REST endpoint, the JobManager and the other job run on and the
    other's lease is renewed; the JobManager restarts from HA data that still has the job: the keeper
    cancels it again, and never kills the JobManager."""
    running: Running = storage_servers("file")  # type: ignore[operator]
    with _session(running, tmp_path, policy_text(running.storage_options())) as at:
        keeper, jm, ckpt, ha = at.keeper, at.jm, at.ckpt, at.ha
        adopted = {e["job"] for e in keeper.events("adopted")}
        assert adopted == {"orders", "payments"}  # not the other session cluster's job
        body = _heartbeat(running, ckpt, PAYMENTS)[1]
        assert (body["writer"], body["session"], body["jobId"], body["epoch"]) == (
            "keeper",
            "shared",
            B,
            0,
        )
        _store(running, "member2").fence(
            ORDERS.folder(StoragePath.parse(ckpt)), 1, fence_body(ORDERS, "member2", 1, "t")
        )
        cancelled = keeper.wait_event("cancelled", 10)
        assert (cancelled["jobId"], cancelled["why"]) == (A, "superseded")
        assert read_jobs(ha) == {A: "CANCELED", B: "RUNNING"}
        orders_beat = _heartbeat(running, ckpt, ORDERS)[0]
        payments_beat = _heartbeat(running, ckpt, PAYMENTS)[0]
        wait_for(lambda: _heartbeat(running, ckpt, PAYMENTS)[0] > payments_beat, 10, "payments renewed")
        # HA data written before the cancel: the restarted JobManager recovers the superseded job.
        write_jobs(ha, {A: "RUNNING", B: "RUNNING"})
        assert jm.process is not None
        jm.process.kill()
        again = keeper.wait_event("cancelled", 20, after=1)
        assert again["jobId"] == A
        wait_for(lambda: read_jobs(ha)[A] == "CANCELED", 5, "the recovered job cancelled")
        assert len(jm.deaths) == 1 and jm.alive, keeper.events("stopped")  # only the test's own kill
        assert _heartbeat(running, ckpt, ORDERS)[0] == orders_beat  # never renewed again
        assert keeper.ready() == 200  # the superseded job does not keep the session from its probe


def test_one_jobs_renewal_alone_failing_cancels_that_job_and_the_other_runs_on(
    storage_servers: object, tmp_path: Path
) -> None:
    """One job's record cannot be written any more (its heartbeat's name taken by a directory: a fault of
    that folder alone) while the other's renewals go through: past its deadline the keeper cancels that
    job alone; the JobManager and the other job run on, and nothing is killed."""
    running: Running = storage_servers("file")  # type: ignore[operator]
    with _session(running, tmp_path, policy_text(running.storage_options())) as at:
        keeper, jm, ckpt, ha = at.keeper, at.jm, at.ckpt, at.ha
        record = ORDERS.folder(StoragePath.parse(ckpt)).child(heartbeat_name("member1")).fs_path
        running.fs.rm(record)
        running.fs.makedirs(record + "/taken")  # a name the keeper's write cannot take
        cancelled = keeper.wait_event("cancelled", 20)
        assert (cancelled["jobId"], cancelled["why"]) == (A, "renew-failed")
        assert keeper.events("renew-failed")
        assert read_jobs(ha) == {A: "CANCELED", B: "RUNNING"}
        payments_beat = _heartbeat(running, ckpt, PAYMENTS)[0]
        wait_for(lambda: _heartbeat(running, ckpt, PAYMENTS)[0] > payments_beat, 10, "payments renewed")
        assert jm.alive and not jm.deaths and not keeper.events("stopped")


def test_cut_from_its_storage_it_kills_the_jobmanager_before_another_cluster_may_count_a_lease_expired(
    proxied_s3: tuple[Running, TcpProxy], tmp_path: Path
) -> None:
    """Every lease lapses at once: the keeper kills the JobManager (no cancel: the jobs stay in its HA
    data), before the lease of either job, counted from its last heartbeat's storage time, could expire
    anywhere else; the restarts while the cut lasts are killed too."""
    running, proxy = proxied_s3
    policy = policy_text(running.storage_options(running.via(proxy.port)))
    with _session(running, tmp_path, policy, restart_after=0.3) as at:
        keeper, jm, ckpt, ha = at.keeper, at.jm, at.ckpt, at.ha
        ok = keeper.metric("flink_failover_keeper_renewals_total", 'result="ok"')
        wait_for(
            lambda: keeper.metric("flink_failover_keeper_renewals_total", 'result="ok"') >= ok + 2,
            15,
            "renewals",
        )
        before = len(jm.deaths)  # a slow first renewal may have stopped one already: not the cut's
        proxy.cut()
        death = wait_for(lambda: jm.deaths[before : before + 1], 30, "the JobManager's death")[0]
        last = min(_heartbeat(running, ckpt, w)[0] for w in (ORDERS, PAYMENTS))
        assert death.wall < last.timestamp() + LEASE
        wait_for(lambda: len(jm.deaths) >= before + 2, 20, "a restart killed while cut")
        stopped = keeper.events("stopped")
        assert stopped and stopped[-1]["why"] in ("renew-deadline", "rest-unanswered")
        assert not keeper.events("cancelled")
        assert read_jobs(ha) == {A: "RUNNING", B: "RUNNING"}  # kept for the restart to recover
        assert keeper.ready() == 503
        helds = len(keeper.events("held"))
        proxy.heal()
        keeper.wait_event("held", 30, after=helds)
        deaths = len(jm.deaths)
        ok = keeper.metric("flink_failover_keeper_renewals_total", 'result="ok"')
        wait_for(
            lambda: keeper.metric("flink_failover_keeper_renewals_total", 'result="ok"') >= ok + 4,
            20,
            "renewed",
        )
        assert jm.alive and len(jm.deaths) == deaths
