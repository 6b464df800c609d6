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
    RELEASED,
    RESTORE_DECISION,
    RESTORED_FROM,
)
from webhook.common.flink import FlinkResource
from webhook.common.paths import StoragePath, StoragePathError
from webhook.common.untyped import as_map
from webhook.member.fencing.protocol import Fence, HoldVerdict, ReleaseCause
from webhook.member.fencing.records import FOLDER, Workload
from webhook.member.policy import RestorePolicy
from webhook.member.restore import RestoreDecision, RestoreOutcome

HA_KEYS = ("high-availability.type", "high-availability")


class CopyState(StrEnum):
    RUNNING = "running"  # spec.job.state running: it heartbeats, and a newer fence stops it
    HELD = "held"  # restored and held suspended by us: released when nobody else runs a copy
    FENCED = "fenced"  # a stale copy we stopped
    IDLE = "idle"  # suspended by someone else, or no job: not ours to move


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


def epoch_of(resource: FlinkResource, policy: RestorePolicy) -> int:
    """The failover count a copy runs under: what its restore fenced under, else the control plane's
    count, else 0 (it never failed over)."""
    for key in (policy.key(EPOCH), policy.key(FAILOVER_COUNT)):
        raw = resource.annotations.get(key, "").strip()
        if raw.isdigit():
            return int(raw)
    return 0


def ownership_folder(resource: FlinkResource, policy: RestorePolicy) -> StoragePath | None:
    """``<checkpoint-dir>/flink-failover/...`` in the job's own scheme; None when it has no usable one."""
    root = _checkpoint_dir(resource, policy)
    if root is None or not resource.name:
        return None
    try:
        return workload_of(resource).folder(root)
    except StoragePathError:
        return None


def clock_folder(resource: FlinkResource, policy: RestorePolicy) -> StoragePath | None:
    """``<checkpoint-dir>/flink-failover``: where an agent learns the storage's time once per poll."""
    root = _checkpoint_dir(resource, policy)
    return None if root is None else root.child(FOLDER)


def _checkpoint_dir(resource: FlinkResource, policy: RestorePolicy) -> StoragePath | None:
    raw = resource.checkpoint_dir or policy.default_checkpoint_dir
    if not raw:
        return None
    try:
        path = StoragePath.parse(raw)
    except StoragePathError:
        return None
    return path if path.scheme in policy.allowed_schemes else None


def workload_of(resource: FlinkResource) -> Workload:
    return Workload(resource.kind, resource.namespace, resource.name)


def read_copy(obj: Mapping[str, Any], policy: RestorePolicy) -> Copy:
    resource = FlinkResource.from_object(obj)
    status = as_map(as_map(obj.get("status")).get("jobStatus"))
    job_id = str(status.get("jobId") or "")
    hold = resource.annotations.get(policy.key(HOLD), "")
    if resource.job is None or resource.deleting:
        state = CopyState.IDLE
    elif resource.labels.get(policy.key(FENCED)):
        state = CopyState.FENCED
    elif hold and resource.state == "suspended":
        state = CopyState.HELD
    elif resource.state == "running":
        state = CopyState.RUNNING
    else:
        state = CopyState.IDLE
    manual = resource.annotations.get(policy.key(RELEASE), "").strip().lower() == "true"
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
    )


def high_availability(resource: FlinkResource) -> bool:
    for key in HA_KEYS:
        value = resource.configuration.get(key, "").strip()
        if value and value.upper() != "NONE":
            return True
    return False


def stop_mode(resource: FlinkResource) -> str:
    """The upgradeMode under which ``state: suspended`` stops a copy without a savepoint.

    last-state deletes the Flink cluster and keeps its HA data and checkpoints (no cancel); it needs HA
    and a FlinkDeployment. Otherwise stateless: the operator cancels the job, and the checkpoints stay
    only if the job retains them on cancellation (docs/failover.md says so).
    """
    if resource.kind == "FlinkDeployment" and high_availability(resource):
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


def hold_patch(text: str, policy: RestorePolicy) -> dict[str, Any]:
    return {"metadata": {"annotations": {policy.key(HOLD): text}}}


def release_patch(path: str, cause: ReleaseCause, policy: RestorePolicy, when: str) -> dict[str, Any]:
    annotations: dict[str, Any] = {
        policy.key(HOLD): None,
        policy.key(RELEASE): None,
        policy.key(RELEASED): f"{cause.value} at {when}",
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
                policy.key(FENCED_BY): f"{fence.owner} at epoch {fence.epoch}, superseded {when}",
            },
        }
    }


def format_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def hold_subject(clusters: tuple[str, ...], epoch: int) -> str:
    """The part of a hold text that changes only when whom it waits for changes (the rest moves every
    poll): the agent rewrites the annotation only when this part differs."""
    return f"epoch {epoch}: waiting for {', '.join(clusters)} to stop"


def hold_text(verdict: HoldVerdict, epoch: int, local_now: datetime) -> str:
    """Whom a hold waits for and until when (``until``: by this machine's clock, for people)."""
    subject = hold_subject(tuple(w.cluster for w in verdict.waiting), epoch)
    ages = ", ".join(f"{w.age:.0f}s" for w in verdict.waiting)
    until = format_time(local_now + timedelta(seconds=verdict.remaining))
    return f"{subject}; heartbeat age {ages}; until {until} unless renewed"


def unknown_age_text(clusters: tuple[str, ...], epoch: int) -> str:
    return f"epoch {epoch}: waiting for {', '.join(clusters)} (a dry run writes no fence; ages unknown)"


def storage_text(epoch: int, problem: str) -> str:
    return f"epoch {epoch}: waiting for the ownership records to be readable ({problem[:300]})"


def held(decision: RestoreDecision, text: str, epoch: int, policy: RestorePolicy) -> RestoreDecision:
    """A restore admitted suspended: the path stays (it still counts on the first start), the object
    says whom it waits for; the agent releases it and resolves the path again then."""
    spec_job = {**decision.spec_job, "state": "suspended"}
    annotations = {**decision.annotations, policy.key(HOLD): text, policy.key(EPOCH): str(epoch)}
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
    return resource.annotations.get(policy.key(RESTORE_DECISION), "") == RestoreOutcome.RESTORED.value
