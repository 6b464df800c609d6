"""Decide how a failed-over Flink job restarts: from which snapshot, or held, or refused.

Pure over plain data: storage is reached only through the ``lookup`` callable the caller passes in,
so tests drive every branch with real directories and the server wraps the same call in a deadline.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum

from webhook.common.contract import (
    EPOCH,
    FAILOVER_COUNT,
    FENCED,
    FENCED_BY,
    FENCED_UPGRADE_MODE,
    HOLD,
    LAST_SAVEPOINT,
    RELEASE,
    RELEASE_REQUESTED_BY,
    RELEASED,
    RESTORE_DECISION,
    RESTORED_FROM,
    RESTORED_JOB_ID,
    STARTED_FROM,
)
from webhook.common.flink import (
    CHECKPOINT_DIR_KEYS,
    SAVEPOINT_DIR_KEYS,
    FlinkResource,
    is_job_id,
    savepoint_prefix,
)
from webhook.common.paths import StoragePath, StoragePathError
from webhook.member.policy import Fallback, Prefer, RestorePolicy, StatePolicy, UpgradeModePolicy


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


class StorageError(Exception):
    """Storage did not answer usefully (unreachable, denied, broken listing): the state is unknown."""


@dataclass(frozen=True)
class Candidate:
    """A restorable snapshot: a completed checkpoint or a savepoint, both marked by ``_metadata``."""

    path: StoragePath
    kind: str  # "checkpoint" | "savepoint"
    modified: datetime | None
    # The checkpoint id Flink wrote in the _metadata header (chk-11 holds 11; a savepoint holds the id
    # it took between two checkpoints); None when the header does not carry one readably.
    checkpoint_id: int | None = None


@dataclass(frozen=True)
class SnapshotQuery:
    """What to look for in storage; every part may be absent."""

    job_dir: StoragePath | None
    savepoint: StoragePath | None  # the savepoint the control plane reported (last-savepoint)
    checkpoint_dir: StoragePath | None = None  # must exist when job_dir is missing, else storage is wrong
    # The job's savepoint directory: listed once for ``savepoint-<first 6 hex of job_id>-<12 hex>``.
    savepoint_dir: StoragePath | None = None
    job_id: str = ""
    # The snapshot the job was started from (its floor): checked only when nothing of its own is.
    started_from: StoragePath | None = None


@dataclass(frozen=True)
class Snapshots:
    checkpoint: Candidate | None
    savepoint: Candidate | None  # the reported savepoint, when complete
    job_dir_missing: bool = False  # the job directory does not exist (the checkpoint directory does)
    incomplete: tuple[int, ...] = ()  # chk-<N> without _metadata, highest first
    # Snapshots passed over because their _metadata is not a complete Flink metadata file, each as
    # "chk-9: _metadata is empty (0 bytes)": told in the warnings and the audit.
    rejected: tuple[str, ...] = ()
    listed: tuple[Candidate, ...] = ()  # the job's own complete savepoints found in its savepoint dir
    floor: Candidate | None = None  # the snapshot the job started from, when nothing of its own is
    savepoint_dir_listed: bool = False  # the savepoint directory was listed (it may hold none)


# Flink's checkpoint metadata file (org.apache.flink.runtime.checkpoint.Checkpoints) starts with this
# 4-byte big-endian magic number, then a 4-byte metadata version (serializers V1..V7 so far: 4 from
# Flink 1.20, 6 from Flink 2.3, measured), then the serializer's first field: the checkpoint id as an
# 8-byte big-endian long (MetadataV2V3SerializerBase, every version since Flink 1.3).
METADATA_MAGIC = 0x4960672D
METADATA_HEADER_BYTES = 16  # magic, version, checkpoint id: the one small read per _metadata
METADATA_MIN_BYTES = 8  # magic and version: a file that ends there is truncated
MAX_METADATA_VERSION = 64  # newer Flink adds versions; far beyond the known ones is not a version
FIRST_VERSION_WITH_ID = 2  # the V1 format (Flink 1.2 and older) is not read for an id


def metadata_problem(head: bytes, size: int | None) -> str:
    """Why a ``_metadata`` file whose first bytes are ``head`` is not a complete Flink metadata file
    ("" when it can be one). An empty or truncated file (a crash while it was written, a copy cut
    short) passes an existence check, and restoring it fails the job on the new cluster."""
    if size == 0 or not head:
        return "_metadata is empty (0 bytes)"
    if len(head) < METADATA_MIN_BYTES or (size is not None and size <= METADATA_MIN_BYTES):
        return f"_metadata is truncated ({size if size is not None else len(head)} bytes)"
    magic = int.from_bytes(head[:4], "big")
    if magic != METADATA_MAGIC:
        return (
            f"_metadata is not a Flink metadata file (starts with 0x{magic:08x}, not 0x{METADATA_MAGIC:08x})"
        )
    version = int.from_bytes(head[4:8], "big", signed=True)
    if not 0 < version <= MAX_METADATA_VERSION:
        return f"_metadata has no valid Flink metadata version ({version})"
    return ""


def metadata_checkpoint_id(head: bytes) -> int | None:
    """The checkpoint id a complete ``_metadata`` header carries (bytes 8-16), None when it has none
    readable: a header of fewer than 16 bytes, the V1 format, or a negative number."""
    if len(head) < METADATA_HEADER_BYTES or metadata_problem(head, None):
        return None
    if int.from_bytes(head[4:8], "big", signed=True) < FIRST_VERSION_WITH_ID:
        return None
    value = int.from_bytes(head[8:16], "big", signed=True)
    return value if value >= 0 else None


SnapshotLookup = Callable[[SnapshotQuery], Snapshots]  # raises StorageError


@dataclass(frozen=True)
class SessionCluster:
    """What the API server said about the FlinkDeployment a FlinkSessionJob names (spec.deploymentName):
    the session cluster's configuration holds the checkpoint directory the job writes to."""

    resource: FlinkResource | None  # None: no such FlinkDeployment (or it could not be read: ``error``)
    error: str = ""  # the API server could not be asked or refused: the directory is unknown


