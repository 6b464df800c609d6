"""Find restorable checkpoints and savepoints in the job's storage, through fsspec.

This is the only module that touches storage. Listing cost stays flat: one listing of the job's
checkpoint directory, then one metadata lookup per ``chk-<N>`` from the highest N down until one
has ``_metadata`` (normally the first); one listing of the savepoint directory, then one metadata
lookup per savepoint named after the job; the snapshot the job started from only when nothing of
its own is restorable. Each metadata lookup is one small read (the 16-byte header).

With ``verify: files`` the files a ``_metadata`` names are asked as ``restore/verdict.py`` plans it: the
job's verdict (one read beside the job directory's listing) spares the files a recent full check
confirmed, the rest go by HEAD, prefix listing or folder listing, side by side (``_files``); a storage
that may write (the fencing agent's) leaves a verdict after a check that confirmed every file.
"""

from __future__ import annotations

import concurrent.futures
import copy
import functools
import logging
import os
import queue
import stat
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import fsspec

from webhook.common.flink import is_job_id, is_savepoint_of
from webhook.common.paths import FSSPEC_PROTOCOL, StoragePath, StoragePathError
from webhook.restore import presigned
from webhook.restore.checks import NamedFiles, judge, missing, named_files
from webhook.restore.compat import Target, cannot_read
from webhook.restore.decide import Candidate, SnapshotQuery, Snapshots, StorageError, Trips
from webhook.restore.metadata import (
    METADATA_HEADER_BYTES,
    METADATA_MIN_BYTES,
    metadata_checkpoint_id,
    metadata_problem,
    read_metadata,
)
from webhook.restore.policy import Verify
from webhook.restore.verdict import VERDICT_NAME, Verdict, budget_units, coverage, decode, encode, made, plan

log = logging.getLogger(__name__)

METADATA = "_metadata"
# Savepoints of one job read per lookup at most (each one metadata read). The operator keeps 10 by
# default (kubernetes.operator.savepoint.history.max.count); more are passed over, named in the warning.
MAX_SAVEPOINTS = 32

# Conservative network defaults so one slow endpoint cannot eat the admission deadline by itself.
_S3_DEFAULTS: dict[str, Any] = {
    "use_listings_cache": False,
    "config_kwargs": {
        "connect_timeout": 2,
        "read_timeout": 3,
        "retries": {"max_attempts": 2, "mode": "standard"},
        # as many connections as lookup requests run side by side (botocore's default is 10: 200 HEADs
        # of a verdict's new files queued in 20 rounds)
        "max_pool_connections": 64,
    },
}


_S3FS_RETRIES = 1  # s3fs-level tries; botocore's own max_attempts above still applies

# The same for the other object stores, where their clients have the knobs: gcsfs's per-request timeout
# (it retries 6 times itself), the Azure SDK's connect and read timeouts.
_NETWORK_DEFAULTS: dict[str, dict[str, Any]] = {
    "s3": _S3_DEFAULTS,
    "gs": {"requests_timeout": 3},
    "abfs": {"connection_timeout": 2, "read_timeout": 3},
}
# Object stores whose fsspec client caches listings unless told not to (s3fs, gcsfs, adlfs and ossfs
# cache them without expiry): a heartbeat, fence or chk-N another cluster wrote after the first listing
# would never be seen. Forced off whatever the policy says: no cached listing decides anything.
_LISTING_CACHES = frozenset({"s3", "gs", "abfs", "oss"})


# Per fsspec protocol: the extra of this package that installs its backend, and a module the backend
# needs at run time (fsspec resolves "hdfs" to a class that imports pyarrow only when used).
BACKENDS: dict[str, tuple[str, str]] = {
    "s3": ("", "s3fs"),
    "gs": ("gcs", "gcsfs"),
    "abfs": ("azure", "adlfs"),
    "oss": ("oss", "ossfs"),
    "hdfs": ("hdfs", "pyarrow.fs"),
    "file": ("", ""),
}


@dataclass(frozen=True)
class MissingBackend:
    scheme: str
    extra: str
    error: str
    native: bool = False  # the Python package imports, but the native client it loads is missing

    def message(self) -> str:
        if self.native:
            return (
                f"allowed scheme {self.scheme}:// cannot be read: {self.error}; use an image with a JVM and "
                f"the Hadoop client, or remove {self.scheme} from the policy's allowedSchemes; until then "
                "a restore from it is a storage error"
            )
        install = f"install flink-failover[{self.extra}]" if self.extra else "reinstall flink-failover"
        return (
            f"allowed scheme {self.scheme}:// has no fsspec backend ({self.error}): {install}, or remove "
            f"{self.scheme} from the policy's allowedSchemes; until then a restore from it is a storage error"
        )


def missing_backends(schemes: Iterable[str]) -> tuple[MissingBackend, ...]:
    """The allowed schemes this installation cannot read (imports each backend once: start-up cost only)."""
    import importlib

    missing = []
    for scheme in schemes:
        protocol = FSSPEC_PROTOCOL[scheme]
        extra, module = BACKENDS.get(protocol, ("", ""))
        try:
            fsspec.get_filesystem_class(protocol)
            if module:
                importlib.import_module(module)
        except (ImportError, ValueError) as exc:
            missing.append(MissingBackend(scheme, extra, str(exc).strip().splitlines()[0][:160]))
            continue
        if protocol == "hdfs" and (problem := hadoop_client_problem(os.environ)):
            missing.append(MissingBackend(scheme, extra, problem, native=True))
    return tuple(missing)


