"""The edge of ``fencing/admitted.py``: each heartbeat written at an admission is looked at once more,
after ``admitted.delay``, and removed when its object is not on this cluster and the record is still
the admission's.

``schedule`` only queues (a bounded queue: full, the look is dropped and counted; the lease bounds that
heartbeat, as it did before), so an admission never waits for it; one daemon thread per worker waits
out each delay in order (every look has the same delay) and makes the reads, each under a deadline: the
object's GET from the member API (``sessions.KubeSessionClusters``, a GET of any Flink kind) and the
record's read and removal on the storage's lanes (``FencingStore``, the agent's own calls). Every error
leaves the heartbeat.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

from webhook.common.flinkresources import RESOURCES
from webhook.common.kubeclient import ClientConfig
from webhook.fencing import metrics
from webhook.fencing.admitted import Admitted, Outcome, Seen, delay, judge
from webhook.fencing.records import FencingStore
from webhook.member.sessions import KubeSessionClusters
from webhook.restore.policy import RestorePolicy
from webhook.restore.snapshots import StorageError

log = logging.getLogger(__name__)

QUEUE_SIZE = 1000


class AdmittedHeartbeats:
    """``schedule`` is the gate's ``admitted`` (``fencing/gate.py`` ``AdmittedSink``)."""

    def __init__(
        self,
        config: ClientConfig,
        policy: RestorePolicy,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        fencing = policy.fencing
        self.delay = delay(policy.deadline_seconds, fencing.poll_seconds, fencing.lease_seconds)
        self.timeout = fencing.call_timeout  # each read, each removal
        self._objects = {kind: KubeSessionClusters(config, resource) for kind, resource in RESOURCES.items()}
        self._monotonic, self._sleep = monotonic, sleep
        self._queue: queue.Queue[tuple[float, FencingStore, Admitted]] = queue.Queue(QUEUE_SIZE)
        self._thread = threading.Thread(target=self._run, name="admitted-heartbeats", daemon=True)
        self._thread.start()

    def schedule(self, store: FencingStore, admitted: Admitted) -> None:
        try:
            self._queue.put_nowait((self._monotonic() + self.delay, store, admitted))
        except queue.Full:
            _said(admitted, Outcome.DROPPED, "the queue is full: its lease bounds it")

    def _run(self) -> None:
        while True:
            due, store, admitted = self._queue.get()
            self._sleep(max(due - self._monotonic(), 0.0))
            try:
                self.look(store, admitted)
            except Exception as exc:  # a look must never take the thread down
                _said(admitted, Outcome.ERROR, f"{type(exc).__name__}: {str(exc)[:200]}")

    def look(self, store: FencingStore, admitted: Admitted) -> Outcome:
        """Read the object, then (only when it is absent) the record; remove what ``judge`` says goes."""
        lookup = self._objects.get(admitted.kind)
        if lookup is None:
            return _said(admitted, Outcome.ERROR, f"no member API resource for {admitted.kind}")
        found = lookup(admitted.namespace, admitted.name, self.timeout)
        if found.error:
            seen = Seen(None, error=found.error)
        elif found.resource is not None:
            seen = Seen(True)
        else:
            try:
                seen = Seen(False, store.lanes.call(store.heartbeat_call(admitted.folder), self.timeout))
            except StorageError as exc:
                seen = Seen(False, error=str(exc))
        outcome = judge(admitted, seen)
        if outcome is Outcome.REMOVED:
            try:
                store.forget(admitted.folder, self.timeout)
            except StorageError as exc:
                return _said(admitted, Outcome.ERROR, str(exc))
        return _said(admitted, outcome, seen.error)


def _said(admitted: Admitted, outcome: Outcome, error: str = "") -> Outcome:
    """The metric and one log line per look (a warning when the heartbeat is left for want of a read)."""
    metrics.ADMITTED_HEARTBEATS.labels(outcome.value).inc()
    fields = {"object": admitted.shown, "folder": str(admitted.folder), "outcome": outcome.value}
    if error:
        fields["error"] = error[:300]
    if outcome in (Outcome.ERROR, Outcome.DROPPED):
        log.warning("admission heartbeat left to its lease", extra={"fields": fields})
    else:
        log.info("admission heartbeat looked at again", extra={"fields": fields})
    return outcome
