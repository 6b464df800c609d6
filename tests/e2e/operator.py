"""The Flink operator of one member cluster, played on its real API server by ``status``, with its timing.

As the operator (1.15) behaves (DESIGN.md §9, docs/failover.md): a job ``spec.job.state: running`` asks
for starts after ``start_seconds`` with a new jobId, restoring ``spec.job.initialSavepointPath`` when it
is a first deployment; a suspend is a request: the status stays ``RUNNING`` for ``stop_seconds``, then
says at once ``FINISHED`` / ``MISSING`` / ``SUSPENDED`` with ``lastReconciledSpec`` holding the suspend.
While a job runs it completes a checkpoint every ``checkpoint_seconds`` into its checkpoint storage the
way Flink lays it out (``<dir>/<jobId>/chk-<N>/_metadata``), continuing the ids of the checkpoint it
started from; each ``_metadata`` is a real one written by Flink 1.20.5 (``../shared/data/flink-real``)
with its checkpoint id set to N. A deleted object ends its job.

FlinkSessionJobs are played the same way, beside the FlinkDeployments (one double per member for both
kinds; a session job and a FlinkDeployment of one namespace never share a name in the tier): a
FlinkDeployment without ``spec.job`` is a session cluster, reported ``jobManagerDeploymentStatus:
READY`` once deployed, and runs no job of its own; a FlinkSessionJob starts only while its session cluster
(``spec.deploymentName``) is READY on the same member, checkpoints into its own checkpoint directory or
else its session cluster's, and reports no JobManager (the session cluster's is not its own). Its stop
is the job's: ``CANCELED`` after a stateless suspend (the operator cancels it), ``FINISHED`` after a
stop with a savepoint, ``lastReconciledSpec`` holding the suspend either way.

What a scenario may ask of it per job (a set of keys each, changed while it runs): ``finalized``, the
operator's finalizer on the object, so that a deletion is a cleanup (the job runs on for ``stop_seconds``,
then ``FINISHED``/``CANCELED``, and only then the finalizer goes and the object with it), as the real
operator does; ``leader_lost``, the JobManager loses its leadership as a stop (a suspend or a deletion's
cleanup) is asked: Flink reports ``SUSPENDED``, only locally terminal, and a new leader resumes the job,
which runs and checkpoints on, its status still saying ``SUSPENDED``, until the key is removed and the stop
completes; ``withheld``, a job the operator does not get to: neither a start nor a stop is begun while
its key is there (a stop then takes ``stop_seconds`` from its removal).

It scales to a fleet of thousands on two cores: checkpoints are written by their own thread (a round of
them to the storage emulator takes seconds at that size and must not hold up starts and stops), the
starts' and stops' status writes go out on a few threads at once, and each job's records are indexed.
"""

from __future__ import annotations

import concurrent.futures
import copy
import functools
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.e2e.informer import Informer, Key, key_of
from tests.e2e.kubelet import Kubelet, keeper_container
from tests.e2e.rest import ApiError, Rest, flink_path
from tests.support.operator import Job, running_status, stopped_status
from tests.support.repo import shared_data_dir

WriteCheckpoint = Callable[[str, str, int], None]  # (checkpoint dir, jobId, checkpoint id)
FLINK_1_20_CHECKPOINT = "flink-real/ck-1.20.5/b45bd4e20f28087eee7d73ebe0a0b884/chk-11/_metadata"


def real_metadata(checkpoint_id: int) -> bytes:
    """A _metadata Flink 1.20.5 wrote, with its checkpoint id (bytes 8-16, big-endian) set."""
    data = (shared_data_dir() / FLINK_1_20_CHECKPOINT).read_bytes()
    return data[:8] + checkpoint_id.to_bytes(8, "big") + data[16:]


DEPLOYMENT, SESSION_JOB = "FlinkDeployment", "FlinkSessionJob"
COLLECTIONS = {
    DEPLOYMENT: "/apis/flink.apache.org/v1beta1/flinkdeployments",
    SESSION_JOB: "/apis/flink.apache.org/v1beta1/flinksessionjobs",
}


def checkpoint_dir(obj: dict[str, Any]) -> str:
    conf = (obj.get("spec") or {}).get("flinkConfiguration") or {}
    for key in ("execution.checkpointing.dir", "state.checkpoints.dir"):
        if conf.get(key):
            return str(conf[key]).rstrip("/")
    return ""


