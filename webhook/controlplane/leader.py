"""Leader election on a ``coordination.k8s.io/v1`` Lease, so that of several control-plane replicas exactly
one captures at a time while every replica serves the Work webhook.

The protocol is the one client-go's ``leaderelection`` (used by controller-runtime) and kopf's peering
follow: the holder writes ``spec.renewTime`` every ``retry_period``; a candidate takes the Lease over
when the record has not changed for ``lease_duration`` as measured on its *own* monotonic clock since it
last saw it change (so clock skew between replicas does not matter); every write carries the
``resourceVersion`` it read, so two candidates racing for an expired Lease cannot both win (the loser
gets 409 Conflict). A holder that cannot renew within ``renew_deadline`` (< ``lease_duration``) stops
leading before anyone else may start; one that shuts down cleanly releases the Lease (empty holder)
so a successor takes over at its next try instead of waiting out the duration.

:func:`claim` is the pure decision; :class:`KubeLeases` the API calls; :class:`LeaderElector` the loop.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from prometheus_client import Counter, Gauge

from webhook.common.kubeclient import ApiFailure
from webhook.common.kubeobjects import LEASES, KubeObjects, micro_time

log = logging.getLogger(__name__)

GROUP = "coordination.k8s.io"
VERSION = "v1"
PLURAL = "leases"

TRANSITIONS = Counter(
    "flink_failover_leader_transitions_total", "Times this process started or stopped leading", ["change"]
)
LEADING = Gauge(
    "flink_failover_leader",
    "1 while this process holds the capture Lease",
    ["lease"],
    multiprocess_mode="livemax",
)


@dataclass(frozen=True)
class ElectionConfig:
    namespace: str
    name: str
    identity: str = ""
    lease_duration: float = 15.0  # client-go's defaults: 15 s, 10 s, 2 s
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def problem(self) -> str | None:
        """Why these timings cannot guarantee a single leader, or None."""
        if not self.namespace or not self.name or not self.identity:
            return "lease namespace, name and identity must not be empty"
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            return (
                "need 0 < retry period < renew deadline < lease duration "
                f"(got {self.retry_period}, {self.renew_deadline}, {self.lease_duration})"
            )
        return None


def default_identity() -> str:
    """Pod name (or host name), process id and a random suffix: unique per process, readable in the Lease."""
    host = os.environ.get("POD_NAME") or socket.gethostname()
    return f"{host}_{os.getpid()}_{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class LeaseRecord:
    """The fields of a Lease the election reads and writes."""

    holder: str
    duration_seconds: int
    acquire_time: str
    renew_time: str
    transitions: int
    resource_version: str = ""

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> LeaseRecord:
        raw_spec = obj.get("spec")
        spec: Mapping[str, Any] = raw_spec if isinstance(raw_spec, Mapping) else {}
        raw_meta = obj.get("metadata")
        meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
        duration = spec.get("leaseDurationSeconds")
        transitions = spec.get("leaseTransitions")
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            duration_seconds=duration if isinstance(duration, int) and duration > 0 else 1,
            acquire_time=str(spec.get("acquireTime") or ""),
            renew_time=str(spec.get("renewTime") or ""),
            transitions=transitions if isinstance(transitions, int) and transitions >= 0 else 0,
            resource_version=str(meta.get("resourceVersion") or ""),
        )

    def to_object(self, namespace: str, name: str) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": name, "namespace": namespace}
        if self.resource_version:
            metadata["resourceVersion"] = self.resource_version
        return {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {
                "holderIdentity": self.holder,
                "leaseDurationSeconds": self.duration_seconds,
                "acquireTime": self.acquire_time,
                "renewTime": self.renew_time,
                "leaseTransitions": self.transitions,
            },
        }


def claim(
    current: LeaseRecord | None,
    unchanged_for: float,
    identity: str,
    lease_duration: float,
    now: datetime,
) -> LeaseRecord | None:
    """The record to write to hold (or keep) the Lease, or None while another holder's Lease is valid.

    ``unchanged_for``: seconds since this process last saw the record change (its own clock).
    """
    duration = max(1, round(lease_duration))
    stamp = micro_time(now)
    if current is None:
        return LeaseRecord(identity, duration, stamp, stamp, 0)
    if current.holder == identity:
        return replace(current, duration_seconds=duration, renew_time=stamp)
    if current.holder and unchanged_for < current.duration_seconds:
        return None
    return replace(
        current,
        holder=identity,
        duration_seconds=duration,
        acquire_time=stamp,
        renew_time=stamp,
        transitions=current.transitions + 1,
    )


class Leases(Protocol):
    def get(self, namespace: str, name: str) -> LeaseRecord | ApiFailure | None: ...

    def create(self, namespace: str, name: str, record: LeaseRecord) -> LeaseRecord | ApiFailure: ...

    def update(self, namespace: str, name: str, record: LeaseRecord) -> LeaseRecord | ApiFailure: ...


class KubeLeases:
    """Lease GET / POST / PUT: a typed facade over ``common.kubeobjects.KubeObjects``, errors as values."""

    def __init__(self, objects: KubeObjects, request_timeout: float = 5.0) -> None:
        self._objects = objects
        self._timeout = request_timeout

    def get(self, namespace: str, name: str) -> LeaseRecord | ApiFailure | None:
        answer = self._objects.get(LEASES, namespace, name, timeout=self._timeout)
        return answer if answer is None else _lease(answer)

    def create(self, namespace: str, name: str, record: LeaseRecord) -> LeaseRecord | ApiFailure:
        body = record.to_object(namespace, name)
        return _lease(self._objects.create(LEASES, namespace, body, timeout=self._timeout))

    def update(self, namespace: str, name: str, record: LeaseRecord) -> LeaseRecord | ApiFailure:
        body = record.to_object(namespace, name)
        return _lease(self._objects.replace(LEASES, namespace, name, body, timeout=self._timeout))


def _lease(answer: Mapping[str, Any] | ApiFailure) -> LeaseRecord | ApiFailure:
    if isinstance(answer, ApiFailure):
        return answer
    if answer.get("kind") not in (None, "Lease"):
        return ApiFailure(0, "answer is not a Lease")
    return LeaseRecord.from_object(answer)


def _wall_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class LeaderElector:
    """Runs in its own thread: campaigns, renews, calls ``on_start`` / ``on_stop`` on every change."""

    leases: Leases
    config: ElectionConfig
    on_start: Callable[[], None]
    on_stop: Callable[[], None]
    monotonic: Callable[[], float] = time.monotonic
    wall: Callable[[], datetime] = _wall_now
    stop: threading.Event = field(default_factory=threading.Event)
    _leading: bool = False
    _observed: LeaseRecord | None = None
    _observed_at: float = 0.0
    _last_renew: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def leading(self) -> bool:
        return self._leading

    def run(self) -> None:
        while not self.stop.is_set():
            self.step()
            self.stop.wait(self.config.retry_period)

    def step(self) -> None:
        """One try: acquire or renew; step down when the renew deadline passed without a renewal."""
        with self._lock:
            if self.stop.is_set():
                return
            held = self._try()
            now = self.monotonic()
            if held:
                self._last_renew = now
                if not self._leading:
                    self._change(True)
            elif self._leading and self._taken():
                log.warning("the leader lease is held by %s now: stopping capture", self._observed_holder())
                self._change(False)
            elif self._leading and now - self._last_renew >= self.config.renew_deadline:
                log.warning("leader lease not renewed within the renew deadline: stopping capture")
                self._change(False)

    def _observed_holder(self) -> str:
        return self._observed.holder if self._observed is not None else ""

    def _taken(self) -> bool:
        """Another process holds the Lease (we were away longer than it lasts): stop at once."""
        return self._observed_holder() not in ("", self.config.identity)

    def release(self) -> None:
        """Stop campaigning; hand the Lease back when we hold it, so a successor need not wait it out."""
        self.stop.set()
        with self._lock:
            if not self._leading:
                return
            self._change(False)
            current = self._observed
            if current is None or current.holder != self.config.identity:
                return
            released = replace(current, holder="", duration_seconds=1, renew_time=micro_time(self.wall()))
            answer = self.leases.update(self.config.namespace, self.config.name, released)
            if isinstance(answer, ApiFailure):
                log.warning("releasing the leader lease failed: %s", answer.message)
            else:
                log.info("leader lease released", extra={"fields": {"identity": self.config.identity}})

    def _try(self) -> bool:
        cfg = self.config
        current = self.leases.get(cfg.namespace, cfg.name)
        if isinstance(current, ApiFailure):
            log.warning("reading the leader lease failed: %s", current.message)
            return False
        now = self.monotonic()
        if current != self._observed:
            self._observed, self._observed_at = current, now
        wanted = claim(current, now - self._observed_at, cfg.identity, cfg.lease_duration, self.wall())
        if wanted is None:
            return False
        if current is None:
            answer = self.leases.create(cfg.namespace, cfg.name, wanted)
        else:
            answer = self.leases.update(cfg.namespace, cfg.name, wanted)
        if isinstance(answer, ApiFailure):
            if answer.status != 409:  # 409: another candidate wrote first; not worth a warning
                log.warning("writing the leader lease failed: %s", answer.message)
            return False
        self._observed, self._observed_at = answer, self.monotonic()
        return True

    def _change(self, leading: bool) -> None:
        self._leading = leading
        LEADING.labels(self.config.name).set(1 if leading else 0)
        TRANSITIONS.labels("started" if leading else "stopped").inc()
        log.info(
            "started leading" if leading else "stopped leading",
            extra={"fields": {"identity": self.config.identity, "lease": self.config.name}},
        )
        (self.on_start if leading else self.on_stop)()