def hadoop_client_problem(environ: Mapping[str, str]) -> str:
    """Why pyarrow's HadoopFileSystem cannot work here ("" when it can): it loads a JVM (libjvm) and
    libhdfs at the first connection, and the JVM needs the Hadoop jars on its classpath. Without them
    pyarrow still imports, and every restore failed with ``OSError: Unable to load libjvm``.

    Looks where Arrow looks: libjvm under ``JAVA_HOME``, libhdfs in ``ARROW_LIBHDFS_DIR``, then
    ``HADOOP_HOME/lib/native``, then the loader's search path; each is loaded once to be sure.
    """
    import ctypes

    home = environ.get("JAVA_HOME", "")
    jvms = (
        [
            os.path.join(home, sub, "libjvm.so")
            for sub in (
                "lib/server",
                "jre/lib/server",
                "lib/amd64/server",
                "jre/lib/amd64/server",
                "lib/aarch64/server",
            )
        ]
        if home
        else []
    )
    if not _load_first(jvms + ([] if home else ["libjvm.so"]), ctypes.RTLD_GLOBAL):
        where = f"under JAVA_HOME={home}" if home else "(JAVA_HOME is not set)"
        return f"no loadable JVM (libjvm.so) {where}"
    hadoop_home = environ.get("HADOOP_HOME", "")
    hdfs_dirs = [
        environ.get("ARROW_LIBHDFS_DIR", ""),
        os.path.join(hadoop_home, "lib", "native") if hadoop_home else "",
    ]
    libhdfs = [os.path.join(d, "libhdfs.so") for d in hdfs_dirs if d]
    if not _load_first([*libhdfs, "libhdfs.so"], ctypes.RTLD_GLOBAL):
        return "no loadable libhdfs.so (set ARROW_LIBHDFS_DIR or HADOOP_HOME)"
    hadoop = os.path.join(environ.get("HADOOP_HOME", ""), "bin", "hadoop")
    if "hadoop" not in environ.get("CLASSPATH", "") and not (
        environ.get("HADOOP_HOME") and os.path.isfile(hadoop)
    ):
        return "no Hadoop jars for the JVM (set CLASSPATH to `hadoop classpath --glob`, or HADOOP_HOME)"
    return ""


def _load_first(paths: list[str], mode: int) -> bool:
    import ctypes

    for path in paths:
        if os.sep in path and not os.path.isfile(path):
            continue
        try:
            ctypes.CDLL(path, mode=mode)
        except OSError:
            continue
        return True
    return False


class DeadlineExceeded(StorageError):
    pass


def checkpoint_ids(names: list[str]) -> list[int]:
    """Checkpoint numbers among directory entry names, highest first; other names are ignored.

    Only the spelling Flink writes counts: ``chk-`` and 1-18 ASCII digits without a leading zero
    (``chk-007`` would resolve to another directory, ``chk-7``) and nothing after them (not even the
    newline a ``$`` regex lets through). String tests rather than a regex: thousands of entries.
    """
    ids = set()
    for name in names:
        if name.startswith("chk-"):
            digits = name[4:]
            if (
                0 < len(digits) <= 18
                and digits.isascii()
                and digits.isdigit()
                and (digits[0] != "0" or digits == "0")
            ):
                ids.add(int(digits))
    return sorted(ids, reverse=True)


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.expires = time.monotonic() + seconds

    def remaining(self) -> float:
        return self.expires - time.monotonic()

    def check(self) -> None:
        if self.remaining() <= 0:
            raise DeadlineExceeded("storage lookup passed the admission deadline")


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


class _Unchecked(Exception):
    """The lookup's request budget ran out before a candidate was checked."""


# A listing page holds this many entries on object stores (S3's and GCS's default page, Azure's).
LISTING_PAGE = 1000
# A _metadata larger than this is not read whole within an admission (the job is held instead).
MAX_METADATA_BYTES = 64 * 1024 * 1024

_Listing = dict[str, tuple[int | None, datetime | None]]  # name -> (size, modified); files only


