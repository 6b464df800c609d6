"""Kubernetes Events (``events.k8s.io/v1``) for the decisions that change what runs.

``kubectl describe flinkdeployment`` is where an engineer looks first, and the Flink operator itself
reports there. A decision is *recorded* (``EventSink.record``): never blocking the admission or the poll
that made it. What is written is decided as client-go's correlator decides it (``common/correlator.py``):
a rate limit per object (25, then one every 5 minutes; past it the Event is dropped and counted), notes
that differ only in detail combined once ten were seen, and the same (object, type, reason, note) within
ten minutes one Event whose ``series.count`` grows, not a new Event each poll. ``EventRecorder`` writes
them from a thread of its own through a bounded queue (full: the Event is dropped and counted), each call
under the client's deadline. The pure callers only build ``Occurrence`` values.
"""

from __future__ import annotations

import logging
import queue
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from prometheus_client import Counter

from webhook.common.correlator import WINDOW, Correlator, Dropped, New, Repeat
from webhook.common.kubeclient import ApiFailure
from webhook.common.kubeobjects import micro_time
from webhook.common.untyped import as_map

log = logging.getLogger(__name__)

NORMAL, WARNING = "Normal", "Warning"
MAX_NOTE = 1024  # events.k8s.io/v1 refuses a longer note
SERIES_WINDOW = WINDOW  # seconds: a repeat within this window grows the series (client-go's 10 minutes)
QUEUE_SIZE = 1000

RECORDED = Counter("flink_failover_events_total", "Kubernetes Events written, by reason", ["reason"])
DROPPED = Counter(
    "flink_failover_events_dropped_total", "Events not written (queue full, or the API server refused)"
)
RATE_LIMITED = Counter(
    "flink_failover_events_rate_limited_total",
    "Events not written: over the rate limit of the object they are about (client-go's spam filter)",
)


@dataclass(frozen=True)
class Regarding:
    """The object an Event is about (``uid`` lets ``kubectl describe`` find it)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str = ""

    @classmethod
    def of(cls, obj: Mapping[str, Any], kind: str = "") -> Regarding:
        meta = as_map(obj.get("metadata"))
        return cls(
            str(obj.get("apiVersion") or "flink.apache.org/v1beta1"),
            str(obj.get("kind") or kind),
            str(meta.get("namespace") or ""),
            str(meta.get("name") or ""),
            str(meta.get("uid") or ""),
        )


@dataclass(frozen=True)
class Occurrence:
    regarding: Regarding
    type: str  # Normal | Warning
    reason: str  # UpperCamelCase: Held, Released, Stopping, Stopped, SteppedDown, ...
    action: str  # what was done: Fence, Release, Restore, ...
    note: str


class EventSink(Protocol):
    def record(self, occurrence: Occurrence) -> None: ...


class NoEvents:
    """Where no API server is at hand (``review``, tests that do not look)."""

    def record(self, occurrence: Occurrence) -> None:
        return None


Create = Callable[[str, Mapping[str, Any]], "Mapping[str, Any] | ApiFailure"]  # (namespace, body)
Patch = Callable[[str, str, Mapping[str, Any]], "Mapping[str, Any] | ApiFailure"]  # (namespace, name, body)


class EventRecorder:
    """Writes recorded Events from its own thread; ``record`` only queues."""

    def __init__(
        self,
        create: Create,
        patch: Patch,
        controller: str,
        instance: str,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._create = create
        self._patch = patch
        self.controller = controller  # reportingController, e.g. flink-failover.io/member
        self.instance = instance[:128]  # reportingInstance: cluster and pod
        self._monotonic = monotonic
        self._queue: queue.Queue[Occurrence | None] = queue.Queue(QUEUE_SIZE)
        self._correlator = Correlator()  # this thread's alone
        self._thread = threading.Thread(target=self._run, name="events", daemon=True)
        self._thread.start()

    def record(self, occurrence: Occurrence) -> None:
        try:
            self._queue.put_nowait(occurrence)
        except queue.Full:
            DROPPED.inc()

    def close(self, wait: float = 5.0) -> None:
        """Write what is queued (for up to ``wait`` seconds), then stop."""
        try:
            self._queue.put(None, timeout=wait)
        except queue.Full:
            return
        self._thread.join(wait)

    def _run(self) -> None:
        while True:
            occurrence = self._queue.get()
            if occurrence is None:
                return
            try:
                self._write(occurrence)
            except Exception:  # an Event must never take the recorder down
                DROPPED.inc()
                log.exception("cannot write event")

    def _write(self, occurrence: Occurrence) -> None:
        now = self._monotonic()
        about = occurrence.regarding
        similar = (about, occurrence.type, occurrence.reason)
        step = self._correlator.correlate(about, similar, occurrence.note, now)
        if isinstance(step, Dropped):
            RATE_LIMITED.inc()
            return
        namespace = about.namespace or "default"
        if isinstance(step, Repeat):
            body = {"series": {"count": step.count, "lastObservedTime": micro_time()}}
            if not isinstance(self._patch(namespace, step.name, body), ApiFailure):
                RECORDED.labels(occurrence.reason).inc()
                return
            self._correlator.vanished(step.series)  # the Event is gone (expired, deleted): a new one
            step = step.fallback
        self._create_event(replace(occurrence, note=step.note), step, namespace, now)

    def _create_event(self, occurrence: Occurrence, step: New, namespace: str, now: float) -> None:
        name = f"{occurrence.regarding.name or 'flink-failover'}.{secrets.token_hex(8)}"[-253:].lstrip(".-")
        answer = self._create(
            namespace, event_body(occurrence, name, namespace, self.controller, self.instance)
        )
        if isinstance(answer, ApiFailure):
            DROPPED.inc()
            log.warning(
                "event not written",
                extra={"fields": {"reason": occurrence.reason, "error": answer.message[:200]}},
            )
            return
        self._correlator.created(step.series, name, now)
        RECORDED.labels(occurrence.reason).inc()


def event_body(
    occurrence: Occurrence, name: str, namespace: str, controller: str, instance: str
) -> dict[str, Any]:
    r = occurrence.regarding
    regarding = {"apiVersion": r.api_version, "kind": r.kind, "namespace": r.namespace, "name": r.name}
    if r.uid:
        regarding["uid"] = r.uid
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "eventTime": micro_time(),
        "reportingController": controller,
        "reportingInstance": instance,
        "action": occurrence.action,
        "reason": occurrence.reason,
        "regarding": regarding,
        "note": occurrence.note[:MAX_NOTE],
        "type": occurrence.type,
    }
