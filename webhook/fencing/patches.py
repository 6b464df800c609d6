"""The JSON merge patches that move a copy (stop, step down, resume, hold, release, supersede), and the
hold a restore is admitted with. Pure: plain data in, plain data out.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from webhook.common.contract import (
    EPOCH,
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
from webhook.common.flink import FlinkResource
from webhook.fencing.copies import Copy
from webhook.fencing.protocol import Fence, ReleaseCause
from webhook.policy.restore import RestorePolicy
from webhook.restore.outcome import RestoreDecision, RestoreOutcome


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
