"""What the agent does with one copy: pure functions that return typed values.

``decide`` reads a copy (as ``copies.read_copy`` sees it: its state, epoch, what its operator reports),
the workload's ownership records (or why they could not be read), the times that matter and the fencing
policy, and returns a ``Plan``: chains of effects and the ``Action`` to log (the heartbeat loop's
answers, and what a copy the lease keeper guards leaves to it, are ``renewal``'s); ``release_start``
what a release starts from once the newest checkpoint was looked for (``newest_known``: only a lookup
that ran to its end may keep the admitted path; one that could not check holds), and ``resume_query`` /
``resume_start`` where a stepped-down copy resumes (or why it waits). The agent only executes them
(``agent.py``, ``renewer.py``); every choice is made here, where the property tests reach it.

The rules, on top of ``protocol``'s:

- A copy deleted or suspended by someone else keeps the heartbeat it had until its operator reports
  the job stopped or the object is gone (a deletion's cleanup takes as long as a stop): only then is it
  dropped.
- A stale copy (a newer fence elsewhere) is asked to stop, and keeps its heartbeat fresh until its
  operator reports it stopped: only then is the ack written and the heartbeat dropped. An ack means
  stopped, never "asked to stop".
- A running copy's heartbeat is renewed every poll by a loop of its own that nothing else delays, and
  only while a listing of the last two polls found no newer fence (the cluster still looks before it
  says it runs). A copy whose heartbeat has not been renewed for ``renewDeadlineSeconds`` (the agent's
  own monotonic clock, from the start of its last renewal that succeeded) steps down at once, whatever
  the storage does; a copy this agent has not renewed yet counts as renewed ``renewDeadline - poll``
  before it was first seen (it gets one poll: it cannot tell how long its cluster went without a
  renewal). It resumes from its own newest checkpoint once the storage answers and nobody fenced the
  workload meanwhile; if somebody did, it stays stopped and acks.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum

from webhook.common.checkpoints import checkpoint_number
from webhook.common.flink import BLUE_GREEN
from webhook.fencing.copies import Copy, CopyState, judged_epoch
from webhook.fencing.directories import checkpoint_dir_of, savepoint_dir_of
from webhook.fencing.holdtexts import hold_subject
from webhook.fencing.patches import stop_mode
from webhook.fencing.protocol import (
    Fence,
    HoldOutcome,
    HoldVerdict,
    Ownership,
    ReleaseCause,
    judge_copy,
    judge_hold,
    superseding,
)
from webhook.fencing.renewal import retry_seconds
from webhook.restore.decide import restoring_flink
from webhook.restore.outcome import RestoreDecision, RestoreOutcome
from webhook.restore.policy import FencingPolicy, FencingStorageError, Prefer, RestorePolicy
from webhook.restore.restoring import cannot_load_any, judge_rewind
from webhook.restore.snapshots import Candidate, SnapshotQuery, Snapshots, checked_as, choose, newest


class Action(StrEnum):
    """What happened to a copy in one poll: the log's verb, the metrics', and what tests read."""

    HEARTBEAT = "heartbeat"
    ENDING = "ending"  # deleted or suspended by someone else: heartbeats until its operator reports the stop
    STOPPING = "stopping"
    WAITING_FOR_OPERATOR = "waiting-for-operator"
    ACKED = "acked"
    FENCED = "fenced"
    STEPPED_DOWN = "stepped-down"
    RESUMED = "resumed"
    HELD = "held"
    RELEASED = "released"
    SUPERSEDED = "superseded"
    SKIPPED = "skipped"
    ERROR = "error"  # the records were unreadable, or an effect failed (``Trouble`` says which side)
    PENDING = "pending"  # the storage had not answered when the poll ended


# A poll leaves these copies to the next one; a recheck between polls looks at them again.
WAITING = frozenset({Action.STOPPING, Action.HELD, Action.WAITING_FOR_OPERATOR, Action.ERROR, Action.PENDING})


class Trouble(StrEnum):
    """Why an action is ERROR or PENDING: the cause the Event and the metrics are chosen from."""

    NONE = ""
    STORAGE = "storage"  # the ownership records (or the checkpoints) could not be read or written
    API = "api"  # the member cluster's API server refused or did not answer a patch


# --- effects ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Beat:
    """Renew this cluster's heartbeat now, before the next effect of its chain (a release, a resume)."""


