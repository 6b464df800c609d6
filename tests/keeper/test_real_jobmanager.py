"""The keeper beside a real Flink JobManager: Flink 1.20 from PyPI (its distribution inside pyflink) on
a Java 17 runtime, started by Flink's own ``jobmanager.sh start-foreground`` (a JVM running
``StandaloneSessionClusterEntrypoint``), restarted whenever it dies as the kubelet restarts a container.

Needs ``.venv-flink1`` (or ``.venv-flink``; ``make flink-venvs``) and ``java``; skipped without them
(each start of the JVM takes seconds to a minute on a busy machine)."""

from __future__ import annotations

import os
import shutil
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.support.backends import Running
from tests.support.keeper import flink_home as find_flink_home
from tests.support.keeper import new_marker, policy_text, running_keeper, standin, wait_for
from tests.support.server import free_port
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
    if home is None or shutil.which("java") is None:
        pytest.skip("no Flink distribution (.venv-flink1: make flink-venvs) or no java")
    return home


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as started:
        yield started


class Rest:
    """Polls the JobManager's REST endpoint every 0.1 s and keeps when it answered (monotonic)."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}/overview"
        self.answers: list[float] = []
        self._halt = threading.Event()
        threading.Thread(target=self._poll, daemon=True).start()

    def _poll(self) -> None:
        while not self._halt.is_set():
            try:
                with urllib.request.urlopen(self.url, timeout=0.5) as answer:
                    if answer.status == 200:
                        self.answers.append(time.monotonic())
            except OSError:
                pass
            self._halt.wait(0.1)

    def stop(self) -> None:
        self._halt.set()


@pytest.mark.parametrize("storage_backend", ["file"], indirect=True)
def test_a_real_jobmanager_is_killed_at_a_newer_fence_and_its_restarts_never_serve(
    storage_backend: Running, tmp_path: Path, stack: ExitStack, flink_home: Path
) -> None:
    """The keeper holds the lease; Flink's JobManager starts and serves its REST API; member2 restores the
    job (fence epoch 1): the keeper kills the JVM (found by its main class), and every restart of it is
    killed before it serves a single REST request."""
    ckpt = storage_backend.bucket() + "/checkpoints"
    marker = new_marker()
    rest_port, rpc_port = free_port(), free_port()
    argv = [
        str(flink_home / "bin" / "jobmanager.sh"), "start-foreground",
        "-D", f"rest.port={rest_port}", "-D", "rest.bind-address=127.0.0.1",
        "-D", f"jobmanager.rpc.port={rpc_port}", "-D", "jobmanager.memory.process.size=1024m",
        "-D", f"test.marker={marker}",
    ]  # fmt: skip
    logs = tmp_path / "flink-log"
    logs.mkdir()
    env = {**os.environ, "FLINK_HOME": str(flink_home), "FLINK_LOG_DIR": str(logs)}
    with running_keeper(tmp_path, policy_text(storage_backend.storage_options()), ckpt, marker) as keeper:
        keeper.wait_event("held", 20)
        jm = stack.enter_context(standin(marker, argv=argv, env=env, restart_after=0.5))
        rest = Rest(rest_port)
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
        assert all(at < death.monotonic for at in rest.answers)
        assert keeper.ready() == 503
