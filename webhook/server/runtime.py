"""The worker's interpreter tuned for admission latency under a burst.

Measured with ``make bench`` (``bench/workburst.py``: a fleet of 500 Flink Works while the capture watch
folds and patches the 500 bindings they follow, against an API double with real latency), two things
made the tail, not the work itself:

* **Full garbage collections.** A worker holds about a million objects that never die (gunicorn,
  Flask, the Kubernetes client's thousands of model classes, protobuf descriptors). Every JSON document
  decoded allocates containers, and every so often the collector walks all of them: pauses of 50 to
  100 ms, in whichever request was running. ``gc.freeze()`` once the endpoints are built moves what
  exists then out of the collector's sight; it still collects everything allocated later.
* **The GIL's switch interval.** A thread that comes back from I/O (a fresh GET of a binding, the
  answer going out) waits for the GIL until the running thread gives it up, by default after 5 ms,
  and a request does that several times. While the capture watch decodes and folds a storm of events,
  every Work paid those waits. Half a millisecond keeps the waits short; a CPU-bound thread loses a few
  percent of its throughput, which an admission server does not need.
"""

from __future__ import annotations

import gc
import sys

SWITCH_INTERVAL = 0.0005  # seconds; Python's default is 0.005


def tune_worker() -> None:
    """Once per worker, after its endpoints are built (imports done, role started)."""
    sys.setswitchinterval(SWITCH_INTERVAL)
    gc.collect()
    gc.freeze()
