"""The edge of ``fencing/admitted.py``: each heartbeat written at an admission is looked at once more,
after ``admitted.delay``, and removed when its object is not on this cluster and the record is still
the admission's.

``schedule`` only queues (bounded: full, the look is dropped and counted; the lease bounds that
heartbeat, as it did before), so an admission never waits for it; one daemon thread per worker takes
the looks in the order they fall due and makes the reads, each under a deadline: the object's GET from
the member API (``sessions.KubeSessionClusters``, a GET of any Flink kind) and the record's read and
removal on the storage's lanes (``FencingStore``, the agent's own calls). A look that could not tell
(a read past its deadline) removes nothing and is made again (``admitted.again``: one poll later, then
doubling, never past the heartbeat's lease).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from webhook.common.flinkresources import RESOURCES
from webhook.common.kubeclient import ClientConfig
from webhook.fencing import metrics
from webhook.fencing.admitted import Admitted, Outcome, Seen, again, delay, judge
from webhook.fencing.records import FencingStore
from webhook.member.sessions import KubeSessionClusters
from webhook.policy.restore import RestorePolicy
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
    ) -> None:
        fencing = policy.fencing
        self.delay = delay(policy.deadline_seconds, fencing.poll_seconds, fencing.lease_seconds)
        self.timeout = fencing.call_timeout  # each read, each removal
        self._objects = {kind: KubeSessionClusters(config, resource) for kind, resource in RESOURCES.items()}
        self._poll, self._lease = fencing.poll_seconds, fencing.lease_seconds
        self._monotonic = monotonic
        self._due: list[tuple[float, int, _Look]] = []  # a heap: the next look due first
        self._order = itertools.count()  # equal times keep their order; looks never compare
        self._ready = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="admitted-heartbeats", daemon=True)
        self._thread.start()

    def schedule(self, store: FencingStore, admitted: Admitted) -> None:
        now = self._monotonic()
        if not self._push(now + self.delay, _Look(store, admitted, now, 0)):
            _said(admitted, Outcome.DROPPED, "the queue is full: its lease bounds it")

    def _push(self, due: float, look: _Look) -> bool:
        with self._ready:
            if len(self._due) >= QUEUE_SIZE:
                return False
            heapq.heappush(self._due, (due, next(self._order), look))
            self._ready.notify()
            return True

    def _next(self) -> _Look:
        with self._ready:
            while True:
                wait = self._due[0][0] - self._monotonic() if self._due else None
                if wait is not None and wait <= 0:
                    return heapq.heappop(self._due)[2]
                self._ready.wait(wait)

    def _run(self) -> None:
        while True:
            look = self._next()
            try:
                outcome = self.look(look.store, look.admitted)
            except Exception as exc:  # a look must never take the thread down
                outcome = _said(look.admitted, Outcome.ERROR, f"{type(exc).__name__}: {str(exc)[:200]}")
            if outcome is Outcome.ERROR:
                self._again(look)

    def _again(self, look: _Look) -> None:
        now = self._monotonic()
        looked = replace(look, looks=look.looks + 1)
        wait = again(looked.looks, now - look.written, self._poll, self._lease)
        if wait is None or not self._push(now + wait, looked):
            _said(look.admitted, Outcome.LEFT, f"{looked.looks} looks could not tell: its lease bounds it")

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


@dataclass(frozen=True)
class _Look:
    store: FencingStore
    admitted: Admitted
    written: float  # monotonic time of the admission
    looks: int  # looks made so far that could not tell


def _said(admitted: Admitted, outcome: Outcome, error: str = "") -> Outcome:
    """The metric and one log line per look (a warning when the heartbeat is left for want of a read)."""
    metrics.ADMITTED_HEARTBEATS.labels(outcome.value).inc()
    fields = {"object": admitted.shown, "folder": str(admitted.folder), "outcome": outcome.value}
    if error:
        fields["error"] = error[:300]
    if outcome is Outcome.ERROR:
        log.warning("admission heartbeat unread, looked at again later", extra={"fields": fields})
    elif outcome in (Outcome.LEFT, Outcome.DROPPED):
        log.warning("admission heartbeat left to its lease", extra={"fields": fields})
    else:
        log.info("admission heartbeat looked at again", extra={"fields": fields})
    return outcome
