"""Checkpoint trees of any size and shape on a running storage backend, and one lookup over them.

A job's ``chk-N`` names its shared files by full URL wherever they lie (``shared/``, one folder per
subtask as file merging writes them, an entropy folder each) in Flink 2.3's format
(``tests/support/flinktrees.py`` ``incremental_metadata``); the files are written beside it, all at once.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from tests.support.backends import Running
from tests.support.flinktrees import Tree, incremental_metadata, tree
from webhook.common.paths import StoragePath
from webhook.policy.restore import Verify
from webhook.restore.checks import named_files
from webhook.restore.metadata import Metadata, read_metadata
from webhook.restore.snapshots import SnapshotQuery, Snapshots
from webhook.restore.storage.backends import Deadline, modified_time
from webhook.restore.storage.search import CheckpointStorage
from webhook.restore.verdict import VERDICT_NAME, Verdict, decode, encode

JOB = "5f3c0de8a1b24c6d9e7f00112233aabb"
SIZE = 16


def put(running: Running, blobs: Mapping[str, bytes]) -> None:
    """Write every ``url -> bytes`` (Flink paths on ``running``) in as few calls as the backend takes."""
    if running.backend.name == "file":
        for url, data in blobs.items():
            path = Path(running.path(url))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        return
    items = [(running.path(url), data) for url, data in blobs.items()]
    if running.backend.name == "gcs":  # the emulator answers writes side by side slowly (~0.1 s each)
        for path, data in items:
            running.fs.pipe_file(path, data)
        return
    for start in range(0, len(items), 500):
        running.fs.pipe(dict(items[start : start + 500]))


def remove(running: Running, url: str) -> None:
    if running.backend.name == "file":
        os.remove(running.path(url))
    else:
        running.fs.rm_file(running.path(url))


def names(count: int) -> list[str]:
    return [str(uuid.UUID(int=i + 1)) for i in range(count)]


def checkpoint(
    running: Running, job_dir: str, n: int, shared: Iterable[str], write_shared: bool = True
) -> dict[str, bytes]:
    """``chk-n`` naming ``shared`` (URLs) and two exclusive files; written with the shared files."""
    shared = list(shared)
    exclusive = [f"x{n}-{k}" for k in range(2)]
    blobs = {url: bytes(SIZE) for url in shared} if write_shared else {}
    blobs.update({f"{job_dir}/chk-{n}/{name}": bytes(SIZE) for name in exclusive})
    blobs[f"{job_dir}/chk-{n}/_metadata"] = incremental_metadata(n, shared, exclusive, SIZE)
    put(running, blobs)
    return blobs


def lookup(storage: CheckpointStorage, job_dir: str, budget: int = 100, seconds: float = 60.0) -> Snapshots:
    """The job directory's newest restorable checkpoint as an admission with ``verify: files`` finds it."""
    path = StoragePath.parse(job_dir)
    query = SnapshotQuery(path, None, checkpoint_dir=path.parent, verify=Verify.FILES, budget=budget)
    return storage.snapshots(query, Deadline(seconds))


def chosen(found: Snapshots) -> str:
    return str(found.checkpoint.path) if found.checkpoint is not None else ""


def verified_job(running: Running, old: int = 30) -> tuple[str, list[str]]:
    """A job whose chk-1 names ``old`` shared files; a writer's lookup (the fencing agent's storage)
    restores it and leaves a verdict."""
    job_dir = f"{running.bucket('verdict')}/ck/{JOB}"
    shared = [f"{job_dir}/shared/{n}" for n in names(old)]
    checkpoint(running, job_dir, 1, shared)
    writer = CheckpointStorage(running.storage_options(), write_verdicts=True)
    assert chosen(lookup(writer, job_dir)) == f"{job_dir}/chk-1"
    writer.settle()
    return job_dir, shared


def verdict_of(running: Running, job_dir: str) -> Verdict:
    """The verdict the job directory holds (it must hold one), with its storage time."""
    url = f"{job_dir}/{VERDICT_NAME}"
    stored_at = modified_time(running.fs.info(running.path(url)))
    found = decode(running.read(url), StoragePath.parse(job_dir), stored_at)
    assert isinstance(found, Verdict), found
    return found


def aged(running: Running, job_dir: str, age: timedelta) -> None:
    """The job's verdict written again as a writer leaves it whose check began ``age`` before its write
    (the store stamps the write: a verdict is aged by what it says of its check, never by its time)."""
    put(
        running,
        {
            f"{job_dir}/{VERDICT_NAME}": encode(
                replace(verdict_of(running, job_dir), seen_before=age.total_seconds())
            )
        },
    )


def real_job(running: Running, name: str, skip: Iterable[str] = ()) -> tuple[Tree, str, str]:
    """The real-Flink tree ``name`` (tests/fixtures/flink) written on ``running`` under a new bucket, all
    but the files ``skip`` names (paths relative to the tree); the tree, its root URL and job directory."""
    each, skip = tree(name), frozenset(skip)
    base = running.bucket("real")
    root = f"file:{base}" if running.backend.name == "file" else base
    blobs = {f"{root}/{rel}": each.metadata(rel, root) for rel in each.metadata_files() if rel not in skip}
    blobs.update({f"{root}/{rel}": bytes(size) for rel, size in each.files() if rel not in skip})
    put(running, blobs)
    return each, root, f"{root}/ck/{each.job_id}"


def named(each: Tree, root: str, n: int) -> set[str]:
    """The files ``chk-n`` of the real tree ``each`` written at ``root`` names (URLs as Flink wrote them)."""
    rel = f"ck/{each.job_id}/chk-{n}"
    found = read_metadata(each.metadata(f"{rel}/_metadata", root))
    assert isinstance(found, Metadata), found
    files = named_files(found, StoragePath.parse(f"{root}/{rel}"), (StoragePath.parse(root).scheme,))
    assert not files.problem, files.problem
    return {str(f.path) for f in files.files}


def reader(running: Running) -> CheckpointStorage:
    return CheckpointStorage(running.storage_options())  # the webhook's: reads verdicts, writes none
