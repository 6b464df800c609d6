"""A Flink object as the fencing protocol sees it, and the patches that move it. Pure.

The member webhook and the agent share these, so a hold written at admission and one written by the
agent read the same, and every patch is a JSON merge patch over plain data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from webhook.common.contract import (
    EPOCH,
    FAILOVER_COUNT,
    FENCED,
    FENCED_BY,
    FENCED_UPGRADE_MODE,
    HOLD,
    RELEASE,
    RELEASE_REQUESTED_BY,
    RELEASED,
    RESTORE_DECISION,
    RESTORED_FROM,
    RESUMED,
    STEPPED_DOWN,
)
from webhook.common.flink import BLUE_GREEN, FlinkResource, runs_keeper, with_session_cluster
from webhook.common.paths import StoragePath, StoragePathError
from webhook.common.untyped import as_map
from webhook.fencing.layout import FOLDER, Workload
from webhook.fencing.operator import OperatorReport, operator_report
from webhook.fencing.protocol import Fence, HoldVerdict, Ownership, ReleaseCause, Waiting
from webhook.policy.restore import RestorePolicy
from webhook.restore.outcome import RestoreDecision, RestoreOutcome
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


@dataclass(frozen=True)
class Copy:
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
    keys = (policy.key(EPOCH), policy.key(FAILOVER_COUNT)) if restored(resource, policy) else ()
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


def ownership_folder(resource: FlinkResource, policy: RestorePolicy) -> StoragePath | None:
    """``<checkpoint-dir>/flink-failover/...`` in the job's own scheme; None when it has no usable one."""
    root = checkpoint_dir_of(resource, policy)
    if root is None or not resource.name:
        return None
    try:
        return workload_of(resource).folder(root)
    except StoragePathError:
        return None


def clock_folder(resource: FlinkResource, policy: RestorePolicy) -> StoragePath | None:
    """``<checkpoint-dir>/flink-failover``: where an agent learns the storage's time once per poll."""
    root = checkpoint_dir_of(resource, policy)
    return None if root is None else root.child(FOLDER)


def checkpoint_dir_of(resource: FlinkResource, policy: RestorePolicy) -> StoragePath | None:
    return _usable_dir(resource.checkpoint_dir or policy.default_checkpoint_dir, policy)


def savepoint_dir_of(resource: FlinkResource, policy: RestorePolicy) -> StoragePath | None:
    """The job's savepoint directory (its own configuration, else the policy's), when usable."""
    return _usable_dir(resource.savepoint_dir or policy.default_savepoint_dir, policy)


def _usable_dir(raw: str, policy: RestorePolicy) -> StoragePath | None:
    if not raw:
        return None
    try:
        path = StoragePath.parse(raw)
    except StoragePathError:
        return None
    return path if path.scheme in policy.allowed_schemes else None