@dataclass(frozen=True)
class KeepRenewing:
    """Hand the copy to the heartbeat loop: its heartbeat is renewed every poll until a later poll says
    otherwise. ``confirmed``: this poll's listing found no newer fence (a running copy is renewed only
    while a recent listing did); ``may_step_down``: a running copy (a stale one asked to stop is already
    suspended and keeps beating until its operator reports the stop)."""

    confirmed: bool
    may_step_down: bool = True


@dataclass(frozen=True)
class LookForKeeper:
    """The copy's spec carries the lease keeper: the heartbeat loop reads this cluster's heartbeat record
    before each renewal, and once it shows the keeper writing it for ``epoch`` writes no more and leaves
    the copy to the keeper (``renewal.keeper_renews``)."""

    epoch: int


@dataclass(frozen=True)
class WriteFence:
    epoch: int  # the fence of this copy's own restore, missing (storage was down at admission)


@dataclass(frozen=True)
class Stop:
    fence: Fence  # suspend the copy without a savepoint, labelled fenced by this fence


@dataclass(frozen=True)
class MarkStopping:
    epoch: int  # record that the operator was asked to stop the copy for this fence


@dataclass(frozen=True)
class Acknowledge:
    epoch: int  # the operator reported the copy stopped: write the ack, drop the heartbeat


@dataclass(frozen=True)
class Resume:
    """Start a stepped-down copy again from its own newest restorable checkpoint."""


@dataclass(frozen=True)
class RewriteHold:
    verdict: HoldVerdict  # rewrite the hold annotation from this verdict


@dataclass(frozen=True)
class StorageHold:
    """Hold with "waiting for the ownership records to be readable" (``checkpoint``: "waiting until the
    newest checkpoint can be checked", a release that could not check it)."""

    problem: str
    checkpoint: bool = False


@dataclass(frozen=True)
class Release:
    cause: ReleaseCause  # start a held copy from the newest restorable state, resolved now


@dataclass(frozen=True)
class Supersede:
    fence: Fence  # a held copy a newer restore elsewhere owns: keep it suspended for good


Effect = (
    Beat
    | KeepRenewing
    | LookForKeeper
    | WriteFence
    | Stop
    | MarkStopping
    | Acknowledge
    | Resume
    | RewriteHold
    | StorageHold
    | Release
    | Supersede
)

# Effects that touch only the storage; the others patch the object (a release and a resume read the
# storage first): a failed effect's trouble is its side.
STORAGE_EFFECTS = (Beat, KeepRenewing, LookForKeeper, WriteFence, MarkStopping, Acknowledge)


def trouble_of(effect: Effect) -> Trouble:
    return Trouble.STORAGE if isinstance(effect, STORAGE_EFFECTS) else Trouble.API


Chain = tuple[Effect, ...]


@dataclass(frozen=True)
class Plan:
    """What to do with one copy this poll: chains of effects. The chains are independent (a stale copy
    is stopped even when its heartbeat cannot be written, and renewed even when the stop fails); inside
    a chain each effect runs only if the one before it succeeded (a resume only after a renewal)."""

    action: Action
    detail: str = ""
    chains: tuple[Chain, ...] = ()
    trouble: Trouble = Trouble.NONE


def plan(action: Action, detail: str = "", *chains: Chain, trouble: Trouble = Trouble.NONE) -> Plan:
    return Plan(action, detail, tuple(chain for chain in chains if chain), trouble)


# --- inputs ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Unreadable:
    """The records could not be read this poll (or a read of the previous poll is still unanswered)."""

    problem: str


@dataclass(frozen=True)
class Times:
    mono: float  # the agent's monotonic clock now
    renewed: float  # monotonic start of the copy's last successful renewal (or its first-sight stand-in)
    storage_now: datetime | None = None  # the storage's time this poll (held copies need it)
    hold_written: float | None = None  # monotonic time the agent last wrote this copy's hold text
    # monotonic start of this copy's last release that waited (its newest checkpoint not checked)
    release_waited: float | None = None
    keeper: bool = False  # the keeper in the copy's pod was seen renewing its heartbeat (``renewal``)


