"""One running copy under faults, at production scale: issue 21's six cases with the default timings.

The served member roles (gunicorn, TLS, ``--cluster``) of two fake member clusters, moto's S3 on
loopback, member1's role behind a TCP proxy, and Flink operator doubles that keep a suspended job
RUNNING for 6 s (and 20 s) before they report it stopped. For each case: seconds during which both
jobs were RUNNING by their status, the old job's checkpoints newer than the one the new job started
from, how the new job was released, and the seconds from the old job's reported stop to the new job's
RUNNING status. The default policy: lease 30 s, renew deadline 10 s, poll 5 s, stop margin 10 s.

Issue 28 adds the member role's own trouble: one of its two replicas SIGKILLed mid-failover
(``replica-killed``), and every replica of member1's role down while its job runs and Karmada fails it
over, back after 10 s (within the stated bound) or 45 s (beyond a lease: measured, not 0 s).

Issue 47 adds ``--pods off|on``: member1's JobManager is a process that completes the job's
checkpoints itself (``tests/support/jobpod.py``), without or under the lease keeper, and the old job
counts as RUNNING only while that process runs it.

``python -m bench fencing_faults [--stop 6] [--cases both-reach,cut,...] [--pods on]`` (about 8 minutes).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tests.support.backends import S3, Running
from tests.support.operator import lost_checkpoints, overlap
from tests.support.production import (
    Production,
    Timings,
    kill,
    production,
    start_pair,
    start_replicas,
    stop_asked,
    wait_for,
)

P = "flink-failover.io"


def both_reach(p: Production) -> None:
    _, two = start_pair(p)
    p.fail_over(two)


def cut(p: Production) -> None:
    _, two = start_pair(p)
    p.proxy.cut()
    p.fail_over(two)


def slow(p: Production) -> None:
    _, two = start_pair(p)
    p.proxy.slow(2 * p.timings.poll)
    p.fail_over(two)


def role_down(p: Production) -> None:
    with p.role("member1", p.member1, p.through):
        assert wait_for(lambda: "heartbeat-member1.json" in p.record_names())
    two = p.stack.enter_context(p.role("member2", p.member2, p.endpoint))
    p.fail_over(two)
    time.sleep(p.timings.poll)  # down for a poll more, then back (within the lease)
    p.stack.enter_context(p.role("member1", p.member1, p.through))


def replica_killed(p: Production) -> None:
    """Two replicas of member1's role (the chart's default): one is SIGKILLed once the stop was asked."""
    (first, _), two = start_replicas(p)
    p.fail_over(two)
    assert wait_for(lambda: stop_asked(p))
    kill(first)


def all_down(seconds: float) -> Callable[[Production], None]:
    """Both replicas of member1's role SIGKILLed while its job runs, Karmada fails the job over, and the
    replicas come back ``seconds`` later (within the stated bound, or beyond the lease)."""

    def case(p: Production) -> None:
        ones, two = start_replicas(p)
        for one in ones:
            kill(one)
        p.fail_over(two)
        time.sleep(seconds)  # the outage being measured, not an event waited for
        start_replicas_of_member1(p)

    return case


def start_replicas_of_member1(p: Production) -> None:
    for _ in range(2):
        p.stack.enter_context(p.role("member1", p.member1, p.through))


def deleted(p: Production) -> None:
    _, two = start_pair(p)
    p.member1.fake.delete("analytics", "orders")
    assert wait_for(lambda: "heartbeat-member1.json" not in p.record_names(), 120)
    p.fail_over(two)


CASES: dict[str, Callable[[Production], None]] = {
    "both-reach": both_reach,
    "cut": cut,
    "slow": slow,
    "role-down": role_down,
    "deleted": deleted,
    "replica-killed": replica_killed,
    "all-down-10s": all_down(10),
    "all-down-45s": all_down(45),
}
# Beyond the stated assumption (every replica of the holder's role down longer than lease - stop margin
# - 2 polls = 10 s): measured, not expected to be 0 s.
BEYOND = ("all-down-45s",)


def run_case(storage: Running, work: Path, name: str, stop: float, pods: str = "") -> str:
    timings = Timings(lease=30, poll=5, deadline=10, margin=10, stop=stop)
    where = work / f"{name}-{stop:g}{pods}"
    with production(
        storage, where, timings, f"bench-{name}-{int(stop)}{pods}", pods=bool(pods), keeper=pods == "on"
    ) as p:
        CASES[name](p)
        if not wait_for(lambda: bool(p.operator2.jobs), 180):
            return f"{name:14} stop {stop:>4g} s: the new job never started"
        new = p.operator2.jobs[0]
        wait_for(lambda: all(j.ended is not None for j in p.old_jobs()), 60)
        old_end = max((j.ended or time.monotonic()) for j in p.old_jobs())
        both = overlap(p.old_jobs(), p.operator2.jobs)
        lost = len(lost_checkpoints(p.old_jobs(), new))
        cause = p.released_cause().split(" at ")[0] or "not held"
        gap = new.started - old_end
        return (
            f"{name:14} stop {stop:>4g} s: two RUNNING {both:5.2f} s, checkpoints lost {lost}, "
            f"released by {cause:13} new job RUNNING {gap:5.1f} s after the old job's reported stop"
        )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench fencing_faults")
    parser.add_argument("--stop", type=float, action="append", help="operator stop delays (default 6 and 20)")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated: {', '.join(CASES)}")
    parser.add_argument(
        "--pods",
        choices=("off", "on"),
        default="",
        help="member1's JobManager a process, under the keeper: on",
    )
    args = parser.parse_args(argv)
    stops = args.stop or [6.0, 20.0]
    failed = 0
    with tempfile.TemporaryDirectory() as tmp, S3.start(Path(tmp) / "moto") as storage:
        for stop in stops:
            for name in args.cases.split(","):
                if name in ("cut", "slow") and stop > 10:
                    continue  # beyond the stop margin the guarantee does not hold: documented, not measured
                line = run_case(storage, Path(tmp), name, stop, args.pods)
                print(line + ("  (beyond the stated assumption)" if name in BEYOND else ""), flush=True)
                failed += "two RUNNING  0.00 s" not in line and name not in BEYOND
    return 1 if failed else 0
