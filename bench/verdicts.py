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
per request) would otherwise take CPU and the GIL from the process measured. Beside each row, the
store's floor (``_replay.py``): one more admission recorded at the proxy (each request's method, key,
headers and signature, when it went out and when its answer was in) and exactly those requests sent
again by a bare urllib3 client through the same proxy, in the fewest rounds their dependencies allow
(the job directory's listing before a checkpoint's folder and ``_metadata``, those and the verdict
before the files they name), as many at once as the product had at its busiest: what the product's
wall time is divided by. Also the same replay straight to moto (no round-trip time).

Beside the job without a verdict, the same admission with key ranges off (``FileCheck.ranged`` False:
``shared/`` listed by prefix through s3fs, page after page, as before range listings): before and after
in one run.

``--large`` (default 100,000; ``VERDICTS_LARGE``; 0: none) adds a job of that many files, with the
verdict of its ``chk-3`` (the writer checks it once, in full; its upload and that check take minutes on
moto): 5 admissions after one warm-up, for the product's CPU at that size; ``--large-all`` adds its
other rows. Per row also the CPU of this process (the product and its storage client) and of moto per
admission, from /proc: on moto, every listing costs the server time in proportion to the whole bucket,
not to what it returns. ``--profile``: the rows with a verdict under cProfile in every thread
(``_profile.py``), where their CPU goes.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import s3fs

from bench._procstat import cpu_seconds, process_tree
from bench._profile import ThreadProfiles
from bench._replay import Replay, floor_shape, shape
from bench.restore_trips import _admission
from tests.support.flinktrees import incremental_metadata
from tests.support.jobtrees import lookup
from tests.support.s3 import CREDENTIALS, moto_server, s3_options
from tests.support.tcpproxy import ProxyProcess, tcp_proxy_process
from webhook.member.handler import MemberHandler
from webhook.policy.restore import RestorePolicy
from webhook.restore.storage.search import CheckpointStorage
from webhook.restore.storage.verify import FileCheck
from webhook.server.runtime import tune_worker

RTT = 0.020
RUNS, WARM = 20, 3
REPLAYS = 5  # the floor's replays of the rows other than the verdicts' at 10,000 files (their p99: the most)
JOB = "5f3c0de8a1b24c6d9e7f00112233aabb"
NEW = 200
LARGE = 100_000


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
    fs: s3fs.S3FileSystem,
    endpoint: str,
    bucket: str,
    files: int,
    verdict: bool,
    kept: bool = False,
    once: bool = False,
) -> None:
    """``verdict``: a writer checked chk-2 in full; ``kept``: then chk-3 too, as the fencing agent of
    the member where the job runs does every ``fencing.verdictSeconds`` (fencing/prechecks.py);
    ``once``: the writer checks only chk-3, in full (the same verdict of chk-3, one full check fewer)."""
    fs.mkdir(bucket)
    shared = [f"s3://{bucket}/ck/{JOB}/shared/{uuid.uuid4()}" for _ in range(files)]
    _upload(fs, {url.removeprefix("s3://"): bytes(16) for url in shared})
    _checkpoints(fs, bucket, shared, 3 if once else 2 if verdict else 3)
    if verdict:  # a writer checks chk-2 in full as it completes, then chk-3 is written
        # moto walks the whole bucket for every listing: at 100,000 keys one range listing took longer
        # than the client's default read timeout, so the writer (setting up, not measured) waits longer
        patient = {"read_timeout": 300, "retries": {"max_attempts": 1}}
        slow = {**s3_options(endpoint), "config_kwargs": patient}
        writer = CheckpointStorage({"s3": slow}, write_verdicts=True)
        found = lookup(writer, f"s3://{bucket}/ck/{JOB}", budget=10_000, seconds=600)
        assert found.checkpoint is not None and found.checkpoint.path.name == f"chk-{3 if once else 2}", found
        writer.settle(600)
        if once:
            return
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


@dataclass(frozen=True)
class Row:
    """One row: the product's wall clock and the store's floor for the same requests, p50 and p99 (ms)."""

    text: str
    p50: float
    p99: float
    floor50: float
    floor99: float
    cpu50: float
    shapes: str


