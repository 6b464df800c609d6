"""What the lease keeper costs per job, in a fleet of 1 and of 1,000 jobs: ``flink-failover keeper``
processes for real against moto's S3 with the production timings (lease 30 s, poll 5 s, renew deadline
10 s, stop margin 10 s), each beside a stand-in JobManager: CPU seconds per minute, resident memory,
storage requests per minute (the keeper's own counters, and the requests for its folder in moto's
access log), renewals failed and JobManagers killed, over a window after the leases are held.

A keeper runs in each job's pod, so 1,000 jobs are 1,000 keeper processes, which do not fit here (about
100 MiB each; 2 shared cores). At a fleet of F jobs the bucket holds F jobs' folders; ``--measured M``
real keepers (5 by default) keep M of them, and a load generator (``bench/_keeper_load.py``, a process
of its own) sends the other F - M keepers' requests to the same moto server: a listing of the job's
folder and a heartbeat PUT per job per poll, each job at its own phase, open loop. So a keeper's cost
per job is measured while its storage serves the whole fleet's traffic, and the store's answer to that
traffic (the rate it served, its latency, the requests a keeper would have failed) is measured too.

``python -m bench keeper [--fleets 1,1000] [--measured 5] [--seconds 60]`` (the default takes about 3
minutes: each fleet's keepers start, take their leases, then the window).
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench._keeper_load import WORKERS, fleet_load, heartbeat_like, seed, summary
from bench._procstat import cpu_seconds, find_moto, machine_busy, rss_mib
from tests.support.keeper import KeeperProcess, new_marker, policy_text, standin
from tests.support.s3 import moto_server, s3_options
from webhook.common.paths import StoragePath
from webhook.fencing.layout import Workload

PRODUCTION = {"leaseSeconds": 30, "pollSeconds": 5, "renewDeadlineSeconds": 10, "stopMarginSeconds": 10}
CALLS = ("list", "beat", "clock")
BUCKET = "bench-keeper"
CHECKPOINTS = f"s3://{BUCKET}/checkpoints"


def _requests(keeper: KeeperProcess) -> float:
    return sum(keeper.metric("flink_failover_keeper_storage_requests_total", f'call="{c}"') for c in CALLS)


def _folder(job: int) -> str:
    """The job's ownership folder, bucket-relative (``fencing/layout.py``)."""
    path = Workload("FlinkDeployment", "bench", f"job-{job:04d}").folder(StoragePath.parse(CHECKPOINTS))
    return path.fs_path.removeprefix(f"{BUCKET}/")


def _anon_mib(pids: list[int]) -> float:
    """Anonymous resident memory (the heap: not shared with other processes of the same image)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                total += next((int(line.split()[1]) for line in f if line.startswith("RssAnon:")), 0)
        except OSError:
            continue
    return total / 1024


def _wire(log: Path, offset: int, folders: list[str]) -> int:
    """Requests for ``folders`` in moto's access log past ``offset``: a PUT or GET naming the folder in
    its path or (url-encoded) in its listing's prefix."""
    text = log.read_bytes()[offset:].decode(errors="replace")
    names = "|".join(re.escape(f.rsplit("/", 1)[-1]) for f in folders)
    return len(
        re.findall(
            rf'"(?:\x1b\[[0-9;]*m)*(?:GET|PUT|HEAD|POST|DELETE) [^"]*(?:/|%2F)(?:{names})(?:/|%2F)', text
        )
    )


def fleet(work: Path, jobs: int, measured: int, seconds: float) -> dict[str, Any]:
    """``measured`` real keepers in a fleet of ``jobs``, the rest simulated; what one window measured."""
    measured = min(measured, jobs)
    folders = [_folder(j) for j in range(jobs)]
    body = heartbeat_like(folders[0])
    with ExitStack() as stack:
        log = work / "moto.log"
        endpoint = stack.enter_context(moto_server(log))
        port = int(endpoint.rsplit(":", 1)[1])
        seed(port, BUCKET, folders, body, b'{"owner": "member1", "epoch": 0}\n')
        loads = (
            stack.enter_context(fleet_load(port, BUCKET, folders[measured:], body, PRODUCTION["pollSeconds"]))
            if jobs > measured
            else []
        )
        options = {"s3": s3_options(endpoint)}
        keepers = []
        for job in range(measured):
            marker = new_marker()
            keeper = KeeperProcess(
                work / f"job-{job}",
                policy_text(options, **PRODUCTION),
                CHECKPOINTS,
                marker,
                workload=f"FlinkDeployment/bench/job-{job:04d}",
            )
            keeper.start(60)
            stack.callback(keeper.kill)
            keepers.append((keeper, marker))
        for keeper, marker in keepers:
            keeper.wait_event("held", 60)
            stack.enter_context(standin(marker))
        time.sleep(PRODUCTION["pollSeconds"])  # every keeper past its first poll
        pids = [k.process.pid for k, _ in keepers if k.process is not None]
        moto = find_moto()
        before_cpu, before_req, before_moto = (
            cpu_seconds(pids),
            sum(_requests(k) for k, _ in keepers),
            cpu_seconds(moto),
        )
        offset = log.stat().st_size
        busy_before, total_before = machine_busy()
        since = time.time()
        started = time.monotonic()
        time.sleep(seconds)
        elapsed = time.monotonic() - started
        until = time.time()
        cpu = cpu_seconds(pids) - before_cpu
        requests = sum(_requests(k) for k, _ in keepers) - before_req
        wire = _wire(log, offset, folders[:measured])
        moto_cpu = cpu_seconds(moto) - before_moto
        busy_after, total_after = machine_busy()
        found = {
            "jobs": jobs,
            "measured": len(keepers),
            "elapsed": elapsed,
            "cpu": cpu,
            "rss": rss_mib(pids),
            "anon": _anon_mib(pids),
            "requests": requests,
            "wire": wire,
            "failed": sum(
                k.metric("flink_failover_keeper_renewals_total", 'result="failed"') for k, _ in keepers
            ),
            "unlisted": sum(
                k.metric("flink_failover_keeper_listings_total", 'result="failed"') for k, _ in keepers
            ),
            "kills": sum(
                k.metric("flink_failover_keeper_jobmanager_kills_total", f'reason="{why}"')
                for k, _ in keepers
                for why in ("renew-deadline", "superseded", "not-held")
            ),
            "moto_cpu": moto_cpu,
            "load": os.getloadavg()[0],
            "machine": 100 * (busy_after - busy_before) / max(total_after - total_before, 1.0),
        }
    if loads:
        found["store"] = summary(loads[0].requests, since, until)
        found["simulated"] = jobs - len(keepers)
    return found


