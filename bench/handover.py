"""Leader hand-over of the control plane: two real server processes against the fake API server, a stream
of ResourceBinding changes, the leader killed (SIGKILL) or stopped (SIGTERM). Reports how long after the
signal the successor held the Lease and persisted its first record, and how many changes arrived while
nobody captured; fails when a change was lost or a patch came from a process not holding the Lease.

``python -m bench handover`` uses the production defaults (lease 15 s, renew deadline 10 s, retry 2 s);
``--fast`` the test's short timings.
"""

from __future__ import annotations

import json
import signal
import tempfile
from pathlib import Path

from tests.controlplane.handover import FAST, run_hand_over

DEFAULTS = ("15", "10", "2")


def main(argv: list[str]) -> int:
    timings = FAST if "--fast" in argv else DEFAULTS
    figures = {}
    for how in (signal.SIGKILL, signal.SIGTERM):
        with tempfile.TemporaryDirectory(prefix="handover-") as tmp:
            # the stream outlasts the gap: changes arrive before, during and after the hand-over
            pace = float(timings[0]) / 10
            result = run_hand_over(Path(tmp), how, bindings=40, timings=timings, pace=pace)
        figures[how.name] = {
            "leaseTakenAfterS": round(result.acquired_at - result.kill_at, 2),
            "firstRecordAfterS": round(result.first_capture_at - result.kill_at, 2),
            "changesWhileNobodyCaptured": result.changes_during_gap,
            "changeEveryS": pace,
        }
    lease, deadline, retry = timings
    print(json.dumps({"leaseDuration": lease, "renewDeadline": deadline, "retryPeriod": retry, **figures}))
    return 0
