"""How storage is read: a folder's names, a folder's files with sizes and times, every file below a
prefix, a whole ``_metadata`` and its first bytes; and :class:`Lookup`, one search's memo of them (each
folder and prefix listed once, however many candidates name it), its deadline and its budget.
"""

from __future__ import annotations

import concurrent.futures
import os
import stat
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import fsspec

from webhook.common.paths import StoragePath, StoragePathError
from webhook.restore.metadata import METADATA_HEADER_BYTES
from webhook.restore.snapshots import SnapshotQuery, StorageError
from webhook.restore.storage.backends import (
    Deadline,
    DeadlineExceeded,
    Filesystems,
    modified_time,
    storage_error,
)
from webhook.restore.storage.requests import REQUESTS, Cursor, Ledger, Listing, Unchecked
from webhook.restore.verdict import Verdict

# A listing page holds this many entries on object stores (S3's and GCS's default page, Azure's).
LISTING_PAGE = 1000
# A _metadata larger than this is not read whole within an admission (the job is held instead).
MAX_METADATA_BYTES = 64 * 1024 * 1024


class Listings:
    """Reads through ``filesystems``; local files through ``os`` (fsspec's local listing normalises every
    path and stats every entry: microseconds each, thousands of retained checkpoints)."""

    def __init__(self, filesystems: Filesystems) -> None:
        self.filesystems = filesystems

    def names(
        self,
        fs: fsspec.AbstractFileSystem,
        folder: StoragePath,
        cursor: Cursor,
        times: dict[str, datetime] | None = None,
    ) -> list[str] | None:
        """The names in ``folder``, one listing counted as the storage makes it; None: no such folder.
        ``times``, when given, gets the storage time of each file an object store's listing shows."""
        try:
            cursor.step()
            return entry_names(fs, folder, times)
        except FileNotFoundError:
            cursor.step(missing_folder(folder) - 1)
            return None
        except Exception as exc:
            raise storage_error("listing", folder, exc) from None

    def require_dir(self, fs: fsspec.AbstractFileSystem, path: StoragePath) -> None:
        try:
            exists = fs.isdir(path.fs_path)
        except Exception as exc:
            raise storage_error("checking", path, exc) from None
        if not exists:
            raise StorageError(f"checkpoint directory {path} does not exist (wrong bucket or path?)")

    def tree(self, root: StoragePath, cursor: Cursor) -> Listing | None:
        """Every file below ``root`` by its path relative to it, by prefix (None: nothing there)."""
        if root.protocol == "file":
            cursor.step()
            out: Listing = {}
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
                raise storage_error("listing", root, exc) from None
            return out
        fs = self.filesystems.filesystem(root)
        try:
            entries = fs.find(root.fs_path, detail=True, withdirs=False)
        except FileNotFoundError:
            cursor.step()
            return None
        except Exception as exc:
            raise storage_error("listing", root, exc) from None
        cursor.step(max(1, -(-len(entries) // LISTING_PAGE)))
        if not entries:
            return None
        base = root.fs_path.rstrip("/") + "/"
        listed: Listing = {}
        for name, e in entries.items():
            name = str(name)
            if not name.startswith(base) or e.get("type") not in (None, "file"):
                continue
            size = e.get("size")
            listed[name[len(base) :]] = (size if isinstance(size, int) else None, modified_time(e))
        return listed

    def folder(self, folder: StoragePath, cursor: Cursor) -> Listing | None:
        """The files directly in ``folder`` with their sizes and times (None: no such folder)."""
        if folder.protocol == "file":
            cursor.step()
            try:
                out: Listing = {}
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
                raise storage_error("listing", folder, exc) from None
        fs = self.filesystems.filesystem(folder)
        try:
            entries = fs.ls(folder.fs_path, detail=True)
        except FileNotFoundError:
            cursor.step(MISSING_FOLDER)
            return None
        except Exception as exc:
            raise storage_error("listing", folder, exc) from None
        cursor.step(max(1, -(-len(entries) // LISTING_PAGE)))
        listed: Listing = {}
        for e in entries:
            if e.get("type") not in (None, "file"):
                continue
            size = e.get("size")
            listed[str(e["name"]).rstrip("/").rsplit("/", 1)[-1]] = (
                size if isinstance(size, int) else None,
                modified_time(e),
            )
        return listed

    def whole(self, fs: fsspec.AbstractFileSystem, meta: StoragePath, cursor: Cursor) -> bytes | None:
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
            raise storage_error("reading", meta, exc) from None
        if len(data) > MAX_METADATA_BYTES:
            raise Unchecked(f"{meta} is larger than {MAX_METADATA_BYTES // 2**20} MiB and was not read")
        return data

    def header_bytes(self, fs: fsspec.AbstractFileSystem, meta: StoragePath) -> bytes:
        try:
            if meta.protocol == "file":
                with open(meta.path, "rb") as f:
                    return f.read(METADATA_HEADER_BYTES)
            return bytes(fs.cat_file(meta.fs_path, start=0, end=METADATA_HEADER_BYTES))
        except FileNotFoundError:
            return b""
        except Exception as exc:
            raise storage_error("reading", meta, exc) from None


class Lookup:
    """One search (``CheckpointStorage.snapshots``): its query, deadline, request ledger and the folders
    and prefixes it listed (each once, however many candidates name it)."""

    def __init__(self, listings: Listings, query: SnapshotQuery, deadline: Deadline) -> None:
        self.listings = listings
        self.query = query
        self.deadline = deadline
        self.ledger = Ledger(query.budget)
        self._folders: dict[StoragePath, tuple[concurrent.futures.Future[Listing | None], Cursor]] = {}
        self._trees: dict[StoragePath, tuple[concurrent.futures.Future[Listing | None], Cursor]] = {}
        self._lock = threading.Lock()
        # The job directory's verdict (restore/verdict.py) when one was read and can be used: its read
        # runs beside the listings and is waited for where it is first needed (``expect_verdict``).
        self._verdict: Verdict | None = None
        self._pending_verdict: Callable[[], Verdict | None] | None = None
        self._verdict_lock = threading.Lock()
        self.job_dir: StoragePath | None = None
        # When the lookup began, before its first listing: what a verdict it writes was seen at (the
        # writer's wall clock for people, its monotonic clock for the duration to the write).
        self.started = datetime.now(UTC)
        self.started_mono = time.monotonic()
        # The key ranges this lookup listed: folder -> (after, through or None: to its end, files seen).
        self._ranges: dict[StoragePath, list[tuple[str, str | None, dict[str, int | None]]]] = {}

    @property
    def verdict(self) -> Verdict | None:
        """The job's verdict, waited for and decoded the first time it is asked for."""
        with self._verdict_lock:  # not ``_lock``: resolving waits for a request
            if self._pending_verdict is not None:
                resolve, self._pending_verdict = self._pending_verdict, None
                self._verdict = resolve()
            return self._verdict

    def expect_verdict(self, resolve: Callable[[], Verdict | None]) -> None:
        """The verdict is being read: ``resolve`` waits for it (its request was started beside the job
        directory's listing), so a checkpoint's folder and ``_metadata`` need not wait for it too."""
        with self._verdict_lock:
            self._pending_verdict = resolve

    def _once(
        self,
        started: dict[StoragePath, tuple[concurrent.futures.Future[Listing | None], Cursor]],
        read: Callable[[StoragePath, Cursor], Listing | None],
        path: StoragePath,
        cursor: Cursor,
    ) -> concurrent.futures.Future[Listing | None]:
        """``read`` of ``path``, started now unless this lookup already started it."""
        key = path.canonical
        with self._lock:
            known = started.get(key)
            if known is None:
                forked = cursor.fork()
                self.deadline.check()
                future = REQUESTS.submit(lambda: read(key, forked))
                known = started[key] = (future, forked)
        return known[0]

    def _waited(
        self,
        started: dict[StoragePath, tuple[concurrent.futures.Future[Listing | None], Cursor]],
        future: concurrent.futures.Future[Listing | None],
        path: StoragePath,
        cursor: Cursor,
    ) -> Listing | None:
        found: Listing | None = self.wait(future)
        with self._lock:
            cursor.join(started[path.canonical][1])
        return found

    def tree(self, path: StoragePath, cursor: Cursor) -> concurrent.futures.Future[Listing | None]:
        """Every file below ``path`` by its path relative to it (one prefix listing, started once)."""
        return self._once(self._trees, self.listings.tree, path, cursor)

    def trees(self) -> tuple[StoragePath, ...]:
        with self._lock:
            return tuple(self._trees)

    def tree_listing(self, path: StoragePath, cursor: Cursor) -> Listing | None:
        return self._waited(self._trees, self.tree(path, cursor), path, cursor)

    def folder(self, path: StoragePath, cursor: Cursor) -> concurrent.futures.Future[Listing | None]:
        """The listing of ``path`` (started now unless it already was); its cursor moves on the result."""
        return self._once(self._folders, self.listings.folder, path, cursor)

    def listing(self, path: StoragePath, cursor: Cursor) -> Listing | None:
        return self._waited(self._folders, self.folder(path, cursor), path, cursor)

    def joined(self, path: StoragePath, cursor: Cursor) -> None:
        """``cursor`` moved on past the listing of ``path`` (it waited for it)."""
        with self._lock:
            cursor.join(self._folders[path.canonical][1])

    def ranged(
        self, folder: StoragePath, after: str, through: str | None, files: dict[str, int | None]
    ) -> None:
        """A key range of ``folder`` this lookup listed: every key after ``after`` up to ``through``
        (None: to the folder's end) and the files it showed."""
        with self._lock:
            self._ranges.setdefault(folder.canonical, []).append((after, through, files))

    def shown(
        self, folder: StoragePath, cursor: Cursor
    ) -> list[tuple[str, str | None, dict[str, int | None]]]:
        """What this lookup's listings showed of ``folder``, each as the keys it listed (after a name,
        through a name or None: to the folder's end) and the files it showed there: a folder listing, a
        prefix listing above it, a key range; those still under way waited for."""
        key = folder.canonical
        with self._lock:
            listed = key in self._folders
            trees = [t for t in self._trees if key.is_within(t)]
            out = list(self._ranges.get(key, ()))
        if listed:
            found = self.listing(key, cursor)
            out.append(("", None, {k: v[0] for k, v in (found or {}).items()}))
        for tree in trees:
            rel = key.path[len(tree.path.rstrip("/")) :].strip("/")
            start = f"{rel}/" if rel else ""
            files = {}
            for name, (size, _) in (self.tree_listing(tree, cursor) or {}).items():
                if name.startswith(start) and "/" not in name[len(start) :]:
                    files[name[len(start) :]] = size
            out.append(("", None, files))
        return out

    def wait(self, future: concurrent.futures.Future[Any]) -> Any:
        try:
            return future.result(timeout=max(self.deadline.remaining(), 0.001))
        except concurrent.futures.TimeoutError:
            raise DeadlineExceeded("storage lookup passed the admission deadline") from None

    def request(
        self, fn: Callable[[Cursor], Any], cursor: Cursor
    ) -> tuple[concurrent.futures.Future[Any], Cursor]:
        started = cursor.fork()
        self.deadline.check()
        return REQUESTS.submit(lambda: fn(started)), started


MISSING_FOLDER = 2


def missing_folder(path: StoragePath) -> int:
    return 1 if path.protocol == "file" else MISSING_FOLDER


def below(root: StoragePath, rel: str) -> StoragePath | None:
    """``root``'s file at relative path ``rel`` (None for a name no path can hold)."""
    try:
        return root.child(*rel.split("/")).canonical
    except StoragePathError:
        return None


def local_metadata_inside(meta: StoragePath, snapshot: StoragePath) -> bool:
    """A local ``_metadata`` that is a symlink must lead inside its snapshot's directory."""
    if not os.path.islink(meta.path):
        return True
    real = os.path.realpath(meta.path)
    return real.startswith(os.path.realpath(snapshot.path) + os.sep)


def entry_names(
    fs: fsspec.AbstractFileSystem, job_dir: StoragePath, times: dict[str, datetime] | None = None
) -> list[str]:
    """Names in the job directory (one listing); FileNotFoundError when it does not exist.

    Names only: a detailed listing costs one stat per entry on local storage, and fsspec's local
    listing normalises every entry's path (microseconds each, thousands of retained checkpoints).
    """
    if job_dir.protocol == "file":
        try:
            return os.listdir(job_dir.path)
        except NotADirectoryError:
            raise StorageError(f"{job_dir} is a file, not a checkpoint directory") from None
    if times is not None:  # the same request: an object store's listing carries each object's time
        detailed = [e for e in fs.ls(job_dir.fs_path, detail=True) if isinstance(e, dict)]
        entries = [str(e.get("name", "")) for e in detailed]
        for e in detailed:
            modified = modified_time(e) if e.get("type") in (None, "file") else None
            if modified is not None:
                times[str(e.get("name", "")).rstrip("/").rsplit("/", 1)[-1]] = modified
    else:
        entries = [str(e) for e in fs.ls(job_dir.fs_path, detail=False)]
    # A directory never lists itself: a single entry naming the job dir means it is a file.
    if len(entries) == 1 and _same(entries[0], job_dir.fs_path) and fs.isfile(job_dir.fs_path):
        raise StorageError(f"{job_dir} is a file, not a checkpoint directory")
    return [e.rstrip("/").rsplit("/", 1)[-1] for e in entries]


def _same(name: str, fs_path: str) -> bool:
    return str(name).rstrip("/").removeprefix("file://") == fs_path.rstrip("/")


def real(path: StoragePath) -> str:
    return os.path.realpath(path.path)


def entry_inside(real_parent: str, path: StoragePath) -> bool:
    """``path`` (an entry of the directory whose real path is ``real_parent``) stays inside it.

    An entry that is not a symlink lies where its parent does (one lstat); a symlink is resolved.
    """
    try:
        if not stat.S_ISLNK(os.lstat(os.path.join(real_parent, path.name)).st_mode):
            return True
    except OSError:
        pass
    return inside(path, real_parent)


def inside(path: StoragePath, real_root: str) -> bool:
    real = os.path.realpath(path.path)
    parent = os.path.realpath(os.path.dirname(path.path))
    # The entry itself may be a symlink: its target must stay below the directory that lists it.
    return (real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)) and (
        real.startswith(parent.rstrip(os.sep) + os.sep)
    )