# (namespace, name) -> the session cluster; built at the edge (a GET in the member's own cluster, or
# the objects of ``review --objects``).
SessionClusterLookup = Callable[[str, str], SessionCluster]


def newer(first: Candidate, second: Candidate) -> bool:
    """Is ``second`` newer than ``first``? By the checkpoint ids Flink wrote when both headers carry
    one and they differ (a copy, a bucket restore or replication resets modification times, not ids);
    else by the ``_metadata`` modification times; a tie keeps ``first``."""
    first_id, second_id = first.checkpoint_id, second.checkpoint_id
    if first_id is not None and second_id is not None and first_id != second_id:
        return second_id > first_id
    if first.modified and second.modified:
        return second.modified > first.modified
    return False


def newest(candidates: tuple[Candidate, ...] | list[Candidate]) -> Candidate | None:
    """The newest of several savepoints: by id when every one carries an id, else by time (the
    documented order: docs/flink.md "Which snapshot")."""
    if not candidates:
        return None
    if all(c.checkpoint_id is not None for c in candidates):
        return max(candidates, key=lambda c: (c.checkpoint_id or 0, c.modified or _EPOCH, str(c.path)))
    return max(candidates, key=lambda c: (c.modified or _EPOCH, str(c.path)))


_EPOCH = datetime.fromtimestamp(0, UTC)


def choose(checkpoint: Candidate | None, savepoint: Candidate | None, prefer: Prefer) -> Candidate | None:
    """Pick the snapshot to restore; ``newest`` compares what Flink wrote (:func:`newer`)."""
    if checkpoint is None or savepoint is None:
        return checkpoint or savepoint
    if prefer is Prefer.CHECKPOINT:
        return checkpoint
    if prefer is Prefer.SAVEPOINT:
        return savepoint
    return savepoint if newer(checkpoint, savepoint) else checkpoint


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