def decide(me: str, copy: Copy, records: Ownership | Unreadable, times: Times, policy: FencingPolicy) -> Plan:
    if isinstance(records, Ownership):
        # Judged under the fence this cluster's restore wrote, not the annotation anyone may edit.
        copy = replace(copy, epoch=judged_epoch(me, copy.epoch, records))
    if copy.state is CopyState.RUNNING:
        return _running(me, copy, records, times)
    if copy.state in (CopyState.STOPPING, CopyState.FENCED):
        return _fenced(me, copy, records)
    if copy.state is CopyState.STEPPED_DOWN:
        return _stepped_down(me, copy, records)
    if copy.state is CopyState.HELD:
        return _held(me, copy, records, times, policy)
    if copy.state is CopyState.ENDING:
        return _ending(copy)
    return plan(Action.SKIPPED)


def _ending(copy: Copy) -> Plan:
    """Deleted or suspended by someone else: its job runs until the operator reports the stop (or the
    object is gone), so the heartbeat it had stays fresh until then; it never steps down (it is being
    stopped already) and a copy whose heartbeat was not renewed here is not given one."""
    why = "being deleted" if copy.resource.deleting else "suspended by someone else"
    detail = f"{why}; heartbeat kept until its operator reports the job stopped ({copy.operator.detail})"
    return plan(Action.ENDING, detail, (KeepRenewing(True, False),))


def _running(me: str, copy: Copy, records: Ownership | Unreadable, times: Times) -> Plan:
    if isinstance(records, Unreadable):
        silent = times.mono - times.renewed
        detail = f"storage: {records.problem}; heartbeat last renewed {silent:.0f}s ago"
        return plan(Action.ERROR, detail, (KeepRenewing(False),), trouble=Trouble.STORAGE)
    verdict = judge_copy(me, copy.epoch, records)
    if verdict.stop and verdict.fence is not None:
        fence = verdict.fence
        # Stop it, and keep beating so the new copy waits until the operator reports this one stopped.
        detail = f"fence of {fence.owner} at epoch {fence.epoch}"
        return plan(
            Action.STOPPING, detail, (Stop(fence), MarkStopping(fence.epoch)), (KeepRenewing(True, False),)
        )
    repair = bool(copy.epoch and copy.restored_here and records.fence(me, copy.epoch) is None)
    mend: Chain = (WriteFence(copy.epoch),) if repair else ()
    if times.keeper:  # renewed by its keeper: the agent neither renews nor steps it down (``renewal``)
        return plan(Action.HEARTBEAT, "renewed by the keeper in its pod", mend, (KeepRenewing(True),))
    look: Chain = (LookForKeeper(copy.epoch),) if copy.guarded else ()
    return plan(Action.HEARTBEAT, "", mend, (KeepRenewing(True),), look)


def _fenced(me: str, copy: Copy, records: Ownership | Unreadable) -> Plan:
    epoch = copy.fenced_epoch
    if copy.resource.state == "running":  # re-applied by someone: stop it again, under the newest fence
        fence = None if isinstance(records, Unreadable) else records.newest_fence()
        fence = fence or Fence("another cluster", epoch, datetime.min)
        return plan(
            Action.STOPPING, "fenced copy was running again", (Stop(fence),), (KeepRenewing(True, False),)
        )
    if isinstance(records, Unreadable):
        renew = (KeepRenewing(False, False),) if copy.state is CopyState.STOPPING else ()
        return plan(Action.ERROR, f"storage: {records.problem}", renew, trouble=Trouble.STORAGE)
    if copy.state is CopyState.STOPPING:
        detail = f"waiting for the operator to stop the job ({copy.operator.detail})"
        marked = records.stopping_since(me, epoch) is not None
        return plan(
            Action.WAITING_FOR_OPERATOR,
            detail,
            (KeepRenewing(True, False),),
            () if marked else (MarkStopping(epoch),),
        )
    beating = records.heartbeat(me) is not None
    if beating or records.acked(me, epoch) is None:
        detail = f"operator reports the job stopped ({copy.operator.detail})"
        return plan(Action.ACKED, detail, (Acknowledge(epoch),))
    return plan(Action.FENCED)


