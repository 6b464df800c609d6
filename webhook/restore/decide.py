"""Decide how a failed-over Flink job restarts: from which snapshot, or held, or refused.

Pure over plain data: storage is reached only through the ``lookup`` callable the caller passes in,
so tests drive every branch with real directories and the server wraps the same call in a deadline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from webhook.common.contract import FENCED, LAST_SAVEPOINT, RESTORE_RECORD, STARTED_FROM
from webhook.common.flink import (
    CHECKPOINT_DIR_KEYS,
    SAVEPOINT_DIR_KEYS,
    FlinkResource,
    is_job_id,
    savepoint_prefix,
    snapshot_job,
    with_session_cluster,
)
from webhook.common.flink_reads import NOT_STATED, Target
from webhook.common.paths import StoragePath, StoragePathError
from webhook.policy.restore import Fallback, RestorePolicy
from webhook.restore.outcome import (
    RestoreDecision,
    RestoreOutcome,
    decision_annotations,
    job_id_label,
    restore_from,
    triggered,
)
from webhook.restore.record import make_record
from webhook.restore.restoring import cannot_load_any, id_note, judge_rewind
from webhook.restore.restoring import restoring_flink as restoring_flink  # where fencing/ takes it from
from webhook.restore.snapshots import (
    SnapshotLookup,
    SnapshotQuery,
    Snapshots,
    StorageError,
    checked_as,
    choose,
    newest,
)
from webhook.restore.updates import carry_over, held_before, keep_fenced, refuse_held_change


@dataclass(frozen=True)
class Parent:
    """What the API server said about an object's parent: the FlinkDeployment a FlinkSessionJob names
    (spec.deploymentName; the session cluster's configuration holds the checkpoint directory the job
    writes to), or the FlinkBlueGreenDeployment that owns a child (its hold holds the child)."""

    resource: FlinkResource | None  # None: no such object (or it could not be read: ``error``)
    error: str = ""  # the API server could not be asked or refused: what it holds is unknown


# (namespace, name) -> a FlinkSessionJob's session cluster; built at the edge (a GET in the member's own
# cluster, or the objects of ``review --objects``).
ParentLookup = Callable[[str, str], Parent]


def decide_restore(
    operation: str,
    resource: FlinkResource,
    old: FlinkResource | None,
    policy: RestorePolicy,
    lookup: SnapshotLookup,
    session_clusters: ParentLookup | None = None,
    requester: str = "",
    *,
    from_agent: bool = False,
    agent_unknown: str = "",
) -> RestoreDecision:
    """The member role's whole decision for one admission (docs/architecture.md has the map).

    ``session_clusters`` finds a FlinkSessionJob's session cluster, whose configuration supplies the
    checkpoint and savepoint directories the job itself does not set; without it only the job's own
    configuration and the policy defaults count. ``requester`` is who sent the request, and
    ``from_agent`` whether that is this cluster's fencing agent (False wherever the agent's identity
    is not known: ``agent_unknown`` says why, for the warning): only the agent's release markers
    start a held job; a person asks with the ``release`` annotation, which names them.
    """
    if operation == "UPDATE" and old is not None and old.labels.get(policy.key(FENCED)):
        return keep_fenced(resource, old, policy)
    if operation == "UPDATE" and held_before(old, policy) and not resource.deleting and old is not None:
        # Decided from the old object before the new one's labels: an edit that drops the trigger
        # labels (a GitOps tool applying the base manifest) must not start a held job, and one that
        # moves where its state lives or who owns it is refused.
        refused = None if from_agent else refuse_held_change(resource, old, policy)
        if refused is not None:
            return refused
        return carry_over(resource, old, policy, requester, from_agent, agent_unknown)
    if operation not in ("CREATE", "UPDATE") or not triggered(resource, policy):
        return RestoreDecision(RestoreOutcome.SKIP, "no failover label")
    if resource.job is None:
        return RestoreDecision(RestoreOutcome.SKIP, "session cluster without spec.job")
    if resource.deleting:
        return RestoreDecision(RestoreOutcome.SKIP, "object is being deleted")

    found = job_id_label(resource, policy)
    job_id = ""
    if found is not None:
        label, value = found
        if not is_job_id(value):
            return RestoreDecision(
                RestoreOutcome.DENIED,
                f"label {label}={value[:64]!r} is not a Flink jobId (32 lowercase hex characters)",
            )
        job_id = value

    if operation == "UPDATE":
        return carry_over(resource, old, policy, requester, from_agent, agent_unknown)

    own = resource
    cluster: FlinkResource | None = None
    warning = ""  # what reading the session cluster (or not) left unknown
    if resource.kind == "FlinkSessionJob" and resource.deployment_name:
        # Read whenever there is one: its directories, and the Flink that restores the job, are its.
        where = f"FlinkDeployment {resource.namespace}/{resource.deployment_name}"
        if not session_clusters:
            warning = SESSION_CLUSTER_NOT_READ.format(
                where=f"{resource.namespace}/{resource.deployment_name}"
            )
        else:
            session = session_clusters(resource.namespace, resource.deployment_name)
            if session.error and not resource.checkpoint_dir:
                why = f"cannot read the session cluster {where}: {session.error}"
                return _fallback(policy.on_storage_error, why, job_id, policy, storage_error=True)
            if session.error:
                warning = f"cannot read the session cluster {where}: {session.error}"
            elif session.resource is None:
                warning = f"session cluster {where} not found: its checkpoint directory is unknown"
            else:
                cluster = session.resource
                resource = with_session_cluster(resource, cluster)
    decision = _warned(
        (warning,) if warning else (), _resolve(resource, job_id, policy, lookup, own, cluster)
    )
    if decision.outcome in (RestoreOutcome.RESTORED, RestoreOutcome.SUSPENDED):
        record = make_record(own, resource, cluster, job_id, policy, requester)
        annotations = {**decision.annotations, policy.key(RESTORE_RECORD): record.encode()}
        decision = replace(decision, annotations=annotations)
    return decision


def _warned(earlier: tuple[str, ...], decision: RestoreDecision) -> RestoreDecision:
    """``decision`` told after the ``earlier`` warnings of the steps that led to it (a refusal carries
    none: its reason is the whole answer)."""
    if not earlier or decision.outcome is RestoreOutcome.DENIED:
        return decision
    return replace(decision, warnings=(*earlier, *decision.warnings))


def _resolve(
    resource: FlinkResource,
    job_id: str,
    policy: RestorePolicy,
    lookup: SnapshotLookup,
    own: FlinkResource,
    cluster: FlinkResource | None,
) -> RestoreDecision:
    checkpoint_from = _source(own, CHECKPOINT_DIR_KEYS, "defaultCheckpointDir", cluster)
    checkpoint_dir = _storage_dir(
        checkpoint_from, resource.checkpoint_dir or policy.default_checkpoint_dir, policy
    )
    savepoint_dir = _storage_dir(
        _source(own, SAVEPOINT_DIR_KEYS, "defaultSavepointDir", cluster),
        resource.savepoint_dir or policy.default_savepoint_dir,
        policy,
    )
    if isinstance(checkpoint_dir, str):  # why it is refused
        return RestoreDecision(RestoreOutcome.DENIED, checkpoint_dir, job_id=job_id)
    if isinstance(savepoint_dir, str):
        return RestoreDecision(RestoreOutcome.DENIED, savepoint_dir, job_id=job_id)
    if checkpoint_dir is None:
        checkpoint_from = ""
    target = restoring_flink(own, cluster, policy)
    # A session job's directories may be its cluster's: it declares no state only when that was read.
    all_read = own.kind != "FlinkSessionJob" or cluster is not None
    decision = _resolve_dirs(
        resource, job_id, policy, lookup, checkpoint_dir, savepoint_dir, target, all_read=all_read
    )
    return replace(decision, checkpoint_dir_from=checkpoint_from) if checkpoint_from else decision


def _resolve_dirs(
    resource: FlinkResource,
    job_id: str,
    policy: RestorePolicy,
    lookup: SnapshotLookup,
    checkpoint_dir: StoragePath | None,
    savepoint_dir: StoragePath | None,
    target: Target = NOT_STATED,
    *,
    all_read: bool = True,
) -> RestoreDecision:
    job_dir: StoragePath | None = None
    if checkpoint_dir is not None and job_id:
        job_dir = resource.job_checkpoints(checkpoint_dir, job_id)
    roots = [d for d in (savepoint_dir, checkpoint_dir) if d is not None]  # where the job keeps state
    savepoint, ignored_savepoint = _reported_savepoint(resource, job_id, roots, policy)
    listed_dir = savepoint_dir if job_id else None
    started_from, ignored_start = _started_from(resource, job_id, roots, policy)
    ignored = tuple(w for w in (ignored_savepoint, ignored_start) if w)

    if job_dir is None and savepoint is None and listed_dir is None and started_from is None:
        no_dirs = checkpoint_dir is None and savepoint_dir is None
        if no_dirs and all_read and resource.upgrade_mode == "stateless":
            # It keeps no state anywhere and says so: nothing to wait for, nothing to lose.
            why = (
                "the job declares no state (upgradeMode stateless, no checkpoint or savepoint directory "
                f"in {_checkpoint_dir_places(resource)}): started as declared, nothing to restore"
            )
            return RestoreDecision(
                RestoreOutcome.STATELESS,
                why,
                job_id=job_id,
                warnings=(*ignored, why),
                annotations=decision_annotations(policy, RestoreOutcome.STATELESS, job_id),
            )
        if checkpoint_dir is None and savepoint_dir is None:
            why = f"no checkpoint directory configured ({_checkpoint_dir_places(resource)})"
        elif checkpoint_dir is None:
            labels = ", ".join(policy.job_id_labels)
            why = f"no checkpoint directory configured and no jobId label (searched: {labels})"
        else:
            labels = ", ".join(policy.job_id_labels)
            why = f"no jobId label (searched: {labels}) and no last-savepoint annotation"
        return _warned(
            ignored, _fallback(policy.on_missing_state, f"nothing to restore: {why}", job_id, policy)
        )

    asked = ", ".join(str(p) for p in (job_dir, savepoint, listed_dir, started_from) if p is not None)
    query = checked_as(
        SnapshotQuery(job_dir, savepoint, checkpoint_dir, listed_dir, job_id, started_from, target=target),
        policy,
    )
    try:
        result = lookup(query)
    except StorageError as exc:  # the lookup's contract (snapshots.py): raised at the edge, a value here
        decision = _fallback(
            policy.on_storage_error, f"storage error: {exc}", job_id, policy, storage_error=True
        )
        return _warned(ignored, replace(decision, storage=asked))
    found = _Found(
        result=result,
        job_dir=job_dir,
        savepoint=savepoint,
        listed_dir=listed_dir,
        started_from=started_from,
        has_savepoint_dir=savepoint_dir is not None,
        target=target,
    )
    decision = _warned(ignored, _from_snapshots(resource, job_id, policy, found))
    trips = result.trips
    return replace(decision, storage=asked, storage_rounds=trips.rounds, storage_requests=trips.requests)


@dataclass(frozen=True, kw_only=True)
class _Found:
    """What storage answered, and what it was asked."""

    result: Snapshots
    job_dir: StoragePath | None
    savepoint: StoragePath | None
    listed_dir: StoragePath | None
    started_from: StoragePath | None
    has_savepoint_dir: bool
    target: Target = NOT_STATED


def _from_snapshots(
    resource: FlinkResource, job_id: str, policy: RestorePolicy, found: _Found
) -> RestoreDecision:
    """The decision once storage answered: the newest candidate that passed its check, or the hold."""
    result, job_dir, savepoint, listed_dir = found.result, found.job_dir, found.savepoint, found.listed_dir
    started_from = found.started_from
    if result.unchecked:
        # Never a restore nobody checked, and never an older one chosen in its stead: hold it.
        why = f"{result.unchecked}: held rather than restored unchecked"
        return replace(_fallback(Fallback.SUSPEND, why, job_id, policy), reason=why)
    own_savepoint = newest([c for c in (result.savepoint, *result.listed) if c is not None])
    chosen = choose(result.checkpoint, own_savepoint, policy.prefer)
    lineage = ""
    if chosen is None and result.floor is not None:
        chosen = result.floor
        whose = f"job {job_id}" if job_id else "the job"
        lineage = f"{whose} completed nothing restorable of its own; it was started from {chosen.path}"
        predecessor = snapshot_job(str(chosen.path))
        if predecessor and predecessor != job_id:
            whole = len(predecessor) == 32  # else the 6-hex prefix a savepoint name carries
            lineage += f" (a {chosen.kind} of job {predecessor}{'' if whole else '...'})"
    if chosen is None:
        why = _nothing(job_dir, savepoint, result, listed_dir, job_id, started_from)
        blocked = cannot_load_any(result)
        if blocked:
            # State exists that a newer Flink can load: held, never started empty (onMissingState)
            # nor from what would crash-loop it, until a Flink that reads it is named or it is released.
            why = f"the restoring Flink cannot load any snapshot left: {blocked}; {why}"
            return _fallback(Fallback.SUSPEND, why, job_id, policy)
        return _fallback(policy.on_missing_state, why, job_id, policy)
    if (
        not lineage
        and job_dir is not None
        and chosen.kind == "checkpoint"
        and not chosen.path.is_within(job_dir)
    ):
        why = "checkpoint outside the job directory"
        return _fallback(policy.on_storage_error, why, job_id, policy, storage_error=True)

    # No silent rewind: a newer snapshot passed over only because the restoring Flink cannot load it
    # (not for damage) holds the job, unless the policy lets it restore the older one.
    rewind = judge_rewind(result, chosen, bool(lineage), job_dir, resource, policy)
    if rewind.held:
        why = f"{rewind.held}; skipped {'; '.join(result.rejected)}"
        return replace(_fallback(Fallback.SUSPEND, why, job_id, policy), unloadable=True)
    rewound = rewind.rewound

    path = str(chosen.path)
    if lineage:
        told = [f"restoring from the state the old job started from: {lineage}"]
    else:
        told = [f"restoring from {chosen.kind} {path}{id_note(chosen)}"]
    if rewound:
        told.append(rewound)
    if chosen.note:
        told.append(f"{chosen.kind} {path}: {chosen.note}")
    if not found.target.known:
        told.append(
            f"the restoring Flink's version is not known ({found.target.unknown}): not checked that it "
            f"can load {chosen.kind} {path}"
        )
    told.extend(f"skipped {r}" for r in result.rejected)
    decision = restore_from(
        resource,
        job_id,
        path,
        chosen.kind,
        policy,
        has_savepoint_dir=found.has_savepoint_dir,
        warnings=tuple(told),
    )
    if lineage:
        decision = replace(decision, lineage=lineage, reason=f"{decision.reason}: {lineage}")
    if rewound:
        decision = replace(decision, reason=f"{decision.reason}; {rewound}")
    if result.rejected:
        decision = replace(decision, reason=f"{decision.reason}; skipped {'; '.join(result.rejected)}")
    return decision


def _fallback(
    choice: Fallback, why: str, job_id: str, policy: RestorePolicy, *, storage_error: bool = False
) -> RestoreDecision:
    """What the policy says to do when nothing can be restored: refuse, hold, or start empty (its one
    warning says which and why)."""
    if choice is Fallback.DENY:
        refused = f"failover restore refused: {why}"
        return RestoreDecision(RestoreOutcome.DENIED, refused, job_id=job_id, storage_error=storage_error)
    if choice is Fallback.SUSPEND:
        outcome, note, spec_job = RestoreOutcome.SUSPENDED, "job held suspended", {"state": "suspended"}
    else:
        outcome, note, spec_job = RestoreOutcome.STATELESS, "job starts without state", {}
    return RestoreDecision(
        outcome,
        why,
        job_id=job_id,
        storage_error=storage_error,
        warnings=(f"{note}: {why}",),
        spec_job=spec_job,
        annotations=decision_annotations(policy, outcome, job_id),
    )


def _checkpoint_dir_places(resource: FlinkResource) -> str:
    """Where a checkpoint directory is looked for, as the user would set it."""
    if resource.kind == "FlinkSessionJob" and resource.deployment_name:
        return (
            f"the job's flinkConfiguration, its session cluster FlinkDeployment "
            f"{resource.namespace}/{resource.deployment_name}, or policy defaultCheckpointDir"
        )
    return "flinkConfiguration or policy defaultCheckpointDir"


# Told when a session job's directories may live on its session cluster, which this member role cannot read.
SESSION_CLUSTER_NOT_READ = (
    "session cluster FlinkDeployment {where} not read: the member role reads it only with the chart value "
    "member.readSessionClusters (serve --read-session-clusters) or with fencing (--cluster)"
)


def _source(
    resource: FlinkResource, keys: tuple[str, ...], policy_key: str, cluster: FlinkResource | None = None
) -> str:
    """Where a directory setting came from, as the user would look for it."""
    key = resource.setting_key(keys)
    if key:
        return f"flinkConfiguration {key}"
    if cluster is not None and (key := cluster.setting_key(keys)):
        return f"session cluster FlinkDeployment {cluster.namespace}/{cluster.name} flinkConfiguration {key}"
    return f"restore policy {policy_key}"


def _storage_dir(source: str, value: str, policy: RestorePolicy) -> StoragePath | str | None:
    """The directory ``value`` names (None: none set), or why it is refused (a str)."""
    if not value:
        return None
    allowed = f"allowed schemes: {', '.join(policy.allowed_schemes)}"
    try:
        path = StoragePath.parse(value)
    except StoragePathError as exc:
        return f"{source} {value[:200]!r}: {exc} ({allowed})"
    if path.scheme not in policy.allowed_schemes:
        return (
            f"{source} {value[:200]!r}: storage scheme {path.scheme!r} is not allowed by the restore "
            f"policy ({allowed})"
        )
    return path


def _nothing(
    job_dir: StoragePath | None,
    savepoint: StoragePath | None,
    result: Snapshots,
    savepoint_dir: StoragePath | None = None,
    job_id: str = "",
    started_from: StoragePath | None = None,
) -> str:
    """Why nothing is restorable, in the words a person can act on."""
    parts = []
    if job_dir is not None:
        if result.job_dir_missing:
            parts.append(
                f"job directory {job_dir} does not exist (no checkpoint was ever written for this jobId)"
            )
        elif result.incomplete:
            shown = ", ".join(f"chk-{n}" for n in result.incomplete[:3])
            more = f" and {len(result.incomplete) - 3} more" if len(result.incomplete) > 3 else ""
            parts.append(
                f"only incomplete checkpoints in {job_dir} ({shown}{more} without _metadata: "
                "in progress or aborted)"
            )
        elif not any(r.startswith("chk-") for r in result.rejected):
            parts.append(f"no checkpoints in {job_dir}")
    if savepoint is not None and not any(r.startswith(f"savepoint {savepoint}:") for r in result.rejected):
        parts.append(f"savepoint {savepoint} has no _metadata")
    if savepoint_dir is not None and job_id:
        parts.append(f"no complete savepoint-{job_id[:6]}-* of this job in {savepoint_dir}")
    if started_from is not None and not any(r.startswith("started from ") for r in result.rejected):
        parts.append(f"the snapshot it started from, {started_from}, has no _metadata")
    elif started_from is None and job_id:
        parts.append("the snapshot it started from is not known (no started-from annotation)")
    parts.extend(f"skipped {r}" for r in result.rejected)
    return "no restorable checkpoint or savepoint: " + "; ".join(parts)


def _started_from(
    resource: FlinkResource, job_id: str, roots: list[StoragePath], policy: RestorePolicy
) -> tuple[StoragePath | None, str]:
    """The snapshot the old job was started from (the started-from annotation the control plane took
    from that job's own status), when it lies where this job keeps state: its floor; else why it is
    ignored ("" when there is none)."""
    raw = resource.annotations.get(policy.key(STARTED_FROM), "").strip()
    if not raw or not job_id:
        return None, ""
    return _annotated_snapshot("started-from", raw, roots, policy, need_root=True)


def _annotated_snapshot(
    what: str, raw: str, roots: list[StoragePath], policy: RestorePolicy, *, need_root: bool
) -> tuple[StoragePath | None, str]:
    """A snapshot path an annotation names, when it parses, has an allowed scheme and lies inside one
    of the job's directories (``need_root``: even when it has none); else None and the warning why."""
    try:
        path = StoragePath.parse(raw)
    except StoragePathError as exc:
        return None, f"ignored {what}: {exc}"
    if path.scheme not in policy.allowed_schemes:
        return None, f"ignored {what}: scheme {path.scheme!r} not allowed"
    if (roots or need_root) and not any(path.is_within(root) and path != root for root in roots):
        return None, f"ignored {what}: outside the job's savepoint and checkpoint directories"
    return path, ""


def _reported_savepoint(
    resource: FlinkResource, job_id: str, roots: list[StoragePath], policy: RestorePolicy
) -> tuple[StoragePath | None, str]:
    """The last-savepoint annotation, when it can belong to this job and lives where the job keeps state;
    else why it is ignored ("" when there is none)."""
    raw = resource.annotations.get(policy.key(LAST_SAVEPOINT), "").strip()
    if not raw:
        return None, ""
    path, ignored = _annotated_snapshot("last-savepoint", raw, roots, policy, need_root=False)
    if path is None:
        return None, ignored
    prefix = savepoint_prefix(path.name)
    if prefix and job_id and prefix != job_id[:6]:
        return None, "ignored last-savepoint: it belongs to another job"
    return path, ""
