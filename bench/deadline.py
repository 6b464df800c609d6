"""How long the member webhook takes to answer when storage hangs, against its deadline; and how long a
checkpoint directory of 5,000 entries takes to resolve. Moved here from tests/faults (issue 24): a
loaded 2-core machine must not fail a test by being slow, but the figures still matter.

``python -m bench deadline [--deadline S] [--margin S]``: the real server (gunicorn, TLS) with every
admission waiting on an endpoint that never answers (``tests/faults/probes.py``); each admission's
time from the flood's start to its answer, the median and the maximum. 24 admissions on 16 worker
threads answer in two rounds, so the bound is two deadlines plus a margin (TLS, JSON, a busy machine).
Exits 1 when an admission was not answered or the wide directory was not restored; the timings are
figures to read (a loaded machine shifts them), marked when beyond the bound.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from tests.faults.probes import ADMISSIONS, hung_stack
from tests.support.objects import flink_deployment, make_checkpoints, review
from webhook.common.admission import parse_review
from webhook.member.handler import MemberHandler
from webhook.policy.restore import RestorePolicy

JOB = "d" * 32
ROUNDS = 2  # ADMISSIONS (24) on the server's 2 workers x 8 threads


def hung(deadline: float) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp, hung_stack(Path(tmp), deadline) as stack:
        started = time.monotonic()
        threads = stack.flood()
        for t in threads:
            t.join(deadline + 60)
        return sorted(at - started for at in stack.answered)


def wide_directory(entries: int, deadline: float) -> tuple[float, bool]:
    """Seconds to resolve a job directory of ``entries`` checkpoints of which only chk-1 is complete (the
    worst case: one listing, then one metadata lookup per checkpoint from the highest down), and
    whether it restored within the deadline."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_checkpoints(root / JOB, [1])
        for n in range(2, entries + 1):
            (root / JOB / f"chk-{n}").mkdir()
        labels = {"flink-failover.io/failover": "true", "flink-failover.io/job-id": JOB}
        obj = flink_deployment(checkpoint_dir=str(root), labels=labels)
        handler = MemberHandler.from_policy(RestorePolicy(deadline_seconds=deadline))
        try:
            started = time.monotonic()
            resp = handler(parse_review(review(obj))).to_review()["response"]
            return time.monotonic() - started, bool(resp.get("patch"))
        finally:
            handler.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench deadline")
    parser.add_argument("--deadline", type=float, default=2.0)
    parser.add_argument("--margin", type=float, default=1.5)
    args = parser.parse_args(argv or [])
    answers = hung(args.deadline)
    bound = ROUNDS * args.deadline + args.margin
    late = [a for a in answers if a > bound]
    print(
        f"hung storage, deadline {args.deadline:g}s, {ADMISSIONS} admissions at once: answered "
        f"{len(answers)}, median {statistics.median(answers):.2f}s, max {max(answers):.2f}s, "
        f"beyond {ROUNDS} deadlines + {args.margin:g}s: {len(late)}",
        flush=True,
    )
    seconds, restored = wide_directory(5000, args.deadline)
    print(f"5,000 checkpoints, only chk-1 complete: {seconds:.2f}s, restored: {restored}", flush=True)
    return 1 if len(answers) != ADMISSIONS or not restored else 0