def _stepped_down(me: str, copy: Copy, records: Ownership | Unreadable) -> Plan:
    if isinstance(records, Unreadable):
        return plan(
            Action.STEPPED_DOWN, f"storage still unusable: {records.problem}", trouble=Trouble.STORAGE
        )
    newer = superseding(me, copy.epoch, records)
    if newer is not None:  # somebody took over while we could not renew: stay stopped, ack when stopped
        return plan(Action.STOPPING, f"taken over by {newer.owner} at epoch {newer.epoch}", (Stop(newer),))
    # Renew first: the resume runs only if the storage takes a heartbeat again.
    return plan(Action.RESUMED, "storage answers again and nobody took over", (Beat(), Resume()))


def _held(me: str, copy: Copy, records: Ownership | Unreadable, times: Times, policy: FencingPolicy) -> Plan:
    if isinstance(records, Unreadable) or times.storage_now is None:
        problem = records.problem if isinstance(records, Unreadable) else "the storage's time is unknown"
        if policy.on_storage_error is FencingStorageError.PROCEED:
            cause = ReleaseCause.STORAGE_ERROR
            return plan(Action.RELEASED, cause.value, (Release(cause),))
        return plan(Action.HELD, problem, (StorageHold(problem),), trouble=Trouble.STORAGE)
    if copy.epoch and records.fence(me, copy.epoch) is None:
        return plan(Action.HELD, "fence of this restore written late", (WriteFence(copy.epoch),))
    verdict = judge_hold(
        me, copy.epoch, records, times.storage_now, policy.lease_seconds, copy.manual_release
    )
    if verdict.outcome is HoldOutcome.SUPERSEDED and verdict.superseded_by is not None:
        newer = verdict.superseded_by
        detail = f"restore on {newer.owner} at epoch {newer.epoch}"
        return plan(Action.SUPERSEDED, detail, (Supersede(newer),))
    if verdict.outcome is HoldOutcome.HOLD:
        subject = hold_subject(verdict.waiting, copy.epoch)
        stale = times.hold_written is None or times.mono - times.hold_written >= policy.lease_seconds
        rewrite = not copy.hold.startswith(subject + ";") or stale
        return plan(Action.HELD, subject, (RewriteHold(verdict),) if rewrite else ())
    cause = verdict.cause or ReleaseCause.NO_HEARTBEAT
    waited = times.release_waited
    if waited is not None and times.mono - waited < policy.poll_seconds - retry_seconds(policy):
        # A lookup that could not check costs up to verifyBudget requests: once a poll, not every recheck.
        return plan(Action.HELD, "release waits until the newest checkpoint can be checked (next poll)")
    if copy.workload.kind == BLUE_GREEN and not copy.children:
        return plan(Action.HELD, "released once the operator has created its FlinkDeployment")
    # Heartbeat before the job may start: a failover that follows must wait for this copy too.
    return plan(Action.RELEASED, cause.value, (Beat(), Release(cause)))


# --- what a release and a resume start from -------------------------------------------------------


@dataclass(frozen=True)
class Unresolved:
    """The newest restorable checkpoint could not be checked (the storage failed, the lookup ran out of
    its deadline or its budget, the object no longer says where to look): whatever the stale copy
    completed meanwhile is unknown."""

    problem: str


@dataclass(frozen=True)
class StartFrom:
    path: str  # "" keeps the path the job was admitted with
    rewound: str = ""  # how much newer state it leaves behind (policy onUnloadable: older), for its Event


@dataclass(frozen=True)
class ResumeHeld:
    """A stepped-down copy stays stopped rather than rewound: its newest snapshot is one its Flink
    cannot load (the version, the claim mode, 1.x state into Flink 2), and the policy holds such a job
    (``onUnloadable: hold``, ``restoring.judge_rewind``, the rule a restore follows)."""

    why: str


def newest_known(decision: RestoreDecision, found: Snapshots | None, admitted: str) -> str | Unresolved:
    """What a release's lookup (``decide_restore`` on the held object, ``found``: what the storage
    answered, None when it was not asked) says the job may start from: the newest restorable path, ""
    to keep ``admitted`` (the path the webhook chose) only when the lookup ran to its end and found
    nothing restorable, else ``Unresolved``: the stale copy may have completed a newer checkpoint."""
    if decision.storage_error or decision.unloadable:  # unknown, or newest state this Flink cannot load
        return Unresolved(decision.reason)
    if found is not None and found.unchecked:
        return Unresolved(f"{found.unchecked}: the newest checkpoint was not checked")
    if decision.outcome is RestoreOutcome.RESTORED:
        older = _older_checkpoint(decision.path, admitted)
        return Unresolved(older) if older else decision.path
    if found is None and admitted:
        return Unresolved(f"nothing was looked up ({decision.reason})")
    return ""