def decide_restore(
    operation: str,
    resource: FlinkResource,
    old: FlinkResource | None,
    policy: RestorePolicy,
    lookup: SnapshotLookup,
    session_clusters: SessionClusterLookup | None = None,
    requester: str = "",
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
        return _keep_fenced(resource, old, policy)
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
        return _carry_over(resource, old, policy, requester, from_agent, agent_unknown)

    warnings: list[str] = []
    own = resource
    cluster: FlinkResource | None = None
    needs_cluster = not (resource.checkpoint_dir and resource.savepoint_dir)
    if (
        resource.kind == "FlinkSessionJob"
        and not session_clusters
        and resource.deployment_name
        and needs_cluster
    ):
        warnings.append(
            SESSION_CLUSTER_NOT_READ.format(where=f"{resource.namespace}/{resource.deployment_name}")
        )
    if resource.kind == "FlinkSessionJob" and session_clusters and resource.deployment_name and needs_cluster:
        session = session_clusters(resource.namespace, resource.deployment_name)
        where = f"FlinkDeployment {resource.namespace}/{resource.deployment_name}"
        if session.error and not resource.checkpoint_dir:
            why = f"cannot read the session cluster {where}: {session.error}"
            return _fallback(policy.on_storage_error, why, job_id, warnings, policy, True)
        if session.error:
            warnings.append(f"cannot read the session cluster {where}: {session.error}")
        elif session.resource is None:
            warnings.append(f"session cluster {where} not found: its checkpoint directory is unknown")
        else:
            cluster = session.resource
            # The session job's own settings win over the cluster's, as in the operator.
            merged = {**cluster.configuration, **resource.configuration}
            resource = replace(resource, configuration=merged)
    return _resolve(resource, job_id, policy, lookup, warnings, own, cluster)


def _resolve(
    resource: FlinkResource,
    job_id: str,
    policy: RestorePolicy,
    lookup: SnapshotLookup,
    warnings: list[str] | None = None,
    own: FlinkResource | None = None,
    cluster: FlinkResource | None = None,
) -> RestoreDecision:
    warnings = [] if warnings is None else warnings
    own = own or resource
    checkpoint_from = _source(own, CHECKPOINT_DIR_KEYS, "defaultCheckpointDir", cluster)
    try:
        checkpoint_dir = _storage_dir(
            checkpoint_from,
            resource.checkpoint_dir or policy.default_checkpoint_dir,
            policy,
        )
        savepoint_dir = _storage_dir(
            _source(own, SAVEPOINT_DIR_KEYS, "defaultSavepointDir", cluster),
            resource.savepoint_dir or policy.default_savepoint_dir,
            policy,
        )
    except _Refused as exc:
        return RestoreDecision(RestoreOutcome.DENIED, str(exc), job_id=job_id)
    if checkpoint_dir is None:
        checkpoint_from = ""
    decision = _resolve_dirs(resource, job_id, policy, lookup, warnings, checkpoint_dir, savepoint_dir)
    return replace(decision, checkpoint_dir_from=checkpoint_from) if checkpoint_from else decision


def _resolve_dirs(
    resource: FlinkResource,
    job_id: str,
    policy: RestorePolicy,
    lookup: SnapshotLookup,
    warnings: list[str],
    checkpoint_dir: StoragePath | None,
    savepoint_dir: StoragePath | None,
) -> RestoreDecision:
    job_dir: StoragePath | None = None
    if checkpoint_dir is not None and job_id:
        job_dir = resource.job_checkpoints(checkpoint_dir, job_id)
    roots = [d for d in (savepoint_dir, checkpoint_dir) if d is not None]  # where the job keeps state
    savepoint = _reported_savepoint(resource, job_id, roots, policy, warnings)
    listed_dir = savepoint_dir if job_id else None
    started_from = _started_from(resource, job_id, roots, policy, warnings)

    if job_dir is None and savepoint is None and listed_dir is None and started_from is None:
        if checkpoint_dir is None and savepoint_dir is None:
            why = f"no checkpoint directory configured ({_checkpoint_dir_places(resource)})"
        elif checkpoint_dir is None:
            labels = ", ".join(policy.job_id_labels)
            why = f"no checkpoint directory configured and no jobId label (searched: {labels})"
        else:
            labels = ", ".join(policy.job_id_labels)
            why = f"no jobId label (searched: {labels}) and no last-savepoint annotation"
        return _fallback(policy.on_missing_state, f"nothing to restore: {why}", job_id, warnings, policy)

    asked = ", ".join(str(p) for p in (job_dir, savepoint, listed_dir, started_from) if p is not None)
    try:
        result = lookup(SnapshotQuery(job_dir, savepoint, checkpoint_dir, listed_dir, job_id, started_from))
    except StorageError as exc:
        decision = _fallback(policy.on_storage_error, f"storage error: {exc}", job_id, warnings, policy, True)
        return replace(decision, storage=asked)

    own_savepoint = newest([c for c in (result.savepoint, *result.listed) if c is not None])
    chosen = choose(result.checkpoint, own_savepoint, policy.prefer)
    lineage = ""
    if chosen is None and result.floor is not None:
        chosen = result.floor
        whose = f"job {job_id}" if job_id else "the job"
        lineage = f"{whose} completed nothing restorable of its own; it was started from {chosen.path}"
        predecessor = _job_of(chosen.path)
        if predecessor and predecessor != job_id:
            lineage += f" (a {chosen.kind} of job {predecessor})"
    if chosen is None:
        return _fallback(
            policy.on_missing_state,
            _nothing(job_dir, savepoint, result, listed_dir, job_id, started_from),
            job_id,
            warnings,
            policy,
        )
    if (
        not lineage
        and job_dir is not None
        and chosen.kind == "checkpoint"
        and not chosen.path.is_within(job_dir)
    ):
        why = "checkpoint outside the job directory"
        return _fallback(policy.on_storage_error, why, job_id, warnings, policy, True)

    path = str(chosen.path)
    if lineage:
        warnings.append(f"restoring from the state the old job started from: {lineage}")
    else:
        warnings.append(f"restoring from {chosen.kind} {path}{_id_note(chosen)}")
    warnings.extend(f"skipped {r}" for r in result.rejected)
    decision = _restored(
        resource, job_id, path, chosen.kind, policy, savepoint_dir is not None, tuple(warnings)
    )
    if lineage:
        decision = replace(decision, lineage=lineage, reason=f"{decision.reason}: {lineage}")
    if result.rejected:
        decision = replace(decision, reason=f"{decision.reason}; skipped {'; '.join(result.rejected)}")
    return decision


def _id_note(candidate: Candidate) -> str:
    return f" (checkpoint id {candidate.checkpoint_id})" if candidate.checkpoint_id is not None else ""


_JOB_DIR_RE = re.compile(r"/([0-9a-f]{32})/chk-[0-9]+$")


def _job_of(path: StoragePath) -> str:
    """The jobId a snapshot path names (``.../<jobId>/chk-N``), else the 6-hex prefix a savepoint
    name carries ("" when neither)."""
    m = _JOB_DIR_RE.search(path.path)
    if m:
        return m.group(1)
    prefix = savepoint_prefix(path.name)
    return f"{prefix}..." if prefix else ""


def _restored(
    resource: FlinkResource,
    job_id: str,
    path: str,
    source: str,
    policy: RestorePolicy,
    has_savepoint_dir: bool,
    warnings: tuple[str, ...],
    carried: bool = False,
) -> RestoreDecision:
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


def _fallback(
    choice: Fallback,
    why: str,
    job_id: str,
    warnings: list[str],
    policy: RestorePolicy,
    storage_error: bool = False,
) -> RestoreDecision:
    if choice is Fallback.DENY:
        refused = f"failover restore refused: {why}"
        return RestoreDecision(RestoreOutcome.DENIED, refused, job_id=job_id, storage_error=storage_error)
    if choice is Fallback.SUSPEND:
        outcome, note, spec_job = RestoreOutcome.SUSPENDED, "job held suspended", {"state": "suspended"}
    else:
        outcome, note, spec_job = RestoreOutcome.STATELESS, "job starts without state", {}
    warnings.append(f"{note}: {why}")
    return RestoreDecision(
        outcome,
        why,
        job_id=job_id,
        storage_error=storage_error,
        warnings=tuple(warnings),
        spec_job=spec_job,
        annotations=_annotations(policy, outcome, job_id),
    )


def _annotations(policy: RestorePolicy, outcome: RestoreOutcome, job_id: str) -> dict[str, str]:
    out = {policy.key(RESTORE_DECISION): outcome.value}
    if job_id:
        out[policy.key(RESTORED_JOB_ID)] = job_id
    return out


def _carry_over(
    resource: FlinkResource,
    old: FlinkResource | None,
    policy: RestorePolicy,
    requester: str = "",
    from_agent: bool = False,
    agent_unknown: str = "",
) -> RestoreDecision:
    """Karmada re-applied its template and dropped what we set at CREATE: put it back, storage untouched."""
    recorded = old.annotations.get(policy.key(RESTORE_DECISION), "") if old is not None else ""
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
        if not path:
            return RestoreDecision(RestoreOutcome.SKIP, "restored object without a recorded path")
        if resource.initial_savepoint_path and resource.initial_savepoint_path != path:
            return RestoreDecision(RestoreOutcome.SKIP, "initialSavepointPath set explicitly")
        has_sp = bool(resource.savepoint_dir or policy.default_savepoint_dir)
        decision = _restored(resource, job_id, path, "carried", policy, has_sp, (), carried=True)
        # Keep upgradeMode as it was after CREATE rather than recomputing it from a changed spec.
        spec_job = dict(decision.spec_job)
        if old.job_field("upgradeMode") and resource.upgrade_mode == "stateless":
            spec_job["upgradeMode"] = str(old.job_field("upgradeMode"))
        annotations = dict(decision.annotations)
        epoch = old.annotations.get(policy.key(EPOCH), "")
        if epoch:
            annotations[policy.key(EPOCH)] = resource.annotations.get(policy.key(EPOCH)) or epoch
        notes = list(decision.warnings)
        if _still_held(resource, old, policy, from_agent):
            # A re-applied template must not start a job held for fencing; the agent releases it.
            spec_job["state"] = "suspended"
            hold = resource.annotations.get(policy.key(HOLD)) or old.annotations[policy.key(HOLD)]
            annotations[policy.key(HOLD)] = hold
            annotations[policy.key(RESTORE_DECISION)] = RestoreOutcome.HELD.value
            notes.append(f"job stays held suspended (carried over from the previous object): {hold}")
            # --- issue 28: release markers only from the agent, requests recorded by this webhook only ---
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
            if _release_asked(resource, old, policy):
                annotations[asked_by] = requester or "unknown"
            elif resource.annotations.get(asked_by) or old.annotations.get(asked_by):
                annotations[asked_by] = old.annotations.get(asked_by, "")  # never set by the request itself
            # --- end issue 28 ---
        elif recorded == RestoreOutcome.HELD and not resource.annotations.get(policy.key(HOLD)):
            annotations[policy.key(RESTORE_DECISION)] = RestoreOutcome.RESTORED.value  # the agent's release
        return replace(decision, spec_job=spec_job, annotations=annotations, warnings=tuple(notes))
    spec_job = {}
    warnings: tuple[str, ...] = ()
    if recorded == RestoreOutcome.SUSPENDED and not resource.initial_savepoint_path:
        spec_job["state"] = "suspended"  # a re-applied template must not start the held job empty
        warnings = (
            "job stays held suspended (carried over from the previous object): nothing restorable was "
            "found when it was created; set spec.job.initialSavepointPath or state: running by hand",
        )
    return RestoreDecision(
        RestoreOutcome(recorded),
        "carried over from the previous object",
        job_id=job_id,
        carried=True,
        warnings=warnings,
        spec_job=spec_job,
        annotations=_annotations(policy, RestoreOutcome(recorded), job_id),
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


def _keep_fenced(resource: FlinkResource, old: FlinkResource, policy: RestorePolicy) -> RestoreDecision:
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


class _Refused(Exception):
    pass


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


def _storage_dir(source: str, value: str, policy: RestorePolicy) -> StoragePath | None:
    if not value:
        return None
    allowed = f"allowed schemes: {', '.join(policy.allowed_schemes)}"
    try:
        path = StoragePath.parse(value)
    except StoragePathError as exc:
        raise _Refused(f"{source} {value[:200]!r}: {exc} ({allowed})") from None
    if path.scheme not in policy.allowed_schemes:
        raise _Refused(
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
    resource: FlinkResource, job_id: str, roots: list[StoragePath], policy: RestorePolicy, warnings: list[str]
) -> StoragePath | None:
    """The snapshot the old job was started from (the started-from annotation the control plane took
    from that job's own status), when it lies where this job keeps state: its floor."""
    raw = resource.annotations.get(policy.key(STARTED_FROM), "").strip()
    if not raw or not job_id:
        return None
    return _annotated_snapshot("started-from", raw, roots, True, policy, warnings)


def _annotated_snapshot(
    what: str,
    raw: str,
    roots: list[StoragePath],
    need_root: bool,
    policy: RestorePolicy,
    warnings: list[str],
) -> StoragePath | None:
    """A snapshot path an annotation names, when it parses, has an allowed scheme and lies inside one
    of the job's directories (``need_root``: even when it has none); else None and a warning why."""
    try:
        path = StoragePath.parse(raw)
    except StoragePathError as exc:
        warnings.append(f"ignored {what}: {exc}")
        return None
    if path.scheme not in policy.allowed_schemes:
        warnings.append(f"ignored {what}: scheme {path.scheme!r} not allowed")
        return None
    if (roots or need_root) and not any(path.is_within(root) and path != root for root in roots):
        warnings.append(f"ignored {what}: outside the job's savepoint and checkpoint directories")
        return None
    return path


def _reported_savepoint(
    resource: FlinkResource, job_id: str, roots: list[StoragePath], policy: RestorePolicy, warnings: list[str]
) -> StoragePath | None:
    """The last-savepoint annotation, when it can belong to this job and lives where the job keeps state."""
    raw = resource.annotations.get(policy.key(LAST_SAVEPOINT), "").strip()
    if not raw:
        return None
    path = _annotated_snapshot("last-savepoint", raw, roots, False, policy, warnings)
    if path is None:
        return None
    prefix = savepoint_prefix(path.name)
    if prefix and job_id and prefix != job_id[:6]:
        warnings.append("ignored last-savepoint: it belongs to another job")
        return None
    return path
