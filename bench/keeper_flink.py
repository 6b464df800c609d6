"""How long a real Flink job's tasks run on after the keeper kills its JobManager (issue 47).

The keeper stops the JobManager, not the TaskManagers (other pods): their tasks run until the
TaskManager notices the JobManager is gone. Flink 1.20 from PyPI on Java 17: a standalone JobManager and
one TaskManager (each ``start-foreground``), a streaming SQL job (datagen, 5 rows a second, into a print
sink: every row a line on the TaskManager's stdout), the keeper holding the lease on local files; then
member2's fence (a failover there): the keeper kills the JobManager, and the rows the TaskManager still
prints are counted, with the time of the last one after the kill. Once per ``heartbeat.timeout`` asked
(Flink's default 50 s, and shorter ones).

Then the keeper cut from its storage beside a real JobManager (``tests/support/keeper_cut.py``, at the
production timings: lease 30 s, poll 5 s, renew deadline 10 s, on moto's S3 through a TCP proxy): the
time from the start of the keeper's last renewal that succeeded to the JobManager's exit, against the
renew deadline and the lease; the restarts killed while the cut lasts; from the heal to the lease held
again and to a restarted JobManager serving.

``python -m bench keeper_flink [--heartbeat-timeouts 50000,10000] [--cuts 3]`` (not run by default:
each heartbeat case starts two JVMs, 1-2 minutes; each cut about a minute). Needs ``.venv-flink1``
(``make flink-venvs``) and ``java``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

from bench.keeper import PRODUCTION
from tests.support.keeper import (
    flink_env,
    flink_home,
    new_marker,
    policy_text,
    running_keeper,
    standin,
    wait_for,
)
from tests.support.keeper_cut import storage_cut
from tests.support.repo import REPO
from tests.support.s3 import moto_server, s3_options
from tests.support.server import free_port
from webhook.common.paths import StoragePath
from webhook.fencing.lanes import Lanes
from webhook.fencing.layout import Workload
from webhook.fencing.records import FencingStore, fence_body
from webhook.restore.storage.search import CheckpointStorage

RUN_BY_DEFAULT = False
WORKLOAD = Workload("FlinkDeployment", "bench", "printer")
SQL = (
    "CREATE TABLE src (n BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '5')",
    "CREATE TABLE snk (n BIGINT) WITH ('connector' = 'print')",
    "INSERT INTO snk SELECT n FROM src",
)
SUBMIT = """
import sys
from pyflink.common import Configuration
from pyflink.table import EnvironmentSettings, TableEnvironment
conf = Configuration()
for key, value in (("execution.target", "remote"), ("rest.address", "127.0.0.1"), ("rest.port", sys.argv[1]),
                   ("parallelism.default", "1")):
    conf.set_string(key, value)
settings = EnvironmentSettings.new_instance().in_streaming_mode().with_configuration(conf).build()
t = TableEnvironment.create(settings)
statements = sys.argv[2:]
for statement in statements[:-1]:
    t.execute_sql(statement)