def _older_checkpoint(path: str, admitted: str) -> str:
    """Why ``path`` cannot be newest: a checkpoint of the same job directory with a lower id than the
    one admitted (that one gone or unreadable now, or a listing that missed it); "" otherwise."""
    head, _, name = path.rstrip("/").rpartition("/")
    before_head, _, before = admitted.rstrip("/").rpartition("/")
    found, was = checkpoint_number(name), checkpoint_number(before)
    if head != before_head or found is None or was is None or found >= was:
        return ""
    return (
        f"the newest restorable checkpoint found ({name}) is older than the one admitted ({before}), "
        "which is gone or no longer restorable"
    )


def release_start(cause: ReleaseCause, resolved: str | Unresolved) -> StartFrom | StorageHold:
    """A release starts from the newest state resolved now; when that cannot be checked the job stays
    held, says why and is tried again at the next poll (the stale copy may have checkpointed past the
    admitted path), unless the release is the policy's ``onStorageError: proceed`` itself."""
    if isinstance(resolved, Unresolved):
        if cause is ReleaseCause.STORAGE_ERROR:
            return StartFrom("")
        return StorageHold(resolved.problem, checkpoint=True)
    return StartFrom(resolved)


def resume_start(
    copy: Copy, query: SnapshotQuery | None, found: Snapshots | None, policy: RestorePolicy
) -> StartFrom | Unresolved | ResumeHeld:
    """Where a stepped-down copy resumes: its own newest restorable snapshot; "" (its HA metadata or
    last savepoint) only when it keeps none to look for. It stays stopped while its newest checkpoint
    cannot be checked, or cannot be found (no jobId in its status) and no HA data resumes it; and, as a
    restore does, rather than start from older state than a snapshot its Flink cannot load (no silent
    rewind: held, or with ``onUnloadable: older`` resumed, its Event saying what it left behind)."""
    if query is None:
        if copy.job_id or copy.folder is None or stop_mode(copy.resource) == "last-state":
            return StartFrom("")
        return Unresolved("its status names no jobId: its own checkpoints cannot be found")
    if found is None or found.unchecked:
        why = found.unchecked if found is not None else "not looked up"
        return Unresolved(f"{why}: the newest checkpoint was not checked")
    chosen = resume_choice(found, policy.prefer)
    if chosen is None:
        blocked = cannot_load_any(found)
        return ResumeHeld(f"its Flink cannot load any snapshot left: {blocked}") if blocked else StartFrom("")
    rewind = judge_rewind(found, chosen, False, query.job_dir, copy.resource, policy)
    if rewind.held:
        return ResumeHeld(rewind.held)
    return StartFrom(str(chosen.path), rewind.rewound)


def resume_query(copy: Copy, policy: RestorePolicy) -> SnapshotQuery | None:
    """Where a stepped-down copy's own job keeps its state: its checkpoints where the restore path looks
    for them (``create-subdir`` honoured), its savepoints; None when nothing can be looked for."""
    root = checkpoint_dir_of(copy.resource, policy)
    if root is None or not copy.job_id:
        return None
    job_dir = copy.resource.job_checkpoints(root, copy.job_id)
    query = SnapshotQuery(
        job_dir,
        None,
        root,
        savepoint_dir_of(copy.resource, policy),
        copy.job_id,
        target=restoring_flink(
            copy.resource, copy.session, policy
        ),  # what its Flink cannot load is passed over
    )
    return checked_as(query, policy)  # checked as a restore checks it (whole _metadata, named files)


def resume_skipped(found: Snapshots) -> str:
    """What the resume passed over and why ("" when nothing), for its Event and log line."""
    return "".join(f"; skipped {why}" for why in (*found.rejected, found.unchecked) if why)


def resume_choice(found: Snapshots, prefer: Prefer) -> Candidate | None:
    """Its newest complete checkpoint, or its own newer savepoint, ordered as a restore orders them
    (None when none: the operator's own HA data or last savepoint)."""
    return choose(found.checkpoint, newest(found.listed), prefer)
