"""What a restore decision is, and the fields a restore writes on the object.

Pure: the values ``decide_restore`` (``restore/decide.py``) and the UPDATE rules (``restore/updates.py``)
both return, and the spec.job fields and annotations a restore from a path puts on the object.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from webhook.common.contract import RESTORE_DECISION, RESTORED_FROM, RESTORED_JOB_ID
from webhook.common.flink import FlinkResource
from webhook.policy.restore import RestorePolicy, StatePolicy, UpgradeModePolicy


class RestoreOutcome(StrEnum):
    """The member role's outcomes: what it logs, and the ``decision`` label of its admission metrics.

    ``decide_restore`` returns one of the first five; the handler tells an UPDATE that got our fields
    back (carried) from one that still had them (unchanged), and answers error when it failed.
    """

    SKIP = "skip"  # not ours to touch: allowed, no patch
    RESTORED = "restored"
    SUSPENDED = "suspended"
    STATELESS = "stateless"
    DENIED = "denied"
    HELD = "held"  # restored, but admitted suspended until the old copy stops (fencing)
    CARRIED = "carried"
    UNCHANGED = "unchanged"
    ERROR = "error"


@dataclass(frozen=True)
class RestoreDecision:
    outcome: RestoreOutcome
    reason: str = ""  # why; the denial message when DENIED
    job_id: str = ""
    path: str = ""  # restore path, in the job's own scheme spelling
    source: str = ""  # checkpoint | savepoint
    carried: bool = False  # replayed from oldObject on UPDATE, storage untouched
    storage_error: bool = False  # the state is unknown because storage failed, not known to be absent
    checkpoint_dir_from: str = ""  # where the checkpoint directory was read (the audit says it)
    storage: str = ""  # what was looked up in storage (job directory, savepoint), for the audit
    # When the job completed nothing restorable of its own and the restore uses the snapshot it was
    # started from: "job <jobId> completed nothing restorable; it started from <path>" (audit, warning).
    lineage: str = ""
    warnings: tuple[str, ...] = ()
    spec_job: Mapping[str, str] = field(default_factory=dict)  # spec.job fields the object must have
    annotations: Mapping[str, str] = field(default_factory=dict)  # annotations the object must have
    labels: Mapping[str, str] = field(default_factory=dict)  # labels the object must have (a fenced copy)
    # Held rather than rewound (policy onUnloadable: hold): a newer snapshot exists that the restoring
    # Flink cannot load. A fencing release never starts from older state in its stead.
    unloadable: bool = False
    storage_rounds: int = 0  # storage requests the lookup waited for one after another (the audit)
    storage_requests: int = 0  # storage requests the lookup made


def triggered(resource: FlinkResource, policy: RestorePolicy) -> bool:
    if resource.labels.get(policy.failover_label, "").lower() == "true":
        return True
    return any(resource.labels.get(label) for label in policy.job_id_labels)


def job_id_label(resource: FlinkResource, policy: RestorePolicy) -> tuple[str, str] | None:
    """(label, value) of the first configured jobId label present."""
    for label in policy.job_id_labels:
        value = resource.labels.get(label)
        if value:
            return label, value
    return None


def restore_from(
    resource: FlinkResource,
    job_id: str,
    path: str,
    source: str,
    policy: RestorePolicy,
    *,
    has_savepoint_dir: bool,
    warnings: tuple[str, ...] = (),
    carried: bool = False,
) -> RestoreDecision:
    """Build the decision that restores ``resource`` from ``path`` (a ``source``: checkpoint, savepoint,
    carried): the spec.job fields and the decision annotations it writes."""
    spec_job: dict[str, str] = {"initialSavepointPath": path}
    mode = _upgrade_mode(resource, policy, has_savepoint_dir)
    if mode:
        spec_job["upgradeMode"] = mode
    elif policy.upgrade_mode is UpgradeModePolicy.LAST_STATE and not carried:
        warnings = (*warnings, _last_state_refused(resource))
    if policy.state is StatePolicy.RUNNING:
        spec_job["state"] = "running"
    annotations = {
        policy.key(RESTORE_DECISION): RestoreOutcome.RESTORED.value,
        policy.key(RESTORED_FROM): path,
    }
    if job_id:
        annotations[policy.key(RESTORED_JOB_ID)] = job_id
    return RestoreDecision(
        RestoreOutcome.RESTORED,
        f"restoring from {source} {path}",
        job_id=job_id,
        path=path,
        source=source,
        carried=carried,
        warnings=warnings,
        spec_job=spec_job,
        annotations=annotations,
    )


# Operators from 1.10 on accept last-state without high availability; before, their validator refuses it.
LAST_STATE_WITHOUT_HA = (1, 10)


def _last_state_refused(resource: FlinkResource) -> str:
    """Why policy ``upgradeMode: last-state`` was not written (the operator's validator would refuse it)."""
    if resource.kind == "FlinkSessionJob":
        return "upgradeMode last-state not set: the Flink operator refuses it for a FlinkSessionJob"
    return (
        "upgradeMode last-state not set: without high-availability configured the Flink operator accepts "
        "it only from 1.10 on, and the policy does not say the operator is that new (set operatorVersion, "
        'e.g. "1.10", or configure high-availability.type)'
    )


def last_state_accepted(resource: FlinkResource, policy: RestorePolicy) -> bool:
    """Would the target operator accept ``upgradeMode: last-state`` for this resource?

    Never for a session job; with HA configured, always; without, only from operator 1.10 on, which
    the policy must state (``operatorVersion``): an unknown operator is taken to be an older one.
    """
    if resource.kind == "FlinkSessionJob":
        return False
    if resource.high_availability:
        return True
    return policy.operator_version is not None and policy.operator_version >= LAST_STATE_WITHOUT_HA


def _upgrade_mode(resource: FlinkResource, policy: RestorePolicy, has_savepoint_dir: bool) -> str:
    """The upgradeMode to write, or "" to leave it; never one the operator's validator would reject
    (a rejected CREATE blocks the failover: docs/flink.md "Operator versions")."""
    has_checkpoint_dir = bool(resource.checkpoint_dir or policy.default_checkpoint_dir)
    match policy.upgrade_mode:
        case UpgradeModePolicy.KEEP:
            return ""
        case UpgradeModePolicy.SAVEPOINT:
            return "savepoint"
        case UpgradeModePolicy.LAST_STATE:
            return "last-state" if last_state_accepted(resource, policy) else ""
        case UpgradeModePolicy.AUTO:
            if resource.upgrade_mode != "stateless":
                return ""
            if has_savepoint_dir and has_checkpoint_dir:
                return "savepoint"
            if has_checkpoint_dir and last_state_accepted(resource, policy):
                return "last-state"
            return ""
    return ""


def decision_annotations(policy: RestorePolicy, outcome: RestoreOutcome, job_id: str) -> dict[str, str]:
    out = {policy.key(RESTORE_DECISION): outcome.value}
    if job_id:
        out[policy.key(RESTORED_JOB_ID)] = job_id
    return out