def _case(
    name: str,
    policy: RestorePolicy,
    bucket: str,
    proxy: ProxyProcess,
    direct: str,
    runs: int = RUNS,
    warm: int = WARM,
    ranged: bool = True,
    profiles: ThreadProfiles | None = None,
    replays: int = 0,
) -> Row:
    """One row, and its wall clock p50 and p99: per admission also the CPU of this process (the product
    and its storage client) and of moto (the store), p50, from /proc; ``ranged`` False: no key ranges.
    Then one admission recorded at the proxy, and its requests replayed (``_replay.py``) through the
    same proxy (the store's floor) and straight to moto (``direct``: no round-trip time), ``replays``
    times (0: ``REPLAYS`` times through the proxy only)."""
    handler = MemberHandler.from_policy(policy)
    tune_worker()  # as the server does once its endpoints are built (server/runtime.py)
    if not ranged:
        FileCheck.ranged = lambda self, path: False  # type: ignore[method-assign]
    moto = _moto_pids()
    try:
        fields: dict[str, object] = {}
        times, ours, theirs, path, sent = [], [], [], "", 0
        for i in range(warm + runs):
            if profiles is not None and i == warm:
                profiles.clear()
            before, cpu, store = proxy.requests, time.process_time(), cpu_seconds(moto)
            seconds, fields, path = _admission(handler, bucket)
            sent = proxy.requests - before
            if i >= warm:
                times.append(seconds * 1000)
                ours.append((time.process_time() - cpu) * 1000)
                theirs.append((cpu_seconds(moto) - store) * 1000)
        if profiles is not None:
            print(profiles.report(name, runs), flush=True)
        with proxy.recording() as recorded:
            _admission(handler, bucket)
    finally:
        handler.close()
        FileCheck.ranged = _RANGED  # type: ignore[method-assign]
    mine, least = shape(recorded), floor_shape(recorded, JOB)
    floors = []
    for endpoint in (proxy.endpoint, direct) if replays else (proxy.endpoint,):
        replay = Replay(recorded, JOB, endpoint, mine.peak)
        try:
            floors.append([replay.once() * 1000 for _ in range(warm + (replays or REPLAYS))][warm:])
        finally:
            replay.close()
    floor, bare = floors[0], floors[-1] if replays else []
    chosen = path.rsplit("/", 1)[-1] or "(held)"
    p50, p99, f50, f99 = _p(times, 0.5), _p(times, 0.99), _p(floor, 0.5), _p(floor, 0.99)
    without = f"{_p(bare, 0.5):.0f}" if bare else "-"
    row = (
        f"| {name} | {chosen} | {p50:.0f} | {p99:.0f} | {f50:.0f} | {f99:.0f} | {p50 / f50:.2f}x "
        f"| {p99 / f99:.2f}x | {without} | {_p(ours, 0.5):.0f} | {_p(ours, 0.99):.0f} "
        f"| {_p(theirs, 0.5):.0f} | {fields.get('storageRoundTrips', 0)} "
        f"| {fields.get('storageRequests', 0)} | {sent} |"
    )
    shapes = f"{name}: the product {mine}; the floor {least}"
    return Row(row, p50, p99, f50, f99, _p(ours, 0.5), shapes)


