"""Who may run a job, from the ownership records in its checkpoint storage. Pure: no I/O, no clocks.

Every time here is a modification time assigned by the storage itself (``now`` is the time the storage
gave an object the caller has just written), so two machines' clocks are never compared.

The records, per workload (``records.py`` lays them out):

- a **heartbeat** per cluster that runs a copy, renewed every poll by that cluster only;
- a **fence** per restore: the new owner cluster and the failover count (the epoch) it restored under;
- a **stopping** record per stale copy whose stop was asked for: its operator has not reported it
  stopped yet (the cluster keeps its heartbeat fresh meanwhile, so the new copy keeps waiting);
- an **ack** per stopped copy: that cluster's operator reported its copy stopped, for fences up to that
  epoch. An ack is written only then, never when the stop is merely asked for.

Each object has one writer, so no compare-and-swap is needed. Rules:

1. A copy whose epoch is lower than the newest fence of another cluster is stale: stop it.
2. A restored copy is held while another cluster's heartbeat is fresh and that cluster has not acked
   the restore's epoch. "Fresh" is measured from the later of the heartbeat and the fence: a heartbeat
   that stopped before the fence existed proves nothing about a cluster that could not reach storage
   then, so a silent cluster gets one whole lease after the fence to see it and answer.
3. A held copy superseded by a newer fence of another cluster is never released.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

# Everything a decision needs is in the objects' names and storage times, so one listing decides; the
# objects' bodies (jobId, the writer's own time) are for people reading the bucket.


@dataclass(frozen=True)
class Heartbeat:
    cluster: str
    modified: datetime  # storage time of the last renewal


@dataclass(frozen=True)
class Fence:
    owner: str  # the cluster the workload was restored on
    epoch: int  # the failover count of that restore
    modified: datetime  # storage time


@dataclass(frozen=True)
class Ack:
    cluster: str
    epoch: int  # the copy on ``cluster`` is stopped for every fence up to this epoch
    modified: datetime


@dataclass(frozen=True)
class Stopping:
    cluster: str
    epoch: int  # the fence whose stop the copy on ``cluster`` has asked its operator for
    modified: datetime


@dataclass(frozen=True)
class Ownership:
    """One listing of a workload's ownership records."""

    heartbeats: tuple[Heartbeat, ...] = ()
    fences: tuple[Fence, ...] = ()
    acks: tuple[Ack, ...] = ()
    stopping: tuple[Stopping, ...] = ()

    def heartbeat(self, cluster: str) -> Heartbeat | None:
        return next((b for b in self.heartbeats if b.cluster == cluster), None)

    def stopping_since(self, cluster: str, epoch: int) -> datetime | None:
        """When ``cluster`` asked its operator to stop its copy for ``epoch`` (or a newer fence)."""
        return min(
            (s.modified for s in self.stopping if s.cluster == cluster and s.epoch >= epoch), default=None
        )

    def newest_fence(self) -> Fence | None:
        """The highest epoch wins; two owners at one epoch (two restores Karmada counted once) are
        ordered by name so every reader picks the same one."""
        return max(self.fences, key=lambda f: (f.epoch, f.owner), default=None)

    def fence(self, owner: str, epoch: int) -> Fence | None:
        return next((f for f in self.fences if f.owner == owner and f.epoch == epoch), None)

    def acked(self, cluster: str, epoch: int) -> Ack | None:
        return max(
            (a for a in self.acks if a.cluster == cluster and a.epoch >= epoch), default=None, key=_epoch
        )


def _epoch(ack: Ack) -> int:
    return ack.epoch


# --- the stale side ------------------------------------------------------------------------------


@dataclass(frozen=True)
class CopyJudgement:
    """Rule 1's answer for a copy that runs (``spec.job.state: running``) on ``me``: stop it or not."""

    stop: bool
    fence: Fence | None = None  # the fence that makes it stale, when ``stop``


def superseding(me: str, epoch: int, ownership: Ownership) -> Fence | None:
    """The newest fence when it is another cluster's and newer than ``epoch``. A fence of ``me`` itself
    never supersedes ``me``; one at the same epoch is the restore that made this copy (or a twin)."""
    fence = ownership.newest_fence()
    return fence if fence is not None and fence.owner != me and fence.epoch > epoch else None


def judge_copy(me: str, epoch: int, ownership: Ownership) -> CopyJudgement:
    """Rule 1."""
    fence = superseding(me, epoch, ownership)
    return CopyJudgement(fence is not None, fence)


# --- the new side --------------------------------------------------------------------------------


class HoldOutcome(StrEnum):
    HOLD = "hold"  # keep it suspended: someone may still run a copy
    RELEASE = "release"  # start it: nobody else runs one
    SUPERSEDED = "superseded"  # a newer restore elsewhere owns the workload: keep it suspended for good


class ReleaseCause(StrEnum):
    ACK = "ack"  # every other copy was stopped and said so
    LEASE_EXPIRY = "lease-expiry"  # a copy did not renew its heartbeat for a whole lease
    NO_HEARTBEAT = "no-heartbeat"  # nobody else heartbeats (fencing not deployed there, or first failover)
    MANUAL = "manual"  # an engineer released it
    STORAGE_ERROR = "storage-error"  # the records are unreadable and the policy says proceed


