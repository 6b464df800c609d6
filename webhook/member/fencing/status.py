"""``flink-failover status``: every job's fencing state on one member cluster, for the on-call engineer.

For each FlinkDeployment and FlinkSessionJob (or one): what fencing makes of it (running, held, stopping,
fenced, stepped down), the ownership records in its storage with their ages in the storage's own time,
whom a held job waits for and until when, and the last decision written on the object. ``--held`` keeps
only held jobs. The same view is served by the member role at ``/fencing/status`` (JSON) for tools.

``describe`` is pure (a copy, its records, the storage's time); ``collect`` is the edge that reads them.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
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
from webhook.member.fencing import command, copies
from webhook.member.fencing.copies import Copy, CopyState
from webhook.member.fencing.flinkapi import PLURALS, FlinkApi
from webhook.member.fencing.protocol import HoldOutcome, Ownership, judge_hold
from webhook.member.policy import RestorePolicy
from webhook.member.restore import StorageError

if TYPE_CHECKING:  # storage (fsspec) is loaded when a command runs, not when the CLI parses
    from webhook.member.fencing.records import FencingStore


@dataclass(frozen=True)
class Record:
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
    records: tuple[Record, ...] = ()
    last: Mapping[str, str] = field(default_factory=dict)  # the decisions written on the object
    operator: str = ""  # what the operator reports, for a copy asked to stop
    problem: str = ""  # why the records could not be read


def describe(
    copy: Copy,
    ownership: Ownership | None,
    storage_now: datetime | None,
    policy: RestorePolicy,
    me: str,
    problem: str = "",
) -> JobView:
    """One job's view from its object and its records (``None``: unreadable, ``problem`` says why)."""
    records: list[Record] = []
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
            verdict = judge_hold(me, copy.epoch, ownership, storage_now, policy.fencing.lease_seconds)
            if verdict.outcome is HoldOutcome.HOLD:
                waiting = tuple(w.cluster for w in verdict.waiting)
                remaining = round(verdict.remaining, 1)
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
        copy.operator.detail if copy.state in (CopyState.STOPPING, CopyState.FENCED) else "",
        problem,
    )


def _record(name: str, cluster: str, epoch: int | None, modified: datetime, now: datetime | None) -> Record:
    age = None if now is None else round(max(0.0, (now - modified).total_seconds()), 1)
    return Record(name, cluster, epoch, age, copies.format_time(modified))


def collect(
    api: FlinkApi,
    store: FencingStore,
    policy: RestorePolicy,
    me: str,
    target: tuple[str, str, str] | None = None,
    held_only: bool = False,
) -> tuple[list[JobView], list[str]]:
    """The views of every job of the cluster (or of ``target``: kind, namespace, name), and what could
    not be listed."""
    objects: list[Mapping[str, Any]] = []
    problems: list[str] = []
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
            if isinstance(listed, ApiFailure):
                problems.append(f"cannot list {PLURALS[kind]}: {listed.message}")
            else:
                objects += listed
    views = []
    clocks: dict[StoragePath, datetime] = {}  # the storage's time, learnt once per storage
    for obj in objects:
        copy = copies.read_copy(obj, policy)
        if held_only and copy.state is not CopyState.HELD:
            continue
        views.append(_view(copy, store, policy, me, clocks))
    return sorted(views, key=lambda v: (v.namespace, v.name, v.kind)), problems


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
        return describe(copy, None, None, policy, me, f"storage: {exc}")
    return describe(copy, ownership, now, policy, me)


def render(views: Iterable[JobView], problems: Iterable[str]) -> str:
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
    lines += [f"warning: {p}" for p in problems]
    return "\n".join(lines) if lines else "no Flink jobs"


# --- the command -----------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", nargs="?", metavar="NAMESPACE/NAME", help="one job (default: every job)")
    parser.add_argument("--kind", choices=list(PLURALS), default="FlinkDeployment", help="the job's kind")
    parser.add_argument("--held", action="store_true", help="only jobs held until an old copy stops")
    parser.add_argument(
        "--cluster",
        default=os.environ.get("FLINK_FAILOVER_CLUSTER", ""),
        help="this member's name in Karmada, to say whom a held job waits for ($FLINK_FAILOVER_CLUSTER)",
    )
    command.add_cluster_arguments(parser, "its prefix and storage options")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text", help="output format")


def run(args: argparse.Namespace) -> int:
    started = command.start("status", args, args.target)
    if isinstance(started, int):
        return started
    policy, api = started.policy, started.api
    target = (args.kind, *started.target) if started.target is not None else None
    from webhook.member.fencing.lanes import Lanes
    from webhook.member.fencing.records import FencingStore
    from webhook.member.storage import CheckpointStorage

    lanes = Lanes(max(policy.fencing.call_timeout, 5.0))
    try:
        store = FencingStore(CheckpointStorage(policy.storage_options), args.cluster or "status", lanes)
        views, problems = collect(api, store, policy, args.cluster, target, args.held)
    finally:
        lanes.close()
    if args.output == "json":
        print(json.dumps({"jobs": [asdict(v) for v in views], "problems": problems}, indent=2, default=str))
    else:
        print(render(views, problems))
    return 1 if target is not None and not views else 0
