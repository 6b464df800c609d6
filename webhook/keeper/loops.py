"""What a job's keeper (``keeper.Keeper``) and a session cluster's (``session_keeper.SessionKeeper``)
share: their three loops' threads and heartbeats (``/healthz``), their stop, the log of a policy with
fencing off, and the JobManager's kill with its metrics and log lines."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from datetime import UTC, datetime

from webhook.fencing.records import FencingStore
from webhook.keeper import metrics
from webhook.keeper.decide import Decision
from webhook.keeper.jobmanager import JobManagers, Process
from webhook.policy.fencing import FencingPolicy

log = logging.getLogger("webhook.keeper")

LOOPS = ("lister", "renewer", "guard")


class Loops:
    """Subclasses give ``_lister``, ``_renewer`` and ``_guard`` (each calls ``_tick`` every turn and
    waits on ``_stop``), ``_decide`` (the decision with fencing on) and ``_fields`` (what every log line
    names)."""

    def __init__(
        self, policy: FencingPolicy, store: FencingStore, jobmanagers: JobManagers, clock: Callable[[], float]
    ) -> None:
        self.policy = policy
        self.store = store
        self.jobmanagers = jobmanagers
        self.clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._beats: dict[str, float] = {}  # thread -> when its loop last went round
        self.pod = socket.gethostname()

    def decision(self) -> Decision:
        """What the probes read: with fencing off, ready, nothing renewed, nothing stopped."""
        if not self.policy.enabled:
            return Decision(True, False, False, "")
        return self._decide()

    def alive(self) -> bool:
        """Every loop went round within a poll and a deadline (a thread stuck past that is a bug)."""
        if not self.policy.enabled:
            return True
        now = self.clock()
        limit = 2 * self.policy.poll_seconds + 1.0
        with self._lock:
            beats = dict(self._beats)
        return len(beats) == len(LOOPS) and all(now - t <= limit for t in beats.values())

    def _off(self) -> bool:
        """Fencing is off in the policy: said once; the keeper holds nothing and stops nothing."""
        if self.policy.enabled:
            return False
        log.warning(
            "fencing is off in the policy: the keeper holds nothing and stops nothing",
            extra={"fields": self._fields(event="off")},
        )
        return True

    def _run_loops(self) -> None:
        for name in LOOPS:
            thread = threading.Thread(target=getattr(self, f"_{name}"), name=f"keeper-{name}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout)
        self.store.lanes.close()

    def _tick(self, name: str) -> None:
        with self._lock:
            self._beats[name] = self.clock()

    def _kill(self, found: list[Process], why: str, reason: str, said: str) -> None:
        """SIGKILL the JobManager processes ``found``; ``why`` labels the metric, ``said`` the log line."""
        alive = self.jobmanagers.kill(found, self.policy.stop_margin_seconds)
        metrics.KILLS.labels(why).inc(len(found) - len(alive))
        fields = self._fields(
            event="stopped",
            why=why,
            reason=reason,
            pids=[p.pid for p in found],
            entrypoint=found[0].entrypoint,
        )
        if alive:
            metrics.KILL_FAILURES.inc(len(alive))
            log.error(
                "JobManager not stopped within the stop margin",
                extra={"fields": {**fields, "event": "stop-failed", "alive": alive}},
            )
            return
        log.error(said, extra={"fields": fields})

    def _decide(self) -> Decision:
        raise NotImplementedError

    def _fields(self, **more: object) -> dict[str, object]:
        raise NotImplementedError


def written() -> str:
    """The writer's own clock in a heartbeat body: for people reading the bucket, never compared."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")