print("submitted", t.execute_sql(statements[-1]).get_job_client().get_job_id(), flush=True)
"""


def _conf(home: Path, work: Path, rest: int, rpc: int, heartbeat_ms: int) -> Path:
    conf = work / "conf"
    shutil.copytree(home / "conf", conf)
    doc = yaml.safe_load((conf / "config.yaml").read_text())
    doc["jobmanager"]["rpc"]["port"] = rpc
    doc["jobmanager"]["memory"]["process"]["size"] = "1024m"
    doc["taskmanager"]["memory"]["process"]["size"] = "1024m"
    doc["taskmanager"]["numberOfTaskSlots"] = 1
    doc["rest"] = {"port": rest, "address": "localhost", "bind-address": "localhost"}
    doc["heartbeat"] = {"timeout": heartbeat_ms, "interval": min(10000, heartbeat_ms // 5)}
    (conf / "config.yaml").write_text(yaml.safe_dump(doc))
    return conf


def _rows(path: Path) -> int:
    return sum(1 for line in path.read_text(errors="replace").splitlines() if line.startswith("+I"))


def case(home: Path, heartbeat_ms: int) -> tuple[int, float]:
    """Rows printed after the kill, and seconds from the kill to the last of them."""
    with tempfile.TemporaryDirectory(prefix="bench-keeper-flink-") as tmp:
        work = Path(tmp)
        rest, rpc = free_port(), free_port()
        conf = _conf(home, work, rest, rpc, heartbeat_ms)
        (work / "log").mkdir()
        env = flink_env(home, FLINK_CONF_DIR=str(conf), FLINK_LOG_DIR=str(work / "log"))
        storage = work / "storage"
        storage.mkdir()
        ckpt = str(storage / "checkpoints")
        marker = new_marker()
        tm_out = work / "tm.out"
        with running_keeper(
            work / "keeper", policy_text(), ckpt, marker, workload="FlinkDeployment/bench/printer"
        ) as keeper:
            keeper.wait_event("held", 30)
            argv = [str(home / "bin" / "jobmanager.sh"), "start-foreground", "-D", f"test.marker={marker}"]
            with standin(marker, argv=argv, env=env, restart=False) as jm, tm_out.open("wb") as sink:
                tm = subprocess.Popen(
                    [str(home / "bin" / "taskmanager.sh"), "start-foreground"],
                    env=env,
                    stdout=sink,
                    stderr=sink,
                )
                try:
                    url = f"http://127.0.0.1:{rest}/taskmanagers"
                    wait_for(lambda: _answers(url, '"id"'), 180, "the TaskManager registered")
                    python = str(REPO / ".venv-flink1" / "bin" / "python")
                    subprocess.run([python, "-c", SUBMIT, str(rest), *SQL], env=env, check=True, timeout=300,
                                   capture_output=True)  # fmt: skip
                    wait_for(lambda: _rows(tm_out) >= 10, 120, "rows printed")
                    other = FencingStore(CheckpointStorage(), "member2", Lanes(5.0))
                    other.fence(
                        WORKLOAD.folder(StoragePath.parse(ckpt)), 1, fence_body(WORKLOAD, "member2", 1, "b")
                    )
                    death = wait_for(lambda: jm.deaths[:1], 30, "the JobManager killed", keeper)[0]
                    before = _rows(tm_out)
                    last_change, seen = time.monotonic(), before
                    end = time.monotonic() + heartbeat_ms / 1000 + 30
                    while time.monotonic() < end:
                        now_rows = _rows(tm_out)
                        if now_rows != seen:
                            seen, last_change = now_rows, time.monotonic()
                        time.sleep(0.1)
                    return seen - before, max(0.0, last_change - death.monotonic)
                finally:
                    tm.kill()
                    tm.wait(10)


def _answers(url: str, text: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as answer:
            return text in answer.read().decode()
    except OSError:
        return False


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench keeper_flink")
    parser.add_argument(
        "--heartbeat-timeouts", default="50000,10000", help="Flink heartbeat.timeout values, ms"
    )
    parser.add_argument("--cuts", type=int, default=3, help="storage cuts beside a real JobManager")
    args = parser.parse_args(argv)
    home = flink_home()
    if home is None:
        print("not run: no Flink distribution with a Java runtime (make flink-jm)")
        return 0
    timeouts = [int(v) for v in args.heartbeat_timeouts.split(",") if v]
    if timeouts:
        print(
            "heartbeat.timeout | rows printed after the JobManager was killed | the last one, after the kill"
        )
    for value in timeouts:
        rows, seconds = case(home, value)
        print(f"{value / 1000:g} s | {rows} | {seconds:.1f} s", flush=True)
    return cuts(home, args.cuts)


def cuts(home: Path, count: int) -> int:
    """The keeper cut from its storage beside a real JobManager, ``count`` times: 1 when a JobManager
    exited after the lease could have expired elsewhere, or served before the lease was held again."""
    if count <= 0:
        return 0
    deadline, lease = PRODUCTION["renewDeadlineSeconds"], PRODUCTION["leaseSeconds"]
    print(
        f"storage cut (renew deadline {deadline} s, lease {lease} s): last renewal -> JobManager exit | "
        "cut -> exit | exit -> the lease's end elsewhere | restarts killed | heal -> held | held -> served"
    )
    status = 0
    with tempfile.TemporaryDirectory(prefix="bench-keeper-cut-") as tmp:
        work = Path(tmp)
        endpoint = moto_server(work / "moto.log")
        with endpoint as url:
            options = s3_options(url)
            import fsspec

            fsspec.filesystem("s3", skip_instance_cache=True, **options).mkdir("bench-keeper-cut")
            port = int(url.rsplit(":", 1)[1])
            for n in range(count):
                run = storage_cut(
                    home, work / f"cut-{n}", port, options, f"s3://bench-keeper-cut/c{n}", PRODUCTION
                )
                print(
                    f"{run.renewal_to_exit:.2f} s | {run.exit.wall - run.cut:.2f} s | "
                    f"{run.lease_end - run.exit.wall:.2f} s | {len(run.deaths_while_cut)} | "
                    f"{run.held_again - run.healed:.2f} s | {run.served_again - run.held_again:.2f} s",
                    flush=True,
                )
                early = [a for a in run.answers if run.exit.wall <= a < run.held_again]
                status = status or (1 if run.exit.wall >= run.lease_end or early else 0)
    return status
