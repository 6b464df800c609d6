"""Kubernetes Events (``events.k8s.io/v1``) for the decisions that change what runs.

``kubectl describe flinkdeployment`` is where an engineer looks first, and the Flink operator itself
reports there. A decision is *recorded* (``EventSink.record``): never blocking the admission or the poll
that made it, and aggregated as client-go's recorder does: the same (object, type, reason, note) within
ten minutes becomes one Event whose ``series.count`` grows, not a new Event each poll. ``EventRecorder``
writes them from a thread of its own through a bounded queue (full: the Event is dropped and counted),
each call under the client's deadline. The pure callers only build ``Occurrence`` values.
"""

from __future__ import annotations

import logging
import queue
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client import Counter

from webhook.common.kubeclient import ApiFailure
from webhook.common.kubeobjects import micro_time
from webhook.common.untyped import as_map

log = logging.getLogger(__name__)

NORMAL, WARNING = "Normal", "Warning"
MAX_NOTE = 1024  # events.k8s.io/v1 refuses a longer note
SERIES_WINDOW = 600.0  # seconds: a repeat within this window grows the series (client-go's 10 minutes)
QUEUE_SIZE = 1000

RECORDED = Counter("flink_failover_events_total", "Kubernetes Events written, by reason", ["reason"])
DROPPED = Counter(
    "flink_failover_events_dropped_total", "Events not written (queue full, or the API server refused)"
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


@dataclass
class _Series:
    name: str
    count: int
    first_seen: float


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
        self._series: dict[tuple[Regarding, str, str, str], _Series] = {}
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
        key = (occurrence.regarding, occurrence.type, occurrence.reason, occurrence.note)
        series = self._series.get(key)
        namespace = occurrence.regarding.namespace or "default"
        if series is not None and now - series.first_seen < SERIES_WINDOW:
            series.count += 1
            body = {"series": {"count": series.count, "lastObservedTime": micro_time()}}
            if not isinstance(self._patch(namespace, series.name, body), ApiFailure):
                RECORDED.labels(occurrence.reason).inc()
                return
            # The Event is gone (expired, deleted): start a new one.
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
        self._series[key] = _Series(name, 1, now)
        if len(self._series) > 10_000:  # bounded memory: forget the oldest series
            oldest = min(self._series, key=lambda k: self._series[k].first_seen)
            self._series.pop(oldest)
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
