"""Is a workload relocating to a cluster, and with which state? Pure: record + binding + target -> decision.

The workload is relocating to ``target`` when the newest good state known for it (the record, the
binding's ``aggregatedStatus`` folded into it, or a ``preservedLabelState`` of an eviction task) was
seen on another cluster and nothing newer was seen on ``target``: whether or not an eviction task
still exists, whatever the purge mode. Ties go to ``target`` (a job that runs there is not moving).
Once ``target`` has run a job since the workload moved there, it is not relocating any more; a
cluster still in the placement is not one the workload left (``target`` was added beside it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from webhook.common import contract as keys
from webhook.common.contract import Contract
from webhook.common.flink import is_job_id
from webhook.controlplane.binding import RUNNING, Binding, EvictionTask
from webhook.controlplane.record import (
    RESCHEDULED,
    BindingRecord,
    HistoryEntry,
    HistoryType,
    format_record_time,
    parse_time,
)


class Relocation(StrEnum):
    RELOCATING = "relocating"  # inject the job and the annotations
    FAILOVER_NO_STATE = "failover-no-state"  # inject the failover label and the annotations only
    RUNNING_ON_TARGET = "running-on-target"  # the newest good state is on the target: stop
    LEAVING = "leaving"  # the target is not (or no longer) where the workload is scheduled
    NO_FAILOVER = "no-failover"  # nothing ever ran elsewhere and no eviction points here


@dataclass(frozen=True)
class GoodState:
    cluster: str
    job_id: str
    seen: datetime
    origin: str  # "record" or "preserved"


@dataclass(frozen=True)
class Injection:
    source_cluster: str
    job_id: str  # "" when no good state was ever seen
    failover_time: str
    failover_count: int
    reason: str
    last_savepoint: str
    started_from: str = ""  # the snapshot job_id was started from (its floor), when recorded


def injection_metadata(injection: Injection, contract: Contract) -> tuple[dict[str, str], dict[str, str]]:
    """The labels and annotations of the contract (README, "Label and annotation contract")."""
    labels = {contract.failover_label: "true"}
    if injection.job_id:
        labels[contract.key(keys.JOB_ID)] = injection.job_id
    annotations = {
        contract.key(keys.SOURCE_CLUSTER): injection.source_cluster,
        contract.key(keys.FAILOVER_TIME): injection.failover_time,
        contract.key(keys.FAILOVER_COUNT): str(injection.failover_count),
        contract.key(keys.REASON): injection.reason,
    }
    if injection.last_savepoint:
        annotations[contract.key(keys.LAST_SAVEPOINT)] = injection.last_savepoint
    if injection.started_from and injection.job_id:
        annotations[contract.key(keys.STARTED_FROM)] = injection.started_from
    return labels, {k: v for k, v in annotations.items() if v}


@dataclass(frozen=True)
class RelocationDecision:
    outcome: Relocation
    injection: Injection | None = None
    newest: GoodState | None = None
    explanation: str = ""


def preserved_job_id(task: EvictionTask, job_id_labels: Iterable[str]) -> str:
    """Karmada's preserved value counts only as 32 lowercase hex under one of our jobId label keys."""
    for key in job_id_labels:
        value = task.preserved.get(key, "")
        if is_job_id(value):
            return value
    return ""


def good_states(
    record: BindingRecord, binding: Binding, job_id_labels: Iterable[str], now: datetime
) -> list[GoodState]:
    labels = tuple(job_id_labels)
    confirmed: list[GoodState] = []
    for cluster, state in record.clusters:
        if state.good:
            confirmed.append(GoodState(cluster, state.job_id, parse_time(state.job_seen) or now, "record"))
    preserved: list[GoodState] = []
    doubtful: list[GoodState] = []
    for task in binding.tasks:
        job_id = preserved_job_id(task, labels)
        if not job_id or not task.from_cluster:
            continue
        state = record.cluster(task.from_cluster)
        if state.job_id == job_id:
            continue  # the record already holds it, with the time it was first seen RUNNING
        candidate = GoodState(task.from_cluster, job_id, parse_time(task.created) or now, "preserved")
        # Karmada preserves whatever the JSONPath finds, running or not: a job that cluster only ever
        # reported in another state (it never ran there) is used only when nothing better is known.
        never_ran = state.observed_job_id == job_id and state.observed_state != RUNNING
        (doubtful if never_ran else preserved).append(candidate)
    return confirmed + preserved if confirmed or preserved else doubtful


