"""Which snapshots a job has: the job directory listed once and its ``chk-N`` checked from the highest
down, the reported savepoint and the job's own savepoints side by side, and the snapshot it started from
when nothing of its own is restorable; each candidate checked as the policy's ``verify`` says (its header,
its whole ``_metadata``, or every file it names: ``verify.py``).

``CheckpointStorage`` is the one door to storage the webhook, the fencing agent and the commands use.
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import fsspec

from webhook.common.checkpoints import checkpoint_number, checkpoint_numbers
from webhook.common.flink import is_job_id, is_savepoint_of
from webhook.common.flink_reads import Target, cannot_read
from webhook.common.paths import FSSPEC_PROTOCOL, StoragePath
from webhook.policy.restore import Verify
from webhook.restore.checks import judge, named_files
from webhook.restore.metadata import (
    METADATA_MIN_BYTES,
    metadata_checkpoint_id,
    metadata_problem,
    read_metadata,
)
from webhook.restore.snapshots import (
    Candidate,
    SnapshotQuery,
    Snapshots,
    floor_of,
    needs_floor,
    own_savepoints,
)
from webhook.restore.storage.backends import Deadline, Filesystems, modified_time, storage_error
from webhook.restore.storage.listings import (
    Listings,
    Lookup,
    entry_inside,
    inside,
    local_metadata_inside,
    real,
)
from webhook.restore.storage.requests import BRANCHES, REQUESTS, Cursor, Unchecked, collection_paused
from webhook.restore.storage.verify import FileCheck
from webhook.restore.verdict import VERDICT_NAME, Verdict

log = logging.getLogger(__name__)

METADATA = "_metadata"
# Savepoints of one job read per lookup at most (each one metadata read). The operator keeps 10 by
# default (kubernetes.operator.savepoint.history.max.count); more are passed over, named in the warning.
MAX_SAVEPOINTS = 32


@dataclass(frozen=True)
class CheckpointScan:
    """What one listing of a job's checkpoint directory showed, so "nothing restorable" can say why."""

    candidate: Candidate | None
    job_dir_missing: bool = False
    incomplete: tuple[int, ...] = ()  # chk-<N> seen without _metadata (in progress or aborted), highest first
    rejected: tuple[str, ...] = ()  # "chk-<N>: why" for a snapshot Flink could not restore


@dataclass(frozen=True)
class SavepointCheck:
    """The savepoint when it passed its check, else why not ("" when it has no ``_metadata`` at all)."""

    candidate: Candidate | None
    problem: str = ""


@dataclass(frozen=True)
class SavepointScan:
    """What one listing of the savepoint directory showed for one job."""

    found: tuple[Candidate, ...] = ()  # complete savepoints named after the job
    rejected: tuple[str, ...] = ()  # "savepoint <path>: why" for the others named after it


@dataclass(frozen=True)
class _Metadata:
    modified: datetime
    problem: str = ""  # why Flink could not restore the snapshot, "" when it can
    checkpoint_id: int | None = None  # what the file says (Flink wrote it), when readable
    note: str = ""