def is_session_cluster(obj: dict[str, Any]) -> bool:
    """A FlinkDeployment without ``spec.job``: a session cluster, which runs the session jobs naming it."""
    return obj.get("kind", DEPLOYMENT) == DEPLOYMENT and not (obj.get("spec") or {}).get("job")


def session_cluster_key(obj: dict[str, Any]) -> Key | None:
    """The key of the session cluster a FlinkSessionJob names (``spec.deploymentName``), else None."""
    if obj.get("kind") != SESSION_JOB:
        return None
    namespace, _ = key_of(obj)
    return (namespace, str((obj.get("spec") or {}).get("deploymentName") or ""))


def session_cluster_status(obj: dict[str, Any]) -> dict[str, Any]:
    """What the operator reports of a deployed session cluster: its JobManager, no job of its own."""
    status = running_status("", obj.get("spec") or {})
    del status["jobStatus"]
    return status


def job_dir(obj: dict[str, Any], objects: dict[Key, dict[str, Any]]) -> str:
    """Where a job checkpoints: its own configuration, else (a session job) its session cluster's."""
    own = checkpoint_dir(obj)
    cluster = session_cluster_key(obj)
    if own or cluster is None:
        return own
    return checkpoint_dir(objects.get(cluster) or {})


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
    informer: Informer | None = None  # FlinkDeployments
    sessions: Informer | None = None  # FlinkSessionJobs
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
    # the JobManager pods of FlinkDeployments that carry the lease keeper (tests/e2e/kubelet.py); None:
    # the keeper sidecar is not run, and such a job runs as any other
    kubelet: Kubelet | None = None
    _recovering: dict[Key, Job] = field(default_factory=dict)  # jobs whose JobManager died, to recover
    finalized: set[Key] = field(default_factory=set)  # the operator's finalizer on these objects
    leader_lost: set[Key] = field(default_factory=set)  # a stop asked reports SUSPENDED, the job runs on
    withheld: set[Key] = field(default_factory=set)  # neither started nor stopped while here
    _cleanup: dict[Key, float] = field(default_factory=dict)  # a deletion's cleanup began (finalized)

    def start(self) -> OperatorDouble:
        self.informer = Informer(self.api, COLLECTIONS[DEPLOYMENT], f"operator-{self.cluster}").start()
        self.sessions = Informer(
            self.api, COLLECTIONS[SESSION_JOB], f"operator-{self.cluster}-sessionjobs"
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
        informers = [i for i in (self.informer, self.sessions) if i is not None]
        for informer in informers:
            informer.halt()
        for thread in (self._thread, self._checkpointer):
            if thread is not None:
                thread.join(15)
        for informer in informers:
            informer.stop()

    def fail(self, namespace: str, name: str) -> None:
        """The job on this cluster stops making progress (its JobManager restarting, say): its status says
        RECONCILING, which Karmada's FlinkDeployment interpreter reads as unhealthy, and no checkpoint
        completes; it comes back only as a new job."""
        key = (namespace, name)
        self._failing.add(key)
        obj = self._objects().get(key)
        if obj is not None:
            status = copy.deepcopy(obj.get("status") or {})
            status.setdefault("jobStatus", {})["state"] = "RECONCILING"
            status["lifecycleState"] = "DEPLOYED"
            self._write_status(obj, status)

    def jobs_of(self, namespace: str, name: str) -> list[Job]:
        with self._lock:
            return list(self._by_key.get((namespace, name), ()))

    def _objects(self) -> dict[Key, dict[str, Any]]:
        """Both kinds' objects as the informers hold them now, each with its ``kind`` (a list's items may
        come without it)."""
        out: dict[Key, dict[str, Any]] = {}
        for kind, informer in ((DEPLOYMENT, self.informer), (SESSION_JOB, self.sessions)):
            assert informer is not None
            for key, obj in informer.snapshot().items():
                if key in out:
                    self.errors.append(f"{key}: a FlinkDeployment and a FlinkSessionJob share the name")
                    continue
                out[key] = obj if obj.get("kind") == kind else {**obj, "kind": kind}
        return out

    def _loop(self) -> None:
        with concurrent.futures.ThreadPoolExecutor(self.writers, f"operator-{self.cluster}-w") as pool:
            while not self._halt.wait(self.tick):
                objects = self._objects()
                now = time.monotonic()
                # one object's reconcile touches only its own key's records: keys in parallel are safe;
                # in a few slices, not a task per object (thousands of them ten times a second)
                items = list(objects.items())
                slices = [items[i :: self.writers] for i in range(self.writers)]
                reconcile = functools.partial(self._reconcile_all, now=now, objects=objects)
                for errors in pool.map(reconcile, slices):
                    self.errors.extend(errors)
                for key in [k for k in self._current if k not in objects]:
                    self._end(key)
                for key in [k for k in self._deployed if k not in objects]:  # ended by a cleanup too
                    self._deployed.pop(key, None)
                    self._failing.discard(key)
                if self.kubelet is not None:
                    for key in [k for k in self.kubelet.pods if k not in objects]:
                        self.kubelet.remove(key)
                        self._recovering.pop(key, None)
                self._snapshot = objects

    def _reconcile_all(
        self, items: list[tuple[Key, dict[str, Any]]], now: float, objects: dict[Key, dict[str, Any]]
    ) -> list[str]:
        errors = []
        for key, obj in items:
            try:
                self._reconcile(key, obj, now, objects)
            except (ApiError, OSError) as exc:
                errors.append(f"{key}: {exc}")
        return errors

    def _checkpoints(self) -> None:
        while not self._halt.wait(self.tick):
            self._checkpoint(self._snapshot, time.monotonic())

    def _reconcile(
        self, key: Key, obj: dict[str, Any], now: float, objects: dict[Key, dict[str, Any]]
    ) -> None:
        if (obj.get("metadata") or {}).get("deletionTimestamp"):
            self._clean_up(key, obj, now)
            return
        if key in self.finalized and FINALIZER[obj.get("kind", DEPLOYMENT)] not in _finalizers(obj):
            self._patch_finalizers(obj, [*_finalizers(obj), FINALIZER[obj.get("kind", DEPLOYMENT)]])
        if is_session_cluster(obj):
            if (obj.get("status") or {}).get("jobManagerDeploymentStatus") != "READY":
                asked = self._asked.setdefault(key, now)
                if now - asked >= self.start_seconds:
                    self._asked.pop(key, None)
                    self._write_status(obj, session_cluster_status(obj))
            return
        if key in self.withheld:
            self._asked.pop(key, None)
            return
        job_spec = (obj.get("spec") or {}).get("job") or {}
        desired = job_spec.get("state", "running")
        reported = ((obj.get("status") or {}).get("jobStatus") or {}).get("state")
        current = self._current.get(key)
        sidecar = keeper_container(obj) if self.kubelet is not None else None
        if desired == "suspended":
            if current is None or current.ended is not None:
                self._asked.pop(key, None)
                self._no_pod(key)
                return
            if key in self.leader_lost:
                self._report_suspended(obj, reported)
                return
            asked = self._asked.setdefault(key, now)
            if now - asked >= self.stop_seconds:
                self._end(key)
                self._asked.pop(key, None)
                self._write_status(obj, _stopped(obj))
                self._no_pod(key)
            return
        if sidecar is not None and self._guarded(key, obj, sidecar, current):
            return
        if key in self._failing or (reported == "RUNNING" and current is not None and current.ended is None):
            return
        cluster = session_cluster_key(obj)
        if cluster is not None:  # a session job is submitted to its session cluster once that is up
            deployed = (objects.get(cluster) or {}).get("status") or {}
            if deployed.get("jobManagerDeploymentStatus") != "READY":
                self._asked.pop(key, None)
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
        died = self._recovering.pop(key, None)
        if died is not None and not first:  # a restarted JobManager recovers its job from HA data
            job = _recovered(died, job_dir(obj, objects), key)
        if not self._write_status(obj, _running(job.job_id, obj)):
            return
        with self._lock:
            self.jobs.append(job)
            self._by_key.setdefault(key, []).append(job)
        self._current[key] = job
        self._deployed[key] = nonce

    def _guarded(self, key: Key, obj: dict[str, Any], sidecar: dict[str, Any], current: Job | None) -> bool:
        """A job whose JobManager pod carries the keeper runs only while that JobManager is alive: its
        death (the keeper killing it) stops the job (RECONCILING, no checkpoint), and a JobManager that
        is alive again recovers it (the operator's HA). True when nothing more is to be done now."""
        assert self.kubelet is not None
        pod = self.kubelet.ensure(key, sidecar)
        running = current is not None and current.ended is None
        if pod.jobmanager_alive:
            return False
        if running and current is not None:
            self._end(key)
            self._recovering[key] = current
            status = copy.deepcopy(obj.get("status") or {})
            status.setdefault("jobStatus", {})["state"] = "RECONCILING"
            status["jobManagerDeploymentStatus"] = "DEPLOYING"
            self._write_status(obj, status)
        self._asked.pop(key, None)
        return True

    def _no_pod(self, key: Key) -> None:
        if self.kubelet is not None:
            self.kubelet.remove(key)
            self._recovering.pop(key, None)

    def _clean_up(self, key: Key, obj: dict[str, Any], now: float) -> None:
        """A deleted object held by the operator's finalizer: its job runs on while the operator cancels
        it (``stop_seconds``, or while its JobManager has lost the leadership), then the job ends, the
        status says so and the finalizer goes. Without the finalizer the object is gone at once."""
        finalizer = FINALIZER[obj.get("kind", DEPLOYMENT)]
        if finalizer not in _finalizers(obj):
            return
        reported = ((obj.get("status") or {}).get("jobStatus") or {}).get("state")
        if key in self.leader_lost and key in self._current:
            self._report_suspended(obj, reported)
            return
        began = self._cleanup.setdefault(key, now)
        if key in self._current and now - began < self.stop_seconds:
            return
        if key in self._current:
            self._end(key)
            if not self._write_status(obj, _stopped(obj, "CANCELED")):
                return
        self._cleanup.pop(key, None)
        self._patch_finalizers(obj, [f for f in _finalizers(obj) if f != finalizer])

    def _report_suspended(self, obj: dict[str, Any], reported: Any) -> None:
        """The JobManager lost its leadership: Flink's SUSPENDED, once; the job is not ended (a new leader
        resumes it) and goes on checkpointing."""
        if reported != "SUSPENDED":
            self._write_status(obj, _stopped(obj, "SUSPENDED"))

    def _patch_finalizers(self, obj: dict[str, Any], finalizers: list[str]) -> None:
        namespace, name = key_of(obj)
        path = flink_path(str(obj.get("kind") or DEPLOYMENT), namespace, name)
        try:
            self.api.merge_patch(path, {"metadata": {"finalizers": finalizers or None}})
        except ApiError as exc:
            if exc.status != 404:
                raise

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
            folder = job_dir(objects[key], objects)
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
        kind = str(obj.get("kind") or DEPLOYMENT)
        path = flink_path(kind, namespace, name, "status")
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
                fresh = self.api.get(flink_path(kind, namespace, name), ok_missing=True)
                if fresh is None:
                    return False
                body = fresh
        return False


def _running(job_id: str, obj: dict[str, Any]) -> dict[str, Any]:
    status = running_status(job_id, obj.get("spec") or {})
    if obj.get("kind") == SESSION_JOB:  # its JobManager is the session cluster's
        del status["jobManagerDeploymentStatus"]
    return status


def _stopped(obj: dict[str, Any], state: str = "") -> dict[str, Any]:
    """The completed stop: a session job suspended stateless is cancelled (CANCELED), one stopped with a
    savepoint FINISHED; a FlinkDeployment as ``stopped_status`` says. ``state``: the job state instead
    (a deletion's cancel, a JobManager's lost leadership)."""
    status = stopped_status(obj)
    job = (obj.get("spec") or {}).get("job") or {}
    if obj.get("kind") == SESSION_JOB and job.get("upgradeMode") == "stateless":
        status["jobStatus"]["state"] = "CANCELED"
    if state:
        status["jobStatus"]["state"] = state
    return status


def _recovered(died: Job, folder: str, key: Key) -> Job:
    """The job a JobManager restarted after its death runs: the same jobId, from its newest checkpoint."""
    last = died.checkpoints[-1][0] if died.checkpoints else died.first_id - 1
    path = f"{folder}/{died.job_id}/chk-{last}" if died.checkpoints else died.started_from
    return Job(died.job_id, time.monotonic(), None, path, last + 1, key)


# The real operator's finalizer of each kind (a deleted object stays until its cleanup is done).
FINALIZER = {
    DEPLOYMENT: "flinkdeployments.flink.apache.org/finalizer",
    SESSION_JOB: "flinksessionjobs.flink.apache.org/finalizer",
}


def _finalizers(obj: dict[str, Any]) -> list[str]:
    return [str(f) for f in (obj.get("metadata") or {}).get("finalizers") or []]


def _checkpoint_id(path: str) -> int:
    name = path.rstrip("/").rsplit("/", 1)[-1]
    if name.startswith("chk-") and name[4:].isdigit():
        return int(name[4:])
    return 0