def decide_relocation(
    record: BindingRecord, binding: Binding, target: str, job_id_labels: Iterable[str], now: datetime
) -> RelocationDecision:
    """``record`` must already have ``binding`` folded in (``capture.observe``).

    A good state on ``target`` means "the job runs there" only when it was seen after the workload's
    latest arrival there: a job that ran on ``target`` before the workload left it is history, and a
    return to ``target`` (A -> B -> A) is a relocation like any other.
    """
    if target not in binding.clusters:
        # The cluster being left (its Work lingers with purge mode Gracefully or Never): never inject.
        return RelocationDecision(Relocation.LEAVING, explanation=f"{target} is not in spec.clusters")
    states = good_states(record, binding, job_id_labels, now)
    arrived = _arrived(record, binding, target)
    running_now = {s.job_id for s in binding.statuses if s.cluster == target and s.state == RUNNING}
    current, prior = _split(states, target, arrived, running_now)
    # The failover that brought the workload here: the newest state seen before it arrived (on another
    # cluster, or on target itself before it left), else an eviction pointing here. None when that state
    # is on a cluster still placed: target was added beside it (a widened placement), not moved to.
    newest = max(prior, key=lambda s: (s.seen, s.cluster == target), default=None)
    widened = newest is not None and newest.cluster != target and newest.cluster in binding.clusters
    injection: Injection | None = None
    if newest is not None and not widened:
        injection = _injection(record, binding, target, newest, now)
    elif newest is None:
        injection = _no_state(record, binding, target, now)
    if current:
        # The job has run on target since it arrived: stop the trigger labels, even if a cluster that
        # was left reports something newer later (its old object can live on when it comes back). The
        # failover that brought it here stays visible as annotations.
        here = max(current, key=lambda s: s.seen)
        why = "target ran a job since the workload arrived" if arrived else "newest good state is on target"
        return RelocationDecision(Relocation.RUNNING_ON_TARGET, injection, here, why)
    if newest is not None and widened:
        return RelocationDecision(
            Relocation.NO_FAILOVER,
            newest=newest,
            explanation=f"newest good state is on {newest.cluster}, still placed",
        )
    if newest is not None:
        why = "returning: the newest good state ran on target before the workload left it"
        explanation = why if newest.cluster == target else f"newest good state is on {newest.cluster}"
        return RelocationDecision(Relocation.RELOCATING, injection, newest, explanation)
    if injection is None:
        return RelocationDecision(
            Relocation.NO_FAILOVER, explanation="no good state seen and no eviction towards target"
        )
    return RelocationDecision(
        Relocation.FAILOVER_NO_STATE, injection, explanation="eviction towards target, no good state"
    )


def _split(
    states: list[GoodState], target: str, arrived: datetime | None, running_now: set[str]
) -> tuple[list[GoodState], list[GoodState]]:
    """(states of a job running on target now, every other state). A state counts as current when it
    was first seen after the arrival, or when the binding in hand (read after the arrival) reports that
    job RUNNING on target: a job that kept running while its Work lingered (purge mode Gracefully).
    Without a known arrival (the workload has been on target as long as anything was recorded),
    target's state is current only when nothing newer was seen elsewhere."""
    if arrived is None:
        newest = max(states, key=lambda s: (s.seen, s.cluster == target), default=None)
        on_target = newest is not None and newest.cluster == target
        current = [s for s in states if s.cluster == target] if on_target else []
    else:
        current = [
            s for s in states if s.cluster == target and (s.seen >= arrived or s.job_id in running_now)
        ]
    return current, [s for s in states if s not in current]


def _no_state(record: BindingRecord, binding: Binding, target: str, now: datetime) -> Injection | None:
    evidence = _failover_evidence(record, binding, target)
    if evidence is None:
        return None
    return Injection(
        source_cluster=evidence.source,
        job_id="",
        failover_time=evidence.time or _fallback_time(binding, now),
        failover_count=max(1, record.failover_count),
        reason=evidence.reason or RESCHEDULED,
        last_savepoint=record.cluster(evidence.source).savepoint,
    )


def _fallback_time(binding: Binding, now: datetime) -> str:
    return binding.scheduled_time or format_record_time(now)


def _latest(entries: Iterable[HistoryEntry]) -> HistoryEntry | None:
    found = None
    for entry in entries:
        found = entry  # history is kept oldest first
    return found


def _arrived(record: BindingRecord, binding: Binding, target: str) -> datetime | None:
    """When the workload last moved to target: a recorded move, or an eviction task from elsewhere."""
    moments = [parse_time(e.time) for e in _moves_to(record, target)]
    moments += [parse_time(task_time(record, t)) for t in _other_tasks(binding, target)]
    known = [m for m in moments if m is not None]
    return max(known) if known else None


