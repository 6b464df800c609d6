"""The heartbeat loop's answers, pure: who renews a running copy's heartbeat, when, and when its copy
steps down (``renewer.Renewer`` carries them out).

**A copy the lease keeper guards** (its JobManager's podTemplate carries the keeper's sidecar,
``keeper/inject.py``; docs/keeper.md) is renewed by its keeper from inside the JobManager's pod, which
stops the JobManager itself when it cannot renew. The agent hands such a copy over only once the
heartbeat record shows the keeper writing it, for this cluster and the epoch the copy is judged under
(``keeper_renews``, the record's body read just before each renewal the agent would send): a spec
that carries the keeper says nothing of the pod that runs (the operator may not have rolled the old
JobManager yet, a pod without a keeper), and until a keeper has written, the agent renews and steps
down as for any copy. Once handed over
(``Renewing.keeper``) the agent neither renews the heartbeat (two writers would double the PUTs, and its
renewal would vouch for a JobManager its keeper killed) nor steps the copy down (a keeper that cannot
renew kills its JobManager itself), until the keeper's record has not moved for the renew deadline: a
keeper dead for good beside a running JobManager; the agent then takes the copy back (``takeback``). A
copy whose spec no longer carries the keeper is the agent's again at once (as one first seen: it must
be renewed within a poll). A handed-over copy a newer fence makes stale is not renewed while its
operator stops it: its keeper stopped renewing and killed the JobManager at that fence, within its
deadline, so the new side may start at the ack or at the lease's end. The rest stays the agent's:
holds, releases, stopping a stale copy through its operator (so it does not restart a killed JobManager
for ever), the ack, and removing a gone copy's heartbeat. An agent that cannot read the record (or
starts while its storage is down) cannot know a keeper renews: it renews and steps down as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from webhook.fencing.layout import KEEPER_WRITER
from webhook.policy.restore import FencingPolicy, RenewFailure


class Renewal(StrEnum):
    WAIT = "wait"
    BEAT = "beat"
    STEP_DOWN = "step-down"


@dataclass(frozen=True)
class Renewing:
    """What the heartbeat loop knows of one copy (all times on the agent's monotonic clock)."""

    renewed: float  # start of its last renewal that succeeded (or the first-sight stand-in)
    confirmed: float  # start of the last listing that found no newer fence (-inf: none yet)
    may_step_down: bool  # a running copy (not one already asked to stop)
    attempted: float | None = None  # start of the last renewal tried
    in_flight: bool = False  # a renewal has been sent and not answered yet
    keeper: bool = False  # the keeper in its pod renews it: the agent neither renews nor steps down


# The heartbeat loop's effects: what a poll's decision (``decide``) hands it for one copy.


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


def retry_seconds(policy: FencingPolicy) -> float:
    """How often the heartbeat loop looks at every copy (and retries a renewal that failed)."""
    return max(0.05, policy.poll_seconds / 5)


def first_seen(now: float, policy: FencingPolicy) -> float:
    """The renewal a copy first seen at ``now`` counts as: one poll before its renew deadline. The
    agent cannot know how long its cluster went without a renewal (an agent that restarted, a replica
    that took over), so the copy must be renewed within a poll of being seen or it steps down."""
    return now - max(0.0, policy.renew_deadline_seconds - policy.poll_seconds)


def renewal(entry: Renewing, now: float, policy: FencingPolicy) -> Renewal:
    """Step down once the renew deadline has passed; else renew when a poll has passed since the last
    renewal (or a retry period since one that failed), while a recent listing vouches for the copy.
    A copy its keeper renews is left alone."""
    if entry.keeper:
        return Renewal.WAIT
    overdue = now - entry.renewed >= policy.renew_deadline_seconds
    if entry.may_step_down and overdue and policy.on_renew_failure is RenewFailure.STOP:
        return Renewal.STEP_DOWN
    if entry.in_flight:
        return Renewal.WAIT
    if entry.may_step_down and now - entry.confirmed > 2 * policy.poll_seconds:
        return Renewal.WAIT  # no listing has looked for fences lately: say nothing
    if entry.attempted is None or now - entry.renewed >= policy.poll_seconds:
        failed_recently = entry.attempted is not None and entry.attempted > entry.renewed
        if failed_recently and now - (entry.attempted or 0.0) < retry_seconds(policy):
            return Renewal.WAIT
        return Renewal.BEAT
    return Renewal.WAIT


def step_down_reason(entry: Renewing, now: float) -> str:
    return f"heartbeat not renewed for {now - entry.renewed:.0f}s"


def keeper_renews(me: str, epoch: int, body: Mapping[str, Any] | None, job_id: str = "") -> bool:
    """``body`` (this cluster's heartbeat record, None when absent or unreadable) was written by the
    keeper in the copy's own pod for this cluster and ``epoch`` (the copy's judged epoch): a keeper runs
    beside its JobManager and renews. The agent's own body names no writer; a keeper of another epoch
    (an earlier restore's pod) vouches for nothing. ``job_id``: a FlinkSessionJob's (its session
    cluster's keeper keeps each job by its jobId), which the record must name: a keeper still renewing
    the job's former jobId does not guard the one that runs."""
    if body is None:
        return False
    if job_id and body.get("jobId") != job_id:
        return False
    return body.get("writer") == KEEPER_WRITER and body.get("cluster") == me and body.get("epoch") == epoch
