"""Issue 17 item 9: probes answer at once whatever storage does.

The real server (gunicorn, TLS) with every worker thread waiting on an S3 endpoint that never answers:
``/readyz`` and ``/healthz`` on the probe port (``--probe-bind``) answer while all admissions still wait
(before: the option did not exist, and on the webhook port a probe queued behind the admissions until
their deadline). Timings are in ``bench/probes.py``; here only the order of events is asserted.
"""

from __future__ import annotations

from pathlib import Path

from tests.faults.probes import ADMISSIONS, hung_stack

DEADLINE = 6.0  # long enough that the probe cannot race the admissions on a loaded machine


def test_probe_port_answers_while_every_admission_waits_on_hung_storage(tmp_path: Path) -> None:
    with hung_stack(tmp_path, DEADLINE) as stack:
        threads = stack.flood()
        # The event the probe must come after: admissions are waiting on the hung storage (it accepted
        # their connections). Before: a 0.5 s sleep, which passed as well when nothing was waiting yet.
        assert stack.hole.wait_for_connections(1, timeout=60), "no admission reached the storage"
        ready, ready_at = stack.probe(stack.probe_port, "/readyz")
        healthy, _ = stack.probe(stack.probe_port, "/healthz")
        assert (ready, healthy) == (200, 200)
        assert not stack.answered or min(stack.answered) > ready_at  # no admission had been answered yet
        for t in threads:
            t.join(60)
        assert len(stack.answered) == ADMISSIONS
        assert stack.probe(stack.probe_port, "/nothing-here")[0] == 404
