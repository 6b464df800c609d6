"""What the agent does with one copy in one poll: a pure function that returns typed effects.

``decide`` reads a copy (as ``copies.read_copy`` sees it: its state, epoch, what its operator reports),
the workload's ownership records (or why they could not be read), the times that matter (the agent's
monotonic clock, the start of the copy's last successful renewal, the storage's own time) and the
fencing policy. It returns a ``Plan``: what to do, in order, and the line to log. The agent only
executes plans (``agent.py``); every choice is made here, where the property tests reach it.

The rules, on top of ``protocol``'s:

- A stale copy (a newer fence elsewhere) is asked to stop, and keeps its heartbeat fresh until its
  operator reports it stopped: only then is the ack written and the heartbeat dropped. An ack means
  stopped, never "asked to stop".
- A running copy whose heartbeat has not been renewed for ``renewDeadlineSeconds`` (the agent's own
  monotonic clock, from the start of its last renewal that succeeded) steps down, whatever the storage
  does: deadline + poll + the operator's stop margin fit inside the lease, so it has stopped before any
  other cluster may take over. It resumes from its own newest checkpoint once the storage answers and
  nobody fenced the workload meanwhile; if somebody did, it stays stopped and acks.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from webhook.common.flink import BLUE_GREEN
from webhook.member.fencing.copies import Copy, CopyState, hold_subject
from webhook.member.fencing.protocol import (
    Fence,
    HoldOutcome,
    HoldVerdict,
    Ownership,
    ReleaseCause,
    judge_copy,
    judge_hold,
    superseding,
)
from webhook.member.policy import FencingPolicy, FencingStorageError, RenewFailure

# --- effects ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Beat:
    """Renew this cluster's heartbeat (its success restarts the renew deadline)."""


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
class StepDown:
    reason: str  # suspend our own copy: it could not renew


@dataclass(frozen=True)
class Resume:
    """Start a stepped-down copy again from its own newest restorable checkpoint."""


@dataclass(frozen=True)
class RewriteHold:
    verdict: HoldVerdict  # rewrite the hold annotation from this verdict


@dataclass(frozen=True)
class StorageHold:
    problem: str  # hold with "waiting for the ownership records to be readable"


@dataclass(frozen=True)
class Release:
    cause: ReleaseCause  # start a held copy from the newest restorable state, resolved now


@dataclass(frozen=True)
class Supersede:
    fence: Fence  # a held copy a newer restore elsewhere owns: keep it suspended for good


Effect = (
    Beat
    | WriteFence
    | Stop
    | MarkStopping
    | Acknowledge
    | StepDown
    | Resume
    | RewriteHold
    | StorageHold
    | Release
    | Supersede
)


Chain = tuple[Effect, ...]


@dataclass(frozen=True)
class Plan:
    """What to do with one copy this poll: chains of effects. The chains are independent (a stale copy
    is stopped even when its heartbeat cannot be written, and renewed even when the stop fails); inside
    a chain each effect runs only if the one before it succeeded (a resume only after a renewal)."""

    action: str  # the log's verb and what tests read: heartbeat, stopping, acked, stepped-down, ...
    detail: str = ""
    chains: tuple[Chain, ...] = ()

    @property
    def effects(self) -> tuple[Effect, ...]:
        return tuple(effect for chain in self.chains for effect in chain)


def plan(action: str, detail: str = "", *chains: Chain) -> Plan:
    return Plan(action, detail, tuple(chain for chain in chains if chain))


# --- inputs ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Unreadable:
    """The records could not be read this poll (or a read of the previous poll is still unanswered)."""

    problem: str


@dataclass(frozen=True)
class Times:
    mono: float  # the agent's monotonic clock now
    renewed: float  # monotonic start of the copy's last successful renewal (or when first seen)
    storage_now: datetime | None = None  # the storage's time this poll (held copies need it)
    hold_written: float | None = None  # monotonic time the agent last wrote this copy's hold text


def decide(me: str, copy: Copy, records: Ownership | Unreadable, times: Times, policy: FencingPolicy) -> Plan:
    if copy.state is CopyState.RUNNING:
        return _running(me, copy, records, times, policy)
    if copy.state in (CopyState.STOPPING, CopyState.FENCED):
        return _fenced(me, copy, records)
    if copy.state is CopyState.STEPPED_DOWN:
        return _stepped_down(me, copy, records)
    if copy.state is CopyState.HELD:
        return _held(me, copy, records, times, policy)
    return plan("skipped")


def renewal_overdue(times: Times, policy: FencingPolicy) -> bool:
    return (
        policy.on_renew_failure is RenewFailure.STOP
        and times.mono - times.renewed >= policy.renew_deadline_seconds
    )


