"""Verification in proportion to the change, and every shape within the budget (issue 36).

``python -m bench verdicts``: moto's S3 server on loopback behind ``tests/support/tcpproxy.py`` adding
20 ms of round-trip time, the member handler in this process (the server's own code), one admission at
a time, the same rows as ``bench restore_trips``. A RocksDB job whose newest checkpoint ``chk-3`` names
N shared files (UUID names under ``<jobId>/shared/``), 200 of them new since ``chk-2``, which a writer
(a ``CheckpointStorage`` that may write, as the fencing agent's) checked in full and left a verdict for;
beside it the same job without a verdict (the full check, as before verdicts). Then the shapes: file
merging at parallelism 128 (a folder per subtask under ``shared/``, 8 under ``taskowned/``) and S3
entropy injection (each of 500 files below a random prefix of its own), no verdict, default budget.

``VERDICTS_LARGE=100000`` adds the job of 100,000 files (its upload takes minutes on moto).
"""

from __future__ import annotations

import os
import tempfile
import uuid
from pathlib import Path

import s3fs

from bench.restore_trips import _case
from tests.support.flinktrees import incremental_metadata
from tests.support.jobtrees import lookup
from tests.support.s3 import CREDENTIALS, moto_server, s3_options
from tests.support.tcpproxy import tcp_proxy
from webhook.member.policy import RestorePolicy
from webhook.member.storage import CheckpointStorage

RTT = 0.020
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


def _job(fs: s3fs.S3FileSystem, endpoint: str, bucket: str, files: int, verdict: bool) -> None:
    fs.mkdir(bucket)
    shared = [f"s3://{bucket}/ck/{JOB}/shared/{uuid.uuid4()}" for _ in range(files)]
    _upload(fs, {url.removeprefix("s3://"): bytes(16) for url in shared})
    _checkpoints(fs, bucket, shared, 2 if verdict else 3)
    if verdict:  # a writer checks chk-2 in full as it completes, then chk-3 is written
        writer = CheckpointStorage({"s3": s3_options(endpoint)}, write_verdicts=True)
        found = lookup(writer, f"s3://{bucket}/ck/{JOB}", budget=10_000, seconds=600)
        assert found.checkpoint is not None and found.checkpoint.path.name == "chk-2", found
        writer.settle(600)
        _checkpoints(fs, bucket, shared, 3)


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


def main() -> int:
    sizes = [10_000] + ([int(os.environ["VERDICTS_LARGE"])] if os.environ.get("VERDICTS_LARGE") else [])
    with (
        tempfile.TemporaryDirectory(prefix="verdicts-") as tmp,
        moto_server(Path(tmp) / "moto.log") as endpoint,
    ):
        port = int(endpoint.rsplit(":", 1)[1])
        direct = s3fs.S3FileSystem(skip_instance_cache=True, **s3_options(endpoint))
        for files in sizes:
            _job(direct, endpoint, f"verdict-{files}", files, verdict=True)
            _job(direct, endpoint, f"full-{files}", files, verdict=False)
        _merging(direct, "merging-128")
        _entropy(direct, "entropy-500")
        with tcp_proxy(port) as proxy:
            proxy.latency(float(os.environ.get("VERDICTS_RTT", RTT)))
            options = {"s3": {"endpoint_url": proxy.endpoint, **CREDENTIALS}}
            wide = RestorePolicy(storage_options=options, deadline_seconds=30, verify_budget=1000)
            default = RestorePolicy(storage_options=options)
            print(f"moto behind {RTT * 1000:.0f} ms of round-trip time; admissions one by one")
            print(
                "| case | chose | p50 ms | p99 ms | p50 RTT | p99 RTT | product's round trips | requests "
                "| requests the proxy saw |"
            )
            print("|---|---|---|---|---|---|---|---|---|")
            for files in sizes:
                for kind, label in (("verdict", f"verdict of chk-2, {NEW} new"), ("full", "no verdict")):
                    name = f"restore, verify: files, {files:,} files, {label}"
                    print(_case(name, wide, f"{kind}-{files}", proxy), flush=True)
            print(_case("file merging, parallelism 128, default policy", default, "merging-128", proxy))
            print(_case("entropy injection, 500 files, default policy", default, "entropy-500", proxy))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
