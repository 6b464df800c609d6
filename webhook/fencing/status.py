"""Every job's fencing state on one member cluster, for the on-call engineer (``flink-failover status``,
``commands/status.py``, and GET /fencing/status, ``fencing/http.py``).

``describe`` is pure (a copy, its records, the storage's time); ``collect`` is the edge that reads them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from webhook.common.contract import (
    FENCED_BY,
    HOLD,
    RELEASE_REQUESTED_BY,
    RELEASED,
    RESTORE_DECISION,
    RESUMED,
    STEPPED_DOWN,
)
from webhook.common.kubeclient import ApiFailure
from webhook.common.paths import StoragePath
from webhook.fencing import copies
from webhook.fencing.copies import Copy, CopyState
from webhook.fencing.flinkapi import OPTIONAL_KINDS, PLURALS, FlinkApi
from webhook.fencing.layout import format_time
from webhook.fencing.protocol import HoldOutcome, Ownership, judge_hold
from webhook.policy.restore import RestorePolicy
from webhook.restore.snapshots import StorageError

if TYPE_CHECKING:  # storage (fsspec) is loaded when a command runs, not when the CLI parses
    from webhook.fencing.records import FencingStore

_REPORTED = (CopyState.STOPPING, CopyState.FENCED, CopyState.ENDING)  # whose operator report is shown

# Kinds a cluster may not serve (no CRD: 404) without that being a fault of the command: nothing of
# that kind can exist there. A cluster that serves no FlinkDeployments is not a Flink member at all.
ABSENT_IS_EMPTY = frozenset({"FlinkSessionJob", *OPTIONAL_KINDS})


@dataclass(frozen=True)
class RecordView:
    name: str  # heartbeat | fence | stopping | ack
    cluster: str
    epoch: int | None
    age_seconds: float | None  # storage time; None when the storage's time is unknown
    written: str  # storage time, RFC 3339


@dataclass(frozen=True)
class JobView:
    kind: str
    namespace: str
    name: str
    state: str  # CopyState
    epoch: int
    decision: str  # restore-decision on the object
    hold: str = ""
    waiting_for: tuple[str, ...] = ()
    lease_runs_out_in: float | None = None  # seconds, when held and someone is waited for
    records: tuple[RecordView, ...] = ()
    last: Mapping[str, str] = field(default_factory=dict)  # the decisions written on the object
    operator: str = ""  # what the operator reports, for a copy asked to stop
    problem: str = ""  # why the records could not be read, or why the job has none
    records_unreadable: bool = False  # the records exist but could not be read (storage)


@dataclass(frozen=True)
class Collected:
    """What ``collect`` read: the views, what could not be read (``problems``: the command failed its
    job) and what is merely absent (``notes``: a kind this cluster does not serve)."""

    views: list[JobView]
    problems: list[str]
    notes: list[str] = field(default_factory=list)


def describe(
    copy: Copy,
    ownership: Ownership | None,
    storage_now: datetime | None,
    policy: RestorePolicy,
    me: str,
    problem: str = "",
    unreadable: bool = False,
) -> JobView:
    """One job's view from its object and its records (``None``: none read, ``problem`` says why;
    ``unreadable``: they exist but could not be read)."""
    records: list[RecordView] = []
    waiting: tuple[str, ...] = ()
    remaining = None
    if ownership is not None:
        records += [
            _record("heartbeat", b.cluster, None, b.modified, storage_now) for b in ownership.heartbeats
        ]
        records += [_record("fence", f.owner, f.epoch, f.modified, storage_now) for f in ownership.fences]
        records += [
            _record("stopping", s.cluster, s.epoch, s.modified, storage_now) for s in ownership.stopping
        ]
        records += [_record("ack", a.cluster, a.epoch, a.modified, storage_now) for a in ownership.acks]
        if copy.state is CopyState.HELD and storage_now is not None and me:
            judgement = judge_hold(me, copy.epoch, ownership, storage_now, policy.fencing.lease_seconds)
            if judgement.outcome is HoldOutcome.HOLD:
                waiting = tuple(w.cluster for w in judgement.waiting)
                remaining = round(judgement.remaining, 1)
    annotations = copy.resource.annotations
    keys = (RESTORE_DECISION, RELEASED, RELEASE_REQUESTED_BY, FENCED_BY, STEPPED_DOWN, RESUMED)
    last = {key: annotations[policy.key(key)] for key in keys if annotations.get(policy.key(key))}
    w = copy.workload
    return JobView(
        w.kind,
        w.namespace,
        w.name,
        copy.state.value,
        copy.epoch,
        annotations.get(policy.key(RESTORE_DECISION), ""),
        annotations.get(policy.key(HOLD), ""),
        waiting,
        remaining,
        tuple(sorted(records, key=lambda r: (r.name, r.cluster, r.epoch or 0))),
        last,
        copy.operator.detail if copy.state in _REPORTED else "",
        problem,
        unreadable,
    )


def _record(
    name: str, cluster: str, epoch: int | None, modified: datetime, now: datetime | None
) -> RecordView:
    age = None if now is None else round(max(0.0, (now - modified).total_seconds()), 1)
    return RecordView(name, cluster, epoch, age, format_time(modified))


def collect(
    api: FlinkApi,
    store: FencingStore,
    policy: RestorePolicy,
    me: str,
    target: tuple[str, str, str] | None = None,
    held_only: bool = False,
) -> Collected:
    """The views of every job of the cluster (or of ``target``: kind, namespace, name), what could not
    be read, and the kinds the cluster does not serve."""
    objects: list[Mapping[str, Any]] = []
    problems: list[str] = []
    notes: list[str] = []
    if target is not None:
        kind, namespace, name = target
        found = api.get(kind, namespace, name)
        if found is None:
            problems.append(f"{kind} {namespace}/{name} not found")
        elif isinstance(found, ApiFailure):
            problems.append(f"{kind} {namespace}/{name}: {found.message}")
        else:
            objects.append({**found, "kind": kind})
    else:
        for kind in PLURALS:
            listed = api.list_kind(kind)
            if isinstance(listed, ApiFailure) and listed.status == 404 and kind in ABSENT_IS_EMPTY:
                notes.append(f"this cluster serves no {PLURALS[kind]} (its CRD is not installed)")
            elif isinstance(listed, ApiFailure):
                hint = " (no Flink operator CRDs: is this a member cluster?)" if listed.status == 404 else ""
                problems.append(f"cannot list {PLURALS[kind]}: {listed.message}{hint}")
            else:
                objects += listed
    views = []
    clocks: dict[StoragePath, datetime] = {}  # the storage's time, learnt once per storage
    for obj in objects:
        copy = copies.read_copy(obj, policy)
        if held_only and copy.state is not CopyState.HELD:
            continue
        views.append(_view(copy, store, policy, me, clocks))
    views.sort(key=lambda v: (v.namespace, v.name, v.kind))
    unread = [v for v in views if v.records_unreadable]
    problems += [f"{v.kind} {v.namespace}/{v.name}: records unreadable: {v.problem}" for v in unread]
    return Collected(views, problems, notes)


def _view(
    copy: Copy, store: FencingStore, policy: RestorePolicy, me: str, clocks: dict[StoragePath, datetime]
) -> JobView:
    if copy.folder is None or copy.clock is None:
        return describe(copy, None, None, policy, me, "no checkpoint directory: not fenced")
    try:
        if me and copy.clock not in clocks:
            clocks[copy.clock] = store.clock(copy.clock)
        now = clocks.get(copy.clock) if me else None
        ownership = store.list(copy.folder).ownership
    except StorageError as exc:
        return describe(copy, None, None, policy, me, f"storage: {exc}", unreadable=True)
    return describe(copy, ownership, now, policy, me)


def render(views: Iterable[JobView]) -> str:
    """The views as text (what could not be read goes to stderr, not here)."""
    lines = []
    for v in views:
        head = f"{v.kind} {v.namespace}/{v.name}: {v.state}, epoch {v.epoch}"
        lines.append(head + (f", decision {v.decision}" if v.decision else ""))
        if v.waiting_for:
            who = ", ".join(v.waiting_for)
            lines.append(f"  waits for {who}; lease runs out in {v.lease_runs_out_in:g}s unless renewed")
        if v.hold:
            lines.append(f"  hold: {v.hold}")
        if v.operator:
            lines.append(f"  operator: {v.operator}")
        for key, value in v.last.items():
            lines.append(f"  {key}: {value}")
        for r in v.records:
            epoch = f" epoch {r.epoch}" if r.epoch is not None else ""
            age = f", {r.age_seconds:g}s old" if r.age_seconds is not None else ""
            lines.append(f"  {r.name} {r.cluster}{epoch}: written {r.written} (storage time){age}")
        if v.problem:
            lines.append(f"  records: {v.problem}")
    return "\n".join(lines)