def _running(
    me: str, copy: Copy, records: Ownership | Unreadable, times: Times, policy: FencingPolicy
) -> Plan:
    silent = times.mono - times.renewed
    if isinstance(records, Unreadable):
        if renewal_overdue(times, policy):
            reason = f"heartbeat not renewed for {silent:.0f}s (storage: {records.problem})"
            return plan("stepped-down", reason, (StepDown(reason),))
        return plan("error", f"storage: {records.problem}; heartbeat not renewed for {silent:.0f}s")
    verdict = judge_copy(me, copy.epoch, records)
    if verdict.stop and verdict.fence is not None:
        fence = verdict.fence
        # Stop it, and keep beating so the new copy waits until the operator reports this one stopped.
        detail = f"fence of {fence.owner} at epoch {fence.epoch}"
        return plan("stopping", detail, (Stop(fence), MarkStopping(fence.epoch)), (Beat(),))
    if renewal_overdue(times, policy):
        reason = f"heartbeat not renewed for {silent:.0f}s (the records are readable, writes fail)"
        return plan("stepped-down", reason, (StepDown(reason),))
    repair = bool(copy.epoch and copy.restored_here and records.fence(me, copy.epoch) is None)
    return plan("heartbeat", "", (WriteFence(copy.epoch),) if repair else (), (Beat(),))


def _fenced(me: str, copy: Copy, records: Ownership | Unreadable) -> Plan:
    epoch = copy.fenced_epoch
    if copy.resource.state == "running":  # re-applied by someone: stop it again, under the newest fence
        fence = None if isinstance(records, Unreadable) else records.newest_fence()
        fence = fence or Fence("another cluster", epoch, datetime.min)
        return plan("stopping", "fenced copy was running again", (Stop(fence),), (Beat(),))
    if isinstance(records, Unreadable):
        return plan("error", f"storage: {records.problem}")
    if copy.state is CopyState.STOPPING:
        detail = f"waiting for the operator to stop the job ({copy.operator.detail})"
        marked = records.stopping_since(me, epoch) is not None
        return plan("waiting-for-operator", detail, (Beat(),), () if marked else (MarkStopping(epoch),))
    beating = records.heartbeat(me) is not None
    if beating or records.acked(me, epoch) is None:
        detail = f"operator reports the job stopped ({copy.operator.detail})"
        return plan("acked", detail, (Acknowledge(epoch),))
    return plan("fenced")


def _stepped_down(me: str, copy: Copy, records: Ownership | Unreadable) -> Plan:
    if isinstance(records, Unreadable):
        return plan("stepped-down", f"storage still unusable: {records.problem}")
    newer = superseding(me, copy.epoch, records)
    if newer is not None:  # somebody took over while we could not renew: stay stopped, ack when stopped
        return plan("stopping", f"taken over by {newer.owner} at epoch {newer.epoch}", (Stop(newer),))
    # Renew first: the resume runs only if the storage takes a heartbeat again.
    return plan("resumed", "storage answers again and nobody took over", (Beat(), Resume()))


def _held(me: str, copy: Copy, records: Ownership | Unreadable, times: Times, policy: FencingPolicy) -> Plan:
    if isinstance(records, Unreadable) or times.storage_now is None:
        problem = records.problem if isinstance(records, Unreadable) else "the storage's time is unknown"
        if policy.on_storage_error is FencingStorageError.PROCEED:
            return plan("released", ReleaseCause.STORAGE_ERROR.value, (Release(ReleaseCause.STORAGE_ERROR),))
        return plan("held", problem, (StorageHold(problem),))
    if copy.epoch and records.fence(me, copy.epoch) is None:
        return plan("held", "fence of this restore written late", (WriteFence(copy.epoch),))
    verdict = judge_hold(
        me, copy.epoch, records, times.storage_now, policy.lease_seconds, copy.manual_release
    )
    if verdict.outcome is HoldOutcome.SUPERSEDED and verdict.superseded_by is not None:
        newer = verdict.superseded_by
        return plan("superseded", f"restore on {newer.owner} at epoch {newer.epoch}", (Supersede(newer),))
    if verdict.outcome is HoldOutcome.HOLD:
        subject = hold_subject(verdict.waiting, copy.epoch)
        stale = times.hold_written is None or times.mono - times.hold_written >= policy.lease_seconds
        rewrite = not copy.hold.startswith(subject + ";") or stale
        return plan("held", subject, (RewriteHold(verdict),) if rewrite else ())
    cause = verdict.cause or ReleaseCause.NO_HEARTBEAT
    if copy.workload.kind == BLUE_GREEN and not copy.children:
        return plan("held", "released once the operator has created its FlinkDeployment")
    # Heartbeat before the job may start: a failover that follows must wait for this copy too.
    return plan("released", cause.value, (Beat(), Release(cause)))
