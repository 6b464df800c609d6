"""The UPDATE rules: what an UPDATE of an object this webhook restored, held or fenced keeps.

Pure. Karmada re-applies its template and drops what the webhook set at CREATE: the fields are carried
over from ``oldObject``; a job held for fencing stays held until this cluster's fencing agent releases it,
decided from ``oldObject`` whatever the request removed or changed (labels, hold, epoch); a blue/green
child is held by its parent's hold; a stale copy the agent stopped stays stopped.
"""

from __future__ import annotations

from dataclasses import replace

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
    RESTORE_RECORD,
    RESTORED_FROM,
    RESTORED_JOB_ID,
)
from webhook.common.flink import FlinkResource
from webhook.policy.restore import RestorePolicy
from webhook.restore.outcome import (
    RestoreDecision,
    RestoreOutcome,
    decision_annotations,
    restore_from,
    triggered,
)
from webhook.restore.record import RestoreRecord, record_of


def carry_over(
    resource: FlinkResource,
    old: FlinkResource | None,
    policy: RestorePolicy,
    requester: str = "",
    from_agent: bool = False,
    agent_unknown: str = "",
) -> RestoreDecision:
    """Karmada re-applied its template and dropped what we set at CREATE: put it back, storage untouched.

    A job held for fencing is judged by ``old`` alone: whatever the request did to its labels, its
    hold, its restore decision, its epoch or its path, it stays held until the agent releases it."""
    recorded = old.annotations.get(policy.key(RESTORE_DECISION), "") if old is not None else ""
    held = old is not None and _still_held(resource, old, policy, from_agent)
    if held and recorded != RestoreOutcome.RESTORED:
        recorded = RestoreOutcome.HELD  # the hold is the record, whatever an earlier edit left beside it
    if old is None or recorded not in (
        RestoreOutcome.RESTORED,
        RestoreOutcome.HELD,
        RestoreOutcome.SUSPENDED,
        RestoreOutcome.STATELESS,
    ):
        return RestoreDecision(RestoreOutcome.SKIP, "update of an object this webhook did not restore")
    job_id = old.annotations.get(policy.key(RESTORED_JOB_ID), "")
    if recorded in (RestoreOutcome.RESTORED, RestoreOutcome.HELD):
        path = old.annotations.get(policy.key(RESTORED_FROM), "") or old.initial_savepoint_path
        explicit = bool(resource.initial_savepoint_path) and resource.initial_savepoint_path != path
        if not held and not path:
            return RestoreDecision(RestoreOutcome.SKIP, "restored object without a recorded path")
        if not held and explicit:
            return RestoreDecision(RestoreOutcome.SKIP, "initialSavepointPath set explicitly")
        spec_job: dict[str, str] = {}
        if path and not explicit:
            has_sp = bool(resource.savepoint_dir or policy.default_savepoint_dir)
            decision = restore_from(
                resource, job_id, path, "carried", policy, has_savepoint_dir=has_sp, carried=True
            )
            # Keep upgradeMode as it was after CREATE rather than recomputing it from a changed spec.
            spec_job = dict(decision.spec_job)
            if old.job_field("upgradeMode") and resource.upgrade_mode == "stateless":
                spec_job["upgradeMode"] = str(old.job_field("upgradeMode"))
        else:  # held with a path of the request's own (or none): the path may change, the hold may not
            decision = RestoreDecision(
                RestoreOutcome.HELD,
                "carried over from the previous object",
                job_id=job_id,
                path=path,
                carried=True,
                annotations={policy.key(RESTORED_FROM): path} if path else {},
            )
        annotations = dict(decision.annotations)
        if job_id:
            annotations[policy.key(RESTORED_JOB_ID)] = job_id
        _keep_epoch(resource, old, policy, annotations)
        _keep_record(resource, old, policy, annotations)
        notes = list(decision.warnings)
        labels: dict[str, str] = {}
        if held:
            # A re-applied template or an edit must not start a job held for fencing; the agent releases it.
            spec_job["state"] = "suspended"
            hold = old.annotations[policy.key(HOLD)]
            if from_agent and resource.annotations.get(policy.key(HOLD)):
                hold = resource.annotations[policy.key(HOLD)]  # the agent rewrites whom it waits for
            annotations[policy.key(HOLD)] = hold
            annotations[policy.key(RESTORE_DECISION)] = RestoreOutcome.HELD.value
            # The trigger labels stay, so every later UPDATE still reaches this webhook by its labels.
            labels = {
                key: value
                for key, value in old.labels.items()
                if key in (policy.failover_label, *policy.job_id_labels) and key not in resource.labels
            }
            notes.append(f"job stays held suspended (carried over from the previous object): {hold}")
            if _release_marker_changed(resource, old, policy):
                who = requester or "an unknown user"
                unknown = (
                    f" (the agent's identity is not known here: {agent_unknown})" if agent_unknown else ""
                )
                notes.append(
                    f"{policy.key(RELEASED)} set by {who} {RELEASE_IGNORED}{unknown}; ask it with "
                    f"{policy.key(RELEASE)}=true (flink-failover release)"
                )
                annotations[policy.key(RELEASED)] = old.annotations.get(policy.key(RELEASED), "")
            asked_by = policy.key(RELEASE_REQUESTED_BY)
            template = _template_release(resource, old, policy, requester)
            if template:
                notes.append(template)
                if resource.annotations.get(asked_by) or old.annotations.get(asked_by):
                    annotations[asked_by] = old.annotations.get(asked_by, "")
            elif _release_asked(resource, old, policy):
                annotations[asked_by] = requester or "unknown"
            elif resource.annotations.get(asked_by) or old.annotations.get(asked_by):
                annotations[asked_by] = old.annotations.get(asked_by, "")  # never set by the request itself
        elif recorded == RestoreOutcome.HELD and not resource.annotations.get(policy.key(HOLD)):
            annotations[policy.key(RESTORE_DECISION)] = RestoreOutcome.RESTORED.value  # the agent's release
        return replace(
            decision, spec_job=spec_job, annotations=annotations, labels=labels, warnings=tuple(notes)
        )
    annotations = decision_annotations(policy, RestoreOutcome(recorded), job_id)
    _keep_record(resource, old, policy, annotations)
    if recorded == RestoreOutcome.SUSPENDED:
        return _suspended(resource, old, policy, requester, job_id, annotations)
    return RestoreDecision(
        RestoreOutcome(recorded),
        "carried over from the previous object",
        job_id=job_id,
        carried=True,
        annotations=annotations,
    )


