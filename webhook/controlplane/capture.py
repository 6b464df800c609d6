"""Fold what a ResourceBinding shows now into the workload's record. Pure: no I/O, the clock is an argument.

``observe`` is a fixpoint: folding the same binding twice changes nothing, so a capture loop that
patches only on change can never chase its own MODIFIED events.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from webhook.common.flink import BLUE_GREEN, is_job_id
from webhook.controlplane.binding import RUNNING, Binding
from webhook.controlplane.record import (
    MAX_HISTORY,
    RESCHEDULED,
    BindingRecord,
    HistoryEntry,
    HistoryType,
    StoredRecord,
    format_record_time,
    parse_time,
)


def observe(record: BindingRecord, binding: Binding, now: datetime) -> BindingRecord:
    stamp = format_record_time(now)
    record = _observe_jobs(record, binding, stamp)
    record = _observe_tasks(record, binding, stamp)
    return _observe_placement(record, binding, stamp)


def _observe_jobs(record: BindingRecord, binding: Binding, stamp: str) -> BindingRecord:
    for seen in binding.statuses:
        state = record.cluster(seen.cluster)
        updated = state
        if seen.state == RUNNING and is_job_id(seen.job_id) and seen.job_id != state.job_id:
            # What the new job started from is its floor (docs/failover.md "Restore candidates"). A
            # blue/green child that replaced another one here started from a savepoint its parent's
            # status does not name: unknown rather than the template's older path.
            first_here = not state.job_id or binding.resource_kind != BLUE_GREEN
            start = seen.started_from if first_here else ""
            updated = replace(updated, job_id=seen.job_id, job_seen=stamp, started_from=start)
        elif (
            seen.job_id
            and seen.job_id == state.job_id
            and seen.started_from
            and not state.started_from
            and binding.resource_kind != BLUE_GREEN
        ):
            updated = replace(updated, started_from=seen.started_from)
        # A job that never ran here is remembered with its state (Karmada may preserve its jobId);
        # the good job's own state changes (RESTARTING, FAILING, ...) cost no patch.
        if seen.job_id and seen.job_id != updated.job_id:
            pending = (seen.job_id, seen.state)
        elif seen.job_id:
            pending = ("", "")
        else:
            pending = (updated.observed_job_id, updated.observed_state)
        if pending != (updated.observed_job_id, updated.observed_state):
            updated = replace(updated, observed_job_id=pending[0], observed_state=pending[1])
        if seen.savepoint and seen.savepoint != state.savepoint:
            updated = replace(updated, savepoint=seen.savepoint, savepoint_seen=stamp)
        if seen.upgrade_savepoint and seen.upgrade_savepoint != state.upgrade_savepoint:
            updated = replace(updated, upgrade_savepoint=seen.upgrade_savepoint)
        if updated != state:
            record = record.with_cluster(seen.cluster, updated)
    return record


def same_eviction(last_seen: str | None, created: str) -> bool:
    """Is a task from a cluster the one already open from there? Karmada keeps at most one task per
    cluster, adds it without ``creationTimestamp`` and stamps it 14-346 ms later (recorded): a task that
    gets its stamp is the same eviction; a stamp that differs, or a task appearing unstamped after a
    stamped one, is a new eviction that replaced the old one between two observations."""
    return last_seen is not None and (last_seen == "" or last_seen == created)


def _observe_tasks(record: BindingRecord, binding: Binding, stamp: str) -> BindingRecord:
    open_before = dict(record.open_evictions)
    open_now: dict[str, str] = {}
    for task in binding.tasks:
        if not task.from_cluster or task.from_cluster in open_now:
            continue
        open_now[task.from_cluster] = task.created
        if same_eviction(open_before.get(task.from_cluster), task.created):
            continue
        # Records written before openEvictions existed: the stamped task is in the history already.
        known = bool(task.created) and any(
            e.type is HistoryType.EVICTION
            and e.from_clusters == (task.from_cluster,)
            and e.time == task.created
            and e.reason == task.reason
            for e in record.history
        )
        # A task older than everything kept was seen before and trimmed: do not count it twice.
        trimmed = len(record.history) >= MAX_HISTORY and _at_or_before(task.created, record.history[0].time)
        if known or trimmed:
            continue
        to = tuple(sorted(c for c in binding.clusters if c != task.from_cluster))
        # Unstamped: dated when first seen, and that date stays when Karmada stamps it (the stamp is the
        # second of its successful write, often after several 409s; failover-time must not move).
        entry = HistoryEntry(
            HistoryType.EVICTION,
            (task.from_cluster,),
            to,
            task.reason,
            task.created or stamp,
            task.purge_mode,
        )
        record = replace(record.with_history(entry), failover_count=record.failover_count + 1)
    opened = tuple(sorted(open_now.items()))
    return record if opened == record.open_evictions else replace(record, open_evictions=opened)


def _observe_placement(record: BindingRecord, binding: Binding, stamp: str) -> BindingRecord:
    new = tuple(sorted(set(binding.clusters)))
    old = record.placement
    if not new or new == old:
        return record  # an empty placement is a moment between eviction and rescheduling
    if not old:
        return replace(record, placement=new)
    left = set(old) - set(new)
    added = set(new) - set(old)
    reason, purge_mode, explained = RESCHEDULED, "", False
    for task in binding.tasks:
        if task.from_cluster in left:
            reason, purge_mode, explained = task.reason or RESCHEDULED, task.purge_mode, True
            break
    else:
        # The task may be gone already (capture was away): an eviction recorded since the last move counts.
        for entry in reversed(record.history):
            if entry.type is HistoryType.PLACEMENT:
                break
            if entry.type is HistoryType.EVICTION and set(entry.from_clusters) & left:
                reason, purge_mode, explained = entry.reason or RESCHEDULED, entry.purge_mode, True
                break
    # Dated when first seen, unless the scheduler's own stamp belongs to this very spec (a relist after
    # capture was away): the event that shows a move still carries the previous schedule's time.
    moment = binding.scheduled_time
    if not _at_or_before(moment, stamp) or any(not _at_or_before(e.time, moment) for e in record.history):
        moment = stamp
    entry = HistoryEntry(HistoryType.PLACEMENT, old, new, reason, moment, purge_mode)
    count = record.failover_count + (1 if left and added and not explained else 0)
    return replace(record.with_history(entry), placement=new, failover_count=count)


def _at_or_before(first: str, second: str) -> bool:
    """Both are times and ``first`` is not later than ``second`` (False when either is not a time)."""
    a, b = parse_time(first), parse_time(second)
    return a is not None and b is not None and a <= b


@dataclass(frozen=True)
class Capture:
    """The record after folding, and whether the annotation must be written to hold it."""

    record: BindingRecord
    write: bool


def capture(base: BindingRecord, stored: StoredRecord, binding: Binding, now: datetime) -> Capture:
    """``base`` is the newest record we hold (the cache's, else the stored one); ``stored`` is what the
    object carries. A write is due only when the persisted annotation differs from the result."""
    record = observe(base, binding, now)
    if record.empty:
        return Capture(record, False)
    if stored.present and not stored.error and stored.record == record:
        return Capture(record, False)
    return Capture(record, True)
