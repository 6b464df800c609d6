"""restore/verdict.py ``due``: the verdict a check that found every named file leaves, decided over plain
values; ``FileCheck.files`` returns it as a write its caller executes."""

from __future__ import annotations

from datetime import UTC, datetime

from webhook.common.paths import StoragePath
from webhook.restore.checks import NamedFiles, Needed
from webhook.restore.verdict import Coverage, Verdict, due

JOB = StoragePath.parse("s3://b/ck/a1b2c3d4e5f60718293a4b5c6d7e8f90")
CHK = JOB.child("chk-2")
SHARED = JOB.child("shared")
ONE, TWO = Needed(SHARED.child("one"), 10, "state"), Needed(CHK.child("two"), 5, "state")
NAMED = NamedFiles((ONE, TWO))
SEEN = {SHARED: {"one": 12}, CHK: {"two": None}}  # a store that gave no size for one
STAMPED = datetime(2026, 1, 1, 12, tzinfo=UTC)
STARTED = datetime(2026, 1, 1, 12, 5, tzinfo=UTC)


def test_a_full_check_leaves_what_it_saw() -> None:
    verdict = due(NAMED, CHK, (300, STAMPED), SEEN, Coverage((), NAMED.files), None, STARTED)
    assert verdict == Verdict(CHK.canonical, 300, STAMPED, STARTED, {SHARED: {"one": 12}, CHK: {"two": 5}})


def test_none_is_due_without_the_metadatas_size_and_time_or_when_the_verdict_read_covered_it_all() -> None:
    full = Coverage((), NAMED.files)
    assert due(NAMED, CHK, (None, STAMPED), SEEN, full, None, STARTED) is None
    assert due(NAMED, CHK, (300, None), SEEN, full, None, STARTED) is None
    read = Verdict(CHK.canonical, 300, STAMPED, STARTED, {SHARED: {"one": 12}, CHK: {"two": 5}})
    assert due(NAMED, CHK, (300, STAMPED), SEEN, Coverage(NAMED.files, ()), read, STARTED) is None
    # an older checkpoint's verdict read: the newer one gets its own, as old as what it carried over
    older = Verdict(
        JOB.child("chk-1").canonical, 200, STAMPED, STARTED, {SHARED: {"one": 12}}, 1.0, None, STAMPED
    )
    carried = due(NAMED, CHK, (300, STAMPED), SEEN, Coverage((ONE,), (TWO,)), older, STARTED)
    assert carried is not None and carried.checkpoint == CHK.canonical and carried.carried_seen == older.seen