# How a job held for want of state is started by a person (the warning of every UPDATE that keeps it).
SUSPENDED_WAYS_OUT = (
    "start it with spec.job.initialSavepointPath (a snapshot) or {release}=true (flink-failover release: "
    "no state); state: running alone is reverted"
)


def _suspended(
    resource: FlinkResource,
    old: FlinkResource,
    policy: RestorePolicy,
    requester: str,
    job_id: str,
    annotations: dict[str, str],
) -> RestoreDecision:
    """A job held for want of state (nothing restorable when it was created) stays held through every
    UPDATE but a person's way out, which is recorded: a restore path set on it (the decision becomes
    ``restored`` from that path, so later re-applied templates keep it), or the release annotation (the
    decision becomes ``stateless``: started empty, as asked)."""
    who = requester or "an unknown user"
    path = resource.initial_savepoint_path
    if path and path != old.initial_savepoint_path:
        note = f"started from spec.job.initialSavepointPath {path}, set by {who}"
        annotations = {
            **annotations,
            policy.key(RESTORE_DECISION): RestoreOutcome.RESTORED.value,
            policy.key(RESTORED_FROM): path,
        }
        return RestoreDecision(
            RestoreOutcome.RESTORED,
            note,
            job_id=job_id,
            path=path,
            carried=True,
            warnings=(note,),
            annotations=annotations,
        )
    template = _template_release(resource, old, policy, requester)
    if not template and _asked_now(resource, old, policy):
        note = (
            f"started without state: release asked by {who} (nothing restorable was found when it was "
            "created)"
        )
        annotations = {
            **annotations,
            policy.key(RESTORE_DECISION): RestoreOutcome.STATELESS.value,
            policy.key(RELEASED): f"manual: {note}",
            policy.key(RELEASE): "",
        }
        return RestoreDecision(
            RestoreOutcome.STATELESS,
            note,
            job_id=job_id,
            carried=True,
            warnings=(note,),
            annotations=annotations,
        )
    ways = SUSPENDED_WAYS_OUT.format(release=policy.key(RELEASE))
    warnings = [f"job stays suspended (nothing restorable when it was created): {ways}"]
    if template:
        warnings.append(template)
    return RestoreDecision(
        RestoreOutcome.SUSPENDED,
        "carried over from the previous object",
        job_id=job_id,
        carried=True,
        warnings=tuple(warnings),
        spec_job={"state": "suspended"},
        annotations=annotations,
    )


