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
from datetime import datetime
from enum import StrEnum

from webhook.common.flink import is_job_id
from webhook.controlplane.binding import RUNNING, Binding, EvictionTask
from webhook.controlplane.capture import RESCHEDULED
from webhook.controlplane.record import HistoryEntry, HistoryType, Record, format_time, parse_time


class Outcome(StrEnum):
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


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
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
    record: Record, binding: Binding, job_id_labels: Iterable[str], now: datetime
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


def decide(
    record: Record, binding: Binding, target: str, job_id_labels: Iterable[str], now: datetime
) -> Decision:
    """``record`` must already have ``binding`` folded in (``capture.observe``)."""
    if target not in binding.clusters:
        # The cluster being left (its Work lingers with purge mode Gracefully or Never): never inject.
        return Decision(Outcome.LEAVING, explanation=f"{target} is not in spec.clusters")
    states = good_states(record, binding, job_id_labels, now)
    arrived = _arrived(record, binding, target)
    on_target = record.cluster(target)
    seen_on_target = parse_time(on_target.job_seen)
    if on_target.good and arrived is not None and seen_on_target is not None and seen_on_target >= arrived:
        # The restored job has run on target since the move: stop, even if a cluster that was left
        # reports something newer later (its old object can live on for a while when it comes back).
        here = GoodState(target, on_target.job_id, seen_on_target, "record")
        return Decision(Outcome.RUNNING_ON_TARGET, newest=here, explanation="target ran a job since the move")
    if states:
        newest = max(states, key=lambda s: (s.seen, s.cluster == target))
        if newest.cluster == target:
            return Decision(
                Outcome.RUNNING_ON_TARGET, newest=newest, explanation="newest good state is on target"
            )
        if newest.cluster in binding.clusters:
            # The job still runs where it is placed: target is an added cluster, not a move.
            return Decision(
                Outcome.NO_FAILOVER,
                newest=newest,
                explanation=f"newest good state is on {newest.cluster}, still placed",
            )
        return Decision(Outcome.RELOCATING, _injection(record, binding, target, newest, now), newest)
    evidence = _failover_evidence(record, binding, target)
    if evidence is None:
        return Decision(Outcome.NO_FAILOVER, explanation="no good state seen and no eviction towards target")
    source, moment, reason = evidence
    injection = Injection(
        source_cluster=source,
        job_id="",
        failover_time=moment or _fallback_time(binding, now),
        failover_count=max(1, record.failover_count),
        reason=reason or RESCHEDULED,
        last_savepoint=record.cluster(source).savepoint,
    )
    return Decision(
        Outcome.FAILOVER_NO_STATE, injection, explanation="eviction towards target, no good state"
    )


def _fallback_time(binding: Binding, now: datetime) -> str:
    return binding.last_scheduled or format_time(now)


def _latest(entries: Iterable[HistoryEntry]) -> HistoryEntry | None:
    found = None
    for entry in entries:
        found = entry  # history is kept oldest first
    return found


def _arrived(record: Record, binding: Binding, target: str) -> datetime | None:
    """When the workload last moved to target: a recorded move, or an eviction task from elsewhere."""
    moments = [parse_time(e.time) for e in _moves_to(record, target)]
    moments += [parse_time(t.created) for t in _other_tasks(binding, target)]
    known = [m for m in moments if m is not None]
    return max(known) if known else None


def _moves_to(record: Record, target: str) -> list[HistoryEntry]:
    return [
        e
        for e in record.history
        if e.type is HistoryType.PLACEMENT and target in e.to_clusters and target not in e.from_clusters
    ]


def _other_tasks(binding: Binding, target: str) -> list[EvictionTask]:
    tasks = [t for t in binding.tasks if t.from_cluster and t.from_cluster != target]
    return sorted(tasks, key=lambda t: t.created)


def _injection(record: Record, binding: Binding, target: str, newest: GoodState, now: datetime) -> Injection:
    """failover-time and reason come from the latest eviction from the source cluster (a task still in
    the binding or one recorded), or from a later eviction of a cluster the job passed through without
    running (A -> B -> C); without any, from when the move to target was first seen."""
    source = newest.cluster
    evictions: list[tuple[datetime, str, str, bool]] = []  # time, reason, from, still in the binding
    for task in _other_tasks(binding, target):
        moment = parse_time(task.created)
        if moment is not None:
            evictions.append((moment, task.reason, task.from_cluster, True))
    for entry in record.history:
        moment = parse_time(entry.time)
        if entry.type is HistoryType.EVICTION and target not in entry.from_clusters and moment is not None:
            origin = entry.from_clusters[0] if entry.from_clusters else ""
            evictions.append((moment, entry.reason, origin, False))
    from_source = [e for e in evictions if e[2] == source]
    chosen: tuple[datetime, str, str, bool] | None
    if from_source:
        base = max(e[0] for e in from_source)
        chosen = max((e for e in evictions if e[0] >= base), key=lambda e: e[0])
    else:
        current = [e for e in evictions if e[3]]
        chosen = max(current, key=lambda e: e[0]) if current else None
    move = _latest(_moves_to(record, target))
    if chosen is not None:
        failover_time, reason = format_time(chosen[0]), chosen[1]
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
    )


def _failover_evidence(record: Record, binding: Binding, target: str) -> tuple[str, str, str] | None:
    """(source, time, reason) of an eviction that moved the workload to ``target``, if any."""
    others = _other_tasks(binding, target)
    if others:
        return others[-1].from_cluster, others[-1].created, others[-1].reason
    for entry in reversed(record.history):
        if (
            entry.type is HistoryType.PLACEMENT
            and target in entry.to_clusters
            and target not in entry.from_clusters
        ):
            if entry.reason != RESCHEDULED and entry.from_clusters:
                return entry.from_clusters[0], entry.time, entry.reason
            return None  # the latest move here was a plain reschedule
        if entry.type is HistoryType.EVICTION and target in entry.to_clusters and entry.from_clusters:
            return entry.from_clusters[0], entry.time, entry.reason
    return None
