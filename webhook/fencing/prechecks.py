"""Which running jobs' newest checkpoints the agent checks ahead of any failover now (pure;
``prechecker.Prechecker`` runs the checks).

A failover admission with ``verify: files`` checks only the files a recent verdict does not cover
(``restore/verdict.py``, the confirmed-files record). The release and resume lookups leave a verdict,
but a job that has run for an hour has none that recent: its failover would list every file its newest
checkpoint names (10,000 files of a RocksDB job: seconds on S3). So the agent of the member where the
job runs prechecks that job's newest checkpoint every ``fencing.verdictSeconds``: the files new since
its last verdict by HEAD, all of them again once that verdict is ``WRITER_MAX_AGE`` old; the check
leaves the verdict. The verdict a failover then reads covers the newest checkpoint, or the one before it
and all but one checkpoint's new files.

Off the fencing path: a few at a time on threads of their own (``PRECHECKS_AT_ONCE``), never on a
storage's records or heartbeat lane, never failing a poll (a check that fails is logged and tried again
``verdictSeconds`` later).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from webhook.fencing.copies import Copy, CopyState
from webhook.fencing.layout import Workload
from webhook.policy.restore import RestorePolicy, Verify

PRECHECKS_AT_ONCE = 2  # checks running side by side (each has its own requests in flight)
PRECHECKS_QUEUED = 64  # checks started or waiting for a thread, at most: the rest wait for a later poll
# A check runs off the admission's path and may take what the full check of a large job takes
# (100,000 files: 112 range listings), within this deadline and this many times the policy's verifyBudget.
PRECHECK_DEADLINE_SECONDS = 120.0
PRECHECK_BUDGET_FACTOR = 20


def due(
    running: Iterable[Copy],
    started: Mapping[Workload, float],
    busy: frozenset[Workload],
    now: float,
    policy: RestorePolicy,
) -> tuple[Copy, ...]:
    """The running copies to precheck now, the longest waiting first: none was started for them
    within ``verdictSeconds`` (``started``: when the last one started, monotonic) and none is under way
    (``busy``); at most what the queue has room for. None when admissions check no files."""
    every = policy.fencing.verdict_seconds
    if every <= 0 or policy.verify is not Verify.FILES:
        return ()
    room = PRECHECKS_QUEUED - len(busy)
    waiting = [
        c
        for c in running
        if c.state is CopyState.RUNNING
        and c.job_id
        and c.patched not in busy
        and now - started.get(c.patched, float("-inf")) >= every
    ]
    waiting.sort(key=lambda c: started.get(c.patched, float("-inf")))
    return tuple(waiting[: max(room, 0)])
