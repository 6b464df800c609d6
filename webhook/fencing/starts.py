"""What a release and a resume start from, pure: ``release_start`` once the newest checkpoint was
looked for (``newest_known``: only a lookup that ran to its end may keep the admitted path; one that
could not check holds), and ``resume_query`` / ``resume_start`` where a stepped-down copy resumes (or
why it waits). The executors look the snapshots up and patch (``executors.Executors.release``, ``resume``).
"""

from __future__ import annotations

from dataclasses import dataclass

from webhook.common.checkpoints import checkpoint_number
from webhook.fencing.copies import Copy
from webhook.fencing.directories import checkpoint_dir_of, savepoint_dir_of
from webhook.fencing.effects import StorageHold
from webhook.fencing.patches import stop_mode
from webhook.fencing.protocol import ReleaseCause
from webhook.policy.restore import Prefer, RestorePolicy
from webhook.restore.decide import restoring_flink
from webhook.restore.outcome import RestoreDecision, RestoreOutcome
from webhook.restore.restoring import cannot_load_any, judge_rewind
from webhook.restore.snapshots import Candidate, SnapshotQuery, Snapshots, checked_as, choose, newest


@dataclass(frozen=True)
class Unresolved:
    """The newest restorable checkpoint could not be checked (the storage failed, the lookup ran out of
    its deadline or its budget, the object no longer says where to look): whatever the stale copy
    completed meanwhile is unknown."""

    problem: str


@dataclass(frozen=True)
class StartFrom:
    path: str  # "" keeps the path the job was admitted with
    rewound: str = ""  # how much newer state it leaves behind (policy onUnloadable: older), for its Event


@dataclass(frozen=True)
class ResumeHeld:
    """A stepped-down copy stays stopped rather than rewound: its newest snapshot is one its Flink
    cannot load (the version, the claim mode, 1.x state into Flink 2), and the policy holds such a job
    (``onUnloadable: hold``, ``restoring.judge_rewind``, the rule a restore follows)."""

    why: str


def newest_known(decision: RestoreDecision, found: Snapshots | None, admitted: str) -> str | Unresolved:
    """What a release's lookup (``decide_restore`` on the held object, ``found``: what the storage
    answered, None when it was not asked) says the job may start from: the newest restorable path, ""
    to keep ``admitted`` (the path the webhook chose) only when the lookup ran to its end and found
    nothing restorable, else ``Unresolved``: the stale copy may have completed a newer checkpoint."""
    if decision.storage_error or decision.unloadable:  # unknown, or newest state this Flink cannot load
        return Unresolved(decision.reason)
    if found is not None and found.unchecked:
        return Unresolved(f"{found.unchecked}: the newest checkpoint was not checked")
    if decision.outcome is RestoreOutcome.RESTORED:
        older = _older_checkpoint(decision.path, admitted)
        return Unresolved(older) if older else decision.path
    if found is None and admitted:
        return Unresolved(f"nothing was looked up ({decision.reason})")
    return ""


def _older_checkpoint(path: str, admitted: str) -> str:
    """Why ``path`` cannot be newest: a checkpoint of the same job directory with a lower id than the
    one admitted (that one gone or unreadable now, or a listing that missed it); "" otherwise."""
    head, _, name = path.rstrip("/").rpartition("/")
    before_head, _, before = admitted.rstrip("/").rpartition("/")
    found, was = checkpoint_number(name), checkpoint_number(before)
    if head != before_head or found is None or was is None or found >= was:
        return ""
    return (
        f"the newest restorable checkpoint found ({name}) is older than the one admitted ({before}), "
        "which is gone or no longer restorable"
    )


def release_start(cause: ReleaseCause, resolved: str | Unresolved) -> StartFrom | StorageHold:
    """A release starts from the newest state resolved now; when that cannot be checked the job stays
    held, says why and is tried again at the next poll (the stale copy may have checkpointed past the
    admitted path), unless the release is the policy's ``onStorageError: proceed`` itself."""
    if isinstance(resolved, Unresolved):
        if cause is ReleaseCause.STORAGE_ERROR:
            return StartFrom("")
        return StorageHold(resolved.problem, checkpoint=True)
    return StartFrom(resolved)


def resume_start(
    copy: Copy, query: SnapshotQuery | None, found: Snapshots | None, policy: RestorePolicy
) -> StartFrom | Unresolved | ResumeHeld:
    """Where a stepped-down copy resumes: its own newest restorable snapshot; "" (its HA metadata or
    last savepoint) only when it keeps none to look for. It stays stopped while its newest checkpoint
    cannot be checked, or cannot be found (no jobId in its status) and no HA data resumes it; and, as a
    restore does, rather than start from older state than a snapshot its Flink cannot load (no silent
    rewind: held, or with ``onUnloadable: older`` resumed, its Event saying what it left behind)."""
    if query is None:
        if copy.job_id or copy.folder is None or stop_mode(copy.resource) == "last-state":
            return StartFrom("")
        return Unresolved("its status names no jobId: its own checkpoints cannot be found")
    if found is None or found.unchecked:
        why = found.unchecked if found is not None else "not looked up"
        return Unresolved(f"{why}: the newest checkpoint was not checked")
    chosen = resume_choice(found, policy.prefer)
    if chosen is None:
        blocked = cannot_load_any(found)
        return ResumeHeld(f"its Flink cannot load any snapshot left: {blocked}") if blocked else StartFrom("")
    rewind = judge_rewind(found, chosen, False, query.job_dir, copy.resource, policy)
    if rewind.held:
        return ResumeHeld(rewind.held)
    return StartFrom(str(chosen.path), rewind.rewound)


def resume_query(copy: Copy, policy: RestorePolicy) -> SnapshotQuery | None:
    """Where a stepped-down copy's own job keeps its state: its checkpoints where the restore path looks
    for them (``create-subdir`` honoured), its savepoints; None when nothing can be looked for."""
    root = checkpoint_dir_of(copy.resource, policy)
    if root is None or not copy.job_id:
        return None
    job_dir = copy.resource.job_checkpoints(root, copy.job_id)
    query = SnapshotQuery(
        job_dir,
        None,
        root,
        savepoint_dir_of(copy.resource, policy),
        copy.job_id,
        target=restoring_flink(
            copy.resource, copy.session, policy
        ),  # what its Flink cannot load is passed over
    )
    return checked_as(query, policy)  # checked as a restore checks it (whole _metadata, named files)


def resume_skipped(found: Snapshots) -> str:
    """What the resume passed over and why ("" when nothing), for its Event and log line."""
    return "".join(f"; skipped {why}" for why in (*found.rejected, found.unchecked) if why)


def resume_choice(found: Snapshots, prefer: Prefer) -> Candidate | None:
    """Its newest complete checkpoint, or its own newer savepoint, ordered as a restore orders them
    (None when none: the operator's own HA data or last savepoint)."""
    return choose(found.checkpoint, newest(found.listed), prefer)