class CheckpointStorage:
    """Lists checkpoint storage; one instance per process, filesystems are cached by fsspec."""

    def __init__(
        self,
        storage_options: Mapping[str, Mapping[str, Any]] | None = None,
        write_verdicts: bool = False,
        filesystems: Filesystems | None = None,  # another source of filesystems (the simulation's)
    ) -> None:
        self.filesystems = filesystems or Filesystems(storage_options)
        self.listings = Listings(self.filesystems)
        self.files = FileCheck(self.filesystems, write_verdicts)

    def filesystem(
        self, path: StoragePath, lane: str = "", connections: int = 0
    ) -> fsspec.AbstractFileSystem:
        """``path``'s filesystem (``Filesystems.filesystem``: a lane's own where ``lane`` is named)."""
        return self.filesystems.filesystem(path, lane, connections)

    def settle(self, timeout: float = 10.0) -> None:
        """Wait for the verdicts being written (tests, benchmarks, a stopping agent)."""
        self.files.settle(timeout)

    def warm(self, schemes: Iterable[str]) -> None:
        """Build the object-store clients now (one per protocol) and start the lookup threads, not on
        the first admission's path."""
        REQUESTS.submit(lambda: None)
        BRANCHES.submit(lambda: None)
        for protocol in sorted({FSSPEC_PROTOCOL[s] for s in schemes} & {"s3"}):
            try:
                fs = self.filesystem(StoragePath(protocol, "warm", "/"))
                connect = getattr(fs, "connect", None)
                if callable(connect):
                    connect()
            except Exception as exc:  # a missing backend is told at start-up (missing_backends)
                log.debug("cannot prepare %s storage: %s", protocol, exc)

    def snapshots(self, query: SnapshotQuery, deadline: Deadline) -> Snapshots:
        """What ``decide_restore`` asks storage (its ``lookup``): the job's newest checkpoint, the
        reported savepoint, the job's own savepoints in its savepoint directory, and, when none of
        them is restorable, the snapshot the job started from; with what was seen on the way. The
        checkpoint directory, the reported savepoint and the savepoint directory are read side by side."""
        lookup = Lookup(self.listings, query, deadline)
        cursor = Cursor(lookup.ledger)
        try:
            return self._snapshots(lookup, cursor)
        except Unchecked as exc:
            return Snapshots(None, None, unchecked=str(exc), trips=lookup.ledger.trips())

    def _snapshots(self, lookup: Lookup, cursor: Cursor) -> Snapshots:
        query, deadline = lookup.query, lookup.deadline
        branches: list[tuple[concurrent.futures.Future[Any], Cursor]] = []

        def beside(fn: Callable[[Cursor], Any]) -> tuple[concurrent.futures.Future[Any], Cursor]:
            started = cursor.fork()
            branch = (BRANCHES.submit(lambda: fn(started)), started)
            branches.append(branch)
            return branch

        listing_savepoints = query.savepoint_dir is not None and is_job_id(query.job_id)
        reported_path, savepoint_dir, shared_dir = query.savepoint, query.savepoint_dir, query.checkpoint_dir
        reported = listed_branch = clash_branch = None
        if reported_path is not None:
            reported = beside(functools.partial(self._check_savepoint, reported_path, lookup))
        if listing_savepoints and savepoint_dir is not None:
            listed_branch = beside(
                functools.partial(self._scan_savepoints, savepoint_dir, query.job_id, lookup)
            )
            if query.job_dir is not None and shared_dir is not None and shared_dir != query.job_dir:
                clash_branch = beside(functools.partial(self._prefix_clash, shared_dir, query.job_id, lookup))
        scan = None
        if query.job_dir is not None:
            scan = self._scan_checkpoints(query.job_dir, lookup, cursor, query.checkpoint_dir)
        for future, _ in branches:
            lookup.wait(future)
        cursor.join(*(c for _, c in branches))
        check: SavepointCheck | None = lookup.wait(reported[0]) if reported else None
        savepoint = check.candidate if check is not None else None
        rejected = list(scan.rejected if scan is not None else ())
        if check and check.problem:
            rejected.append(f"savepoint {query.savepoint}: {check.problem}")
        listed: tuple[Candidate, ...] = ()
        if listed_branch is not None:
            found: SavepointScan = lookup.wait(listed_branch[0])
            rejected.extend(found.rejected)
            clash = lookup.wait(clash_branch[0]) if clash_branch is not None else ""
            listed, clashing = own_savepoints(found.found, query, clash)
            rejected.extend(clashing)
        floor = None
        if query.started_from is not None and needs_floor(
            query, scan.candidate if scan is not None else None, savepoint, listed
        ):
            started = self._check_savepoint(query.started_from, lookup, cursor)
            floor, passed_over = floor_of(query.started_from, started.candidate, started.problem)
            rejected.extend(passed_over)
        deadline.check()
        return Snapshots(
            scan.candidate if scan is not None else None,
            savepoint,
            scan.job_dir_missing if scan is not None else False,
            scan.incomplete if scan is not None else (),
            tuple(rejected),
            listed,
            floor,
            listing_savepoints,
            trips=lookup.ledger.trips(),
        )

    def _scan_checkpoints(
        self, job_dir: StoragePath, lookup: Lookup, cursor: Cursor, checkpoint_dir: StoragePath | None
    ) -> CheckpointScan:
        """One listing of ``job_dir``, then from the highest ``chk-<N>`` down until one passes its
        check. A job directory that does not exist means "no checkpoints"; a checkpoint directory (or
        bucket) that does not exist means the storage is not the one the job wrote to: an error."""
        fs = self.filesystem(job_dir)
        lookup.deadline.check()
        files = lookup.query.verify is Verify.FILES
        # The job's verdict is read beside the job directory's listing: no round trip of its own.
        verdict = lookup.request(lambda c: self.files.read_verdict(job_dir, c), cursor) if files else None
        # On an object store the listing's entry gives the verdict's storage time (the same request).
        times: dict[str, datetime] | None = {} if files and job_dir.protocol != "file" else None
        names = self.listings.names(fs, job_dir, cursor, times)
        if names is None:
            if checkpoint_dir is not None and checkpoint_dir != job_dir:
                cursor.step()
                self.listings.require_dir(fs, checkpoint_dir)
            return CheckpointScan(None, job_dir_missing=True)
        if files:
            lookup.job_dir = job_dir.canonical
            if verdict is not None and VERDICT_NAME in names:
                listed_at = (times or {}).get(VERDICT_NAME)
                future, reading = verdict

                def resolve() -> Verdict | None:
                    read = lookup.wait(future)
                    cursor.join(reading)
                    return self.files.verdict(job_dir, read, listed_at)

                # Waited for where the named files are checked: the newest checkpoint's folder and
                # _metadata are asked meanwhile (the verdict, 0.4 MB of JSON at 10,000 files, is no
                # round trip of its own).
                lookup.expect_verdict(resolve)
            # With no verdict, the folders where incremental checkpoints keep what they share are listed
            # by prefix now (file merging keeps a folder per subtask below them), except where key
            # ranges list them side by side once the _metadata names their files (S3: ranges.py).
            if not self.files.ranged(job_dir) and lookup.verdict is None:
                for shared in ("shared", "taskowned"):
                    if shared in names:
                        lookup.tree(job_dir.child(shared), cursor)
        local_root = real(job_dir) if job_dir.protocol == "file" else None
        incomplete: list[int] = []
        rejected: list[str] = []
        for n in checkpoint_numbers(names):
            lookup.deadline.check()
            chk = job_dir.child(f"chk-{n}")
            if local_root is not None and not entry_inside(local_root, chk):
                continue  # a symlink leading out of the checkpoint dir is never a restore path
            # A verdict covers only the newest complete checkpoint: none above it had a _metadata.
            found = self._snapshot(fs, chk, n, lookup, cursor, newest=not rejected)
            if found is None:
                incomplete.append(n)
            elif found.problem:
                rejected.append(f"chk-{n}: {found.problem}")
            else:
                candidate = Candidate(chk, "checkpoint", found.modified, found.checkpoint_id, found.note)
                return CheckpointScan(candidate, incomplete=tuple(incomplete), rejected=tuple(rejected))
        return CheckpointScan(None, incomplete=tuple(incomplete), rejected=tuple(rejected))

    def _scan_savepoints(
        self, savepoint_dir: StoragePath, job_id: str, lookup: Lookup, cursor: Cursor
    ) -> SavepointScan:
        """The job's restorable savepoints in ``savepoint_dir``: one listing, then every entry named
        ``savepoint-<first 6 hex of job_id>-<12 hex>`` (Flink's naming) checked side by side. A
        savepoint directory that does not exist holds none; a listing that fails is a storage error."""
        fs = self.filesystem(savepoint_dir)
        lookup.deadline.check()
        names = self.listings.names(fs, savepoint_dir, cursor)
        if names is None:
            return SavepointScan()
        mine = sorted(n for n in names if is_savepoint_of(n, job_id))
        local_root = real(savepoint_dir) if savepoint_dir.protocol == "file" else None
        paths = [savepoint_dir.child(name) for name in mine[:MAX_SAVEPOINTS]]
        paths = [p for p in paths if local_root is None or entry_inside(local_root, p)]

        def check(path: StoragePath, branch: Cursor) -> tuple[_Metadata | None, Cursor]:
            return self._snapshot(fs, path, None, lookup, branch), branch

        checks = [(path, BRANCHES.submit(functools.partial(check, path, cursor.fork()))) for path in paths]
        found: list[Candidate] = []
        rejected: list[str] = []
        for path, future in checks:
            meta, branch = lookup.wait(future)
            cursor.join(branch)
            if meta is None:
                continue  # in progress or aborted: Flink writes _metadata last
            if meta.problem:
                rejected.append(f"savepoint {path}: {meta.problem}")
                continue
            found.append(Candidate(path, "savepoint", meta.modified, meta.checkpoint_id, meta.note))
        if len(mine) > MAX_SAVEPOINTS:
            rejected.append(
                f"{len(mine) - MAX_SAVEPOINTS} more savepoints named after the job in {savepoint_dir} "
                f"(only {MAX_SAVEPOINTS} are read per lookup)"
            )
        return SavepointScan(tuple(found), tuple(rejected))

    def _prefix_clash(self, checkpoint_dir: StoragePath, job_id: str, lookup: Lookup, cursor: Cursor) -> str:
        """Another job whose checkpoints lie in the same checkpoint directory and whose jobId starts
        with the same 6 hex ("" when none): then a savepoint name cannot tell the two apart."""
        fs = self.filesystem(checkpoint_dir)
        lookup.deadline.check()
        names = self.listings.names(fs, checkpoint_dir, cursor) or []
        others = sorted(n for n in names if is_job_id(n) and n != job_id and n[:6] == job_id[:6])
        return others[0] if others else ""

    def _check_savepoint(self, path: StoragePath, lookup: Lookup, cursor: Cursor) -> SavepointCheck:
        fs = self.filesystem(path)
        lookup.deadline.check()
        if path.protocol == "file" and not inside(path, real(path)):
            return SavepointCheck(None)
        directory_id = checkpoint_number(path.name)
        found = self._snapshot(fs, path, directory_id, lookup, cursor)
        if found is None:
            return SavepointCheck(None)
        if found.problem:
            return SavepointCheck(None, found.problem)
        return SavepointCheck(Candidate(path, "savepoint", found.modified, found.checkpoint_id, found.note))

    # --- one snapshot --------------------------------------------------------------------------------
    def _snapshot(
        self,
        fs: fsspec.AbstractFileSystem,
        snapshot: StoragePath,
        directory_id: int | None,
        lookup: Lookup,
        cursor: Cursor,
        newest: bool = False,
    ) -> _Metadata | None:
        """The snapshot's ``_metadata`` checked as the policy says (None when it has none); ``newest``:
        it is the job's newest complete checkpoint (a verdict may cover it)."""
        query = lookup.query
        lookup.ledger.check(str(snapshot))
        if query.verify is Verify.HEADER:
            cursor.step(2)  # its entry, then its first 16 bytes
            return self._header(fs, snapshot, query.target)
        meta = snapshot.child(METADATA)
        if meta.protocol == "file" and not local_metadata_inside(meta, snapshot):
            return None
        # The snapshot's folder (the _metadata's time and size, its exclusive files) and the _metadata
        # itself, side by side: one round trip.
        folder = lookup.folder(snapshot, cursor)
        body, reading = lookup.request(lambda c: self.listings.whole(fs, meta, c), cursor)
        listing = lookup.wait(folder)
        lookup.joined(snapshot, cursor)
        entry = listing.get(METADATA) if listing is not None else None
        if entry is None:  # in progress or aborted: Flink writes _metadata last
            read = not body.cancel()
            if read:
                lookup.wait(body)
            lookup.ledger.probed(2 if read else 1)
            return None
        data = lookup.wait(body)
        cursor.join(reading)
        modified = entry[1] or datetime.fromtimestamp(0, UTC)
        if data is None:
            return None
        with collection_paused():
            judged = judge(read_metadata(data), directory_id, query.on_newer, query.target)
            named = None
            if not judged.problem and query.verify is Verify.FILES and judged.metadata is not None:
                named = named_files(judged.metadata, snapshot, query.allowed_schemes)
        if judged.problem:
            return _Metadata(modified, judged.problem)
        if named is not None:
            if named.problem:
                return _Metadata(modified, named.problem)
            why, write = self.files.files(
                named, snapshot, entry, directory_id, listing, lookup, cursor, newest
            )
            if write is not None:  # off the lookup's path
                self.files.write_verdict(write.job_dir, write.verdict, write.started)
            if why:
                return _Metadata(modified, why)
        return _Metadata(modified, "", judged.checkpoint_id, judged.note)

    def _header(
        self, fs: fsspec.AbstractFileSystem, snapshot: StoragePath, target: Target
    ) -> _Metadata | None:
        """verify: header: the ``_metadata``'s entry and its first 16 bytes (magic, version, id)."""
        meta = snapshot.child(METADATA)
        try:
            info = fs.info(meta.fs_path)
        except FileNotFoundError:
            return None
        except Exception as exc:
            raise storage_error("reading", meta, exc) from None
        if info.get("type") not in (None, "file"):
            return None
        if meta.protocol == "file" and not local_metadata_inside(meta, snapshot):
            return None
        modified = modified_time(info) or datetime.fromtimestamp(0, UTC)
        size = info.get("size")
        size = size if isinstance(size, int) else None
        head = b"" if size == 0 else self.listings.header_bytes(fs, meta)
        problem = metadata_problem(head, size)
        if not problem and len(head) >= METADATA_MIN_BYTES:  # the format version: all a header tells
            problem = cannot_read(target, int.from_bytes(head[4:8], "big"))
        return _Metadata(modified, problem, None if problem else metadata_checkpoint_id(head))
