"""What the restore decision asks storage and what storage answers (the lookup's contract), which of
the candidates it found count (:func:`own_savepoints`, :func:`floor_of`) and which is the newest.

Pure values: ``decide.py`` builds a :class:`SnapshotQuery` and reads :class:`Snapshots`; ``storage/`` answers
one, raising :class:`StorageError` when it cannot. Neither side imports the other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from webhook.common.checkpoints import checkpoint_number
from webhook.common.flink_reads import NOT_STATED, Target
from webhook.common.paths import StoragePath
from webhook.policy.restore import DEFAULT_ALLOWED_SCHEMES, NewerMetadata, Prefer, RestorePolicy, Verify


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
    note: str = ""  # what its check found worth telling (bytes after the end, a newer format trusted)


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
    verify: Verify = Verify.FILES  # how much of each candidate is checked (policy verify)
    on_newer: NewerMetadata = NewerMetadata.TRUST
    budget: int = 100  # storage requests the lookup may make; past it: unchecked, held
    allowed_schemes: tuple[str, ...] = DEFAULT_ALLOWED_SCHEMES  # where named files may be checked
    # The Flink that will restore it (its spec.flinkVersion, its image): a snapshot it cannot load is
    # passed over (common/flink_reads.py); unknown: not judged.
    target: Target = NOT_STATED


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
    # Why the lookup stopped before it could check every candidate (its request budget): then nothing
    # unchecked is restored, the job is held.
    unchecked: str = ""
    trips: Trips = field(default_factory=lambda: Trips())


@dataclass(frozen=True)
class Trips:
    """The storage requests of one lookup: how many, and the longest chain of them one after another
    (the round trips an admission waits for; a listing page of 1,000 entries is one request)."""

    rounds: int = 0
    requests: int = 0


SnapshotLookup = Callable[[SnapshotQuery], Snapshots]  # raises StorageError


def checked_as(query: SnapshotQuery, policy: RestorePolicy) -> SnapshotQuery:
    """``query`` with the policy's checks (verify, onNewerMetadata, verifyBudget, allowedSchemes): the
    webhook's restore and the fencing agent's release and resume check candidates alike."""
    return replace(
        query,
        verify=policy.verify,
        on_newer=policy.on_newer_metadata,
        budget=policy.verify_budget,
        allowed_schemes=policy.allowed_schemes,
    )


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


def own_savepoints(
    found: tuple[Candidate, ...], query: SnapshotQuery, clash: str
) -> tuple[tuple[Candidate, ...], tuple[str, ...]]:
    """The job's own savepoints among those its savepoint directory's listing ``found`` (the reported
    one apart: it is checked on its own), and why any are passed over: ``clash``, another job in the
    same checkpoint directory whose jobId starts with the same 6 hex ("" when none), means a savepoint's
    name cannot tell whose it is."""
    listed = tuple(c for c in found if query.savepoint is None or c.path != query.savepoint)
    if not listed or not clash:
        return listed, ()
    return (), tuple(
        f"savepoint {c.path}: its prefix {query.job_id[:6]} is also that of job {clash} "
        f"in {query.checkpoint_dir}, so whose it is cannot be told by its name"
        for c in listed
    )


def needs_floor(
    query: SnapshotQuery,
    checkpoint: Candidate | None,
    savepoint: Candidate | None,
    listed: tuple[Candidate, ...],
) -> bool:
    """Is the snapshot the job started from to be checked? Only when it names one and nothing of the
    job's own (its newest checkpoint, the reported savepoint, its listed savepoints) is restorable."""
    return query.started_from is not None and checkpoint is None and savepoint is None and not listed


def floor_of(
    started_from: StoragePath, candidate: Candidate | None, problem: str
) -> tuple[Candidate | None, tuple[str, ...]]:
    """The snapshot the job started from as its floor, from its check (``candidate`` when it passed,
    else ``problem``: why not, "" when it has no ``_metadata``), and why it is passed over. Checked as a
    savepoint is; one in a ``chk-N`` directory (``common/checkpoints.py``) is a checkpoint."""
    floor = candidate
    if candidate is not None and checkpoint_number(started_from.name) is not None:
        floor = replace(candidate, kind="checkpoint")
    return floor, ((f"started from {started_from}: {problem}",) if problem else ())