def report(found: dict[str, Any]) -> None:
    n, minutes, elapsed = found["measured"], found["elapsed"] / 60, found["elapsed"]
    per_minute = found["cpu"] / n / minutes
    print(f"fleet of {found['jobs']} jobs: {n} real keepers measured, window {elapsed:.0f} s")
    print(f"  CPU per job:        {per_minute:.2f} s per minute ({100 * per_minute / 60:.2f} % of a core)")
    print(f"  RSS per job:        {found['rss'] / n:.1f} MiB ({found['anon'] / n:.1f} MiB of it anonymous)")
    print(
        f"  storage requests:   {found['requests'] / n / minutes:.1f} per job per minute "
        f"(the keeper's count; {found['wire'] / n / minutes:.1f} in moto's log)"
    )
    print(
        f"  renewals failed: {found['failed']:.0f}, listings failed: {found['unlisted']:.0f}, "
        f"JobManagers killed: {found['kills']:.0f}"
    )
    store = found.get("store")
    if store:
        offered = 2 * found["jobs"] / PRODUCTION["pollSeconds"]
        served = sum(c["count"] - c["failed"] for c in store.values()) / elapsed + found["wire"] / elapsed
        answered = sum(c["answered"] for c in store.values()) / elapsed + found["wire"] / elapsed
        print(
            f"  the store: {found['simulated']} more jobs' traffic from the load generator; the fleet's "
            f"{offered:.0f} requests/s offered, {answered:.0f}/s answered ({served:.0f}/s within a poll); "
            f"moto {100 * found['moto_cpu'] / elapsed:.0f} % of a core"
        )
        if answered < 0.95 * offered:
            capacity = answered * PRODUCTION["pollSeconds"] / 2
            print(
                f"  the store saturated: it answers the keepers of about {capacity:.0f} jobs here; the "
                "others' requests wait about a poll in the generator and fail (the measured keepers' wait "
                f"only behind the generator's {WORKERS} in flight: 1,000 real keepers would all wait at "
                "the store)"
            )
        for call, name in (("list", "listing"), ("beat", "heartbeat PUT")):
            if call in store:
                c = store[call]
                print(
                    f"    {name}: p50 {1000 * c['p50']:.0f} ms, p99 {1000 * c['p99']:.0f} ms, "
                    f"max {1000 * c['max']:.0f} ms; {c['failed']} of {c['count']} later than a poll (failed)"
                )
    print(
        f"  machine busy meanwhile: {found['machine']:.0f} % (load average {found['load']:.1f} on "
        f"{os.cpu_count()} cores: other work shares it)",
        flush=True,
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench keeper")
    parser.add_argument("--fleets", default="1,1000", help="fleet sizes (jobs), comma-separated")
    parser.add_argument("--measured", type=int, default=5, help="real keepers in a fleet larger than that")
    parser.add_argument("--seconds", type=float, default=60.0, help="the measured window of each fleet")
    args = parser.parse_args(argv)
    status = 0
    print(f"production timings (poll {PRODUCTION['pollSeconds']} s); {_processes()} processes here for the "
          "guard to scan in /proc every 0.1 s (a pod has a handful)")  # fmt: skip
    for jobs in (int(v) for v in args.fleets.split(",") if v):
        with tempfile.TemporaryDirectory(prefix="bench-keeper-") as tmp:
            found = fleet(Path(tmp), jobs, args.measured, args.seconds)
        report(found)
        # a failed renewal is retried within the deadline; a JobManager killed is a lease the keeper lost
        status = status or (1 if found["kills"] else 0)
    return status


def _processes() -> int:
    return sum(1 for entry in os.listdir("/proc") if entry.isdigit())