@dataclass(frozen=True)
class Waiting:
    cluster: str
    renewed: datetime  # storage time of its last heartbeat renewal
    age: float | None  # seconds since that renewal, storage time (None: the storage's time is unknown)
    remaining: float  # seconds until the lease runs out, if it is not renewed
    stopping_since: datetime | None = None  # its operator was asked to stop the copy then (storage time)


@dataclass(frozen=True)
class HoldJudgement:
    """Rules 2 and 3's answer for a held restore: hold (and whom it waits for), release (and why), or
    superseded (by whose fence)."""

    outcome: HoldOutcome
    cause: ReleaseCause | None = None  # when RELEASE
    waiting: tuple[Waiting, ...] = ()  # when HOLD
    superseded_by: Fence | None = None  # when SUPERSEDED
    expired: tuple[str, ...] = field(default=())  # clusters whose lease ran out (for the log)

    @property
    def remaining(self) -> float:
        """Seconds until every waited-for lease runs out unrenewed."""
        return max((w.remaining for w in self.waiting), default=0.0)


def judge_hold(
    me: str,
    epoch: int,
    ownership: Ownership,
    now: datetime,
    lease: float,
    manual: bool = False,
) -> HoldJudgement:
    """Rules 2 and 3 for a copy of ``me`` restored under ``epoch``; ``now`` is storage time."""
    newer = superseding(me, epoch, ownership)
    if newer is not None:
        return HoldJudgement(HoldOutcome.SUPERSEDED, superseded_by=newer)
    if manual:
        return HoldJudgement(HoldOutcome.RELEASE, ReleaseCause.MANUAL)
    mine = ownership.fence(me, epoch)
    waiting: list[Waiting] = []
    expired: list[str] = []
    for beat in sorted(ownership.heartbeats, key=lambda b: b.cluster):
        if beat.cluster == me or ownership.acked(beat.cluster, epoch) is not None:
            continue
        since = max(beat.modified, mine.modified) if mine is not None else beat.modified
        age = (now - since).total_seconds()
        if age >= lease:
            expired.append(beat.cluster)
            continue
        waiting.append(
            Waiting(
                beat.cluster,
                beat.modified,
                max(0.0, (now - beat.modified).total_seconds()),
                lease - age,
                ownership.stopping_since(beat.cluster, epoch),
            )
        )
    if waiting:
        return HoldJudgement(HoldOutcome.HOLD, waiting=tuple(waiting), expired=tuple(expired))
    if expired:
        cause = ReleaseCause.LEASE_EXPIRY
    elif _acked_by_another(me, epoch, ownership):
        cause = ReleaseCause.ACK
    else:
        cause = ReleaseCause.NO_HEARTBEAT
    return HoldJudgement(HoldOutcome.RELEASE, cause, expired=tuple(expired))


def _acked_by_another(me: str, epoch: int, ownership: Ownership) -> bool:
    return any(a.cluster != me and a.epoch >= epoch for a in ownership.acks)


def judge_admission(me: str, epoch: int, ownership: Ownership, lease: float) -> HoldJudgement:
    """:func:`judge_hold` at the moment ``me`` writes its fence for ``epoch``: the fence is the newest
    record, so every lease runs from it and any unacked heartbeat of another cluster holds. The member
    webhook needs no storage time, so it lists while it writes instead of after."""
    newer = superseding(me, epoch, ownership)
    if newer is not None:
        return HoldJudgement(HoldOutcome.SUPERSEDED, superseded_by=newer)
    waiting = tuple(
        Waiting(b.cluster, b.modified, None, lease, ownership.stopping_since(b.cluster, epoch))
        for c in others_heartbeating(me, ownership, epoch)
        if (b := ownership.heartbeat(c)) is not None
    )
    if waiting:
        return HoldJudgement(HoldOutcome.HOLD, waiting=waiting)
    acked = _acked_by_another(me, epoch, ownership)
    return HoldJudgement(HoldOutcome.RELEASE, ReleaseCause.ACK if acked else ReleaseCause.NO_HEARTBEAT)


def others_heartbeating(me: str, ownership: Ownership, epoch: int) -> tuple[str, ...]:
    """Clusters other than ``me`` with a heartbeat not covered by an ack of ``epoch``: whom a new
    restore must wait for, before any age is known (the member webhook cannot write on dry runs)."""
    return tuple(
        sorted(
            b.cluster
            for b in ownership.heartbeats
            if b.cluster != me and ownership.acked(b.cluster, epoch) is None
        )
    )


def next_epoch(me: str, ownership: Ownership) -> int:
    """The epoch for a restore that carries no failover count (Karmada's own jobId labels only): the
    fence ``me`` already wrote for the newest epoch, else one above every fence seen."""
    newest = ownership.newest_fence()
    if newest is None:
        return 1
    return newest.epoch if newest.owner == me else newest.epoch + 1
