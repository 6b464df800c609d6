"""What the lease keeper costs, per job: ``flink-failover keeper`` processes for real against moto's S3
with the production timings (lease 30 s, poll 5 s, renew deadline 10 s, stop margin 10 s), each beside
a stand-in JobManager: CPU seconds per minute, resident memory, and storage requests per minute (the
keeper's own counters: a listing and a heartbeat PUT per poll), over a measured window after the
lease is held.

A keeper runs in each job's pod, so N jobs are N keepers: the figures per job hold for any N, the
storage's load is N times one keeper's. ``--jobs N`` runs N at once on this machine (a 2-core machine
shared with other work; keep N small: each keeper is a Python process).

``python -m bench keeper [--jobs 1] [--seconds 60]``
"""

from __future__ import annotations

import argparse
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from bench._procstat import cpu_seconds, machine_busy, rss_mib
from tests.support.keeper import KeeperProcess, new_marker, policy_text, standin
from tests.support.s3 import moto_server, s3_options

PRODUCTION = {"leaseSeconds": 30, "pollSeconds": 5, "renewDeadlineSeconds": 10, "stopMarginSeconds": 10}
CALLS = ("list", "beat", "clock")


def _requests(keeper: KeeperProcess) -> float:
    return sum(keeper.metric("flink_failover_keeper_storage_requests_total", f'call="{c}"') for c in CALLS)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench keeper")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-keeper-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        endpoint = stack.enter_context(moto_server(work / "moto.log"))
        options = {"s3": s3_options(endpoint)}
        import fsspec

        fs = fsspec.filesystem("s3", skip_instance_cache=True, **options["s3"])
        fs.mkdir("bench-keeper")
        keepers = []
        for job in range(args.jobs):
            marker = new_marker()
            keeper = KeeperProcess(
                work / f"job-{job}",
                policy_text(options, **PRODUCTION),
                "s3://bench-keeper/checkpoints",
                marker,
                workload=f"FlinkDeployment/bench/job-{job}",
            )
            keeper.start()
            stack.callback(keeper.kill)
            keepers.append((keeper, marker))
        for keeper, marker in keepers:
            keeper.wait_event("held", 60)
            stack.enter_context(standin(marker))
        pids = [k.process.pid for k, _ in keepers if k.process is not None]
        before_cpu, before_req = cpu_seconds(pids), sum(_requests(k) for k, _ in keepers)
        busy_before, total_before = machine_busy()
        started = time.monotonic()
        time.sleep(args.seconds)
        elapsed = time.monotonic() - started
        minutes = elapsed / 60
        cpu = cpu_seconds(pids) - before_cpu
        requests = sum(_requests(k) for k, _ in keepers) - before_req
        busy_after, total_after = machine_busy()
        rss = rss_mib(pids)
        kills = sum(
            k.metric("flink_failover_keeper_jobmanager_kills_total", 'reason="renew-deadline"')
            for k, _ in keepers
        )
        failed = sum(k.metric("flink_failover_keeper_renewals_total", 'result="failed"') for k, _ in keepers)
        n = len(keepers)
        print(f"keepers: {n} (one per job), window {elapsed:.0f} s, production timings (poll 5 s)")
        print(
            f"  CPU per job:        {cpu / n / minutes:.2f} s per minute "
            f"({100 * cpu / n / elapsed:.2f} % of a core)"
        )
        print(f"  RSS per job:        {rss / n:.1f} MiB")
        print(f"  storage requests:   {requests / n / minutes:.1f} per job per minute")
        print(
            f"  for 1,000 jobs:     {1000 * requests / n / minutes / 60:.0f} requests/s on their storage, "
            f"{1000 * rss / n / 1024:.1f} GiB of keepers summed over 1,000 pods"
        )
        print(f"  renewals failed: {failed:.0f}, JobManagers killed: {kills:.0f}")
        machine = 100 * (busy_after - busy_before) / max(total_after - total_before, 1.0)
        print(f"  processes the guard scans in /proc here: {_processes()} (a pod has a handful)")
        print(f"  machine busy meanwhile: {machine:.0f} % (other work shares it)")
        return 1 if kills or failed else 0


def _processes() -> int:
    import os

    return sum(1 for entry in os.listdir("/proc") if entry.isdigit())