class _Ledger:
    """One lookup's storage requests, and how deep the chain of requests made one after another is."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.requests = 0
        self.heads = 0  # of the requests, HEADs of single files (the budget counts them by the hundred)
        self.probes = 0  # requests that found a chk-N without _metadata (in progress): not checking
        self.deepest = 0
        self.lock = threading.Lock()

    def spend(self, pages: int, depth: int) -> None:
        with self.lock:
            self.requests += pages
            self.deepest = max(self.deepest, depth)

    def headed(self, depth: int) -> None:
        with self.lock:
            self.requests += 1
            self.heads += 1
            self.deepest = max(self.deepest, depth)

    def probed(self, requests: int) -> None:
        with self.lock:
            self.probes += requests

    def check(self, what: str) -> None:
        """Stop before checking ``what`` when the requests spent checking snapshots reached the
        budget (finding the directories of checkpoints in progress is not checking one)."""
        with self.lock:
            over = budget_units(self.requests - self.heads - self.probes, self.heads) >= self.budget
        if over:
            raise _Unchecked(
                f"{what} was not checked: the lookup made its {self.budget} storage requests "
                "(policy verifyBudget)"
            )

    def trips(self) -> Trips:
        with self.lock:
            return Trips(self.deepest, self.requests)


class _Cursor:
    """Where one line of work stands in its lookup: how many requests it waited for one after another."""

    def __init__(self, ledger: _Ledger, depth: int = 0) -> None:
        self.ledger = ledger
        self.depth = depth

    def fork(self) -> _Cursor:
        return _Cursor(self.ledger, self.depth)

    def step(self, pages: int = 1) -> None:
        self.depth += pages
        self.ledger.spend(pages, self.depth)

    def head(self) -> None:
        """One HEAD of a single file."""
        self.depth += 1
        self.ledger.headed(self.depth)

    def join(self, *others: _Cursor) -> None:
        self.depth = max([self.depth, *(o.depth for o in others)])


class _DaemonPool:
    """A fixed set of daemon threads: a lookup abandoned at its deadline never holds a process at exit
    (a ThreadPoolExecutor's threads are joined), and threads are made again in a forked worker."""

    def __init__(self, size: int, name: str) -> None:
        self.size = size
        self.name = name
        self._pid = -1
        self._queue: queue.SimpleQueue[tuple[concurrent.futures.Future[Any], Callable[[], Any]]]
        self._lock = threading.Lock()

    def submit(self, fn: Callable[[], Any]) -> concurrent.futures.Future[Any]:
        with self._lock:
            if self._pid != os.getpid():
                self._pid = os.getpid()
                self._queue = queue.SimpleQueue()
                for i in range(self.size):
                    threading.Thread(
                        target=self._work, args=(self._queue,), name=f"{self.name}-{i}", daemon=True
                    ).start()
            future: concurrent.futures.Future[Any] = concurrent.futures.Future()
            self._queue.put((future, fn))
        return future

    @staticmethod
    def _work(work: queue.SimpleQueue[tuple[concurrent.futures.Future[Any], Callable[[], Any]]]) -> None:
        while True:
            future, fn = work.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as exc:  # handed to whoever waits, as an executor would
                future.set_exception(exc)


# Storage requests of all lookups of a process (leaves: a request each, never waiting on another) and
# the lines of one lookup that run beside each other (branches: wait on leaves only).
_REQUESTS = _DaemonPool(64, "storage-request")
_BRANCHES = _DaemonPool(16, "storage-branch")


class _Lookup:
    """One ``snapshots`` call: its query, deadline, request ledger and the folders it listed (each
    listed once, however many candidates name it)."""

    def __init__(self, storage: CheckpointStorage, query: SnapshotQuery, deadline: Deadline) -> None:
        self.storage = storage
        self.query = query
        self.deadline = deadline
        self.ledger = _Ledger(query.budget)
        self._folders: dict[StoragePath, tuple[concurrent.futures.Future[_Listing | None], _Cursor]] = {}
        self._trees: dict[StoragePath, tuple[concurrent.futures.Future[_Listing | None], _Cursor]] = {}
        self._lock = threading.Lock()
        # The job directory's verdict (restore/verdict.py) when one was read and can be used.
        self.verdict: Verdict | None = None
        self.job_dir: StoragePath | None = None

    def tree(self, path: StoragePath, cursor: _Cursor) -> concurrent.futures.Future[_Listing | None]:
        """Every file below ``path`` by its path relative to it (one prefix listing, started once)."""
        key = path.canonical
        with self._lock:
            known = self._trees.get(key)
            if known is None:
                started = cursor.fork()
                self.deadline.check()
                future = _REQUESTS.submit(lambda: self.storage._list_tree(key, started))
                known = self._trees[key] = (future, started)
        return known[0]

    def trees(self) -> tuple[StoragePath, ...]:
        with self._lock:
            return tuple(self._trees)

    def tree_listing(self, path: StoragePath, cursor: _Cursor) -> _Listing | None:
        future = self.tree(path, cursor)
        found: _Listing | None = self.wait(future)
        with self._lock:
            cursor.join(self._trees[path.canonical][1])
        return found

    def folder(self, path: StoragePath, cursor: _Cursor) -> concurrent.futures.Future[_Listing | None]:
        """The listing of ``path`` (started now unless it already was); its cursor moves on the result."""
        key = path.canonical
        with self._lock:
            known = self._folders.get(key)
            if known is None:
                started = cursor.fork()
                self.deadline.check()
                future = _REQUESTS.submit(lambda: self.storage._list_folder(key, started))
                known = self._folders[key] = (future, started)
        return known[0]

    def listing(self, path: StoragePath, cursor: _Cursor) -> _Listing | None:
        future = self.folder(path, cursor)
        found: _Listing | None = self.wait(future)
        with self._lock:
            cursor.join(self._folders[path.canonical][1])
        return found

    def wait(self, future: concurrent.futures.Future[Any]) -> Any:
        try:
            return future.result(timeout=max(self.deadline.remaining(), 0.001))
        except concurrent.futures.TimeoutError:
            raise DeadlineExceeded("storage lookup passed the admission deadline") from None

    def request(
        self, fn: Callable[[_Cursor], Any], cursor: _Cursor
    ) -> tuple[concurrent.futures.Future[Any], _Cursor]:
        started = cursor.fork()
        self.deadline.check()
        return _REQUESTS.submit(lambda: fn(started)), started


class CheckpointStorage:
    """Lists checkpoint storage; one instance per process, filesystems are cached by fsspec."""

    def __init__(
        self, storage_options: Mapping[str, Mapping[str, Any]] | None = None, write_verdicts: bool = False
    ) -> None:
        self._options = {k: dict(v) for k, v in (storage_options or {}).items()}
        self._lock = threading.Lock()
        # Write a verdict (restore/verdict.py) after a full check of a chk-N passed: the fencing agent's
        # storage does, it writes to the checkpoint storage anyway; the webhook's only reads.
        self.write_verdicts = write_verdicts
        self._writes: list[concurrent.futures.Future[Any]] = []
        self._own: dict[tuple[str, str, str, int], fsspec.AbstractFileSystem] = {}  # per lane and storage
        # per S3 scheme: the pooled client of presigned HEADs (restore/presigned.py), None where s3fs asks
        self._head_clients: dict[str, presigned.HeadClient | None] = {}

    def _fs_options(self, path: StoragePath) -> dict[str, Any]:
        """The options ``path``'s filesystem is built from: the network defaults, then the policy's."""
        # A deep copy: botocore rewrites the nested retries mapping in place when it connects.
        options: dict[str, Any] = copy.deepcopy(_NETWORK_DEFAULTS.get(path.protocol, {}))
        options.update(self._options.get(path.protocol, {}))
        options.update(self._options.get(path.scheme, {}))
        if path.protocol in _LISTING_CACHES:
            options["use_listings_cache"] = False
        return options

    def filesystem(
        self, path: StoragePath, lane: str = "", connections: int = 0
    ) -> fsspec.AbstractFileSystem:
        """``lane``: an instance of that lane's own for ``path``'s storage (bucket), with ``connections``
        connections on S3, not the one everything else on the scheme shares (the fencing heartbeats')."""
        options = self._fs_options(path)
        # keyed by process too: an instance made before a fork is not used after it (as fsspec's cache)
        own = (lane, path.scheme, path.authority, os.getpid()) if lane else None
        if own is not None:
            options["skip_instance_cache"] = True
            if path.protocol == "s3" and connections:
                config = {**options.get("config_kwargs", {}), "max_pool_connections": connections}
                options["config_kwargs"] = config
        try:
            with self._lock:
                if own is not None and own in self._own:
                    return self._own[own]
                cls = _gcs_json_only(options) if path.protocol == "gs" else None
                fs = cls(**options) if cls is not None else fsspec.filesystem(path.protocol, **options)
                if own is not None:
                    self._own[own] = fs
                if path.protocol == "s3" and getattr(fs, "retries", 1) > _S3FS_RETRIES:
                    # s3fs retries 5 times with backoff on top of botocore's attempts: an endpoint that
                    # accepts and never answers held a lookup thread for ~55 s (tests/faults), long after
                    # the admission gave up, filling the lookup pool and delaying worker shutdown.
                    fs.retries = _S3FS_RETRIES
                return fs
        except ImportError as exc:
            raise StorageError(
                f"no fsspec implementation installed for {path.scheme}:// ({exc}); "
                "install the matching extra of flink-failover"
            ) from None
        except (ValueError, TypeError) as exc:
            raise StorageError(f"invalid storageOptions for {path.scheme}: {exc}") from None

    def warm(self, schemes: Iterable[str]) -> None:
        """Build the object-store clients now (one per protocol) and start the lookup threads, not on
        the first admission's path."""
        _REQUESTS.submit(lambda: None)
        _BRANCHES.submit(lambda: None)
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
        lookup = _Lookup(self, query, deadline)
        cursor = _Cursor(lookup.ledger)
        try:
            return self._snapshots(lookup, cursor)
        except _Unchecked as exc:
            return Snapshots(None, None, unchecked=str(exc), trips=lookup.ledger.trips())

    def _snapshots(self, lookup: _Lookup, cursor: _Cursor) -> Snapshots:
        query, deadline = lookup.query, lookup.deadline
        branches: list[tuple[concurrent.futures.Future[Any], _Cursor]] = []

        def beside(fn: Callable[[_Cursor], Any]) -> tuple[concurrent.futures.Future[Any], _Cursor]:
            started = cursor.fork()
            branch = (_BRANCHES.submit(lambda: fn(started)), started)
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
            listed = tuple(c for c in found.found if query.savepoint is None or c.path != query.savepoint)
            clash = lookup.wait(clash_branch[0]) if clash_branch is not None else ""
            if listed and clash:
                rejected.extend(
                    f"savepoint {c.path}: its prefix {query.job_id[:6]} is also that of job {clash} "
                    f"in {shared_dir}, so whose it is cannot be told by its name"
                    for c in listed
                )
                listed = ()
        floor = None
        own = (scan is not None and scan.candidate is not None) or savepoint is not None or bool(listed)
        if query.started_from is not None and not own:
            started = self._check_savepoint(query.started_from, lookup, cursor)
            if started.candidate is not None and query.started_from.name.startswith("chk-"):
                floor = replace(started.candidate, kind="checkpoint")
            else:
                floor = started.candidate
            if started.problem:
                rejected.append(f"started from {query.started_from}: {started.problem}")
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
        self, job_dir: StoragePath, lookup: _Lookup, cursor: _Cursor, checkpoint_dir: StoragePath | None
    ) -> CheckpointScan:
        """One listing of ``job_dir``, then from the highest ``chk-<N>`` down until one passes its
        check. A job directory that does not exist means "no checkpoints"; a checkpoint directory (or
        bucket) that does not exist means the storage is not the one the job wrote to: an error."""
        fs = self.filesystem(job_dir)
        lookup.deadline.check()
        files = lookup.query.verify is Verify.FILES
        # The job's verdict is read beside the job directory's listing: no round trip of its own.
        verdict = lookup.request(lambda c: self._read_verdict(job_dir, c), cursor) if files else None
        names = self._names(fs, job_dir, cursor)
        if names is None:
            if checkpoint_dir is not None and checkpoint_dir != job_dir:
                cursor.step()
                self._require_dir(fs, checkpoint_dir)
            return CheckpointScan(None, job_dir_missing=True)
        if files:
            lookup.job_dir = job_dir.canonical
            if verdict is not None and VERDICT_NAME in names:
                lookup.verdict = lookup.wait(verdict[0])
                cursor.join(verdict[1])
            if lookup.verdict is None:
                for shared in ("shared", "taskowned"):  # where incremental checkpoints keep what they share
                    if shared in names:  # by prefix: file merging keeps a folder per subtask below them
                        lookup.tree(job_dir.child(shared), cursor)
        local_root = _real(job_dir) if job_dir.protocol == "file" else None
        incomplete: list[int] = []
        rejected: list[str] = []
        for n in checkpoint_ids(names):
            lookup.deadline.check()
            chk = job_dir.child(f"chk-{n}")
            if local_root is not None and not _entry_inside(local_root, chk):
                continue  # a symlink leading out of the checkpoint dir is never a restore path
            found = self._snapshot(fs, chk, n, lookup, cursor)
            if found is None:
                incomplete.append(n)
            elif found.problem:
                rejected.append(f"chk-{n}: {found.problem}")
            else:
                candidate = Candidate(chk, "checkpoint", found.modified, found.checkpoint_id, found.note)
                return CheckpointScan(candidate, incomplete=tuple(incomplete), rejected=tuple(rejected))
        return CheckpointScan(None, incomplete=tuple(incomplete), rejected=tuple(rejected))

    def _scan_savepoints(
        self, savepoint_dir: StoragePath, job_id: str, lookup: _Lookup, cursor: _Cursor
    ) -> SavepointScan:
        """The job's restorable savepoints in ``savepoint_dir``: one listing, then every entry named
        ``savepoint-<first 6 hex of job_id>-<12 hex>`` (Flink's naming) checked side by side. A
        savepoint directory that does not exist holds none; a listing that fails is a storage error."""
        fs = self.filesystem(savepoint_dir)
        lookup.deadline.check()
        names = self._names(fs, savepoint_dir, cursor)
        if names is None:
            return SavepointScan()
        mine = sorted(n for n in names if is_savepoint_of(n, job_id))
        local_root = _real(savepoint_dir) if savepoint_dir.protocol == "file" else None
        paths = [savepoint_dir.child(name) for name in mine[:MAX_SAVEPOINTS]]
        paths = [p for p in paths if local_root is None or _entry_inside(local_root, p)]

        def check(path: StoragePath, branch: _Cursor) -> tuple[_Metadata | None, _Cursor]:
            return self._snapshot(fs, path, None, lookup, branch), branch

        checks = [(path, _BRANCHES.submit(functools.partial(check, path, cursor.fork()))) for path in paths]
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

    def _prefix_clash(
        self, checkpoint_dir: StoragePath, job_id: str, lookup: _Lookup, cursor: _Cursor
    ) -> str:
        """Another job whose checkpoints lie in the same checkpoint directory and whose jobId starts
        with the same 6 hex ("" when none): then a savepoint name cannot tell the two apart."""
        fs = self.filesystem(checkpoint_dir)
        lookup.deadline.check()
        names = self._names(fs, checkpoint_dir, cursor) or []
        others = sorted(n for n in names if is_job_id(n) and n != job_id and n[:6] == job_id[:6])
        return others[0] if others else ""

    def _names(self, fs: fsspec.AbstractFileSystem, folder: StoragePath, cursor: _Cursor) -> list[str] | None:
        """The names in ``folder``, one listing counted as the storage makes it; None: no such folder."""
        try:
            cursor.step()
            return _entry_names(fs, folder)
        except FileNotFoundError:
            cursor.step(_missing_folder(folder) - 1)
            return None
        except Exception as exc:
            raise _storage_error("listing", folder, exc) from None

    def _require_dir(self, fs: fsspec.AbstractFileSystem, path: StoragePath) -> None:
        try:
            exists = fs.isdir(path.fs_path)
        except Exception as exc:
            raise _storage_error("checking", path, exc) from None
        if not exists:
            raise StorageError(f"checkpoint directory {path} does not exist (wrong bucket or path?)")

    def _check_savepoint(self, path: StoragePath, lookup: _Lookup, cursor: _Cursor) -> SavepointCheck:
        fs = self.filesystem(path)
        lookup.deadline.check()
        if path.protocol == "file" and not _inside(path, _real(path)):
            return SavepointCheck(None)
        directory_id = _chk_id(path.name)
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
        lookup: _Lookup,
        cursor: _Cursor,
    ) -> _Metadata | None:
        """The snapshot's ``_metadata`` checked as the policy says (None when it has none)."""
        query = lookup.query
        lookup.ledger.check(str(snapshot))
        if query.verify is Verify.HEADER:
            cursor.step(2)  # its entry, then its first 16 bytes
            return self._header(fs, snapshot, query.target)
        meta = snapshot.child(METADATA)
        if meta.protocol == "file" and not _local_metadata_inside(meta, snapshot):
            return None
        # The snapshot's folder (the _metadata's time and size, its exclusive files) and the _metadata
        # itself, side by side: one round trip.
        folder = lookup.folder(snapshot, cursor)
        body, reading = lookup.request(lambda c: self._whole(fs, meta, c), cursor)
        listing = lookup.wait(folder)
        with lookup._lock:
            cursor.join(lookup._folders[snapshot.canonical][1])
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
        judged = judge(read_metadata(data), directory_id, query.on_newer, query.target)
        if judged.problem:
            return _Metadata(modified, judged.problem)
        if query.verify is Verify.FILES and judged.metadata is not None:
            named = named_files(judged.metadata, snapshot, query.allowed_schemes)
            if named.problem:
                return _Metadata(modified, named.problem)
            why = self._files(named, snapshot, entry, directory_id, listing, lookup, cursor)
            if why:
                return _Metadata(modified, why)
        return _Metadata(modified, "", judged.checkpoint_id, judged.note)

    def _files(
        self,
        named: NamedFiles,
        snapshot: StoragePath,
        entry: tuple[int | None, datetime | None],
        directory_id: int | None,
        own: _Listing | None,
        lookup: _Lookup,
        cursor: _Cursor,
    ) -> str:
        """Why a named file is not there ("" when all are): the ones a verdict does not cover are
        checked by the fewest requests (restore/verdict.py ``plan``), made side by side."""
        job_dir = lookup.job_dir if directory_id is not None else None
        verdict = lookup.verdict if job_dir is not None and snapshot.parent.canonical == job_dir else None
        covers = coverage(named, verdict, snapshot, entry[0], entry[1], datetime.now(UTC))
        if covers.note:
            log.info("%s", covers.note)
        known = {f: len(n) for f, n in verdict.files.items()} if verdict is not None else {}
        todo = plan(covers.unchecked, (snapshot.canonical,), lookup.trees(), known, job_dir or snapshot)
        seen: dict[StoragePath, dict[str, int | None]] = {}
        verified = verdict.files if verdict is not None else {}  # what is covered, a verdict names
        for needed in covers.covered:
            seen.setdefault(needed.path.parent, {})[needed.path.name] = verified[needed.path.parent][
                needed.path.name
            ]
        if own is not None:
            seen.setdefault(snapshot.canonical, {}).update({k: v[0] for k, v in own.items()})
        if todo.trees or todo.folders or todo.heads:
            lookup.ledger.check(f"the files of {snapshot}")
        for tree_path in todo.trees:
            lookup.tree(tree_path, cursor)
        for folder_path in todo.folders:
            lookup.folder(folder_path, cursor)
        heads = self._start_heads(todo.heads, lookup, cursor)
        for folder_path in todo.folders:
            found = lookup.listing(folder_path, cursor)
            seen.setdefault(folder_path, {}).update({k: v[0] for k, v in (found or {}).items()})
        unchecked = {f.path.parent for f in covers.unchecked}
        for tree_path in lookup.trees():
            if not any(folder.is_within(tree_path) for folder in unchecked):
                continue
            below = lookup.tree_listing(tree_path, cursor) or {}
            for rel, (size, _) in below.items():
                path = _below(tree_path, rel)
                if path is not None and path.parent in unchecked:
                    seen.setdefault(path.parent, {})[path.name] = size
        for path, (future, started) in heads:
            size = lookup.wait(future)
            cursor.join(started)
            if size is not False:
                seen.setdefault(path.parent, {})[path.name] = size
        why = missing(named, seen)
        size, time = entry
        fresh = covers.unchecked or verdict is None or verdict.checkpoint != snapshot.canonical
        if not why and fresh and self.write_verdicts and job_dir is not None and size is not None and time:
            sizes = {f.path: seen[f.path.parent][f.path.name] for f in named.files}
            confirmed = {p: s for p, s in sizes.items() if s is not None}
            carried = verdict if covers.covered else None
            self._write_verdict(
                job_dir, made(snapshot, size, time, named, confirmed, datetime.now(UTC), carried)
            )
        return why

    def _read_verdict(self, job_dir: StoragePath, cursor: _Cursor) -> Verdict | None:
        """The job directory's verdict when there is one this lookup can use (one read)."""
        path = job_dir.child(VERDICT_NAME)
        cursor.step()
        try:
            if path.protocol == "file":
                with open(path.path, "rb") as f:
                    data = f.read()
            elif path.protocol == "s3":
                data = bytes(self.filesystem(path).cat_file(path.fs_path, max_concurrency=1))
            else:
                data = bytes(self.filesystem(path).cat_file(path.fs_path))
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
        except Exception as exc:  # a verdict that cannot be read is no verdict: the full check runs
            log.info("verdict %s not read: %s", path, _storage_error("reading", path, exc))
            return None
        found = decode(data, job_dir)
        if isinstance(found, str):
            log.info("verdict %s not used: %s", path, found)
            return None
        return found

    def _write_verdict(self, job_dir: StoragePath, verdict: Verdict) -> None:
        """Write ``verdict`` beside the job's checkpoints, off the lookup's path (a failure is logged)."""
        path = job_dir.child(VERDICT_NAME)
        data = encode(verdict)

        def write() -> None:
            try:
                if path.protocol == "file":
                    temporary = f"{path.path}.{os.getpid()}.{threading.get_ident()}"
                    with open(temporary, "wb") as f:
                        f.write(data)
                    os.replace(temporary, path.path)
                else:
                    self.filesystem(path).pipe_file(path.fs_path, data)
            except Exception as exc:
                log.warning("verdict %s not written: %s", path, _storage_error("writing", path, exc))

        with self._lock:
            self._writes = [w for w in self._writes if not w.done()]
            self._writes.append(_REQUESTS.submit(write))

    def settle(self, timeout: float = 10.0) -> None:
        """Wait for the verdicts being written (tests, benchmarks, a stopping agent)."""
        with self._lock:
            writes = list(self._writes)
        concurrent.futures.wait(writes, timeout=timeout)

    def _start_heads(
        self, paths: tuple[StoragePath, ...], lookup: _Lookup, cursor: _Cursor
    ) -> list[tuple[StoragePath, tuple[concurrent.futures.Future[Any], _Cursor]]]:
        """A HEAD of each of ``paths``, side by side: on S3 by presigned URL over a pooled client where
        that asks what s3fs would (restore/presigned.py), else through the path's filesystem."""
        client = (
            self._head_client(paths[0]) if paths and all(p.scheme == paths[0].scheme for p in paths) else None
        )
        if client is None:
            return [(p, lookup.request(functools.partial(self._head_file, p), cursor)) for p in paths]
        lookup.deadline.check()
        try:
            urls = presigned.presign(
                self.filesystem(paths[0]), [p.fs_path for p in paths], lookup.deadline.remaining()
            )
        except Exception as exc:
            raise _storage_error("checking", paths[0], exc) from None
        return [
            (p, lookup.request(functools.partial(self._head_url, p, url, client, lookup.deadline), cursor))
            for p, url in zip(paths, urls, strict=True)
        ]

    def _head_client(self, path: StoragePath) -> presigned.HeadClient | None:
        """The presigned-HEAD client of ``path``'s scheme (None: ask through s3fs), made once."""
        if path.protocol != "s3":
            return None
        with self._lock:
            if path.scheme in self._head_clients:
                return self._head_clients[path.scheme]
        options = self._fs_options(path)
        fs = self.filesystem(path)
        client = None
        if presigned.usable(options, fs):
            config = options.get("config_kwargs") or {}
            verify = (options.get("client_kwargs") or {}).get(
                "verify", os.environ.get("AWS_CA_BUNDLE") or None
            )
            client = presigned.HeadClient(
                int(config.get("max_pool_connections", 10)),
                float(config.get("connect_timeout", 60)),
                float(config.get("read_timeout", 60)),
                verify,
            )
        with self._lock:
            return self._head_clients.setdefault(path.scheme, client)

    def _head_url(
        self, path: StoragePath, url: str, client: presigned.HeadClient, deadline: Deadline, cursor: _Cursor
    ) -> int | bool | None:
        """``_head_file`` by presigned URL: one HEAD, within the lookup's deadline."""
        cursor.head()
        try:
            return client.head(url, deadline.remaining())
        except Exception as exc:
            raise _storage_error("checking", path, exc) from None

    def _head_file(self, path: StoragePath, cursor: _Cursor) -> int | bool | None:
        """One file's size (None: the store gives none), False when it is not there: one HEAD."""
        cursor.head()
        try:
            if path.protocol == "file":
                st = os.stat(path.path)
                return st.st_size if stat.S_ISREG(st.st_mode) else False
            fs = self.filesystem(path)
            if path.protocol == "s3":
                bucket, _, key = path.fs_path.partition("/")
                # s3fs's info() lists the prefix after a 404 (is it a folder?): a second request
                answer = fs.call_s3("head_object", Bucket=bucket, Key=key)
                size = answer.get("ContentLength")
            else:
                info = fs.info(path.fs_path)
                if info.get("type") not in (None, "file"):
                    return False
                size = info.get("size")
        except (FileNotFoundError, NotADirectoryError):
            return False
        except Exception as exc:
            raise _storage_error("checking", path, exc) from None
        return size if isinstance(size, int) else None

    def _list_tree(self, root: StoragePath, cursor: _Cursor) -> _Listing | None:
        """Every file below ``root`` by its path relative to it, by prefix (None: nothing there)."""
        if root.protocol == "file":
            cursor.step()
            out: _Listing = {}
            if not os.path.isdir(root.path):
                return None
            try:
                for folder, _dirs, names in os.walk(root.path):
                    rel = os.path.relpath(folder, root.path)
                    for name in names:
                        try:
                            st = os.stat(os.path.join(folder, name))
                        except OSError:
                            continue
                        if stat.S_ISREG(st.st_mode):
                            key = name if rel == "." else f"{rel}/{name}"
                            out[key] = (st.st_size, datetime.fromtimestamp(st.st_mtime, UTC))
            except Exception as exc:
                raise _storage_error("listing", root, exc) from None
            return out
        fs = self.filesystem(root)
        try:
            entries = fs.find(root.fs_path, detail=True, withdirs=False)
        except FileNotFoundError:
            cursor.step()
            return None
        except Exception as exc:
            raise _storage_error("listing", root, exc) from None
        cursor.step(max(1, -(-len(entries) // LISTING_PAGE)))
        if not entries:
            return None
        base = root.fs_path.rstrip("/") + "/"
        listed: _Listing = {}
        for name, e in entries.items():
            name = str(name)
            if not name.startswith(base) or e.get("type") not in (None, "file"):
                continue
            size = e.get("size")
            listed[name[len(base) :]] = (size if isinstance(size, int) else None, modified_time(e))
        return listed

    def _whole(self, fs: fsspec.AbstractFileSystem, meta: StoragePath, cursor: _Cursor) -> bytes | None:
        """The whole ``_metadata`` (None when absent): one read."""
        cursor.step()
        try:
            if meta.protocol == "file":
                with open(meta.path, "rb") as f:
                    data = f.read(MAX_METADATA_BYTES + 1)
            elif meta.protocol == "s3":
                # One GET: with more than one stream s3fs first asks the object's size (a HEAD).
                data = bytes(fs.cat_file(meta.fs_path, max_concurrency=1))
            else:
                data = bytes(fs.cat_file(meta.fs_path))
        except (FileNotFoundError, IsADirectoryError):
            return None
        except Exception as exc:
            raise _storage_error("reading", meta, exc) from None
        if len(data) > MAX_METADATA_BYTES:
            raise _Unchecked(f"{meta} is larger than {MAX_METADATA_BYTES // 2**20} MiB and was not read")
        return data

    def _list_folder(self, folder: StoragePath, cursor: _Cursor) -> _Listing | None:
        """The files directly in ``folder`` with their sizes and times (None: no such folder)."""
        if folder.protocol == "file":
            cursor.step()
            try:
                out: _Listing = {}
                with os.scandir(folder.path) as entries:
                    for entry in entries:
                        try:
                            if entry.is_file():
                                st = entry.stat()
                                out[entry.name] = (st.st_size, datetime.fromtimestamp(st.st_mtime, UTC))
                        except OSError:
                            continue
                return out
            except (FileNotFoundError, NotADirectoryError):
                return None
            except Exception as exc:
                raise _storage_error("listing", folder, exc) from None
        fs = self.filesystem(folder)
        try:
            entries = fs.ls(folder.fs_path, detail=True)
        except FileNotFoundError:
            cursor.step(_MISSING_FOLDER)
            return None
        except Exception as exc:
            raise _storage_error("listing", folder, exc) from None
        cursor.step(max(1, -(-len(entries) // LISTING_PAGE)))
        listed: _Listing = {}
        for e in entries:
            if e.get("type") not in (None, "file"):
                continue
            size = e.get("size")
            listed[str(e["name"]).rstrip("/").rsplit("/", 1)[-1]] = (
                size if isinstance(size, int) else None,
                modified_time(e),
            )
        return listed

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
            raise _storage_error("reading", meta, exc) from None
        if info.get("type") not in (None, "file"):
            return None
        if meta.protocol == "file" and not _local_metadata_inside(meta, snapshot):
            return None
        modified = modified_time(info) or datetime.fromtimestamp(0, UTC)
        size = info.get("size")
        size = size if isinstance(size, int) else None
        head = b"" if size == 0 else self._head(fs, meta)
        problem = metadata_problem(head, size)
        if not problem and len(head) >= METADATA_MIN_BYTES:  # the format version: all a header tells
            problem = cannot_read(target, int.from_bytes(head[4:8], "big"))
        return _Metadata(modified, problem, None if problem else metadata_checkpoint_id(head))

    def _head(self, fs: fsspec.AbstractFileSystem, meta: StoragePath) -> bytes:
        try:
            if meta.protocol == "file":
                with open(meta.path, "rb") as f:
                    return f.read(METADATA_HEADER_BYTES)
            return bytes(fs.cat_file(meta.fs_path, start=0, end=METADATA_HEADER_BYTES))
        except FileNotFoundError:
            return b""
        except Exception as exc:
            raise _storage_error("reading", meta, exc) from None


def _gcs_json_only(options: Mapping[str, Any]) -> Any:
    """The gcsfs class for a ``gs`` endpoint other than Google's: its JSON API only.

    gcsfs (2025.x on, with GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT at its default) first asks every bucket's
    type over gRPC (Storage Control, TLS to the endpoint), waits 60 s for an endpoint that does not
    speak it, and does not remember the failure: every admission against an emulator or a
    GCS-compatible store missed its deadline. Such an endpoint has no zonal or hierarchical buckets to
    find, so the plain class serves it; Google's own endpoint keeps fsspec's choice (None).
    """
    if not (options.get("endpoint_url") or os.environ.get("STORAGE_EMULATOR_HOST")):
        return None
    from gcsfs.core import GCSFileSystem

    return GCSFileSystem


# An object store's listing of a folder that does not exist: s3fs then lists its parent to tell "no
# such folder" from "empty" (seen through tests/support/tcpproxy.py): two requests, one after another.
_MISSING_FOLDER = 2


def _missing_folder(path: StoragePath) -> int:
    return 1 if path.protocol == "file" else _MISSING_FOLDER


def _below(root: StoragePath, rel: str) -> StoragePath | None:
    """``root``'s file at relative path ``rel`` (None for a name no path can hold)."""
    try:
        return root.child(*rel.split("/")).canonical
    except StoragePathError:
        return None


def _chk_id(name: str) -> int | None:
    """N of a ``chk-N`` directory name (what its _metadata must say), None for any other name."""
    ids = checkpoint_ids([name])
    return ids[0] if ids else None


def _local_metadata_inside(meta: StoragePath, snapshot: StoragePath) -> bool:
    """A local ``_metadata`` that is a symlink must lead inside its snapshot's directory."""
    if not os.path.islink(meta.path):
        return True
    real = os.path.realpath(meta.path)
    return real.startswith(os.path.realpath(snapshot.path) + os.sep)


def _entry_names(fs: fsspec.AbstractFileSystem, job_dir: StoragePath) -> list[str]:
    """Names in the job directory (one listing); FileNotFoundError when it does not exist.

    Names only: a detailed listing costs one stat per entry on local storage, and fsspec's local
    listing normalises every entry's path (microseconds each, thousands of retained checkpoints).
    """
    if job_dir.protocol == "file":
        try:
            return os.listdir(job_dir.path)
        except NotADirectoryError:
            raise StorageError(f"{job_dir} is a file, not a checkpoint directory") from None
    entries = [str(e) for e in fs.ls(job_dir.fs_path, detail=False)]
    # A directory never lists itself: a single entry naming the job dir means it is a file.
    if len(entries) == 1 and _same(entries[0], job_dir.fs_path) and fs.isfile(job_dir.fs_path):
        raise StorageError(f"{job_dir} is a file, not a checkpoint directory")
    return [e.rstrip("/").rsplit("/", 1)[-1] for e in entries]


def modified_time(info: Mapping[str, Any]) -> datetime | None:
    """An fsspec info entry's modification time, whichever key the backend uses (storage time)."""
    for key in ("mtime", "LastModified", "updated", "last_modified", "modification_time"):
        value = info.get(key)
        if isinstance(value, datetime):
            return value if value.tzinfo else value.replace(tzinfo=UTC)
        if isinstance(value, int | float):
            # hdfs reports milliseconds
            return datetime.fromtimestamp(value / 1000 if value > 1e11 else value, UTC)
        if isinstance(value, str):
            try:
                parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                continue
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None


def _same(name: str, fs_path: str) -> bool:
    return str(name).rstrip("/").removeprefix("file://") == fs_path.rstrip("/")


def _real(path: StoragePath) -> str:
    return os.path.realpath(path.path)


def _entry_inside(real_parent: str, path: StoragePath) -> bool:
    """``path`` (an entry of the directory whose real path is ``real_parent``) stays inside it.

    An entry that is not a symlink lies where its parent does (one lstat); a symlink is resolved.
    """
    try:
        if not stat.S_ISLNK(os.lstat(os.path.join(real_parent, path.name)).st_mode):
            return True
    except OSError:
        pass
    return _inside(path, real_parent)


def _inside(path: StoragePath, real_root: str) -> bool:
    real = os.path.realpath(path.path)
    parent = os.path.realpath(os.path.dirname(path.path))
    # The entry itself may be a symlink: its target must stay below the directory that lists it.
    return (real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)) and (
        real.startswith(parent.rstrip(os.sep) + os.sep)
    )


def _storage_error(action: str, path: StoragePath, exc: BaseException) -> StorageError:
    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, PermissionError):
        return StorageError(f"permission denied {action} {path}")
    if isinstance(exc, StoragePathError):
        return StorageError(str(exc))
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
    return StorageError(f"{action} {path}: {text}")  # the decision says "storage error: " once
