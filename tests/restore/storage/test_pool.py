"""restore/storage/pool.py: a storage hung past one admission's deadline is not asked again until that
lookup ends; what one hang stalls (a bucket per scheme, a top-level local directory)."""

from __future__ import annotations

import threading
import time

import pytest

from webhook.common.paths import StoragePath
from webhook.restore.snapshots import SnapshotQuery, Snapshots, StorageError
from webhook.restore.storage.backends import Deadline, DeadlineExceeded
from webhook.restore.storage.pool import LookupPool, describe, storage_key

BUCKET = StoragePath.parse("s3://bucket/checkpoints/job")
OTHER = StoragePath.parse("s3://other/checkpoints/job")


def query(path: StoragePath) -> SnapshotQuery:
    return SnapshotQuery(path, None)


def test_one_hang_stalls_a_bucket_per_scheme_or_a_top_local_directory() -> None:
    assert storage_key(BUCKET) == storage_key(StoragePath.parse("s3://bucket/savepoints/sp-1"))
    assert storage_key(BUCKET) != storage_key(OTHER)
    assert storage_key(BUCKET) != storage_key(StoragePath.parse("s3a://bucket/checkpoints/job"))
    local = storage_key(StoragePath.parse("file:///mnt/checkpoints/job"))
    assert local == storage_key(StoragePath.parse("file:///mnt/savepoints"))
    assert local != storage_key(StoragePath.parse("file:///data/checkpoints/job"))
    assert describe(local) == "file:///mnt"
    assert describe(storage_key(BUCKET)) == "s3://bucket"


@pytest.mark.parametrize("daemon", [False, True])
def test_a_hung_storage_is_not_asked_again_until_its_lookup_ends(daemon: bool) -> None:
    pool = LookupPool(daemon=daemon)
    release = threading.Event()
    calls: list[StoragePath | None] = []

    def hanging(q: SnapshotQuery, _deadline: Deadline) -> Snapshots:
        calls.append(q.job_dir)
        release.wait(30)
        return Snapshots(None, None)

    def answering(q: SnapshotQuery, _deadline: Deadline) -> Snapshots:
        calls.append(q.job_dir)
        return Snapshots(None, None)

    try:
        with pytest.raises(DeadlineExceeded, match=r"within 2s deadline \(looking up s3://bucket"):
            pool.lookup(hanging, query(BUCKET), Deadline(0.05), 2)
        with pytest.raises(DeadlineExceeded, match="an earlier lookup on s3://bucket is still waiting"):
            pool.lookup(answering, query(BUCKET), Deadline(5), 2)
        assert calls == [BUCKET]  # not asked
        assert pool.lookup(answering, query(OTHER), Deadline(5), 2) == Snapshots(None, None)  # another bucket
        release.set()
        asked_again = None
        for _ in range(1000):  # until the abandoned lookup's end is noticed (no timing asserted)
            try:
                asked_again = pool.lookup(answering, query(BUCKET), Deadline(5), 2)
                break
            except DeadlineExceeded:
                time.sleep(0.01)
        assert asked_again == Snapshots(None, None)
    finally:
        release.set()
        pool.close()


def test_an_unexpected_failure_is_a_storage_error() -> None:
    pool = LookupPool()

    def broken(_q: SnapshotQuery, _deadline: Deadline) -> Snapshots:
        raise KeyError("x-amz-request-id")

    try:
        with pytest.raises(StorageError, match="KeyError: 'x-amz-request-id'"):
            pool.lookup(broken, query(BUCKET), Deadline(5), 2)
    finally:
        pool.close()
