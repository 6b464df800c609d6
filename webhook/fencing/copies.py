"""A Flink object as the fencing protocol sees it: its state, the epoch it runs under, whose records it
keeps. Pure.

The member webhook and the agent share these, so a copy reads the same to both. Where its records and
snapshots live is ``directories``'; the patches that move it are ``patches``'; the hold texts it carries
are ``holdtexts``'.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from webhook.common.contract import (
    EPOCH,
    FAILOVER_COUNT,
    FENCED,
    HOLD,
    RELEASE,
    RELEASE_REQUESTED_BY,
    RESTORE_DECISION,
    STEPPED_DOWN,
)
from webhook.common.flink import BLUE_GREEN, FlinkResource, runs_keeper, with_session_cluster
from webhook.common.paths import StoragePath
from webhook.common.untyped import as_map
from webhook.fencing.directories import clock_folder, ownership_folder, workload_of
from webhook.fencing.layout import Workload
from webhook.fencing.operator import OperatorReport, operator_report
from webhook.fencing.protocol import Ownership
from webhook.policy.restore import RestorePolicy
from webhook.restore.outcome import RestoreOutcome
from webhook.restore.record import RestoreRecord, record_of

NOT_REPORTED = OperatorReport(False, "")
HELD_DECISION = RestoreOutcome.HELD.value


class CopyState(StrEnum):
    RUNNING = "running"  # spec.job.state running: it heartbeats, and a newer fence stops it
    HELD = "held"  # restored and held suspended by us: released when nobody else runs a copy
    STOPPING = "stopping"  # a stale copy we asked to stop; its operator has not reported it stopped
    FENCED = "fenced"  # a stale copy we stopped, and its operator reported it stopped
    STEPPED_DOWN = "stepped-down"  # we suspended it ourselves: its heartbeat could not be renewed
    # Deleted, or suspended by someone else, and its operator has not reported the job stopped: the job
    # may still run (a deletion's cleanup, a suspend, take seconds), so it keeps its heartbeat meanwhile.
    ENDING = "ending"
    IDLE = "idle"  # stopped by someone else by its operator's report, or no job: not ours to move


@dataclass(frozen=True, kw_only=True)
class Copy:
    """One Flink object of this cluster as the fencing agent judges it (``read_copy``), built by keyword."""

    workload: Workload
    state: CopyState
    epoch: int
    job_id: str
    folder: StoragePath | None  # where its ownership records live; None: no checkpoint directory
    resource: FlinkResource
    clock: StoragePath | None = None  # where the agent writes its clock for this storage
    manual_release: bool = False
    hold: str = ""  # the hold annotation as it is now
    operator: OperatorReport = NOT_REPORTED  # what the operator reports (a suspended or deleted copy)
    fenced_epoch: int = 0  # the fence that stopped it (STOPPING, FENCED)
    restored_here: bool = False  # the member webhook restored it (so its restore wrote a fence)
    uid: str = ""  # metadata.uid: lets an Event reach `kubectl describe`
    api_version: str = "flink.apache.org/v1beta1"
    # The object the agent patches. For a FlinkBlueGreenDeployment's child it is the child, while the
    # workload (whose records it keeps) is the parent: children change names (-blue, -green) and
    # clusters, the parent is what Karmada moves.
    target: Workload | None = None
    # A held FlinkBlueGreenDeployment: its children the agent saw (a release starts them).
    children: tuple[str, ...] = ()
    # A FlinkSessionJob's session cluster (its directories and Flink): as the restore recorded it, else as
    # the agent's listing shows it; None when neither knows it.
    session: FlinkResource | None = None
    # Its JobManager's podTemplate carries the lease keeper's sidecar: the spec's word only (the pod that
    # runs may predate it); the heartbeat's writer says when the keeper renews (``renewal``).
    guarded: bool = False

    @property
    def patched(self) -> Workload:
        return self.target or self.workload


def epoch_of(resource: FlinkResource, policy: RestorePolicy) -> int:
    """The failover count a copy's object says it runs under: what its restore fenced under (on an object
    this webhook restored only: a copied template's ``epoch`` is no restore's), else the control plane's
    count, else 0 (it never failed over). The agent judges by :func:`judged_epoch`."""
    keys = (policy.key(EPOCH), policy.key(FAILOVER_COUNT)) if was_restored(resource, policy) else ()
    for key in keys or (policy.key(FAILOVER_COUNT),):
        raw = resource.annotations.get(key, "").strip()
        if raw.isdigit():
            return int(raw)
    return 0


def counted_epoch(resource: FlinkResource, policy: RestorePolicy) -> int:
    """The control plane's failover count, the epoch a failover CREATE fences under (0: none). An epoch
    annotation on the request is never it: a template may carry one copied from an earlier object."""
    raw = resource.annotations.get(policy.key(FAILOVER_COUNT), "").strip()
    return int(raw) if raw.isdigit() else 0


def judged_epoch(me: str, annotated: int, ownership: Ownership) -> int:
    """The epoch ``me``'s copy is judged under: that of the newest fence ``me``'s own restore wrote,
    where the listing has one (the records, not an annotation anyone may edit), else ``annotated``."""
    own = max((f.epoch for f in ownership.fences if f.owner == me), default=0)
    return own or annotated


# (namespace, name) -> a session cluster FlinkDeployment the agent listed
SessionClusters = Mapping[tuple[str, str], FlinkResource]


def as_restored(
    resource: FlinkResource, policy: RestorePolicy, sessions: SessionClusters | None = None
) -> tuple[FlinkResource, FlinkResource | None]:
    """The object as its restore saw it (``restore/record.py``: the recorded jobId, directories, parent
    and restoring Flink over whatever the object says now), with a session job's cluster settings merged
    in; and that session cluster. An object without a record (never restored here) is read as it is."""
    record = record_of(resource, policy)
    listed = (sessions or {}).get((resource.namespace, resource.deployment_name))
    if isinstance(record, RestoreRecord):
        session = None
        if record.kind == "FlinkSessionJob" and record.session_cluster:
            session = _recorded_cluster(record, resource.namespace)
        return record.view(resource, policy), session
    return with_session_cluster(resource, listed), listed if resource.kind == "FlinkSessionJob" else None


def _recorded_cluster(record: RestoreRecord, namespace: str) -> FlinkResource:
    """The session cluster as the restore read it: the Flink it runs (its directories are in the view)."""
    return FlinkResource(
        kind="FlinkDeployment",
        namespace=namespace,
        name=record.session_cluster,
        labels={},
        annotations={},
        job=None,
        configuration=dict(record.claim),
        flink_version=record.flink_version,
        image=record.image,
    )


def read_copy(obj: Mapping[str, Any], policy: RestorePolicy, sessions: SessionClusters | None = None) -> Copy:
    """``sessions``: the session clusters the agent listed (a session job's directories may be its
    cluster's). Where the copy's state lives, its jobId to restore and its parent are the restore
    record's (``as_restored``)."""
    resource, session = as_restored(FlinkResource.from_object(obj), policy, sessions)
    status = as_map(as_map(obj.get("status")).get("jobStatus"))
    job_id = str(status.get("jobId") or "")
    hold = resource.annotations.get(policy.key(HOLD), "")
    report = operator_report(obj)
    fenced = resource.labels.get(policy.key(FENCED), "")
    if resource.job is None:
        state = CopyState.IDLE
    elif resource.deleting:  # gone once the operator's cleanup has stopped the job
        idle = report.stopped or resource.kind == BLUE_GREEN  # a template runs no job itself
        state = CopyState.IDLE if idle else CopyState.ENDING
    elif fenced:
        # A restore superseded while it was held never ran: its empty status is the operator's silence
        # about an object it never deployed, not a stop it has yet to report.
        never_ran = report.empty and resource.annotations.get(policy.key(RESTORE_DECISION)) == HELD_DECISION
        stopped = (report.stopped or never_ran) and resource.state == "suspended"
        state = CopyState.FENCED if stopped else CopyState.STOPPING
    elif resource.annotations.get(policy.key(STEPPED_DOWN)) and resource.state == "suspended":
        state = CopyState.STEPPED_DOWN
    elif hold and resource.state == "suspended":
        state = CopyState.HELD
    elif resource.kind == BLUE_GREEN:
        state = CopyState.IDLE  # a template: its children run the job, and are the copies
    elif resource.state == "running":
        state = CopyState.RUNNING
    else:
        state = CopyState.IDLE if report.stopped else CopyState.ENDING
    manual = release_asked(resource, policy)
    child = Workload(resource.kind, resource.namespace, resource.name) if resource.blue_green_parent else None
    return Copy(
        workload=workload_of(resource),
        state=state,
        epoch=epoch_of(resource, policy),
        job_id=job_id,
        folder=ownership_folder(resource, policy),
        resource=resource,
        clock=clock_folder(resource, policy),
        manual_release=manual,
        hold=hold,
        operator=report,
        fenced_epoch=int(fenced) if fenced.isdigit() else 0,
        restored_here=was_restored(resource, policy),
        uid=str(as_map(obj.get("metadata")).get("uid") or ""),
        api_version=str(obj.get("apiVersion") or "flink.apache.org/v1beta1"),
        target=child,
        session=session,
        guarded=runs_keeper(obj) or _session_guarded(resource, session, sessions),
    )


def _session_guarded(
    resource: FlinkResource, session: FlinkResource | None, sessions: SessionClusters | None
) -> bool:
    """A FlinkSessionJob whose session cluster, as the agent listed it, runs the lease keeper."""
    if resource.kind != "FlinkSessionJob":
        return False
    name = session.name if session is not None else resource.deployment_name
    listed = (sessions or {}).get((resource.namespace, name))
    return listed is not None and listed.session_keeper


def with_children(found: list[Copy]) -> list[Copy]:
    """A held FlinkBlueGreenDeployment knows the children the operator created for it (its release
    starts them)."""
    children: dict[Workload, list[str]] = {}
    for copy in found:
        if copy.target is not None:
            children.setdefault(copy.workload, []).append(copy.target.name)
    return [
        replace(c, children=tuple(sorted(children.get(c.workload, ()))))
        if c.workload.kind == BLUE_GREEN and c.target is None
        else c
        for c in found
    ]


def was_restored(resource: FlinkResource, policy: RestorePolicy) -> bool:
    """The member webhook restored this object (held or started): its epoch is its restore's."""
    decision = resource.annotations.get(policy.key(RESTORE_DECISION), "")
    return decision in (RestoreOutcome.RESTORED.value, RestoreOutcome.HELD.value)


def release_asked_by(copy: Copy, policy: RestorePolicy) -> str:
    """Who set ``release: "true"`` (the webhook recorded it at admission), for the log and the Event."""
    return copy.resource.annotations.get(policy.key(RELEASE_REQUESTED_BY), "")


def release_asked(resource: FlinkResource, policy: RestorePolicy) -> bool:
    """A manual release counts only with the requester the member webhook recorded when it was asked
    while the job was held: a ``release: "true"`` left over from before the hold (``release --force`` on
    a copy that was not held, a template that carried it) never releases a later hold."""
    asked = resource.annotations.get(policy.key(RELEASE), "").strip().lower() == "true"
    return asked and bool(resource.annotations.get(policy.key(RELEASE_REQUESTED_BY), "").strip())
