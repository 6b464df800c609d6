"""The Flink operator played faithfully on a fake member API: a suspend is a request, not a stop.

What the real operator (1.15 source, docs/failover.md) writes: while it cancels a job or deletes its
Flink cluster the status keeps ``jobStatus.state: RUNNING`` (the job still reads, writes and
checkpoints); when the stop has completed it writes at once ``jobStatus.state: FINISHED`` (the jobId
kept), ``jobManagerDeploymentStatus: MISSING``, ``lifecycleState: SUSPENDED`` and a
``reconciliationStatus.lastReconciledSpec`` holding ``job.state: suspended``. ``OperatorDouble`` does
that after a configurable delay, starts a job ``spec.job.state: running`` asks for after another, and
while a job runs completes a checkpoint into its storage at a steady pace, continuing the ids of the
checkpoint it was started from, as Flink does. It records when each job was RUNNING by its status.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.controlplane.fakeapi import FakeKarmada

Key = tuple[str, str]


def running_status(job_id: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "jobStatus": {"jobId": job_id, "state": "RUNNING"},
        "jobManagerDeploymentStatus": "READY",
        "lifecycleState": "STABLE",
        "reconciliationStatus": {"state": "DEPLOYED", "lastReconciledSpec": _reconciled(spec)},
    }


def stopped_status(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The status the operator writes when a suspend has completed."""
    job_id = str(((obj.get("status") or {}).get("jobStatus") or {}).get("jobId") or "")
    spec = dict(obj.get("spec") or {})
    status: dict[str, Any] = {
        "jobStatus": {"jobId": job_id, "state": "FINISHED"},
        "lifecycleState": "SUSPENDED",
        "reconciliationStatus": {"state": "DEPLOYED", "lastReconciledSpec": _reconciled(spec)},
    }
    if obj.get("kind", "FlinkDeployment") == "FlinkDeployment":
        status["jobManagerDeploymentStatus"] = "MISSING"
    return status


def _reconciled(spec: Mapping[str, Any]) -> str:
    return json.dumps({"spec": spec, "resource_metadata": {"apiVersion": "flink.apache.org/v1beta1"}})


def set_status(fake: FakeKarmada, namespace: str, name: str, status: Mapping[str, Any]) -> None:
    """Replace an object's status as the operator's status update does (no merge with the old one)."""
    with fake.cond:
        current = fake.objects.get((namespace, name))
        if current is None:
            return
        updated = json.loads(json.dumps(current))
        updated["status"] = json.loads(json.dumps(dict(status)))
        fake._store((namespace, name), updated, "MODIFIED")


def operator_stops(fake: FakeKarmada, namespace: str = "analytics", name: str = "orders") -> None:
    """The operator reports the stop of a suspended copy completed (for step-by-step tests)."""
    set_status(fake, namespace, name, stopped_status(fake.get(namespace, name)))


@dataclass
class Job:
    job_id: str
    started: float
    ended: float | None = None
    started_from: str = ""  # initialSavepointPath it started from ("" for a job that ran before)
    first_id: int = 1  # Flink continues the ids of the checkpoint it restored
    key: tuple[str, str] = ("", "")  # (namespace, name) of its object
    checkpoints: list[tuple[int, float]] = field(default_factory=list)  # (id, completed at)


