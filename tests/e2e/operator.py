"""The Flink operator of one member cluster, played on its real API server by ``status``, with its timing.

As the operator (1.15) behaves (DESIGN.md §9, docs/failover.md): a job ``spec.job.state: running`` asks
for starts after ``start_seconds`` with a new jobId, restoring ``spec.job.initialSavepointPath`` when it
is a first deployment; a suspend is a request: the status stays ``RUNNING`` for ``stop_seconds``, then
says at once ``FINISHED`` / ``MISSING`` / ``SUSPENDED`` with ``lastReconciledSpec`` holding the suspend.
While a job runs it completes a checkpoint every ``checkpoint_seconds`` into its checkpoint storage the
way Flink lays it out (``<dir>/<jobId>/chk-<N>/_metadata``), continuing the ids of the checkpoint it
started from; each ``_metadata`` is a real one written by Flink 1.20.5 (``../shared/data/flink-real``)
with its checkpoint id set to N. A deleted object ends its job.

It scales to a fleet of thousands on two cores: checkpoints are written by their own thread (a round of
them to the storage emulator takes seconds at that size and must not hold up starts and stops), the
starts' and stops' status writes go out on a few threads at once, and each job's records are indexed.
"""

from __future__ import annotations

import concurrent.futures
import copy
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.e2e.informer import Informer, Key, key_of
from tests.e2e.rest import ApiError, Rest, flink_path
from tests.support.operator import Job, running_status, stopped_status
from tests.support.repo import shared_data_dir

WriteCheckpoint = Callable[[str, str, int], None]  # (checkpoint dir, jobId, checkpoint id)
FLINK_1_20_CHECKPOINT = "flink-real/ck-1.20.5/b45bd4e20f28087eee7d73ebe0a0b884/chk-11/_metadata"


def real_metadata(checkpoint_id: int) -> bytes:
    """A _metadata Flink 1.20.5 wrote, with its checkpoint id (bytes 8-16, big-endian) set."""
    data = (shared_data_dir() / FLINK_1_20_CHECKPOINT).read_bytes()
    return data[:8] + checkpoint_id.to_bytes(8, "big") + data[16:]


def checkpoint_dir(obj: dict[str, Any]) -> str:
    conf = (obj.get("spec") or {}).get("flinkConfiguration") or {}
    for key in ("execution.checkpointing.dir", "state.checkpoints.dir"):
        if conf.get(key):
            return str(conf[key]).rstrip("/")
    return ""


