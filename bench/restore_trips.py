"""Storage round trips of a failover admission, through 20 ms of round-trip time in front of S3.

``python -m bench restore_trips``: moto's S3 server on loopback behind ``tests/support/tcpproxy.py``
adding 20 ms of round-trip time (10 ms each way, every packet), the member handler in this process
(the same code the server runs), one admission at a time. Each job has three retained checkpoints
(``chk-1`` .. ``chk-3``), the newest naming N shared files under ``<jobId>/shared/`` and three
exclusive files in its own directory, written in Flink 2.3's format (``tests/support/flinktrees.py``
``incremental_metadata``). For each case: the admission's latency (p50, p99 of 20 after 3 warm-ups),
that latency in round-trip times, and the product's own count from the audit line (round trips one
after another, requests). The goal (issue 29): p99 below 5 round-trip times for ``verify: files``
up to 1,000 files (a listing page holds 1,000 keys).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import s3fs

from tests.support.flinktrees import incremental_metadata
from tests.support.objects import flink_deployment, review
from tests.support.s3 import CREDENTIALS, moto_server, s3_options
from tests.support.tcpproxy import TcpProxy, tcp_proxy
from webhook.common.admission import parse_review
from webhook.member.handler import MemberHandler
from webhook.policy.restore import RestorePolicy, Verify

RTT = 0.020
RUNS, WARM = 20, 3
JOB = "5f3c0de8a1b24c6d9e7f00112233aabb"
SIZES = (10, 1000, 10_000)


def _tree(fs: s3fs.S3FileSystem, bucket: str, files: int, checkpoints: bool = True) -> None:
    fs.mkdir(bucket)
    root = f"{bucket}/ck/{JOB}"
    blobs: dict[str, bytes] = {f"{root}/shared/{i:08d}-sst": bytes(16) for i in range(files)}
    shared = [f"s3://{root}/shared/{i:08d}-sst" for i in range(files)]
    for n in (1, 2, 3) if checkpoints else ():
        exclusive = [f"x{n}-{k}" for k in range(3)]
        blobs.update({f"{root}/chk-{n}/{name}": bytes(16) for name in exclusive})
        blobs[f"{root}/chk-{n}/_metadata"] = incremental_metadata(
            n, shared[: max(1, files * n // 3)], exclusive
        )
    if not checkpoints:
        blobs[f"{root}/.keep"] = b""
        for s in range(3):
            sp = f"{bucket}/sp/savepoint-{JOB[:6]}-{s:012d}"
            exclusive = [f"s{k}" for k in range(3)]
            blobs.update({f"{sp}/{name}": bytes(16) for name in exclusive})
            blobs[f"{sp}/_metadata"] = incremental_metadata(10 + s, [], exclusive)
    keys = list(blobs)
    for start in range(0, len(keys), 2000):
        fs.pipe({k: blobs[k] for k in keys[start : start + 2000]})


def _admission(handler: MemberHandler, bucket: str) -> tuple[float, dict[str, Any], str]:
    obj = flink_deployment(
        checkpoint_dir=f"s3://{bucket}/ck",
        savepoint_dir=f"s3://{bucket}/sp",
        labels={"flink-failover.io/failover": "true", "flink-failover.io/job-id": JOB},
    )
    obj["spec"]["flinkVersion"] = "v2_3"  # incremental_metadata writes format 6, as Flink 2.3 does
    started = time.perf_counter()
    answered = handler(parse_review(review(obj)))
    seconds = time.perf_counter() - started
    return seconds, answered.audit.fields(), answered.audit.path


def _case(name: str, policy: RestorePolicy, bucket: str, proxy: TcpProxy) -> str:
    handler = MemberHandler.from_policy(policy)
    try:
        times, fields, path = [], {}, ""
        for i in range(WARM + RUNS):
            before = proxy.requests
            seconds, fields, path = _admission(handler, bucket)
            sent = proxy.requests - before
            if i >= WARM:
                times.append(seconds * 1000)
    finally:
        handler.close()
    times.sort()
    p50, p99 = statistics.median(times), times[min(len(times) - 1, round(0.99 * (len(times) - 1)))]
    chosen = path.rsplit("/", 1)[-1] or "(held)"
    return (
        f"| {name} | {chosen} | {p50:.0f} | {p99:.0f} | {p50 / (RTT * 1000):.1f} | {p99 / (RTT * 1000):.1f} "
        f"| {fields.get('storageRoundTrips', 0)} | {fields.get('storageRequests', 0)} | {sent} |"
    )


def main() -> int:
    with (
        tempfile.TemporaryDirectory(prefix="restore-trips-") as tmp,
        moto_server(Path(tmp) / "moto.log") as endpoint,
    ):
        port = int(endpoint.rsplit(":", 1)[1])
        direct = s3fs.S3FileSystem(skip_instance_cache=True, **s3_options(endpoint))
        for files in SIZES:
            _tree(direct, f"trips-{files}", files)
        _tree(direct, "trips-savepoints", 0, checkpoints=False)
        with tcp_proxy(port) as proxy:
            proxy.latency(float(os.environ.get("RESTORE_TRIPS_RTT", RTT)))
            options = {"s3": {"endpoint_url": proxy.endpoint, **CREDENTIALS}}
            base = RestorePolicy(storage_options=options, deadline_seconds=30, verify_budget=1000)
            print(
                f"moto behind {RTT * 1000:.0f} ms of round-trip time; {RUNS} admissions per row, one by one"
            )
            print(
                "| case | chose | p50 ms | p99 ms | p50 RTT | p99 RTT | product's round trips | requests "
                "| requests the proxy saw |"
            )
            print("|---|---|---|---|---|---|---|---|---|")
            for files in SIZES:
                print(
                    _case(f"restore, verify: files, {files:,} files", base, f"trips-{files}", proxy),
                    flush=True,
                )
            for level in (Verify.METADATA, Verify.HEADER):
                policy = RestorePolicy(
                    storage_options=options, deadline_seconds=30, verify_budget=1000, verify=level
                )
                print(
                    _case(f"restore, verify: {level.value}, 1,000 files", policy, "trips-1000", proxy),
                    flush=True,
                )
            print(
                _case("savepoint listing (3 savepoints), verify: files", base, "trips-savepoints", proxy),
                flush=True,
            )
    return 0
