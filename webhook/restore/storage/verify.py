"""Are the files a ``_metadata`` names there? The job's verdict spares the ones a recent full check
confirmed; the rest are asked by the fewest requests ``restore/verdict.py`` ``file_requests`` names
(HEADs, prefix listings, folder listings, key ranges), side by side, on S3 by presigned URL (``presigned.py``,
``ranges.py``). A storage that may write (the fencing agent's) leaves a verdict after a check that
confirmed every file.
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import os
import stat
import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from webhook.common.paths import StoragePath
from webhook.restore.checks import NamedFiles, Needed, missing
from webhook.restore.snapshots import StorageError
from webhook.restore.storage import presigned, ranges
from webhook.restore.storage.backends import Deadline, Filesystems, storage_error
from webhook.restore.storage.listings import Lookup, below
from webhook.restore.storage.requests import REQUESTS, Cursor, Listing, collection_paused
from webhook.restore.verdict import (
    MAX_AGE,
    VERDICT_NAME,
    WRITER_MAX_AGE,
    Range,
    Verdict,
    VerdictWrite,
    coverage,
    decode,
    due,
    encode,
    file_requests,
)

log = logging.getLogger(__name__)

# A lookup's range listings in flight at once: a 10,000-file folder's 12 ranges in 3 round trips, a
# 100,000-file folder's 112 in 28, never a lookup holding the whole request pool or a store's listing
# capacity (moto, one process, answered 12 at once past its clients' 3 s read timeout: docs/performance.md).
RANGE_LANES = 4
# Presigned HEADs are signed this many at a time, each batch sent as soon as it is signed.
SIGN_BATCH = 32


class FileCheck:
    """The named-file check of one process's lookups, its presigned-HEAD clients and its verdict writes."""

    def __init__(self, filesystems: Filesystems, write_verdicts: bool = False) -> None:
        self.filesystems = filesystems
        # Write a verdict (restore/verdict.py) after a full check of a chk-N passed: the fencing agent's
        # storage does, it writes to the checkpoint storage anyway; the webhook's only reads.
        self.write_verdicts = write_verdicts
        self._lock = threading.Lock()
        self._writes: list[concurrent.futures.Future[Any]] = []
        # per S3 scheme: the pooled client of presigned HEADs (presigned.py), None where s3fs asks
        self.head_clients: dict[str, presigned.HeadClient | None] = {}

    def files(
        self,
        named: NamedFiles,
        snapshot: StoragePath,
        entry: tuple[int | None, datetime | None],
        directory_id: int | None,
        own: Listing | None,
        lookup: Lookup,
        cursor: Cursor,
        newest: bool = False,
    ) -> tuple[str, VerdictWrite | None]:
        """Why a named file is not there ("" when all are), and the verdict write a storage that may
        write is due after a check that confirmed them all (the caller executes it: ``write_verdict``).
        The ones a verdict does not cover are checked by the fewest requests (restore/verdict.py
        ``file_requests``), made side by side. A verdict covers only the ``newest`` complete checkpoint
        of the job (``coverage``), and a listing of this lookup wins over it: a covered file it does not
        show is missing."""
        job_dir = lookup.job_dir if directory_id is not None else None
        verdict = lookup.verdict if job_dir is not None and snapshot.parent.canonical == job_dir else None
        max_age = (
            WRITER_MAX_AGE if self.write_verdicts else MAX_AGE
        )  # the writer renews before readers expire
        with collection_paused():
            covers = coverage(
                named, verdict, snapshot, entry[0], entry[1], datetime.now(UTC), max_age, newest
            )
        if covers.note:
            log.info("%s", covers.note)
        known = {f: len(n) for f, n in verdict.files.items()} if verdict is not None else {}
        names = {f: n.keys() for f, n in verdict.files.items()} if verdict is not None else {}
        ranged = (snapshot.scheme,) if self.ranged(snapshot) else ()
        todo = file_requests(
            covers.unchecked, (snapshot.canonical,), lookup.trees(), known, job_dir or snapshot, names, ranged
        )
        seen: dict[StoragePath, dict[str, int | None]] = {}
        verified = verdict.files if verdict is not None else {}  # what is covered, a verdict names
        folder: StoragePath | None = None  # the files come folder by folder: each looked up once
        mine: dict[str, int | None] = {}
        theirs: Mapping[str, int] = {}
        for needed in covers.covered:
            if needed.path.parent is not folder:
                folder = needed.path.parent
                mine, theirs = seen.setdefault(folder, {}), verified[folder]
            mine[needed.path.name] = theirs[needed.path.name]
        if own is not None:
            seen.setdefault(snapshot.canonical, {}).update({k: v[0] for k, v in own.items()})
        if todo.trees or todo.folders or todo.heads or todo.ranges:
            lookup.ledger.check(f"the files of {snapshot}")
        for tree_path in todo.trees:
            lookup.tree(tree_path, cursor)
        for folder_path in todo.folders:
            lookup.folder(folder_path, cursor)
        heads = self.start_heads(todo.heads, lookup, cursor)
        listed_ranges = self.start_ranges(todo.ranges, lookup, cursor)
        for folder_path in todo.folders:
            found = lookup.listing(folder_path, cursor)
            seen.setdefault(folder_path, {}).update({k: v[0] for k, v in (found or {}).items()})
        unchecked = {f.path.parent for f in covers.unchecked}
        for tree_path in lookup.trees():
            if not any(folder.is_within(tree_path) for folder in unchecked):
                continue
            listed = lookup.tree_listing(tree_path, cursor) or {}
            for rel, (size, _) in listed.items():
                path = below(tree_path, rel)
                if path is not None and path.parent in unchecked:
                    seen.setdefault(path.parent, {})[path.name] = size
        for lane_parts, (future, started) in listed_ranges:
            found_ranges: list[tuple[dict[str, int | None], str | None]] = lookup.wait(future)
            cursor.join(started)
            for part, (found_range, through) in zip(lane_parts, found_ranges, strict=True):
                lookup.ranged(part.folder, part.after, through, found_range)
                seen.setdefault(part.folder, {}).update(found_range)
        for path, (future, started) in heads:
            size = lookup.wait(future)
            cursor.join(started)
            if size is not False:
                seen.setdefault(path.parent, {})[path.name] = size
        self.listed_win(covers.covered, seen, lookup, cursor)
        why = missing(named, seen)
        if why or not self.write_verdicts or job_dir is None:
            return why, None
        leaves = due(named, snapshot, entry, seen, covers, verdict, lookup.started)
        return why, VerdictWrite(job_dir, leaves, lookup.started_mono) if leaves is not None else None

    @staticmethod
    def listed_win(
        covered: tuple[Needed, ...],
        seen: dict[StoragePath, dict[str, int | None]],
        lookup: Lookup,
        cursor: Cursor,
    ) -> None:
        """A covered file as this lookup's listings show it: the size a listing gave, and gone from
        ``seen`` (missing) where a listing of its folder, a prefix above it or a key range it falls in
        does not show it."""
        by_folder: dict[StoragePath, list[str]] = {}
        folder: StoragePath | None = None  # the files come folder by folder: each looked up once
        names: list[str] = []
        for needed in covered:
            if needed.path.parent is not folder:
                folder = needed.path.parent
                names = by_folder.setdefault(folder, [])
            names.append(needed.path.name)
        for folder, names in by_folder.items():
            for after, through, files in lookup.shown(folder, cursor):
                mine = seen.setdefault(folder, {})
                for name in names:
                    if after < name and (through is None or name <= through):
                        if name in files:
                            mine[name] = files[name]
                        else:
                            mine.pop(name, None)

    def read_verdict(self, job_dir: StoragePath, cursor: Cursor) -> tuple[bytes, datetime | None] | None:
        """The job directory's verdict as stored (one read) and, for local files, its modification time
        (an object store's comes from the job directory's listing: ``verdict``); None: none to read."""
        path = job_dir.child(VERDICT_NAME)
        cursor.step()
        stored_at: datetime | None = None
        try:
            if path.protocol == "file":
                with open(path.path, "rb") as f:
                    data = f.read()
                    stored_at = datetime.fromtimestamp(os.fstat(f.fileno()).st_mtime, UTC)
            elif path.protocol == "s3":
                data = bytes(self.filesystems.filesystem(path).cat_file(path.fs_path, max_concurrency=1))
            else:
                data = bytes(self.filesystems.filesystem(path).cat_file(path.fs_path))
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
        except Exception as exc:  # a verdict that cannot be read is no verdict: the full check runs
            log.info("verdict %s not read: %s", path, storage_error("reading", path, exc))
            return None
        return data, stored_at

    @staticmethod
    def verdict(
        job_dir: StoragePath, read: tuple[bytes, datetime | None] | None, listed_at: datetime | None
    ) -> Verdict | None:
        """The verdict ``read_verdict`` read, when this lookup can use it: its storage time is the one
        the storage gave (``listed_at``: the job directory's listing, for an object store), and anything
        odd in it means none (the full check runs, and the agent's next check writes over it)."""
        if read is None:
            return None
        data, stored_at = read
        path = job_dir.child(VERDICT_NAME)
        stored_at = stored_at or listed_at
        if stored_at is None:
            log.info("verdict %s not used: the storage gave no time for it", path)
            return None
        found = decode(data, job_dir, stored_at)
        if isinstance(found, str):
            log.info("verdict %s not used: %s", path, found)
            return None
        return found

    def write_verdict(self, job_dir: StoragePath, verdict: Verdict, started: float) -> None:
        """Write ``verdict`` beside the job's checkpoints, off the lookup's path (a failure is logged);
        ``started``: when its check began (monotonic), so it says how long before its write its files
        were seen."""
        path = job_dir.child(VERDICT_NAME)

        def write() -> None:
            data = encode(replace(verdict, seen_before=time.monotonic() - started))
            try:
                if path.protocol == "file":
                    temporary = f"{path.path}.{os.getpid()}.{threading.get_ident()}"
                    with open(temporary, "wb") as f:
                        f.write(data)
                    os.replace(temporary, path.path)
                else:
                    self.filesystems.filesystem(path).pipe_file(path.fs_path, data)
            except Exception as exc:
                log.warning("verdict %s not written: %s", path, storage_error("writing", path, exc))

        with self._lock:
            self._writes = [w for w in self._writes if not w.done()]
            self._writes.append(REQUESTS.submit(write))

    def settle(self, timeout: float = 10.0) -> None:
        """Wait for the verdicts being written (tests, benchmarks, a stopping agent)."""
        with self._lock:
            writes = list(self._writes)
        concurrent.futures.wait(writes, timeout=timeout)

    def start_heads(
        self, paths: tuple[StoragePath, ...], lookup: Lookup, cursor: Cursor
    ) -> list[tuple[StoragePath, tuple[concurrent.futures.Future[Any], Cursor]]]:
        """A HEAD of each of ``paths``, side by side: on S3 by presigned URL over a pooled client where
        that asks what s3fs would (restore/presigned.py), else through the path's filesystem."""
        client = (
            self.head_client(paths[0]) if paths and all(p.scheme == paths[0].scheme for p in paths) else None
        )
        if client is None:
            return [(p, lookup.request(functools.partial(self.head_file, p), cursor)) for p in paths]
        fs = self.filesystems.filesystem(paths[0])
        started: list[tuple[StoragePath, tuple[concurrent.futures.Future[Any], Cursor]]] = []
        signer = presigned.Presigner(fs, lookup.deadline.remaining())
        # Signed a batch at a time, each batch's HEADs sent as it is signed: the first answers come back
        # while the rest are signed (where the client signs each, 200 are ~50 ms of CPU).
        for first in range(0, len(paths), SIGN_BATCH):
            batch = paths[first : first + SIGN_BATCH]
            lookup.deadline.check()
            signer.seconds_left = lookup.deadline.remaining()
            try:
                urls = signer.sign([p.fs_path for p in batch])
            except Exception as exc:
                raise storage_error("checking", batch[0], exc) from None
            started.extend(
                (p, lookup.request(functools.partial(self.head_url, p, url, client, lookup.deadline), cursor))
                for p, url in zip(batch, urls, strict=True)
            )
        return started

    def ranged(self, path: StoragePath) -> bool:
        """Whether ``path``'s folders can be listed by key range (S3 by presigned URL: ``ranges.py``)."""
        return path.protocol == "s3" and self.head_client(path) is not None

    def start_ranges(
        self, parts: tuple[Range, ...], lookup: Lookup, cursor: Cursor
    ) -> list[tuple[tuple[Range, ...], tuple[concurrent.futures.Future[Any], Cursor]]]:
        """The listings of the key ranges ``parts`` (their first pages signed together), in at most
        ``RANGE_LANES`` lanes side by side, each listing its ranges one after another."""
        if not parts:
            return []
        client = self.head_client(parts[0].folder)
        if client is None or not all(p.folder.scheme == parts[0].folder.scheme for p in parts):
            raise StorageError(f"key ranges of {parts[0].folder} planned where they cannot be listed")
        fs = self.filesystems.filesystem(parts[0].folder)
        lookup.deadline.check()
        try:
            urls = ranges.presign(
                fs,
                [ranges.params(*_bucket_prefix(p.folder), p.after, None) for p in parts],
                lookup.deadline.remaining(),
            )
        except Exception as exc:
            raise storage_error("listing", parts[0].folder, exc) from None
        lanes = min(RANGE_LANES, len(parts))
        out = []
        for lane in range(lanes):
            mine = tuple(zip(parts[lane::lanes], urls[lane::lanes], strict=True))

            def run(
                c: Cursor, mine: tuple[tuple[Range, str], ...] = mine
            ) -> list[tuple[dict[str, int | None], str | None]]:
                return [self.list_range(p, url, client, fs, lookup.deadline, c) for p, url in mine]

            out.append((tuple(p for p, _ in mine), lookup.request(run, cursor)))
        return out

    def list_range(
        self, part: Range, url: str, client: presigned.HeadClient, fs: Any, deadline: Deadline, cursor: Cursor
    ) -> tuple[dict[str, int | None], str | None]:
        """The files of ``part.folder`` from after ``part.after`` to past ``part.last`` (their sizes)
        and the name it listed through (None: to the folder's end): its first page at ``url``, then
        page after page, each signed as it is needed."""
        bucket, prefix = _bucket_prefix(part.folder)
        end = prefix + part.last
        files: dict[str, int | None] = {}
        while True:
            cursor.step()
            try:
                status, body = client.get(url, deadline.remaining())
                if status == 404 and ranges.error_code(body) == "NoSuchBucket":
                    return files, None  # no bucket: no file (as a folder listing finds none)
                if status == 403:
                    raise PermissionError("HTTP 403")
                if status != 200:
                    code = ranges.error_code(body)
                    raise ranges.ListingFailed(f"HTTP {status}{f' {code}' if code else ''}")
                page = ranges.parse(body, prefix)
            except Exception as exc:
                raise storage_error("listing", part.folder, exc) from None
            files.update(page.files)
            if page.token is None:
                return files, None
            if page.greatest >= end:
                return files, page.greatest[len(prefix) :]
            deadline.check()
            try:
                url = ranges.presign(
                    fs, [ranges.params(bucket, prefix, part.after, page.token)], deadline.remaining()
                )[0]
            except Exception as exc:
                raise storage_error("listing", part.folder, exc) from None

    def head_client(self, path: StoragePath) -> presigned.HeadClient | None:
        """The presigned-HEAD client of ``path``'s scheme (None: ask through s3fs), made once."""
        if path.protocol != "s3":
            return None
        with self._lock:
            if path.scheme in self.head_clients:
                return self.head_clients[path.scheme]
        options = self.filesystems.options(path)
        fs = self.filesystems.filesystem(path)
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
            return self.head_clients.setdefault(path.scheme, client)

    def head_url(
        self, path: StoragePath, url: str, client: presigned.HeadClient, deadline: Deadline, cursor: Cursor
    ) -> int | bool | None:
        """``head_file`` by presigned URL: one HEAD, within the lookup's deadline."""
        cursor.head()
        try:
            return client.head(url, deadline.remaining())
        except Exception as exc:
            raise storage_error("checking", path, exc) from None

    def head_file(self, path: StoragePath, cursor: Cursor) -> int | bool | None:
        """One file's size (None: the store gives none), False when it is not there: one HEAD."""
        cursor.head()
        try:
            if path.protocol == "file":
                st = os.stat(path.path)
                return st.st_size if stat.S_ISREG(st.st_mode) else False
            fs = self.filesystems.filesystem(path)
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
            raise storage_error("checking", path, exc) from None
        return size if isinstance(size, int) else None


def _bucket_prefix(folder: StoragePath) -> tuple[str, str]:
    """``folder``'s bucket and key prefix (ending in ``/``)."""
    bucket, _, key = folder.fs_path.partition("/")
    return bucket, (key.rstrip("/") + "/") if key.strip("/") else ""