def _moves_to(record: BindingRecord, target: str) -> list[HistoryEntry]:
    return [
        e
        for e in record.history
        if e.type is HistoryType.PLACEMENT and target in e.to_clusters and target not in e.from_clusters
    ]


def task_time(record: BindingRecord, task: EvictionTask) -> str:
    """When the eviction happened: as recorded when the task was first seen (Karmada stamps it 14-346 ms
    later, to the second of its successful write), else its creationTimestamp. One eviction, one time,
    whether an answer comes before or after the stamp."""
    if any(cluster == task.from_cluster for cluster, _ in record.open_evictions):
        for entry in reversed(record.history):
            if entry.type is HistoryType.EVICTION and entry.from_clusters == (task.from_cluster,):
                return entry.time
    return task.created


def _other_tasks(binding: Binding, target: str) -> list[EvictionTask]:
    tasks = [t for t in binding.tasks if t.from_cluster and t.from_cluster != target]
    return sorted(tasks, key=lambda t: t.created)


def _injection(
    record: BindingRecord, binding: Binding, target: str, newest: GoodState, now: datetime
) -> Injection:
    """failover-time and reason come from the latest eviction from the source cluster (a task still in
    the binding or one recorded), or from a later eviction of a cluster the job passed through without
    running (A -> B -> C); without any, from when the move to target was first seen."""
    source = newest.cluster
    evictions: list[_Eviction] = []
    for task in _other_tasks(binding, target):
        moment = parse_time(task_time(record, task))
        if moment is not None:
            evictions.append(_Eviction(moment, task.reason, task.from_cluster, in_binding=True))
    for entry in record.history:
        moment = parse_time(entry.time)
        if entry.type is HistoryType.EVICTION and target not in entry.from_clusters and moment is not None:
            origin = entry.from_clusters[0] if entry.from_clusters else ""
            evictions.append(_Eviction(moment, entry.reason, origin, in_binding=False))
    from_source = [e for e in evictions if e.origin == source]
    chosen: _Eviction | None
    if from_source:
        base = max(e.moment for e in from_source)
        chosen = max((e for e in evictions if e.moment >= base), key=lambda e: e.moment)
    else:
        current = [e for e in evictions if e.in_binding]
        chosen = max(current, key=lambda e: e.moment) if current else None
    move = _latest(_moves_to(record, target))
    if chosen is not None:
        failover_time, reason = format_record_time(chosen.moment), chosen.reason
    elif move is not None:
        failover_time, reason = move.time, move.reason
    else:
        failover_time, reason = _fallback_time(binding, now), RESCHEDULED
    return Injection(
        source_cluster=source,
        job_id=newest.job_id,
        failover_time=failover_time,
        failover_count=max(1, record.failover_count),
        reason=reason or RESCHEDULED,
        last_savepoint=record.cluster(source).savepoint,
        started_from=_started_from(record, newest),
    )


def _started_from(record: BindingRecord, newest: GoodState) -> str:
    """What the job restored from was started from, when the record holds it for that very job."""
    state = record.cluster(newest.cluster)
    return state.started_from if state.job_id == newest.job_id else ""


@dataclass(frozen=True)
class _Eviction:
    moment: datetime
    reason: str
    origin: str  # the cluster evicted from
    in_binding: bool  # its task is still in the binding (else only recorded)


@dataclass(frozen=True)
class _Evidence:
    """An eviction that moved the workload to the target."""

    source: str
    time: str
    reason: str


def _failover_evidence(record: BindingRecord, binding: Binding, target: str) -> _Evidence | None:
    others = _other_tasks(binding, target)
    if others:
        latest = max(
            others, key=lambda t: parse_time(task_time(record, t)) or datetime.min.replace(tzinfo=UTC)
        )
        return _Evidence(latest.from_cluster, task_time(record, latest), latest.reason)
    for entry in reversed(record.history):
        if (
            entry.type is HistoryType.PLACEMENT
            and target in entry.to_clusters
            and target not in entry.from_clusters
        ):
            if entry.reason != RESCHEDULED and entry.from_clusters:
                return _Evidence(entry.from_clusters[0], entry.time, entry.reason)
            return None  # the latest move here was a plain reschedule
        if entry.type is HistoryType.EVICTION and target in entry.to_clusters and entry.from_clusters:
            return _Evidence(entry.from_clusters[0], entry.time, entry.reason)
    return None
