"""restore/snapshots.py: which candidates storage found count, decided over plain values (the storage side
only fetches them): the savepoint-prefix clash and the started-from floor."""

from __future__ import annotations

from datetime import UTC, datetime

from webhook.common.paths import StoragePath
from webhook.restore.snapshots import Candidate, SnapshotQuery, floor_of, needs_floor, own_savepoints

JOB = "a1b2c3" + "0" * 26
OTHER = "a1b2c3" + "f" * 26
CK = StoragePath.parse("s3://bucket/checkpoints")
SP = StoragePath.parse("s3://bucket/savepoints")
WHEN = datetime(2026, 1, 1, tzinfo=UTC)


def savepoint(name: str) -> Candidate:
    return Candidate(SP.child(name), "savepoint", WHEN, 7)


FIRST, SECOND = savepoint("savepoint-a1b2c3-000000000001"), savepoint("savepoint-a1b2c3-000000000002")


def query(reported: StoragePath | None = None, started_from: StoragePath | None = None) -> SnapshotQuery:
    return SnapshotQuery(CK.child(JOB), reported, CK, SP, JOB, started_from)


def test_the_listed_savepoints_leave_out_the_reported_one() -> None:
    listed, rejected = own_savepoints((FIRST, SECOND), query(reported=FIRST.path), "")
    assert listed == (SECOND,)
    assert rejected == ()


def test_a_prefix_shared_with_another_job_passes_every_listed_savepoint_over() -> None:
    listed, rejected = own_savepoints((FIRST, SECOND), query(), OTHER)
    assert listed == ()
    assert rejected == tuple(
        f"savepoint {c.path}: its prefix a1b2c3 is also that of job {OTHER} in {CK}, so whose it is "
        "cannot be told by its name"
        for c in (FIRST, SECOND)
    )
    # nothing listed: nothing to pass over, whoever shares the prefix
    assert own_savepoints((FIRST,), query(reported=FIRST.path), OTHER) == ((), ())


def test_the_floor_is_checked_only_when_nothing_of_the_jobs_own_is_restorable() -> None:
    started = SP.child("savepoint-0a0a0a-000000000009")
    checkpoint = Candidate(CK.child(JOB).child("chk-3"), "checkpoint", WHEN, 3)
    assert needs_floor(query(started_from=started), None, None, ())
    assert not needs_floor(query(), None, None, ())  # it names none
    assert not needs_floor(query(started_from=started), checkpoint, None, ())
    assert not needs_floor(query(started_from=started), None, FIRST, ())
    assert not needs_floor(query(started_from=started), None, None, (SECOND,))


def test_a_floor_in_a_chk_directory_is_a_checkpoint_and_a_failed_one_says_why() -> None:
    chk = StoragePath.parse(f"s3://bucket/checkpoints/{OTHER}/chk-41")
    passed = Candidate(chk, "savepoint", WHEN, 41)
    floor, rejected = floor_of(chk, passed, "")
    assert floor == Candidate(chk, "checkpoint", WHEN, 41)
    assert rejected == ()
    assert floor_of(FIRST.path, FIRST, "") == (FIRST, ())
    assert floor_of(chk, None, "_metadata is empty (0 bytes)") == (
        None,
        (f"started from {chk}: _metadata is empty (0 bytes)",),
    )
    assert floor_of(chk, None, "") == (None, ())  # no _metadata: nothing said here (the decision tells)
