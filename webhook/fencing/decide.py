"""What the agent does with one copy: pure functions that return typed values.

``decide`` reads a copy (as ``copies.read_copy`` sees it: its state, epoch, what its operator reports),
the workload's ownership records (or why they could not be read), the times that matter and the fencing
policy, and returns its ``Effects`` (``effects.py``): chains of effects and the ``Action`` to log (the
heartbeat loop's answers, and what a copy the lease keeper guards leaves to it, are ``renewal``'s); what
a release and a resume start from is ``starts``'. The agent only executes them (``agent.py``,
``renewer.py``); every choice is made here, where the property tests reach it.

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

from webhook.common.flink import BLUE_GREEN
from webhook.fencing.copies import Copy, CopyState, judged_epoch
from webhook.fencing.effects import (
    Acknowledge,
    Action,
    Chain,
    Effects,
    MarkStopping,
    Release,
    Resume,
    RewriteHold,
    Stop,
    StorageHold,
    Supersede,
    Trouble,
    WriteFence,
    effects,
)
from webhook.fencing.holdtexts import hold_subject
from webhook.fencing.protocol import (
    Fence,
    HoldOutcome,
    Ownership,
    ReleaseCause,
    judge_copy,
    judge_hold,
    superseding,
)
from webhook.fencing.renewal import Beat, KeepRenewing, LookForKeeper, retry_seconds
from webhook.policy.restore import FencingPolicy, FencingStorageError

# --- inputs ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Unreadable:
    """The records could not be read this poll (or a read of the previous poll is still unanswered)."""

    problem: str


@dataclass(frozen=True, kw_only=True)
class Times:
    mono: float  # the agent's monotonic clock now
    renewed: float  # monotonic start of the copy's last successful renewal (or its first-sight stand-in)
    storage_now: datetime | None = None  # the storage's time this poll (held copies need it)
    hold_written: float | None = None  # monotonic time the agent last wrote this copy's hold text
    # monotonic start of this copy's last release that waited (its newest checkpoint not checked)
    release_waited: float | None = None
    keeper: bool = False  # the keeper in the copy's pod was seen renewing its heartbeat (``renewal``)


def decide(
    me: str, copy: Copy, records: Ownership | Unreadable, times: Times, policy: FencingPolicy
) -> Effects:
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
    return effects(Action.SKIPPED)


def _ending(copy: Copy) -> Effects:
    """Deleted or suspended by someone else: its job runs until the operator reports the stop (or the
    object is gone), so the heartbeat it had stays fresh until then; it never steps down (it is being
    stopped already) and a copy whose heartbeat was not renewed here is not given one."""
    why = "being deleted" if copy.resource.deleting else "suspended by someone else"
    detail = f"{why}; heartbeat kept until its operator reports the job stopped ({copy.operator.detail})"
    return effects(Action.ENDING, detail, (KeepRenewing(True, False),))


def _running(me: str, copy: Copy, records: Ownership | Unreadable, times: Times) -> Effects:
    if isinstance(records, Unreadable):
        silent = times.mono - times.renewed
        detail = f"storage: {records.problem}; heartbeat last renewed {silent:.0f}s ago"
        return effects(Action.ERROR, detail, (KeepRenewing(False),), trouble=Trouble.STORAGE)
    judgement = judge_copy(me, copy.epoch, records)
    if judgement.stop and judgement.fence is not None:
        fence = judgement.fence
        # Stop it, and keep beating so the new copy waits until the operator reports this one stopped.
        detail = f"fence of {fence.owner} at epoch {fence.epoch}"
        return effects(
            Action.STOPPING, detail, (Stop(fence), MarkStopping(fence.epoch)), (KeepRenewing(True, False),)
        )
    repair = bool(copy.epoch and copy.restored_here and records.fence(me, copy.epoch) is None)
    mend: Chain = (WriteFence(copy.epoch),) if repair else ()
    if times.keeper:  # renewed by its keeper: the agent neither renews nor steps it down (``renewal``)
        return effects(Action.HEARTBEAT, "renewed by the keeper in its pod", mend, (KeepRenewing(True),))
    look: Chain = (LookForKeeper(copy.epoch),) if copy.guarded else ()
    return effects(Action.HEARTBEAT, "", mend, (KeepRenewing(True),), look)


def _fenced(me: str, copy: Copy, records: Ownership | Unreadable) -> Effects:
    epoch = copy.fenced_epoch
    if copy.resource.state == "running":  # re-applied by someone: stop it again, under the newest fence
        fence = None if isinstance(records, Unreadable) else records.newest_fence()
        fence = fence or Fence("another cluster", epoch, datetime.min)
        return effects(
            Action.STOPPING, "fenced copy was running again", (Stop(fence),), (KeepRenewing(True, False),)
        )
    if isinstance(records, Unreadable):
        renew = (KeepRenewing(False, False),) if copy.state is CopyState.STOPPING else ()
        return effects(Action.ERROR, f"storage: {records.problem}", renew, trouble=Trouble.STORAGE)
    if copy.state is CopyState.STOPPING:
        detail = f"waiting for the operator to stop the job ({copy.operator.detail})"
        marked = records.stopping_since(me, epoch) is not None
        return effects(
            Action.WAITING_FOR_OPERATOR,
            detail,
            (KeepRenewing(True, False),),
            () if marked else (MarkStopping(epoch),),
        )
    beating = records.heartbeat(me) is not None
    if beating or records.acked(me, epoch) is None:
        detail = f"operator reports the job stopped ({copy.operator.detail})"
        return effects(Action.ACKED, detail, (Acknowledge(epoch),))
    return effects(Action.FENCED)


def _stepped_down(me: str, copy: Copy, records: Ownership | Unreadable) -> Effects:
    if isinstance(records, Unreadable):
        return effects(
            Action.STEPPED_DOWN, f"storage still unusable: {records.problem}", trouble=Trouble.STORAGE
        )
    newer = superseding(me, copy.epoch, records)
    if newer is not None:  # somebody took over while we could not renew: stay stopped, ack when stopped
        return effects(Action.STOPPING, f"taken over by {newer.owner} at epoch {newer.epoch}", (Stop(newer),))
    # Renew first: the resume runs only if the storage takes a heartbeat again.
    return effects(Action.RESUMED, "storage answers again and nobody took over", (Beat(), Resume()))


def _held(
    me: str, copy: Copy, records: Ownership | Unreadable, times: Times, policy: FencingPolicy
) -> Effects:
    if isinstance(records, Unreadable) or times.storage_now is None:
        problem = records.problem if isinstance(records, Unreadable) else "the storage's time is unknown"
        if policy.on_storage_error is FencingStorageError.PROCEED:
            cause = ReleaseCause.STORAGE_ERROR
            return effects(Action.RELEASED, cause.value, (Release(cause),))
        return effects(Action.HELD, problem, (StorageHold(problem),), trouble=Trouble.STORAGE)
    if copy.epoch and records.fence(me, copy.epoch) is None:
        return effects(Action.HELD, "fence of this restore written late", (WriteFence(copy.epoch),))
    judgement = judge_hold(
        me, copy.epoch, records, times.storage_now, policy.lease_seconds, copy.manual_release
    )
    if judgement.outcome is HoldOutcome.SUPERSEDED and judgement.superseded_by is not None:
        newer = judgement.superseded_by
        detail = f"restore on {newer.owner} at epoch {newer.epoch}"
        return effects(Action.SUPERSEDED, detail, (Supersede(newer),))
    if judgement.outcome is HoldOutcome.HOLD:
        subject = hold_subject(judgement.waiting, copy.epoch)
        stale = times.hold_written is None or times.mono - times.hold_written >= policy.lease_seconds
        rewrite = not copy.hold.startswith(subject + ";") or stale
        return effects(Action.HELD, subject, (RewriteHold(judgement),) if rewrite else ())
    cause = judgement.cause or ReleaseCause.NO_HEARTBEAT
    waited = times.release_waited
    if waited is not None and times.mono - waited < policy.poll_seconds - retry_seconds(policy):
        # A lookup that could not check costs up to verifyBudget requests: once a poll, not every recheck.
        return effects(Action.HELD, "release waits until the newest checkpoint can be checked (next poll)")
    if copy.workload.kind == BLUE_GREEN and not copy.children:
        return effects(Action.HELD, "released once the operator has created its FlinkDeployment")
    # Heartbeat before the job may start: a failover that follows must wait for this copy too.
    return effects(Action.RELEASED, cause.value, (Beat(), Release(cause)))
