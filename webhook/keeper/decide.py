"""What the keeper does next, from what it knows of the job's lease. Pure: no I/O, no clocks.

The keeper holds the lease of one job on one cluster: it renews that cluster's heartbeat in the job's
ownership folder (the record the fencing agent writes: ``layout.heartbeat_name``), by the agent's rules
(``fencing/protocol.py``): never while a fence of another cluster is newer than its copy's epoch, only
while a listing of the last two polls found none, once a poll, a failed renewal retried every fifth of a
poll. It **holds** the lease while its last renewal that succeeded **started** less than
``renewDeadlineSeconds`` ago on its own monotonic clock (the storage stamped it no earlier, and another
cluster counts the lease from that stamp or from its own later fence), and no newer fence was seen. A
JobManager that runs while the keeper does not hold the lease is stopped at once; so the JobManager has
stopped within the deadline + the keeper's look (a fifth of a poll) + the kill, well inside the lease
(``policy/fencing.py``: deadline + 2 polls + the stop margin fit in the lease).

Every time here is the keeper's monotonic clock, except where the storage's own time is handed in
(``inherited``: a JobManager already running when the keeper starts).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from webhook.fencing.copies import judged_epoch
from webhook.fencing.protocol import Fence, Ownership, superseding
from webhook.fencing.renewal import first_seen, retry_seconds
from webhook.policy.fencing import FencingPolicy, RenewFailure

NEVER = float("-inf")


@dataclass(frozen=True)
class Lease:
    """What the keeper knows of its job's lease (times on its monotonic clock)."""

    epoch: int  # the copy's epoch: its own newest fence in a listing, else the one it was started with
    renewed: float = NEVER  # start of the last renewal that succeeded (or a stand-in: ``inherited``)
    confirmed: float = NEVER  # start of the last listing that found no newer fence
    attempted: float | None = None  # start of the last renewal tried
    in_flight: bool = False  # a renewal sent and not answered yet
    superseded: Fence | None = None  # a newer fence of another cluster: never renewed again


@dataclass(frozen=True)
class Decision:
    holds: bool  # the lease is held: ready (the startup probe lets the JobManager start)
    renew: bool  # send a renewal now
    stop: bool  # stop the JobManager now (it runs and the lease is not held)
    reason: str  # why it does not hold ("" while it does)


def listed(me: str, lease: Lease, records: Ownership, started: float) -> Lease:
    """A listing that began at ``started`` found ``records``: a newer fence of another cluster ends the
    lease for good (a fence is never taken back); else the listing vouches for the next renewals."""
    if lease.superseded is not None:
        return lease
    epoch = judged_epoch(me, lease.epoch, records)
    fence = superseding(me, epoch, records)
    if fence is not None:
        return replace(lease, epoch=epoch, superseded=fence)
    return replace(lease, epoch=epoch, confirmed=max(lease.confirmed, started))


def sent(lease: Lease, now: float) -> Lease:
    return replace(lease, attempted=now, in_flight=True)


def answered(lease: Lease, started: float, ok: bool) -> Lease:
    """The renewal sent at ``started`` came back: the lease runs from its start if it went through."""
    renewed = max(lease.renewed, started) if ok else lease.renewed
    return replace(lease, renewed=renewed, in_flight=False)


def inherited(
    lease: Lease,
    me: str,
    records: Ownership,
    storage_now: datetime | None,
    clock_started: float,
    now: float,
    policy: FencingPolicy,
    coarse: bool = False,
) -> Lease:
    """A JobManager already runs when the keeper starts (the keeper's container restarted beside it): the
    keeper cannot know how long nobody renewed, so it counts as renewed one poll before the deadline (the
    agent's ``first_seen``), or earlier where the storage says so: this cluster's heartbeat is ``age``
    old in storage time at ``storage_now`` (its clock object, whose write started at ``clock_started``),
    so no renewal began after ``clock_started - age``. ``coarse``: the storage's times are cut to the
    second (S3, Azure): the heartbeat was counted at the end of its second and "now" at the start of
    its, so two seconds are taken off."""
    stand_in = first_seen(now, policy)
    beat = records.heartbeat(me)
    if beat is not None and storage_now is not None:
        age = (storage_now - beat.modified).total_seconds() + (2.0 if coarse else 0.0)
        stand_in = min(stand_in, clock_started - max(age, 0.0))
    return replace(lease, renewed=max(lease.renewed, stand_in))


def holds(lease: Lease, now: float, policy: FencingPolicy) -> tuple[bool, str]:
    if lease.superseded is not None:
        fence = lease.superseded
        return False, (
            f"superseded: {fence.owner} restored the job at epoch {fence.epoch} (this copy's epoch "
            f"{lease.epoch})"
        )
    if lease.renewed == NEVER:
        return False, "the lease has not been taken yet"
    age = now - lease.renewed
    if age >= policy.renew_deadline_seconds and policy.on_renew_failure is RenewFailure.STOP:
        return (
            False,
            f"heartbeat not renewed for {age:.1f}s (renewDeadlineSeconds {policy.renew_deadline_seconds:g})",
        )
    return True, ""


def due(lease: Lease, now: float, policy: FencingPolicy) -> bool:
    """A renewal is due: a poll since the last one that succeeded (a retry period since one that failed),
    none in flight, no newer fence, and a listing of the last two polls found none (``renewal``'s rules
    in ``fencing/decide.py``)."""
    if lease.superseded is not None or lease.in_flight:
        return False
    if now - lease.confirmed > 2 * policy.poll_seconds:
        return False
    if lease.attempted is None or now - lease.renewed >= policy.poll_seconds:
        failed_recently = lease.attempted > lease.renewed if lease.attempted is not None else False
        return not (failed_recently and now - (lease.attempted or 0.0) < retry_seconds(policy))
    return False


def decide(lease: Lease, now: float, jobmanager_runs: bool, policy: FencingPolicy) -> Decision:
    """A JobManager that runs while the lease is not held is stopped **before** the lease is renewed
    again: a lease that lapsed (its deadline passed, or a JobManager found at start that nobody renewed
    for long enough) is never taken back for the JobManager that ran through the lapse."""
    held, reason = holds(lease, now, policy)
    stop = jobmanager_runs and not held
    return Decision(held, due(lease, now, policy) and not stop, stop, reason)


def listing_due(last_listed: float, now: float, held: bool, policy: FencingPolicy) -> bool:
    """List once a poll while the lease is held; every retry period while it is not (to take it as soon
    as the storage answers), unless a newer fence already ended it (the caller stops listing then)."""
    period = policy.poll_seconds if held else retry_seconds(policy)
    return now - last_listed >= period
