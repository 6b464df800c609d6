"""A stand-in Flink JobManager that runs a job: a process of its own whose command line carries a
JobManager's main class and a test's marker (so the lease keeper finds it, as it finds Flink's), that
recovers the job from its newest checkpoint, as Flink does after a crash, and completes checkpoints into
the job's real storage for as long as it lives.

``python -m tests.support.jobmanager ENTRYPOINT --marker=M --root URL --job-id ID --log FILE
[--options JSON] [--every S] [--startup S]``: it waits ``--startup`` seconds first (a JVM takes seconds
to start Flink's cluster before it deploys the job: the keeper's guard, every 0.1 s, kills a JobManager
restarted while the lease is not held long before), then appends to ``--log`` a line ``{"pid", "running"}``
(its monotonic clock: the machine's, so the test compares it with its own) and one ``{"pid", "chk", "at"}``
for each checkpoint completed (its ``_metadata`` written). A SIGKILL ends it anywhere; what it logged is
what it did.
``tests/support/jobpod.py`` runs it under a keeper, and reads the log back as the harness's ``Job``s.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import fsspec

from tests.support.objects import flink_metadata


def _newest(fs: fsspec.AbstractFileSystem, job_dir: str) -> int:
    try:
        names = [str(p).rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(job_dir, detail=False, refresh=True)]
    except FileNotFoundError:
        return 0
    return max((int(n[4:]) for n in names if n.startswith("chk-") and n[4:].isdigit()), default=0)


def _log(path: Path, **entry: object) -> None:
    line = json.dumps({"pid": os.getpid(), **entry}) + "\n"
    with path.open("a", encoding="utf-8") as sink:  # one short appended line: written whole
        sink.write(line)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.jobmanager")
    parser.add_argument("entrypoint")
    parser.add_argument("--marker", required=True)
    parser.add_argument("--root", required=True, help="the job's checkpoint directory")
    parser.add_argument("--job-id", required=True)
    parser.add_argument("--log", required=True, type=Path)
    parser.add_argument("--options", default="{}", help="fsspec options of the root's scheme (JSON)")
    parser.add_argument("--every", type=float, default=0.5)
    parser.add_argument("--startup", type=float, default=2.0)
    args = parser.parse_args(argv)
    time.sleep(args.startup)
    fs, root = fsspec.core.url_to_fs(args.root, **json.loads(args.options))
    job_dir = f"{root.rstrip('/')}/{args.job_id}"
    n = _newest(fs, job_dir)  # recovered from its newest checkpoint, as after any crash
    _log(args.log, running=time.monotonic(), recovered=n)
    while True:
        time.sleep(args.every)
        n += 1
        if args.root.startswith("/") or args.root.startswith("file:"):
            fs.makedirs(f"{job_dir}/chk-{n}", exist_ok=True)
        fs.pipe_file(f"{job_dir}/chk-{n}/_metadata", flink_metadata(n))
        _log(args.log, chk=n, at=time.monotonic())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
