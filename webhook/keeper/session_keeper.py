"""A session cluster's keeper: three loops over the leases of the session jobs it guards (``session.py``
decides; docs/keeper.md, "FlinkSessionJobs").

- the **lister** lists every session job folder of its namespace below the session cluster's checkpoint
  directory in one listing (once a poll while ready, every retry period while not), reads the heartbeat
  body of a folder it has not adopted when that heartbeat's storage time changed, adopts the jobs whose
  body names this session cluster, and hands each adopted lease the fences of its folder;
- the **renewer** renews each adopted lease when it is due, one after the other, each under a deadline of
  a poll (``fencing/lanes.py``);
- the **guard** asks Flink's REST endpoint which jobs run and looks for the JobManager process every
  ``guard_seconds``: it drops the jobs Flink no longer runs, cancels a job it cannot keep alone, and
  SIGKILLs the JobManager when it can keep none.

A lister or renewer stuck on a hung storage delays neither the guard nor the other.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from webhook.common.paths import StoragePath
from webhook.fencing.layout import FOLDER, KEEPER_WRITER, Workload
from webhook.fencing.protocol import Ownership
from webhook.fencing.records import FencingStore, Listing, heartbeat_body
from webhook.fencing.renewal import retry_seconds
from webhook.keeper import metrics
from webhook.keeper.decide import Decision, holds, listed, listing_due, sent
from webhook.keeper.flinkrest import FlinkRest
from webhook.keeper.jobmanager import JobManagers
from webhook.keeper.loops import Loops, written
from webhook.keeper.session import (
    Overview,
    SessionJob,
    adopt,
    adoptable,
    answered_job,
    dropped,
    guard,
    observed,
    ready,
    renew_due,
    running,
)
from webhook.policy.fencing import FencingPolicy
from webhook.restore.snapshots import StorageError

log = logging.getLogger("webhook.keeper")

SESSION_JOB = "FlinkSessionJob"


@dataclass(frozen=True)
class SessionSettings:
    cluster: str
    session: Workload  # the session cluster's FlinkDeployment
    checkpoint_dir: StoragePath  # the session cluster's: its jobs' records lie below it
    policy: FencingPolicy
    rest: str = "http://127.0.0.1:8081"
    guard_seconds: float = 0.25

    @property
    def root(self) -> StoragePath:
        """Every session job folder of the namespace lies right below this."""
        return self.checkpoint_dir.child(FOLDER, self.session.namespace or "_", SESSION_JOB.lower())

    def workload(self, name: str) -> Workload:
        return Workload(SESSION_JOB, self.session.namespace, name)


class SessionKeeper(Loops):
    def __init__(
        self,
        settings: SessionSettings,
        store: FencingStore,
        jobmanagers: JobManagers,
        flink: FlinkRest,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(settings.policy, store, jobmanagers, clock)
        self.settings = settings
        self.flink = flink
        self._jobs: dict[str, SessionJob] = {}  # by the FlinkSessionJob's name
        self._bodies: dict[str, tuple[datetime, Mapping[str, Any] | None]] = {}  # heartbeat read, by name
        self._dropped: set[str] = set()  # jobIds dropped: adopted again only once Flink runs them again
        self._overview: Overview = None
        self._jobmanager_runs = False
        self._listed_once = False
        self._listed_at = float("-inf")
        self._cancelled: dict[str, float] = {}  # jobId -> when its last cancel was sent
        self._ready = False

    # --- what the probes read --------------------------------------------------------------------------
    def _decide(self) -> Decision:
        with self._lock:
            listed_once, jobs = self._listed_once, list(self._jobs.values())
        held, reason = ready(listed_once, jobs, self.clock(), self.policy)
        return Decision(held, False, False, reason)

    # --- start -------------------------------------------------------------------------------------------
    def start(self) -> None:
        if self._off():
            return
        found = self.jobmanagers.find()
        with self._lock:
            self._jobmanager_runs = bool(found)
        log.info(
            "session keeper started",
            extra={"fields": self._fields(event="started", mode="session", jobmanagers=len(found))},
        )
        self._run_loops()

    # --- the lister ----------------------------------------------------------------------------------------
    def _lister(self) -> None:
        period = retry_seconds(self.policy)
        while not self._stop.is_set():
            self._tick("lister")
            now = self.clock()
            if listing_due(self._listed_at, now, self.decision().holds, self.policy):
                self._listed_at = now
                self._list(now)
            self._stop.wait(period)

    def _list(self, started: float) -> None:
        metrics.REQUESTS.labels("list").inc()
        try:
            tree = self.store.lanes.call(self.store.tree_call(self.settings.root), self.policy.call_timeout)
        except StorageError as exc:
            metrics.LISTINGS.labels("failed").inc()
            log.warning(
                "records not listed", extra={"fields": self._fields(event="list-failed", error=str(exc))}
            )
            return
        metrics.LISTINGS.labels("ok").inc()
        folders = self._folders(tree)
        with self._lock:
            adopted = set(self._jobs)
        for name, records in folders.items():
            if name not in adopted:
                self._consider(name, records, started)
        with self._lock:
            for name in adopted & set(self._jobs):
                job = self._jobs[name]
                before = job.lease.superseded
                job = replace(
                    job,
                    lease=listed(self.settings.cluster, job.lease, folders.get(name, Ownership()), started),
                )
                self._jobs[name] = job
                if before is None and job.lease.superseded is not None:
                    self._superseded(job)
            self._listed_once = True
            metrics.SESSION_JOBS.set(len(self._jobs))

    def _folders(self, tree: Mapping[str, Listing]) -> dict[str, Ownership]:
        """The listing's session job folders by job name (a key that is not one, skipped)."""
        found = {}
        for key, listing in tree.items():
            name = key.rstrip("/").rsplit("/", 1)[-1]
            if name and self.settings.workload(name).folder(
                self.settings.checkpoint_dir
            ).fs_path == key.rstrip("/"):
                found[name] = listing.ownership
        return found

    def _consider(self, name: str, records: Ownership, started: float) -> None:
        """A folder not adopted: its heartbeat body (read again only when its storage time changed)."""
        beat = records.heartbeat(self.settings.cluster)
        if beat is None:
            return
        known = self._bodies.get(name)
        if known is None or known[0] != beat.modified:
            folder = self.settings.workload(name).folder(self.settings.checkpoint_dir)
            metrics.REQUESTS.labels("read").inc()
            try:
                body = self.store.lanes.call(self.store.heartbeat_call(folder), self.policy.call_timeout)
            except StorageError as exc:
                log.warning(
                    "heartbeat not read",
                    extra={"fields": self._fields(event="read-failed", job=name, error=str(exc))},
                )
                return
            known = (beat.modified, body)
            self._bodies[name] = known
        found = adoptable(self.settings.cluster, self.settings.session.name, known[1])
        if found is None:
            return
        job_id, epoch = found
        with self._lock:
            overview = self._overview
            if job_id in self._dropped and (overview is None or job_id not in overview):
                return  # dropped: adopted again once Flink runs it again
            self._dropped.discard(job_id)
            job = adopt(
                self.settings.cluster, name, job_id, epoch, records, started, self.clock(), self.policy
            )
            self._jobs[name] = job
        log.info(
            "session job adopted: its lease is kept here",
            extra={"fields": self._fields(event="adopted", job=name, jobId=job_id, epoch=job.lease.epoch)},
        )
        if job.lease.superseded is not None:
            self._superseded(job)

    def _superseded(self, job: SessionJob) -> None:
        fence = job.lease.superseded
        if fence is None:
            return
        log.error(
            "a newer fence of another cluster: the job's lease is never renewed again",
            extra={
                "fields": self._fields(
                    event="superseded",
                    job=job.name,
                    jobId=job.job_id,
                    fencedBy=fence.owner,
                    fenceEpoch=fence.epoch,
                )
            },
        )

    # --- the renewer ---------------------------------------------------------------------------------------
    def _renewer(self) -> None:
        period = retry_seconds(self.policy)
        while not self._stop.is_set():
            self._tick("renewer")
            now = self.clock()
            with self._lock:
                overview, runs = self._overview, self._jobmanager_runs
                due = [j.name for j in self._jobs.values() if renew_due(j, overview, runs, now, self.policy)]
            for name in due:
                # each renewal counts from its own start: one sent after another's failure started after
                # it (``session.lapsed_alone`` tells a job's own fault from a cut by that order)
                started = self.clock()
                with self._lock:
                    job = self._jobs.get(name)
                    if job is None:
                        continue
                    self._jobs[name] = replace(job, lease=sent(job.lease, started))
                self._renew(name, started)
            if not due:
                self._stop.wait(period)

    def _renew(self, name: str, started: float) -> None:
        with self._lock:
            job = self._jobs.get(name)
        if job is None:
            return
        body = heartbeat_body(
            self.settings.workload(name), self.settings.cluster, job.lease.epoch, job.job_id, written(),
            self.settings.session.name,
        )  # fmt: skip
        body.update({"writer": KEEPER_WRITER, "pod": self.pod})
        folder = self.settings.workload(name).folder(self.settings.checkpoint_dir)
        metrics.REQUESTS.labels("beat").inc()
        ok = True
        try:
            self.store.beat(folder, body, self.policy.call_timeout)
        except StorageError as exc:
            ok = False
            metrics.RENEWALS.labels("failed").inc()
            log.warning(
                "heartbeat not renewed",
                extra={"fields": self._fields(event="renew-failed", job=name, error=str(exc))},
            )
        else:
            metrics.RENEWALS.labels("ok").inc()
            metrics.LAST_RENEWAL.set(time.time() - (self.clock() - started))
        with self._lock:
            current = self._jobs.get(name)
            if current is not None:
                self._jobs[name] = answered_job(current, started, ok)

    # --- the guard -----------------------------------------------------------------------------------------
    def _guard(self) -> None:
        answered: set[int] = set()  # JobManager pids that answered on the REST endpoint
        silent_since: float | None = None  # since when one that answered before does not
        while not self._stop.is_set():
            self._tick("guard")
            found = self.jobmanagers.find()
            overview = running(self.flink.overview())
            now = self.clock()
            gone = []
            pids = {p.pid for p in found}
            if overview is not None:
                answered = pids  # these JobManagers answer: started, not hung
            if overview is not None or not pids & answered:
                silent_since = None  # answering, or starting (never answered yet), or none
            elif silent_since is None:
                silent_since = now
            with self._lock:
                self._overview, self._jobmanager_runs = overview, bool(found)
                for name, job in list(self._jobs.items()):
                    job = observed(job, overview, now)
                    self._jobs[name] = job
                    if dropped(job, now, self.policy):
                        gone.append(self._jobs.pop(name))
                        self._dropped.add(job.job_id)
                jobs = list(self._jobs.values())
            metrics.JOBMANAGER.set(len(found))
            metrics.SUPERSEDED.set(sum(1 for j in jobs if j.lease.superseded is not None))
            for job in gone:
                log.info(
                    "session job dropped: Flink runs it no more",
                    extra={"fields": self._fields(event="dropped", job=job.name, jobId=job.job_id)},
                )
            silent = 0.0 if silent_since is None else now - silent_since
            action = guard(jobs, overview, bool(found), now, self.policy, silent)
            if action.kill and found:
                why = "rest-unanswered" if overview is None else "renew-deadline"
                self._kill(found, why, action.reason, "JobManager stopped: the keeper keeps no lease")
            for job_id in action.cancel:
                self._cancel(next(j for j in jobs if j.job_id == job_id), now)
            self._ready_changed()  # after what this look stopped: no kill of its own follows `held`
            self._stop.wait(self.settings.guard_seconds)

    def _ready_changed(self) -> None:
        decision = self.decision()
        if decision.holds == self._ready:
            return
        self._ready = decision.holds
        metrics.HOLDS.set(1 if decision.holds else 0)
        if decision.holds:
            log.info(
                "every adopted lease held: the JobManager may run",
                extra={"fields": self._fields(event="held")},
            )
        else:
            log.error(
                "a lease is not held", extra={"fields": self._fields(event="lost", reason=decision.reason)}
            )

    def _cancel(self, job: SessionJob, now: float) -> None:
        """At most once a retry period per job, while Flink lists it running."""
        if now - self._cancelled.get(job.job_id, float("-inf")) < retry_seconds(self.policy):
            return
        self._cancelled[job.job_id] = now
        why = "superseded" if job.lease.superseded is not None else "renew-failed"
        _, reason = holds(job.lease, now, self.policy)
        ok = self.flink.cancel(job.job_id)
        metrics.CANCELS.labels(why, "ok" if ok else "failed").inc()
        fields = self._fields(
            event="cancelled" if ok else "cancel-failed",
            job=job.name,
            jobId=job.job_id,
            why=why,
            reason=reason,
        )
        if ok:
            log.error("session job cancelled: its lease is not held", extra={"fields": fields})
        else:
            log.error("session job not cancelled", extra={"fields": fields})

    def _fields(self, **more: object) -> dict[str, object]:
        return {"object": str(self.settings.session), "cluster": self.settings.cluster, **more}