_RANGED = FileCheck.ranged


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench verdicts",
        description="Verified restores on moto behind a round-trip time, and the store's own floor "
        "(docs/performance.md, 'Verification in proportion to the change').",
    )
    parser.add_argument(
        "--large",
        type=int,
        default=int(os.environ.get("VERDICTS_LARGE") or LARGE),
        help=f"also a job of this many files, its kept verdict's row (default {LARGE:,}; 0: none; "
        "$VERDICTS_LARGE; its upload and the writer's full check take minutes)",
    )
    parser.add_argument(
        "--large-all",
        action="store_true",
        help="every row at the large size, not only the kept verdict's (two more jobs to upload and check)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="the rows with a verdict only, each under cProfile in every thread (slower): where the CPU goes",
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
    parser.add_argument(
        "--rows",
        default="kept,verdict,full,shapes",
        help="which rows (comma-separated; default all): kept (a kept verdict), verdict (200 new), full "
        "(no verdict), shapes (file merging and entropy injection); fewer rows, less to set up",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _arguments(list(argv or []))
    runs = args.runs
    profiles = ThreadProfiles() if args.profile else None
    if profiles is not None:
        profiles.install()  # before any thread starts
    sizes = [10_000] + ([args.large] if args.large else [])
    chosen = {r.strip() for r in args.rows.split(",")}
    kinds: dict[int, tuple[str, ...]] = {10_000: tuple(k for k in ("kept", "verdict", "full") if k in chosen)}
    if args.large:
        kinds[args.large] = ("kept", "verdict", "full") if args.large_all else ("kept",)
    if profiles is not None:
        kinds = {size: tuple(k for k in ks if k != "full") for size, ks in kinds.items()}
    with (
        tempfile.TemporaryDirectory(prefix="verdicts-") as tmp,
        moto_server(Path(tmp) / "moto.log") as endpoint,
    ):
        port = int(endpoint.rsplit(":", 1)[1])
        direct = s3fs.S3FileSystem(skip_instance_cache=True, **s3_options(endpoint))
        for files in sizes:
            for kind in kinds[files]:
                # the large kept verdict alone: the writer checks chk-3 only (one full check, not two)
                once = kind == "kept" and "verdict" not in kinds[files]
                _job(direct, endpoint, f"{kind}-{files}", files, kind != "full", kind == "kept", once)
        shapes_too = "shapes" in chosen and profiles is None
        if shapes_too:
            _merging(direct, "merging-128")
            _entropy(direct, "entropy-500")
        with tcp_proxy_process(port, args.rtt) as proxy:
            options = {"s3": {"endpoint_url": proxy.endpoint, **CREDENTIALS}}
            wide = RestorePolicy(storage_options=options, deadline_seconds=30, verify_budget=1000)
            default = RestorePolicy(storage_options=options)
            print(
                f"moto behind {args.rtt * 1000:.0f} ms of round-trip time; admissions one by one; the "
                "store's floor: the requests of one admission, recorded at the proxy, sent again by a bare "
                "client "
                "in the fewest rounds they allow (bench/_replay.py)"
            )
            print(
                "| case | chose | p50 ms | p99 ms | store floor p50 | floor p99 | share p50 | share p99 "
                "| floor p50 without RTT | product CPU ms (p50) | CPU p99 | moto CPU ms (p50) "
                "| product's round trips | requests | requests the proxy saw |"
            )
            print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
            rows: dict[tuple[int, str], Row] = {}
            shapes = []
            for files in sizes:
                for kind, label, ranged in (
                    ("kept", "verdict of chk-3 kept by the agent", True),
                    ("verdict", f"verdict of chk-2, {NEW} new", True),
                    ("full", "no verdict", True),
                    ("full", "no verdict, key ranges off (before)", False),
                ):
                    if kind not in kinds[files] or (profiles and (kind == "full" or not ranged)):
                        continue
                    name = f"restore, verify: files, {files:,} files, {label}"
                    many, warm = (runs, WARM) if files <= 10_000 else (2 if kind == "full" else 5, 1)
                    replays = runs if files == 10_000 and kind != "full" else 0
                    bucket = f"{kind}-{files}"
                    row = _case(name, wide, bucket, proxy, endpoint, many, warm, ranged, profiles, replays)
                    print(row.text, flush=True)
                    shapes.append(row.shapes)
                    rows.setdefault((files, kind), row)
            others = (
                ()
                if not shapes_too
                else (
                    ("file merging, parallelism 128, default policy", default, "merging-128", True),
                    (
                        "file merging, parallelism 128, default policy, key ranges off (before)",
                        default,
                        "merging-128",
                        False,
                    ),
                    ("entropy injection, 500 files, default policy", default, "entropy-500", True),
                )
            )
            for name, policy, bucket, ranged in others:
                row = _case(name, policy, bucket, proxy, endpoint, runs, WARM, ranged)
                print(row.text, flush=True)
                shapes.append(row.shapes)
            print("\nhow the requests went out (rounds: requests answered one after another):")
            for line in shapes:
                print(f"- {line}")
            if profiles is not None:
                print("(under the profiler: the figures above are not the bench's)")
            new, kept = rows.get((10_000, "verdict")), rows.get((10_000, "kept"))
            if new is not None:
                print(
                    f"\nthe product's share, {NEW} new of 10,000: its wall time over the store's floor "
                    f"{new.p50 / new.floor50:.2f}x at p50 ({new.p50:.0f} / {new.floor50:.0f} ms), "
                    f"{new.p99 / new.floor99:.2f}x at p99 ({new.p99:.0f} / {new.floor99:.0f} ms) "
                    "(at most 1.3x)"
                )
            if kept is not None:
                print(f"a kept verdict's restore p99 {kept.p99:.0f} ms (under 500)")
                cpu = ", ".join(
                    f"{row.cpu50:.0f} ms at {files:,} files"
                    for files in sizes
                    if (row := rows.get((files, "kept"))) is not None
                )
                print(
                    f"the product's CPU per admission with a kept verdict (p50): {cpu} "
                    "(under 100 ms at 10,000, 1 s at 100,000)"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