def refuse_held_change(
    resource: FlinkResource, old: FlinkResource, policy: RestorePolicy
) -> RestoreDecision | None:
    """While a copy is held (its old copy not known stopped), an UPDATE that moves where its state lives
    or who owns it is refused: the agent, its release and the fence all stand on what the restore saw.
    None: nothing of that changed."""
    changes: list[str] = []
    if resource.job is None:
        changes.append("removes spec.job")
    for what, before, after in (
        ("checkpoint directory", old.checkpoint_dir, resource.checkpoint_dir),
        ("savepoint directory", old.savepoint_dir, resource.savepoint_dir),
        (
            "checkpoints' job subdirectory (create-subdir)",
            old.checkpoints_in_job_subdir,
            resource.checkpoints_in_job_subdir,
        ),
        ("session cluster (spec.deploymentName)", old.deployment_name, resource.deployment_name),
        (
            "FlinkBlueGreenDeployment owner (ownerReferences)",
            old.blue_green_parent,
            resource.blue_green_parent,
        ),
    ):
        if resource.job is not None and before != after:
            changes.append(f"changes its {what} from {str(before)[:200]!r} to {str(after)[:200]!r}")
    for label in policy.job_id_labels:
        before, after = old.labels.get(label, ""), resource.labels.get(label, "")
        if after and after != before:
            changes.append(f"changes label {label} from {before[:64]!r} to {after[:64]!r}")
    if not changes:
        return None
    hold = old.annotations.get(policy.key(HOLD), "")
    where = f"{old.kind} {old.namespace}/{old.name}"
    message = (
        f"{where} is held for fencing ({hold[:300]}); this update {'; '.join(changes)}: that moves where the "
        "restored job's state lives or who owns it, which the hold and its release stand on. Put it back; "
        f"or release the hold (flink-failover release {old.namespace}/{old.name}: the fencing agent starts "
        "it from the newest checkpoint once the old copy has stopped, then change it); or abandon this "
        "restore (delete the object)"
    )
    return RestoreDecision(RestoreOutcome.DENIED, message)


def held_before(old: FlinkResource | None, policy: RestorePolicy) -> bool:
    """The previous object was held for fencing (its hold annotation, suspended): an UPDATE of it is
    decided from it first, before the new object's labels are looked at."""
    return (
        old is not None
        and bool(old.annotations.get(policy.key(HOLD), "").strip())
        and old.state == "suspended"
    )


def _keep_epoch(
    resource: FlinkResource, old: FlinkResource, policy: RestorePolicy, annotations: dict[str, str]
) -> None:
    """The epoch is the fence this cluster's restore wrote: the previous object's, never the request's
    (one lowered after a return would count an old ack as this restore's)."""
    key = policy.key(EPOCH)
    if old.annotations.get(key):
        annotations[key] = old.annotations[key]
    elif resource.annotations.get(key):
        annotations[key] = ""  # none was recorded: the request cannot make one up


def _keep_record(
    resource: FlinkResource, old: FlinkResource, policy: RestorePolicy, annotations: dict[str, str]
) -> None:
    """The restore record is the old object's, never the request's (it is what later decisions read). A
    template's release, once the template no longer carries it, is no longer a template's."""
    key = policy.key(RESTORE_RECORD)
    recorded = old.annotations.get(key, "")
    if recorded:
        annotations[key] = recorded
    elif resource.annotations.get(key):
        annotations[key] = ""  # none was recorded: the request cannot make one up


def _template_release(
    resource: FlinkResource, old: FlinkResource, policy: RestorePolicy, requester: str
) -> str:
    """Why a ``release: "true"`` of this update is no request ("" when it may be one): the CREATE's
    template carried it and the identity that created the object (Karmada) re-applies it."""
    record = record_of(old, policy)
    if not isinstance(record, RestoreRecord) or not record.template_release:
        return ""
    if resource.annotations.get(policy.key(RELEASE), "").strip().lower() != "true":
        return ""
    if record.created_by and requester != record.created_by:
        return ""
    return (
        f"{policy.key(RELEASE)}=true re-applied by {requester or 'an unknown user'}, who created the object "
        f"from a template that carries it, {RELEASE_IGNORED}: a release is asked by a person after the hold "
        "(remove the annotation from the resource template)"
    )


def _asked_now(resource: FlinkResource, old: FlinkResource, policy: RestorePolicy) -> bool:
    """``release: "true"`` set by this update (it was not set before)."""
    key = policy.key(RELEASE)
    return resource.annotations.get(key, "").strip().lower() == "true" and (
        old.annotations.get(key, "").strip().lower() != "true"
    )


def _started(resource: FlinkResource) -> bool:
    return resource.state != "suspended"


