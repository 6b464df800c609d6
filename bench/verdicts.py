"""Verification in proportion to the change, and every shape within the budget (issue 36).

``python -m bench verdicts``: moto's S3 server on loopback behind ``tests/support/tcpproxy.py`` adding
20 ms of round-trip time, the member handler in this process (the server's own code), one admission at
a time, the same rows as ``bench restore_trips``. A RocksDB job whose newest checkpoint ``chk-3`` names
N shared files (UUID names under ``<jobId>/shared/``), 200 of them new since ``chk-2``, which a writer
(a ``CheckpointStorage`` that may write, as the fencing agent's) checked in full and left a verdict for;
the same job whose ``chk-3`` the writer checked too (the fencing agent keeps a running job's verdict
every ``fencing.verdictSeconds``: the common case of a failover); beside them the same job without a
verdict (the full check, as before verdicts). Then the shapes: file
merging at parallelism 128 (a folder per subtask under ``shared/``, 8 under ``taskowned/``) and S3
entropy injection (each of 500 files below a random prefix of its own), no verdict, default budget.

The proxy runs in a process of its own: its threads (four per connection, and moto opens a connection
per request) would otherwise take CPU and the GIL from the process measured. The last row is the store's
floor: the 200 new files' presigned HEADs sent straight to moto, 32 at a time, nothing else: what moto
alone needs to answer them.

Beside the job without a verdict, the same admission with key ranges off (``FileCheck.ranged`` False:
``shared/`` listed by prefix through s3fs, page after page, as before range listings): before and after
in one run.

``--large 100000`` (or ``VERDICTS_LARGE=100000``) adds the job of 100,000 files (its upload takes
minutes on moto; 5 admissions with the verdict, 2 without, after one warm-up each). Per row also the
CPU of this process (the product and its storage client) and of moto per admission, from /proc: on
moto, every listing costs the server time in proportion to the whole bucket, not to what it returns.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import s3fs
import urllib3

from bench._procstat import cpu_seconds, process_tree
from bench.restore_trips import _admission
from tests.support.flinktrees import incremental_metadata
from tests.support.jobtrees import lookup
from tests.support.s3 import CREDENTIALS, moto_server, s3_options
from tests.support.tcpproxy import ProxyProcess, tcp_proxy_process
from webhook.member.handler import MemberHandler
from webhook.restore.policy import RestorePolicy
from webhook.restore.storage.search import CheckpointStorage
from webhook.restore.storage.verify import FileCheck

RTT = 0.020
RUNS, WARM = 20, 3
JOB = "5f3c0de8a1b24c6d9e7f00112233aabb"
NEW = 200


def _upload(fs: s3fs.S3FileSystem, blobs: dict[str, bytes]) -> None:
    keys = list(blobs)
    for start in range(0, len(keys), 2000):
        fs.pipe({k: blobs[k] for k in keys[start : start + 2000]})


def _checkpoints(fs: s3fs.S3FileSystem, bucket: str, shared: list[str], upto: int) -> None:
    """chk-1 .. chk-``upto``: chk-3 names every file, chk-2 all but the last ``NEW``, chk-1 half."""
    root = f"{bucket}/ck/{JOB}"
    named = {1: shared[: len(shared) // 2], 2: shared[:-NEW], 3: shared}
    blobs: dict[str, bytes] = {}
    for n in range(1, upto + 1):
        exclusive = [f"x{n}-{k}" for k in range(3)]
        blobs.update({f"{root}/chk-{n}/{name}": bytes(16) for name in exclusive})
        blobs[f"{root}/chk-{n}/_metadata"] = incremental_metadata(n, named[n], exclusive)
    _upload(fs, blobs)


def _job(
    fs: s3fs.S3FileSystem, endpoint: str, bucket: str, files: int, verdict: bool, kept: bool = False
) -> None:
    """``verdict``: a writer checked chk-2 in full; ``kept``: then chk-3 too, as the fencing agent of
    the member where the job runs does every ``fencing.verdictSeconds`` (fencing/verdicts.py)."""
    fs.mkdir(bucket)
    shared = [f"s3://{bucket}/ck/{JOB}/shared/{uuid.uuid4()}" for _ in range(files)]
    _upload(fs, {url.removeprefix("s3://"): bytes(16) for url in shared})
    _checkpoints(fs, bucket, shared, 2 if verdict else 3)
    if verdict:  # a writer checks chk-2 in full as it completes, then chk-3 is written
        # moto walks the whole bucket for every listing: at 100,000 keys one range listing took longer
        # than the client's default read timeout, so the writer (setting up, not measured) waits longer
        patient = {"read_timeout": 300, "retries": {"max_attempts": 1}}
        slow = {**s3_options(endpoint), "config_kwargs": patient}
        writer = CheckpointStorage({"s3": slow}, write_verdicts=True)
        found = lookup(writer, f"s3://{bucket}/ck/{JOB}", budget=10_000, seconds=600)
        assert found.checkpoint is not None and found.checkpoint.path.name == "chk-2", found
        writer.settle(600)
        _checkpoints(fs, bucket, shared, 3)
        if kept:  # the agent's next check: the 200 new files, and a verdict of chk-3
            found = lookup(writer, f"s3://{bucket}/ck/{JOB}", budget=10_000, seconds=600)
            assert found.checkpoint is not None and found.checkpoint.path.name == "chk-3", found
            writer.settle(600)


def _merging(fs: s3fs.S3FileSystem, bucket: str) -> None:
    fs.mkdir(bucket)
    root = f"{bucket}/ck/{JOB}"
    shared = [f"s3://{root}/shared/job_{JOB}_op_{'ab' * 16}_{i}_128/{uuid.uuid4()}" for i in range(128)]
    shared += [f"s3://{root}/taskowned/job_{JOB}_tm_tm-{k}/{uuid.uuid4()}" for k in range(8)]
    _upload(fs, {url.removeprefix("s3://"): bytes(16) for url in shared})
    _upload(
        fs, {f"{root}/chk-1/x": bytes(16), f"{root}/chk-1/_metadata": incremental_metadata(1, shared, ["x"])}
    )


def _entropy(fs: s3fs.S3FileSystem, bucket: str) -> None:
    fs.mkdir(bucket)
    root = f"{bucket}/ck/{JOB}"
    shared = [f"s3://{bucket}/{uuid.uuid4().hex[:4]}/ck/{JOB}/shared/{uuid.uuid4()}" for _ in range(500)]
    _upload(fs, {url.removeprefix("s3://"): bytes(16) for url in shared})
    _upload(fs, {f"{root}/chk-1/_metadata": incremental_metadata(1, shared, [])})


def _moto_pids() -> list[int]:
    found = []
    for pid in process_tree(os.getpid()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"moto_server" in f.read():
                    found.append(pid)
        except OSError:
            continue
    return found


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _case(
    name: str,
    policy: RestorePolicy,
    bucket: str,
    proxy: ProxyProcess,
    runs: int = RUNS,
    warm: int = WARM,
    ranged: bool = True,
) -> tuple[str, float, float]:
    """One row, and its wall clock p50 and p99: per admission also the CPU of this process (the product
    and its storage client) and of moto (the store), p50, from /proc; ``ranged`` False: no key ranges."""
    handler = MemberHandler.from_policy(policy)
    if not ranged:
        FileCheck.ranged = lambda self, path: False  # type: ignore[method-assign]
    moto = _moto_pids()
    try:
        times, ours, theirs, fields, path, sent = [], [], [], {}, "", 0
        for i in range(warm + runs):
            before, cpu, store = proxy.requests, time.process_time(), cpu_seconds(moto)
            seconds, fields, path = _admission(handler, bucket)
            sent = proxy.requests - before
            if i >= warm:
                times.append(seconds * 1000)
                ours.append((time.process_time() - cpu) * 1000)
                theirs.append((cpu_seconds(moto) - store) * 1000)
    finally:
        handler.close()
        FileCheck.ranged = _RANGED  # type: ignore[method-assign]
    chosen = path.rsplit("/", 1)[-1] or "(held)"
    p50, p99 = _p(times, 0.5), _p(times, 0.99)
    row = (
        f"| {name} | {chosen} | {p50:.0f} | {p99:.0f} | {_p(ours, 0.5):.0f} "
        f"| {_p(theirs, 0.5):.0f} | {fields.get('storageRoundTrips', 0)} "
        f"| {fields.get('storageRequests', 0)} | {sent} |"
    )
    return row, p50, p99


_RANGED = FileCheck.ranged


def _floor(fs: s3fs.S3FileSystem, bucket: str, runs: int = RUNS) -> tuple[str, float, float]:
    """The store alone: chk-3's ``NEW`` new files HEADed straight at moto (presigned, 32 at a time, no
    round-trip time, no product): wall clock and moto's CPU per batch."""
    named = sorted(fs.find(f"{bucket}/ck/{JOB}/shared"))[-NEW:]  # any NEW of them: moto's cost is per request
    urls = [fs.url(key, expires=300, client_method="head_object") for key in named]
    pool = urllib3.PoolManager(maxsize=32)
    moto = _moto_pids()
    times, theirs = [], []
    with ThreadPoolExecutor(32) as lanes:
        for i in range(WARM + runs):
            started, store = time.perf_counter(), cpu_seconds(moto)
            statuses = set(lanes.map(lambda url: pool.request("HEAD", url).status, urls))
            assert statuses == {200}, statuses
            if i >= WARM:
                times.append((time.perf_counter() - started) * 1000)
                theirs.append((cpu_seconds(moto) - store) * 1000)
    p50, p99 = _p(times, 0.5), _p(times, 0.99)
    row = (
        f"| the store alone: {NEW} presigned HEADs straight to moto, 32 at a time | - | {p50:.0f} "
        f"| {p99:.0f} | - | {_p(theirs, 0.5):.0f} | - | {NEW} | - |"
    )
    return row, p50, p99


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench verdicts",
        description="Verified restores on moto behind a round-trip time, and the store's own floor "
        "(docs/performance.md, 'Verification in proportion to the change').",
    )
    parser.add_argument(
        "--large",
        type=int,
        default=int(os.environ.get("VERDICTS_LARGE") or 0),
        help="also a job of this many files (e.g. 100000; $VERDICTS_LARGE; its upload takes minutes)",
    )
    parser.add_argument(
        "--rtt",
        type=float,
        default=float(os.environ.get("VERDICTS_RTT") or RTT),
        help=f"round-trip time the proxy adds, seconds (default {RTT}; $VERDICTS_RTT)",
    )
    parser.add_argument(
        "--runs", type=int, default=RUNS, help=f"admissions measured per row (default {RUNS})"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _arguments(list(argv or []))
    runs = args.runs
    sizes = [10_000] + ([args.large] if args.large else [])
    with (
        tempfile.TemporaryDirectory(prefix="verdicts-") as tmp,
        moto_server(Path(tmp) / "moto.log") as endpoint,
    ):
        port = int(endpoint.rsplit(":", 1)[1])
        direct = s3fs.S3FileSystem(skip_instance_cache=True, **s3_options(endpoint))
        for files in sizes:
            _job(direct, endpoint, f"verdict-{files}", files, verdict=True)
            _job(direct, endpoint, f"kept-{files}", files, verdict=True, kept=True)
            _job(direct, endpoint, f"full-{files}", files, verdict=False)
        _merging(direct, "merging-128")
        _entropy(direct, "entropy-500")
        with tcp_proxy_process(port, args.rtt) as proxy:
            options = {"s3": {"endpoint_url": proxy.endpoint, **CREDENTIALS}}
            wide = RestorePolicy(storage_options=options, deadline_seconds=30, verify_budget=1000)
            default = RestorePolicy(storage_options=options)
            print(f"moto behind {args.rtt * 1000:.0f} ms of round-trip time; admissions one by one")
            print(
                "| case | chose | p50 ms | p99 ms | product CPU ms (p50) | moto CPU ms (p50) "
                "| product's round trips | requests | requests the proxy saw |"
            )
            print("|---|---|---|---|---|---|---|---|---|")
            new: tuple[float, float] | None = None
            for files in sizes:
                for kind, label, ranged in (
                    ("kept", "verdict of chk-3 kept by the agent", True),
                    ("verdict", f"verdict of chk-2, {NEW} new", True),
                    ("full", "no verdict", True),
                    ("full", "no verdict, key ranges off (before)", False),
                ):
                    name = f"restore, verify: files, {files:,} files, {label}"
                    many, warm = (runs, WARM) if files <= 10_000 else (2 if kind == "full" else 5, 1)
                    row, p50, p99 = _case(name, wide, f"{kind}-{files}", proxy, many, warm, ranged)
                    print(row, flush=True)
                    if files == 10_000 and kind == "verdict":
                        new = (p50, p99)
            print(
                _case("file merging, parallelism 128, default policy", default, "merging-128", proxy, runs)[0]
            )
            merging = "file merging, parallelism 128, default policy, key ranges off (before)"
            print(_case(merging, default, "merging-128", proxy, runs, ranged=False)[0])
            print(
                _case("entropy injection, 500 files, default policy", default, "entropy-500", proxy, runs)[0]
            )
            row, floor50, floor99 = _floor(direct, "verdict-10000", runs)
            print(row)
            if new is not None:
                print(
                    f"\nthe product's share, {NEW} new of 10,000: its wall time over the store's floor "
                    f"{new[0] / floor50:.2f}x at p50 ({new[0]:.0f} / {floor50:.0f} ms), "
                    f"{new[1] / floor99:.2f}x at p99 ({new[1]:.0f} / {floor99:.0f} ms)"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