def workload_of(resource: FlinkResource) -> Workload:
    """What the records are kept for: the object itself, or a blue/green child's parent."""
    if resource.blue_green_parent:
        return Workload(BLUE_GREEN, resource.namespace, resource.blue_green_parent)
    return Workload(resource.kind, resource.namespace, resource.name)


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
    return Copy(
        workload_of(resource),
        state,
        epoch_of(resource, policy),
        job_id,
        ownership_folder(resource, policy),
        resource,
        clock_folder(resource, policy),
        manual,
        hold,
        report,
        int(fenced) if fenced.isdigit() else 0,
        restored(resource, policy),
        str(as_map(obj.get("metadata")).get("uid") or ""),
        str(obj.get("apiVersion") or "flink.apache.org/v1beta1"),
        Workload(resource.kind, resource.namespace, resource.name) if resource.blue_green_parent else None,
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


def stop_mode(resource: FlinkResource) -> str:
    """The upgradeMode under which ``state: suspended`` stops a copy without a savepoint.

    last-state deletes the Flink cluster and keeps its HA data and checkpoints (no cancel); it needs HA
    and a FlinkDeployment. Otherwise stateless: the operator cancels the job, and the checkpoints stay
    only if the job retains them on cancellation (docs/failover.md says so).
    """
    if resource.kind == "FlinkDeployment" and resource.high_availability:  # Flink's reading of the keys
        return "last-state"
    return "stateless"


def stop_patch(copy: Copy, fence: Fence, policy: RestorePolicy, when: str) -> dict[str, Any]:
    return {
        "metadata": {
            "labels": {policy.key(FENCED): str(fence.epoch)},
            "annotations": {
                policy.key(FENCED_BY): f"{fence.owner} at epoch {fence.epoch}, stopped {when}",
                policy.key(FENCED_UPGRADE_MODE): copy.resource.upgrade_mode,
            },
        },
        "spec": {"job": {"state": "suspended", "upgradeMode": stop_mode(copy.resource)}},
    }


def step_down_patch(copy: Copy, reason: str, policy: RestorePolicy, when: str) -> dict[str, Any]:
    """Suspend our own copy without a savepoint: its heartbeat could not be renewed in time."""
    return {
        "metadata": {
            "annotations": {
                policy.key(STEPPED_DOWN): f"{reason}; stopped {when}",
                policy.key(FENCED_UPGRADE_MODE): copy.resource.upgrade_mode,
                policy.key(RESUMED): None,
            },
        },
        "spec": {"job": {"state": "suspended", "upgradeMode": stop_mode(copy.resource)}},
    }


def resume_patch(copy: Copy, path: str, policy: RestorePolicy, when: str) -> dict[str, Any]:
    """Start a stepped-down copy again from ``path`` (its own newest restorable checkpoint).

    A suspended job does not resume from state by itself without HA, so the operator is asked for a
    savepoint redeploy (``savepointRedeployNonce`` with ``initialSavepointPath``, operator 1.8+); with HA
    and last-state it resumes from its HA metadata and the path only documents where it stood."""
    before = copy.resource.annotations.get(policy.key(FENCED_UPGRADE_MODE), "")
    mode = (
        before
        if before in ("savepoint", "last-state")
        else ("last-state" if stop_mode(copy.resource) == "last-state" else "savepoint")
    )
    job: dict[str, Any] = {"state": "running", "upgradeMode": mode}
    if path:
        nonce = copy.resource.job.get("savepointRedeployNonce") if copy.resource.job else None
        job["initialSavepointPath"] = path
        job["savepointRedeployNonce"] = (nonce if isinstance(nonce, int) else 0) + 1
    return {
        "metadata": {
            "annotations": {
                policy.key(STEPPED_DOWN): None,
                policy.key(FENCED_UPGRADE_MODE): None,
                policy.key(RESUMED): f"at {when} from {path or 'its own HA metadata or last savepoint'}",
            }
        },
        "spec": {"job": job},
    }


def hold_patch(text: str, policy: RestorePolicy) -> dict[str, Any]:
    return {"metadata": {"annotations": {policy.key(HOLD): text}}}


def child_release_patch(path: str) -> dict[str, Any]:
    """Start a held FlinkBlueGreenDeployment's child (created suspended from the held template): the
    child, not the parent, because a template change on the parent starts a blue/green transition (and
    is reverted during the first one). The parent keeps ``state: suspended`` in its template until its
    next update (docs/flink.md "FlinkBlueGreenDeployment")."""
    job: dict[str, Any] = {"state": "running"}
    if path:
        job["initialSavepointPath"] = path
    return {"spec": {"job": job}}


def release_patch(
    path: str, cause: ReleaseCause, policy: RestorePolicy, when: str, asked_by: str = ""
) -> dict[str, Any]:
    """Start a held copy; a manual release names who asked (read by the webhook at admission)."""
    by = f" (asked by {asked_by})" if cause is ReleaseCause.MANUAL and asked_by else ""
    annotations: dict[str, Any] = {
        policy.key(HOLD): None,
        policy.key(RELEASE): None,
        policy.key(RELEASE_REQUESTED_BY): None,
        policy.key(RELEASED): f"{cause.value} at {when}{by}",
        policy.key(RESTORE_DECISION): RestoreOutcome.RESTORED.value,
    }
    job: dict[str, Any] = {"state": "running"}
    if path:
        job["initialSavepointPath"] = path
        annotations[policy.key(RESTORED_FROM)] = path
    return {"metadata": {"annotations": annotations}, "spec": {"job": job}}


def superseded_patch(fence: Fence, policy: RestorePolicy, when: str) -> dict[str, Any]:
    return {
        "metadata": {
            "labels": {policy.key(FENCED): str(fence.epoch)},
            "annotations": {
                policy.key(HOLD): None,
                policy.key(RELEASE): None,
                policy.key(RELEASE_REQUESTED_BY): None,
                policy.key(FENCED_BY): f"{fence.owner} at epoch {fence.epoch}, superseded {when}",
            },
        }
    }


def format_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def hold_subject(waiting: tuple[Waiting, ...], epoch: int) -> str:
    """The part of a hold text that changes only when whom it waits for, or what they do, changes (the
    ages move every poll): the agent rewrites the annotation when this part differs."""
    parts = [f"{w.cluster} (stopping its job)" if w.stopping_since else w.cluster for w in waiting]
    return f"epoch {epoch}: waiting for {', '.join(parts)} to stop"


def hold_text(verdict: HoldVerdict, epoch: int, local_now: datetime) -> str:
    """Whom a hold waits for, since when they renewed (storage time) and until when the lease runs if
    they stop renewing (``until``: by this machine's clock, for people)."""
    subject = hold_subject(verdict.waiting, epoch)
    beats = "; ".join(_waiting_text(w) for w in verdict.waiting)
    until = format_time(local_now + timedelta(seconds=verdict.remaining))
    return f"{subject}; {beats}; lease runs out {until} unless renewed"


def _waiting_text(waiting: Waiting) -> str:
    text = f"{waiting.cluster} renewed its heartbeat {format_time(waiting.renewed)} (storage time)"
    if waiting.age is not None:
        text += f", {waiting.age:.0f}s old"
    if waiting.stopping_since is not None:
        text += f", asked its operator to stop the job {format_time(waiting.stopping_since)}"
    return text


def unknown_age_text(clusters: tuple[str, ...], epoch: int) -> str:
    return f"epoch {epoch}: waiting for {', '.join(clusters)} (a dry run writes no fence; ages unknown)"


def unvouched_text(epoch: int, problem: str) -> str:
    """A restore the fencing agent cannot vouch for: held until it can (it then judges the hold)."""
    return f"epoch {epoch}: waiting for this cluster's fencing agent ({problem[:300]})"


def storage_text(epoch: int, problem: str) -> str:
    return f"epoch {epoch}: waiting for the ownership records to be readable ({problem[:300]})"


def unchecked_text(epoch: int, problem: str) -> str:
    """A release that could not check the newest checkpoint: it waits, and is tried again every poll."""
    return (
        f"epoch {epoch}: release waits until the newest checkpoint can be checked, tried again every "
        f"poll ({problem[:300]})"
    )


def held(
    decision: RestoreDecision,
    text: str,
    epoch: int,
    policy: RestorePolicy,
    resource: FlinkResource | None = None,
) -> RestoreDecision:
    """A restore admitted suspended: the path stays (it still counts on the first start), the object
    says whom it waits for; the agent releases it and resolves the path again then. Release markers the
    created object carries (a template's) are emptied: only a request made while it is held counts."""
    spec_job = {**decision.spec_job, "state": "suspended"}
    carried = resource.annotations if resource is not None else {}
    annotations = {
        **decision.annotations,
        **{
            policy.key(k): "" for k in (RELEASE, RELEASE_REQUESTED_BY, RELEASED) if carried.get(policy.key(k))
        },
        policy.key(HOLD): text,
        policy.key(EPOCH): str(epoch),
        policy.key(RESTORE_DECISION): RestoreOutcome.HELD.value,
    }
    warning = f"job held suspended until the old copy stops: {text}"
    return replace(
        decision,
        outcome=RestoreOutcome.HELD,
        spec_job=spec_job,
        annotations=annotations,
        warnings=(*decision.warnings, warning),
    )


def fenced_without_hold(decision: RestoreDecision, epoch: int, policy: RestorePolicy) -> RestoreDecision:
    """A restore that need not wait still records the epoch it fenced under."""
    return replace(decision, annotations={**decision.annotations, policy.key(EPOCH): str(epoch)})


def restored(resource: FlinkResource, policy: RestorePolicy) -> bool:
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