def keep_child_held(
    resource: FlinkResource,
    old: FlinkResource | None,
    parent: FlinkResource | None,
    problem: str,
    policy: RestorePolicy,
    requester: str = "",
    from_agent: bool = False,
) -> RestoreDecision | None:
    """A FlinkBlueGreenDeployment's child carries none of its parent's labels or annotations, so it is
    held by its parent's record: started by anyone but the agent while the parent is held (or cannot
    be read: ``problem``), it stays suspended. None: not held (a child whose parent is gone is not)."""
    if from_agent or old is None or old.state != "suspended":
        return None
    moved = bool(old.blue_green_parent) and resource.blue_green_parent != old.blue_green_parent
    if not _started(resource) and not moved:
        return None
    if parent is not None and not held_before(parent, policy):
        return None
    # A parent gone is not held; the child is judged by the parent it had, never by a new reference.
    if parent is None and not problem:
        return None
    name = (
        f"FlinkBlueGreenDeployment {resource.namespace}/{old.blue_green_parent or resource.blue_green_parent}"
    )
    if moved:
        why = parent.annotations[policy.key(HOLD)] if parent is not None else f"unreadable: {problem[:200]}"
        return RestoreDecision(
            RestoreOutcome.DENIED,
            f"{old.kind} {old.namespace}/{old.name} is a child of {name}, which is held ({why[:300]}); "
            f"this update changes its ownerReferences (owner now {resource.blue_green_parent or 'none'!r}): "
            "a held parent's child keeps its owner until the parent is released (flink-failover release "
            f"{resource.namespace}/{old.blue_green_parent}) or deleted",
        )
    why = (
        f"{name} is held: {parent.annotations[policy.key(HOLD)]}"
        if parent is not None
        else (f"{name} could not be read ({problem[:200]}), so it may be held")
    )
    who = requester or "an unknown user"
    return RestoreDecision(
        RestoreOutcome.HELD,
        f"child of a held {name}: kept suspended",
        carried=True,
        spec_job={"state": "suspended"},
        warnings=(f"start by {who} {RELEASE_IGNORED}: {why}",),
    )


# The warning of an UPDATE that forged the agent's release (the member handler turns it into an Event).
RELEASE_IGNORED = "ignored: only this cluster's fencing agent releases a held job"


def _still_held(resource: FlinkResource, old: FlinkResource, policy: RestorePolicy, from_agent: bool) -> bool:
    """Held before, and this update is not the agent's release (which records why it released, and
    comes from the agent's own identity: anyone else's ``released`` marker is a forgery)."""
    if not old.annotations.get(policy.key(HOLD)) or old.state != "suspended":
        return False
    return not (from_agent and _release_marker_changed(resource, old, policy))


def _release_marker_changed(resource: FlinkResource, old: FlinkResource, policy: RestorePolicy) -> bool:
    released = resource.annotations.get(policy.key(RELEASED), "")
    return bool(released) and released != old.annotations.get(policy.key(RELEASED), "")


def _release_asked(resource: FlinkResource, old: FlinkResource, policy: RestorePolicy) -> bool:
    """An engineer asks with this update for the release of the held job (``release: "true"`` set now,
    or left over from before the hold and not recorded yet): the agent carries it out, naming them."""
    key = policy.key(RELEASE)
    asked = resource.annotations.get(key, "").strip().lower() == "true"
    recorded = old.annotations.get(key, "").strip().lower() == "true" and bool(
        old.annotations.get(policy.key(RELEASE_REQUESTED_BY), "").strip()
    )
    return asked and not recorded


def keep_fenced(resource: FlinkResource, old: FlinkResource, policy: RestorePolicy) -> RestoreDecision:
    """A stale copy the fencing agent stopped stays stopped whatever is re-applied over it."""
    if old.state != "suspended":
        return RestoreDecision(RestoreOutcome.SKIP, "fenced copy no longer suspended")
    spec_job = {"state": "suspended"}
    if old.job_field("upgradeMode"):
        spec_job["upgradeMode"] = str(old.job_field("upgradeMode"))
    annotations = {
        key: old.annotations[key]
        for key in (policy.key(FENCED_BY), policy.key(FENCED_UPGRADE_MODE))
        if old.annotations.get(key)
    }
    warnings: tuple[str, ...] = ()
    fenced_at = old.labels[policy.key(FENCED)]
    count = resource.annotations.get(policy.key(FAILOVER_COUNT), "")
    if (
        triggered(resource, policy)
        and count.isdigit()
        and fenced_at.isdigit()
        and int(count) > int(fenced_at)
    ):
        # The workload is failing over back here, onto the stopped copy: a restore path set on an object
        # that already exists is ignored by the operator, so only a new object can be restored.
        warnings = (
            f"failover {count} back to this cluster meets the copy fenced at epoch {fenced_at}: it stays "
            "suspended; delete it so that Karmada re-creates it and it is restored",
        )
    return RestoreDecision(
        RestoreOutcome.SUSPENDED,
        "stale copy stopped by a fence: kept suspended",
        carried=True,
        warnings=warnings,
        spec_job=spec_job,
        annotations=annotations,
        labels={policy.key(FENCED): old.labels[policy.key(FENCED)]},
    )
