"""A real Flink JobManager whose keeper is cut from its storage, then given it back (issue 47): one run
of it, shared by ``tests/keeper/test_real_jobmanager.py`` (which asserts the order of what happened)
and ``bench keeper_flink`` (which prints the durations).

The keeper reaches moto's S3 through a TCP proxy; Flink's own ``jobmanager.sh start-foreground`` (a
JVM running ``StandaloneSessionClusterEntrypoint``) is restarted whenever it dies, as the kubelet
restarts a container; a thread polls its REST endpoint. Once the JobManager serves, the proxy is cut:
the keeper kills it at its renew deadline, and every restart while the cut lasts. Then the proxy heals:
the keeper renews, holds the lease again, and only then does a restarted JobManager serve. Every time
recorded is this machine's wall clock (moto's storage times are this machine's too).
"""

from __future__ import annotations

import threading
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.support.keeper import Death, flink_env, new_marker, policy_text, running_keeper, standin, wait_for
from tests.support.server import free_port
from tests.support.tcpproxy import TcpProxy
from webhook.common.paths import StoragePath
from webhook.fencing.lanes import Lanes
from webhook.fencing.layout import Workload
from webhook.fencing.records import FencingStore
from webhook.restore.storage.search import CheckpointStorage

WORKLOAD = Workload("FlinkDeployment", "analytics", "orders")


class Rest:
    """Polls the JobManager's REST endpoint every 0.1 s and keeps when it answered (wall clock)."""

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
                        self.answers.append(time.time())
            except OSError:
                pass
            self._halt.wait(0.1)

    def stop(self) -> None:
        self._halt.set()


def jobmanager_argv(home: Path, marker: str) -> tuple[list[str], int]:
    """Flink's JobManager in the foreground on free loopback ports, carrying ``marker``; its REST port."""
    rest, rpc = free_port(), free_port()
    argv = [
        str(home / "bin" / "jobmanager.sh"), "start-foreground",
        "-D", f"rest.port={rest}", "-D", "rest.bind-address=127.0.0.1",
        "-D", f"jobmanager.rpc.port={rpc}", "-D", "jobmanager.memory.process.size=1024m",
        "-D", f"test.marker={marker}",
    ]  # fmt: skip
    return argv, rest


@dataclass(frozen=True)
class RealJobManager:
    """How to start Flink's JobManager for one test: its command, marker, REST port and environment."""

    marker: str
    argv: list[str]
    rest_port: int
    env: dict[str, str]


def real_jobmanager(home: Path, work: Path) -> RealJobManager:
    """``jobmanager_argv`` with a new marker, Flink's logs kept in ``work/flink-log``."""
    logs = work / "flink-log"
    logs.mkdir(parents=True, exist_ok=True)
    marker = new_marker()
    argv, rest_port = jobmanager_argv(home, marker)
    return RealJobManager(marker, argv, rest_port, flink_env(home, FLINK_LOG_DIR=str(logs)))


@dataclass
class CutRun:
    """What one run recorded (wall clock, seconds since the epoch)."""

    lease_seconds: float
    deadline_seconds: float
    cut: float
    last_renewal: float  # the start of the keeper's last renewal that succeeded
    exit: Death  # the JobManager's exit: the first death
    lease_end: float  # member1's last heartbeat, in storage time (the end of its second), + the lease
    deaths_while_cut: list[Death]  # the restarts killed before the heal
    healed: float
    held_again: float  # the keeper's "held" line after the heal
    served_again: float  # the first REST answer of a restarted JobManager
    stopped: list[dict[str, Any]]  # the keeper's "stopped" lines
    answers: list[float] = field(default_factory=list)  # every REST answer

    @property
    def renewal_to_exit(self) -> float:
        return self.exit.wall - self.last_renewal


def _time(line: dict[str, Any]) -> float:
    return datetime.fromisoformat(str(line["time"])).timestamp()


def storage_cut(
    home: Path, work: Path, s3_port: int, options: dict[str, Any], checkpoint_dir: str,
    timings: dict[str, float], restarts: int = 2, start_seconds: float = 240,
) -> CutRun:  # fmt: skip
    """One run. ``options``: the s3 storage options of the server on ``s3_port`` (the endpoint is
    replaced by the proxy's for the keeper); ``timings``: the policy's fencing block; ``restarts``:
    restarts killed while the cut lasts before the heal; ``start_seconds``: a JVM's start at most."""
    lease, deadline = float(timings["leaseSeconds"]), float(timings["renewDeadlineSeconds"])
    proxy = TcpProxy(s3_port)
    flink = real_jobmanager(home, work)
    marker, argv, rest_port, env = flink.marker, flink.argv, flink.rest_port, flink.env
    proxied = {"s3": {**options, "endpoint_url": f"http://127.0.0.1:{proxy.port}"}}
    other = FencingStore(CheckpointStorage({"s3": options}), "member2", Lanes(5.0))
    folder = WORKLOAD.folder(StoragePath.parse(checkpoint_dir))
    rest = Rest(rest_port)
    try:
        with running_keeper(
            work / "keeper", policy_text(proxied, **timings), checkpoint_dir, marker
        ) as keeper:
            keeper.wait_event("held", 60)
            with standin(marker, argv=argv, env=env, restart_after=0.5) as jm:
                wait_for(lambda: rest.answers, start_seconds, "the JobManager's REST API", keeper)
                renewed = keeper.metric("flink_failover_keeper_renewals_total", 'result="ok"')
                wait_for(  # a renewal while it serves: the last one before the cut is the JobManager's
                    lambda: keeper.metric("flink_failover_keeper_renewals_total", 'result="ok"') > renewed,
                    4 * timings["pollSeconds"], "a renewal", keeper,
                )  # fmt: skip
                proxy.cut()
                cut = time.time()
                death = wait_for(lambda: jm.deaths[:1], lease + 30, "the JobManager's exit", keeper)[0]
                last = keeper.metric("flink_failover_keeper_last_renewal_timestamp_seconds")
                beat = other.list(folder).ownership.heartbeat("member1")
                assert beat is not None, "member1's heartbeat is not in the storage"
                wait_for(
                    lambda: len(jm.deaths) > restarts, restarts * start_seconds, "restarts killed", keeper
                )
                proxy.heal()
                healed = time.time()
                deaths_while_cut = list(jm.deaths[1:])
                held = keeper.wait_event("held", 60, after=1)
                limit = start_seconds + 30
                served = wait_for(lambda: [a for a in rest.answers if a > healed], limit, "a JM served")[0]
                stopped = keeper.events("stopped")
                return CutRun(
                    lease, deadline, cut, last, death, beat.modified.timestamp() + lease, deaths_while_cut,
                    healed, _time(held), served, stopped, list(rest.answers),
                )  # fmt: skip
    finally:
        rest.stop()
        proxy.close()