@dataclass
class OperatorDouble:
    """The operator of one member cluster, on a thread; ``write_checkpoint(job_id, n)`` is the job's
    storage (it keeps writing while its member role cannot reach storage: the job's path is its own)."""

    fake: FakeKarmada
    stop_seconds: float
    write_checkpoint: Callable[[str, int], None]
    start_seconds: float = 0.3
    checkpoint_seconds: float = 0.5
    tick: float = 0.05
    # The job's pod, where its JobManager is a process of its own (tests/support/jobpod.py): started with
    # each job, stopped with it; that process, not the double, then completes the job's checkpoints.
    on_start: Callable[[Job], None] | None = None
    on_end: Callable[[Job], None] | None = None
    jobs: list[Job] = field(default_factory=list)
    _asked: dict[Key, float] = field(default_factory=dict)
    _current: dict[Key, Job] = field(default_factory=dict)
    _halt: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> OperatorDouble:
        self._thread = threading.Thread(target=self._loop, name="operator-double", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._halt.set()
        if self._thread is not None:
            self._thread.join(10)

    def adopt(self, namespace: str, name: str, job_id: str, last_checkpoint: int) -> None:
        """A job that already runs when the test begins."""
        job = Job(job_id, time.monotonic(), key=(namespace, name))
        job.checkpoints.append((last_checkpoint, job.started))
        self.jobs.append(job)
        self._current[(namespace, name)] = job
        if self.on_start is not None:
            self.on_start(job)

    def _loop(self) -> None:
        while not self._halt.wait(self.tick):
            with self.fake.cond:
                objects = {k: json.loads(json.dumps(v)) for k, v in self.fake.objects.items()}
            now = time.monotonic()
            for key, obj in objects.items():
                self._reconcile(key, obj, now)
            for key in [k for k in self._current if k not in objects]:  # deleted: the cluster goes
                self._end(key, now)
            for job in [j for j in self._current.values() if j.ended is None and self.on_start is None]:
                last, at = job.checkpoints[-1] if job.checkpoints else (job.first_id - 1, job.started)
                if now - at >= self.checkpoint_seconds:
                    self.write_checkpoint(job.job_id, last + 1)
                    job.checkpoints.append((last + 1, time.monotonic()))

    def _reconcile(self, key: Key, obj: dict[str, Any], now: float) -> None:
        job_spec = (obj.get("spec") or {}).get("job") or {}
        desired = job_spec.get("state", "running")
        reported = ((obj.get("status") or {}).get("jobStatus") or {}).get("state")
        current = self._current.get(key)
        if desired == "suspended":
            if reported != "RUNNING":
                self._asked.pop(key, None)
            elif current is not None:
                asked = self._asked.setdefault(key, now)
                if now - asked >= self.stop_seconds:
                    self._end(key, now)
                    set_status(self.fake, *key, stopped_status(obj))
            return
        if reported == "RUNNING" and current is not None and current.ended is None:
            return
        asked = self._asked.setdefault(key, now)
        if now - asked < self.start_seconds:
            return
        self._asked.pop(key, None)
        start_path = str(job_spec.get("initialSavepointPath") or "")
        job = Job(
            secrets.token_hex(16), time.monotonic(), None, start_path, _checkpoint_id(start_path) + 1, key
        )
        self.jobs.append(job)
        self._current[key] = job
        set_status(self.fake, *key, running_status(job.job_id, obj.get("spec") or {}))
        if self.on_start is not None:
            self.on_start(job)

    def _end(self, key: Key, now: float) -> None:
        job = self._current.pop(key, None)
        if job is not None and job.ended is None:
            job.ended = time.monotonic()
            if self.on_end is not None:
                self.on_end(job)


def _checkpoint_id(path: str) -> int:
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return int(name[4:]) if name.startswith("chk-") and name[4:].isdigit() else 0


def overlap(first: list[Job], second: list[Job], until: float | None = None) -> float:
    """Seconds during which a job of ``first`` and a job of ``second`` were both RUNNING by status."""
    end = time.monotonic() if until is None else until
    total = 0.0
    for a in first:
        for b in second:
            start = max(a.started, b.started)
            stop = min(a.ended or end, b.ended or end)
            total += max(0.0, stop - start)
    return total


def lost_checkpoints(old: list[Job], new: Job) -> list[int]:
    """Checkpoints the old jobs completed after the one the new job started from."""
    start = _checkpoint_id(new.started_from)
    return sorted(n for job in old for n, _ in job.checkpoints if n > start)