@dataclass
class OperatorDouble:
    cluster: str
    api: Rest
    write_checkpoint: WriteCheckpoint
    stop_seconds: float = 4.0
    start_seconds: float = 1.0
    checkpoint_seconds: float = 1.0
    tick: float = 0.1
    jobs: list[Job] = field(default_factory=list)
    informer: Informer | None = None
    _asked: dict[Key, float] = field(default_factory=dict)
    _current: dict[Key, Job] = field(default_factory=dict)
    _deployed: dict[Key, Any] = field(default_factory=dict)  # deployed objects -> savepointRedeployNonce
    _failing: set[Key] = field(default_factory=set)
    _halt: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _checkpointer: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)  # the records of jobs
    # a job's end vs its checkpoint being written, per job (one lock for all, held through a storage
    # write after another, starved every other reader of the records at a fleet's size)
    _ending: dict[str, threading.Lock] = field(default_factory=dict)
    _by_key: dict[Key, list[Job]] = field(default_factory=dict)
    _snapshot: dict[Key, dict[str, Any]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    writers: int = 8  # status writes in flight at once

    def start(self) -> OperatorDouble:
        self.informer = Informer(
            self.api, "/apis/flink.apache.org/v1beta1/flinkdeployments", f"operator-{self.cluster}"
        ).start()
        self._thread = threading.Thread(target=self._loop, name=f"operator-{self.cluster}", daemon=True)
        self._thread.start()
        self._checkpointer = threading.Thread(
            target=self._checkpoints, name=f"operator-{self.cluster}-checkpoints", daemon=True
        )
        self._checkpointer.start()
        return self

    def stop(self) -> None:
        self._halt.set()
        for thread in (self._thread, self._checkpointer):
            if thread is not None:
                thread.join(15)
        if self.informer is not None:
            self.informer.stop()

    def fail(self, namespace: str, name: str) -> None:
        """The job on this cluster stops making progress (its JobManager restarting, say): its status says
        RECONCILING, which Karmada's FlinkDeployment interpreter reads as unhealthy, and no checkpoint
        completes; it comes back only as a new job."""
        key = (namespace, name)
        self._failing.add(key)
        assert self.informer is not None
        obj = self.informer.get(namespace, name)
        if obj is not None:
            status = copy.deepcopy(obj.get("status") or {})
            status.setdefault("jobStatus", {})["state"] = "RECONCILING"
            status["lifecycleState"] = "DEPLOYED"
            self._write_status(obj, status)

    def jobs_of(self, namespace: str, name: str) -> list[Job]:
        with self._lock:
            return list(self._by_key.get((namespace, name), ()))

    def _loop(self) -> None:
        assert self.informer is not None
        with concurrent.futures.ThreadPoolExecutor(self.writers, f"operator-{self.cluster}-w") as pool:
            while not self._halt.wait(self.tick):
                objects = self.informer.snapshot()
                now = time.monotonic()
                # one object's reconcile touches only its own key's records: keys in parallel are safe;
                # in a few slices, not a task per object (thousands of them ten times a second)
                items = list(objects.items())
                slices = [items[i :: self.writers] for i in range(self.writers)]
                for errors in pool.map(lambda part, at=now: self._reconcile_all(part, at), slices):
                    self.errors.extend(errors)
                for key in [k for k in self._current if k not in objects]:
                    self._end(key)
                    self._deployed.pop(key, None)
                    self._failing.discard(key)
                self._snapshot = objects

    def _reconcile_all(self, items: list[tuple[Key, dict[str, Any]]], now: float) -> list[str]:
        errors = []
        for key, obj in items:
            try:
                self._reconcile(key, obj, now)
            except (ApiError, OSError) as exc:
                errors.append(f"{key}: {exc}")
        return errors

    def _checkpoints(self) -> None:
        while not self._halt.wait(self.tick):
            self._checkpoint(self._snapshot, time.monotonic())

    def _reconcile(self, key: Key, obj: dict[str, Any], now: float) -> None:
        if (obj.get("metadata") or {}).get("deletionTimestamp"):
            return
        job_spec = (obj.get("spec") or {}).get("job") or {}
        desired = job_spec.get("state", "running")
        reported = ((obj.get("status") or {}).get("jobStatus") or {}).get("state")
        current = self._current.get(key)
        if desired == "suspended":
            if current is None or current.ended is not None:
                self._asked.pop(key, None)
                return
            asked = self._asked.setdefault(key, now)
            if now - asked >= self.stop_seconds:
                self._end(key)
                self._asked.pop(key, None)
                self._write_status(obj, stopped_status(obj))
            return
        if key in self._failing or (reported == "RUNNING" and current is not None and current.ended is None):
            return
        asked = self._asked.setdefault(key, now)
        if now - asked < self.start_seconds:
            return
        self._asked.pop(key, None)
        # initialSavepointPath counts only on a first deployment or with a new savepointRedeployNonce
        nonce = job_spec.get("savepointRedeployNonce")
        first = key not in self._deployed or self._deployed[key] != nonce
        start_path = str(job_spec.get("initialSavepointPath") or "") if first else ""
        job = Job(
            secrets.token_hex(16), time.monotonic(), None, start_path, _checkpoint_id(start_path) + 1, key
        )
        if not self._write_status(obj, running_status(job.job_id, obj.get("spec") or {})):
            return
        with self._lock:
            self.jobs.append(job)
            self._by_key.setdefault(key, []).append(job)
        self._current[key] = job
        self._deployed[key] = nonce

    def _end(self, key: Key) -> None:
        job = self._current.pop(key, None)
        if job is None:
            return
        with self._ending.setdefault(
            job.job_id, threading.Lock()
        ):  # a checkpoint being written completes first
            if job.ended is None:
                job.ended = time.monotonic()

    def _checkpoint(self, objects: dict[Key, dict[str, Any]], now: float) -> None:
        for key, job in list(self._current.items()):
            if job.ended is not None or key not in objects or key in self._failing:
                continue
            last, at = job.checkpoints[-1] if job.checkpoints else (job.first_id - 1, job.started)
            if now - at < self.checkpoint_seconds:
                continue
            folder = checkpoint_dir(objects[key])
            if not folder:
                continue
            with self._ending.setdefault(job.job_id, threading.Lock()):
                if job.ended is not None:
                    continue
                try:
                    self.write_checkpoint(folder, job.job_id, last + 1)
                except (
                    Exception
                ) as exc:  # the job's storage is its own; a failed write is a failed checkpoint
                    self.errors.append(f"checkpoint {job.job_id}/{last + 1}: {exc}")
                    continue
                job.checkpoints.append((last + 1, time.monotonic()))

    def _write_status(self, obj: dict[str, Any], status: dict[str, Any]) -> bool:
        namespace, name = key_of(obj)
        path = flink_path("FlinkDeployment", namespace, name, "status")
        body = copy.deepcopy(obj)
        for attempt in range(5):
            body["status"] = copy.deepcopy(status)
            try:
                self.api.replace(path, body)
                return True
            except ApiError as exc:
                if exc.status == 404:
                    return False
                if exc.status != 409 or attempt == 4:
                    raise
                fresh = self.api.get(flink_path("FlinkDeployment", namespace, name), ok_missing=True)
                if fresh is None:
                    return False
                body = fresh
        return False


def _checkpoint_id(path: str) -> int:
    name = path.rstrip("/").rsplit("/", 1)[-1]
    if name.startswith("chk-") and name[4:].isdigit():
        return int(name[4:])
    return 0
