"""The session cluster's keeper (``flink-failover keeper --mode session``) beside a real Flink session
cluster: Flink 1.20's JobManager (``jobmanager.sh start-foreground``, a JVM running
``StandaloneSessionClusterEntrypoint``) running a real job submitted through its REST endpoint
(tests/support/flinksql.py). The keeper cancels the job through Flink's own REST API, and Flink says so.

Needs ``.venv-flink-jm`` (``make flink-jm``); skipped without it. Every wait is bounded and generous (a
JVM start takes seconds to a minute on a busy machine); the test asserts what happened, never a duration."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from tests.support.backends import Running
from tests.support.flinksql import SLOT_WAIT, submit, submitter
from tests.support.keeper import flink_home as find_flink_home
from tests.support.keeper import policy_text, running_keeper, standin, wait_for
from tests.support.keeper_cut import real_jobmanager
from webhook.common.paths import StoragePath
from webhook.fencing.lanes import Lanes
from webhook.fencing.layout import Workload, heartbeat_name
from webhook.fencing.records import FencingStore, fence_body, heartbeat_body
from webhook.keeper.flinkrest import FlinkRest
from webhook.restore.storage.search import CheckpointStorage

pytestmark = [pytest.mark.slow]

ORDERS = Workload("FlinkSessionJob", "analytics", "orders")


@pytest.fixture(scope="module")
def flink() -> tuple[Path, str]:
    home, python = find_flink_home(), submitter()
    if home is None or python is None:
        pytest.skip("no Flink distribution with a Java runtime and pyflink's gateway (make flink-jm)")
    return home, python


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as started:
        yield started


def _state(rest: FlinkRest, job_id: str) -> str:
    """The job's state in ``/jobs/overview`` ("" while it does not answer or does not list the job)."""
    overview: Any = rest.overview()
    jobs = overview.get("jobs", []) if isinstance(overview, dict) else []
    return next((str(job.get("state")) for job in jobs if job.get("jid") == job_id), "")


@pytest.mark.parametrize("storage_backend", ["file"], indirect=True)
def test_a_real_session_job_superseded_is_cancelled_through_flinks_rest_api_and_its_jobmanager_runs_on(
    storage_backend: Running, tmp_path: Path, stack: ExitStack, flink: tuple[Path, str]
) -> None:
    """A real session cluster ``shared`` runs a real job (orders); member1's agent renewed its record
    naming the cluster and the job's jobId; the keeper, started beside the JobManager, adopts the job and
    renews its lease; member2 restores it (fence epoch 1): the keeper cancels it through Flink's REST API
    (``/jobs/overview`` then lists it cancelled) and never kills the JobManager."""
    home, python = flink
    ckpt = storage_backend.bucket() + "/checkpoints"
    cluster = real_jobmanager(home, tmp_path)
    marker = cluster.marker
    jm = stack.enter_context(
        standin(marker, argv=[*cluster.argv, *SLOT_WAIT], env=cluster.env, restart_after=0.5)
    )
    rest = FlinkRest(f"http://127.0.0.1:{cluster.rest_port}", timeout=5.0)
    wait_for(lambda: rest.overview() is not None, 120, "the JobManager's REST API")
    job_id = submit(python, home, cluster.rest_port)
    wait_for(lambda: _state(rest, job_id) == "RUNNING", 120, "the job running")

    folder = ORDERS.folder(StoragePath.parse(ckpt))
    member1 = FencingStore(CheckpointStorage(storage_backend.storage_options()), "member1", Lanes(5.0))
    member1.beat(folder, heartbeat_body(ORDERS, "member1", 0, job_id, "test", "shared"))
    record = folder.child(heartbeat_name("member1")).fs_path

    def renewed_by_keeper() -> bool:  # a local file is written in place: a read may meet a write
        try:
            return bool(json.loads(storage_backend.fs.cat_file(record)).get("writer") == "keeper")
        except (OSError, ValueError):
            return False

    extra = ["--mode", "session", "--rest", rest.base]
    policy = policy_text(storage_backend.storage_options())
    workload = "FlinkDeployment/analytics/shared"
    with running_keeper(tmp_path, policy, ckpt, marker, workload=workload, extra=extra) as keeper:
        adopted = keeper.wait_event("adopted", 60)
        assert (adopted["job"], adopted["jobId"]) == ("orders", job_id)
        keeper.wait_event("held", 60)
        wait_for(renewed_by_keeper, 60, "the keeper's renewal of the job's record", keeper)
        assert _state(rest, job_id) == "RUNNING"  # nothing has stopped it before the fence
        other = FencingStore(CheckpointStorage(storage_backend.storage_options()), "member2", Lanes(5.0))
        other.fence(folder, 1, fence_body(ORDERS, "member2", 1, "test"))
        cancelled = keeper.wait_event("cancelled", 60)
        assert (cancelled["jobId"], cancelled["why"]) == (job_id, "superseded")
        stopping = ("CANCELLING", "CANCELED")
        wait_for(lambda: _state(rest, job_id) in stopping, 120, "Flink listing the job cancelled", keeper)
        assert jm.alive and not jm.deaths and not keeper.events("stopped")
        assert not keeper.events("cancel-failed")
