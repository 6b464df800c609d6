"""What a session cluster's keeper does next, for the FlinkSessionJobs it guards. Pure: no I/O, no clocks.

A session cluster's JobManager runs several jobs, so its keeper (docs/keeper.md, "FlinkSessionJobs")
keeps one ``Lease`` per fenced session job that runs there, each by the FlinkDeployment keeper's rules
(``decide.py``), and stops what it cannot keep as narrowly as is safe:

- a job **superseded** (a newer fence of another cluster) is cancelled alone, again whenever it shows
  up running (a JobManager that restarted recovered it from HA data);
- a job whose renewal **alone** failed (its deadline passed, its last renewal failed, and a renewal of
  another job that started after that failure went through: the storage answers) is cancelled alone;
- otherwise a lapse is the keeper's as a whole (a storage cut lapses every lease within a retry period
  of the others): the JobManager is SIGKILLed, which keeps its HA data, so its restart recovers every
  job once the leases are held again; and so is it when the REST endpoint cannot take a cancel.

Which session jobs it guards comes from the storage and Flink's REST API only (the keeper has no
Kubernetes credentials): a heartbeat of this cluster whose body names this session cluster and a jobId
(``adoptable``), while Flink's ``/jobs/overview`` does not show, for a poll, that the jobId is gone
(``observed``, ``dropped``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from webhook.common.flink import is_job_id
from webhook.fencing.layout import SESSION_FIELD
from webhook.fencing.protocol import Ownership
from webhook.fencing.renewal import first_seen
from webhook.keeper.decide import Lease, answered, decide, holds, listed
from webhook.policy.fencing import FencingPolicy

# Flink's job states in which nothing of the job runs any more (SUSPENDED: this JobManager lost its
# leadership; the job is another JobManager's to run, or nobody's).
STOPPED_STATES = frozenset({"FINISHED", "CANCELED", "FAILED", "SUSPENDED"})

# The running jobIds Flink's REST endpoint listed; None: it did not answer.
Overview = frozenset[str] | None


@dataclass(frozen=True)
class SessionJob:
    """One adopted session job (times on the keeper's monotonic clock)."""

    name: str  # the FlinkSessionJob's name: its folder's
    job_id: str
    lease: Lease
    seen: float  # when Flink last listed it running (or could not be asked)
    failed: float | None = None  # start of its first renewal that failed since its last that went through


@dataclass(frozen=True)
class Guard:
    """What the guard does at one look: SIGKILL the JobManager, or cancel these jobs (never both)."""

    kill: bool = False
    cancel: tuple[str, ...] = ()  # jobIds
    reason: str = ""


def adoptable(me: str, session: str, body: Mapping[str, Any] | None) -> tuple[str, int] | None:
    """A heartbeat body (this cluster's record in a session job's folder) that names this cluster, this
    session cluster and a jobId: the job's jobId and the epoch its writer renewed it under."""
    if body is None or body.get("cluster") != me or body.get(SESSION_FIELD) != session:
        return None
    job_id, epoch = body.get("jobId"), body.get("epoch")
    if not is_job_id(job_id) or not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
        return None
    return str(job_id), epoch


def adopt(
    me: str, name: str, job_id: str, epoch: int, records: Ownership, listed_at: float, now: float,
    policy: FencingPolicy,
) -> SessionJob:  # fmt: skip
    """A job found in a listing that began at ``listed_at``: renewed a poll before its deadline (the
    agent's ``first_seen``: it must be renewed within a poll), judged by that listing's fences."""
    lease = listed(me, Lease(epoch, renewed=first_seen(now, policy)), records, listed_at)
    return SessionJob(name, job_id, lease, now)


def answered_job(job: SessionJob, started: float, ok: bool) -> SessionJob:
    """Its renewal sent at ``started`` came back (``decide.answered``), and when its failures began."""
    failed = None if ok else (job.failed if job.failed is not None else started)
    return replace(job, lease=answered(job.lease, started, ok), failed=failed)


def running(overview: Any) -> Overview:
    """The jobIds ``/jobs/overview``'s answer lists in a state that runs; None when it is not one."""
    jobs = overview.get("jobs") if isinstance(overview, Mapping) else None
    if not isinstance(jobs, list):
        return None
    return frozenset(
        str(job["jid"])
        for job in jobs
        if isinstance(job, Mapping) and is_job_id(job.get("jid")) and job.get("state") not in STOPPED_STATES
    )


def runs(job: SessionJob, overview: Overview, jobmanager_runs: bool) -> bool:
    """The job may run: Flink lists it, or Flink cannot be asked while a JobManager process runs."""
    return jobmanager_runs if overview is None else job.job_id in overview


def observed(job: SessionJob, overview: Overview, now: float) -> SessionJob:
    """One look at Flink: the job counts as seen while it runs or while Flink cannot be asked."""
    return replace(job, seen=now) if overview is None or job.job_id in overview else job


def dropped(job: SessionJob, now: float, policy: FencingPolicy) -> bool:
    """Flink, answering, has not listed the job for a poll (finished, cancelled, deleted, resubmitted
    under a new jobId): its lease is kept no more. A superseded job never is: it is cancelled whenever it
    shows up again."""
    return job.lease.superseded is None and now - job.seen >= policy.poll_seconds


def renew_due(
    job: SessionJob, overview: Overview, jobmanager_runs: bool, now: float, policy: FencingPolicy
) -> bool:
    """``decide``'s answer for the job alone: never while it runs with its lease not held."""
    return decide(job.lease, now, runs(job, overview, jobmanager_runs), policy).renew


def lapsed_alone(job: SessionJob, others: Iterable[SessionJob]) -> bool:
    """Its renewals fail, and a renewal of another job that started after the first of those failures
    went through: the storage answers this keeper, so the fault is this job's. (In a storage cut every
    renewal that starts after the cut fails: no other job's goes through after this one's first failure.)"""
    if job.failed is None:
        return False
    return any(o.lease.renewed > job.failed for o in others if o.name != job.name)


def guard(
    jobs: Iterable[SessionJob],
    overview: Overview,
    jobmanager_runs: bool,
    now: float,
    policy: FencingPolicy,
    silent: float = 0.0,
) -> Guard:
    """The jobs that run while their lease is not held: each cancelled alone where it is superseded or
    lapsed alone; else the JobManager killed (a lapse of the keeper's as a whole, or a hung JobManager,
    to which no cancel can be sent).

    Where the REST endpoint does not answer, a lapse of the keeper's as a whole kills at once (as a job's
    keeper kills a JobManager that starts while it holds no lease). A superseded job, or one lapsed
    alone, waits for the answer and its cancel: a JobManager that starts answers before it runs a job
    (Flink starts its REST endpoint before its dispatcher runner, and answers 503 until the dispatcher
    leads), so killing it would only start it again. ``silent``: for how long a JobManager that answered
    before has not answered; after a poll it is hung, and killed."""
    every = list(jobs)
    at_risk = []
    for job in every:
        held, reason = holds(job.lease, now, policy)
        if not held and runs(job, overview, jobmanager_runs):
            at_risk.append((job, reason))
    if not at_risk:
        return Guard()
    whole = [(j, r) for j, r in at_risk if j.lease.superseded is None and not lapsed_alone(j, every)]
    if overview is None:
        if not whole and silent < policy.poll_seconds:
            return Guard()
        job, reason = (whole or at_risk)[0]
        return Guard(kill=True, reason=f"{job.name}: {reason}; Flink's REST endpoint does not answer")
    if whole:
        job, reason = whole[0]
        return Guard(kill=True, reason=f"{job.name}: {reason}; no lease of this keeper renewed since")
    return Guard(
        cancel=tuple(job.job_id for job, _ in at_risk),
        reason="; ".join(f"{job.name}: {reason}" for job, reason in at_risk),
    )


def ready(
    listed_once: bool, jobs: Iterable[SessionJob], now: float, policy: FencingPolicy
) -> tuple[bool, str]:
    """The startup probe: a listing went through and every adopted lease not superseded is held, so the
    JobManager starts only once the jobs it recovers are covered."""
    if not listed_once:
        return False, "the session jobs' records have not been listed yet"
    for job in jobs:
        if job.lease.superseded is None:
            held, reason = holds(job.lease, now, policy)
            if not held:
                return False, f"{job.name}: {reason}"
    return True, ""
