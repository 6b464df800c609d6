"""A verdict (restore/verdict.py) spares the next check the files it confirmed, and never more: a
``_metadata`` replaced since, a verdict too old, a verdict of another job, a file it holds shorter than
now named, a new file gone: each is checked, and a missing file passes the checkpoint over. Issue 46,
on the real Flink 2.3.0 RocksDB tree: a verdict covers only the newest complete checkpoint, a listing of
the lookup that lacks a covered file wins, the window is the store's clock from when the files were
seen, and anything odd in a verdict is no verdict. On every backend's real server
(tests/support/backends.py)."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta, tzinfo

import pytest

from tests.support.backends import BACKEND_NAMES, Running
from tests.support.jobtrees import (
    JOB,
    SIZE,
    aged,
    checkpoint,
    chosen,
    lookup,
    named,
    put,
    reader,
    real_job,
    remove,
    verdict_of,
    verified_job,
)
from webhook.common.paths import StoragePath
from webhook.restore.checks import NamedFiles, Needed
from webhook.restore.storage import listings as listings_module
from webhook.restore.storage import verify as verify_module
from webhook.restore.storage.requests import Cursor
from webhook.restore.storage.search import CheckpointStorage
from webhook.restore.verdict import (
    HEADS_PER_UNIT,
    MAX_AGE,
    VERDICT_NAME,
    FileRequests,
    Verdict,
    budget_units,
    coverage,
    decode,
    encode,
    file_requests,
    made,
)

BACKENDS = pytest.mark.parametrize("storage_backend", BACKEND_NAMES, indirect=True)


@BACKENDS
def test_a_full_check_leaves_a_verdict_and_the_next_check_asks_only_the_new_files(
    storage_backend: Running,
) -> None:
    job_dir, shared = verified_job(storage_backend)
    verdict = verdict_of(storage_backend, job_dir)
    assert verdict.checkpoint == StoragePath.parse(f"{job_dir}/chk-1").canonical
    assert verdict.count == 30 + 2  # the shared files and the exclusive ones, each with its size
    assert set(verdict.files[StoragePath.parse(f"{job_dir}/shared").canonical].values()) == {SIZE}
    new = [f"{job_dir}/shared/new-{i}" for i in range(3)]
    checkpoint(storage_backend, job_dir, 2, shared + new)
    found = lookup(reader(storage_backend), job_dir)
    assert chosen(found) == f"{job_dir}/chk-2" and not found.rejected
    # the verdict and the job directory; chk-2's folder and _metadata; one HEAD per new file: no listing
    # of shared/ (its 30 old files are the verdict's)
    assert found.trips.requests == 4 + len(new)


@BACKENDS
def test_a_new_file_gone_passes_the_checkpoint_over(storage_backend: Running) -> None:
    job_dir, shared = verified_job(storage_backend)
    new = [f"{job_dir}/shared/new-{i}" for i in range(3)]
    checkpoint(storage_backend, job_dir, 2, shared + new)
    remove(storage_backend, new[1])
    found = lookup(reader(storage_backend), job_dir)
    assert chosen(found) == f"{job_dir}/chk-1"
    assert "chk-2: 1 of the 35 files its _metadata names is missing" in found.rejected[0]
    assert "new-1" in found.rejected[0]


@BACKENDS
def test_a_verdict_of_a_replaced_metadata_covers_nothing(storage_backend: Running) -> None:
    """The verdict was written for chk-1; then a shared file was lost and the ``_metadata`` written again
    (a copy tool, a restore from a backup): trusted blindly, the verdict would restore it."""
    job_dir, shared = verified_job(storage_backend)
    remove(storage_backend, shared[7])
    meta = f"{job_dir}/chk-1/_metadata"
    put(storage_backend, {meta: storage_backend.read(meta) + b"\0" * 8})  # Flink ignores the tail
    found = lookup(reader(storage_backend), job_dir)
    assert found.checkpoint is None
    assert "chk-1: 1 of the 32 files its _metadata names is missing" in found.rejected[0]


@BACKENDS
def test_a_verdict_older_than_its_age_covers_nothing(storage_backend: Running) -> None:
    """A file deleted after the verdict was written is found once the verdict is past ``MAX_AGE``."""
    job_dir, shared = verified_job(storage_backend)
    aged(storage_backend, job_dir, MAX_AGE + timedelta(minutes=1))
    remove(storage_backend, shared[3])
    found = lookup(reader(storage_backend), job_dir)
    assert found.checkpoint is None and "is missing" in found.rejected[0]


@BACKENDS
def test_another_jobs_verdict_copied_here_covers_nothing(storage_backend: Running) -> None:
    """A job directory copied with its verdict (a migration, a replica), or a verdict moved by hand:
    it speaks of another job's checkpoints, so it covers nothing here, and a file it claims is asked."""
    job_dir, shared = verified_job(storage_backend)
    never = f"{job_dir}/shared/never-written"
    other = StoragePath.parse(f"{job_dir[: -len(JOB)]}{'0' * 32}/chk-1")
    claims = NamedFiles(tuple(needed(StoragePath.parse(url)) for url in [*shared, never]))
    lying = made(other, 1, datetime.now(UTC), claims, {}, datetime.now(UTC))
    put(storage_backend, {f"{job_dir}/{VERDICT_NAME}": encode(lying)})
    checkpoint(storage_backend, job_dir, 2, [*shared, never], write_shared=False)
    found = lookup(reader(storage_backend), job_dir)
    assert chosen(found) == f"{job_dir}/chk-1"
    assert "never-written" in found.rejected[0]


# --- on real Flink trees (tests/fixtures/flink) ------------------------------------------------------

ROCKSDB = "2.3.0-rocksdb-incremental"  # chk-5, chk-7, chk-8; chk-7 names none of chk-5's files
JOB8 = "cdfbe14c3559ed404c837aa902a7edbd"  # its jobId


def verified_at_chk7(running: Running) -> tuple[str, str, dict[int, set[str]], str]:
    """The real RocksDB tree with chk-8 still in progress (no _metadata): the agent's lookup restores
    chk-7, the newest complete checkpoint, and leaves its verdict. Its root, job directory, the files
    each checkpoint names, and chk-8's _metadata path."""
    each, root, job_dir = real_job(running, ROCKSDB, skip=frozenset({f"ck/{JOB8}/chk-8/_metadata"}))
    writer = CheckpointStorage(running.storage_options(), write_verdicts=True)
    assert chosen(lookup(writer, job_dir)).endswith("/chk-7")
    writer.settle()
    assert json.loads(running.read(f"{job_dir}/{VERDICT_NAME}"))["checkpoint"].endswith("/chk-7")
    files = {n: named(each, root, n) for n in (5, 7, 8)}
    meta8 = f"{job_dir}/chk-8/_metadata"
    return root, job_dir, files, meta8


def _metadata8(root: str) -> bytes:
    from tests.support.flinktrees import tree

    return tree(ROCKSDB).metadata(f"ck/{JOB8}/chk-8/_metadata", root)


def shared(paths: set[str]) -> list[str]:
    return sorted(p for p in paths if "/shared/" in p)


@BACKENDS
@pytest.mark.parametrize("how", ["cut", "a file gone"])
def test_a_verdict_covers_its_checkpoint_only_while_it_is_the_newest_complete_one(
    storage_backend: Running, how: str
) -> None:
    """Issue 46: the verdict was written while chk-7 was the newest; then chk-8 completed (Flink
    subsumed chk-7 and deleted a shared file only chk-7 named) and is passed over. chk-7 is no longer the
    newest complete checkpoint: it is checked in full, found missing a file, and chk-5 is restored (the
    verdict alone would restore chk-7)."""
    root, job_dir, files, meta8 = verified_at_chk7(storage_backend)
    data = _metadata8(root)
    put(storage_backend, {meta8: data[: len(data) // 2] if how == "cut" else data})
    if how == "a file gone":
        remove(storage_backend, shared(files[8] - files[7])[0])
    subsumed = shared(files[7] - files[8] - files[5])[0]
    remove(storage_backend, subsumed)
    found = lookup(reader(storage_backend), job_dir)
    assert chosen(found).endswith("/chk-5"), found.rejected
    assert found.rejected[0].startswith("chk-8: ")
    assert found.rejected[1].startswith("chk-7: 1 of the") and subsumed.rsplit("/", 1)[1] in found.rejected[1]


@BACKENDS
def test_a_verdict_still_covers_its_checkpoint_while_newer_ones_are_in_progress(
    storage_backend: Running,
) -> None:
    """chk-8 without its _metadata (in progress): chk-7 is the newest complete one, its verdict covers it
    (only its folder and its _metadata are read)."""
    _root, job_dir, _files, _meta8 = verified_at_chk7(storage_backend)
    found = lookup(reader(storage_backend), job_dir)
    assert chosen(found).endswith("/chk-7") and found.incomplete == (8,)
    # the verdict and the job directory; chk-8's folder and _metadata; chk-7's: no other listing or HEAD
    assert found.trips.requests <= 6, found.trips


@BACKENDS
@pytest.mark.parametrize("listing", ["its own folder", "shared/"])
def test_a_listing_of_this_lookup_that_lacks_a_covered_file_wins_over_the_verdict(
    storage_backend: Running, listing: str
) -> None:
    """Issue 46: a covered file that a listing this lookup made does not show is missing. chk-7's own
    folder listing (read with its _metadata) lacks one of its files; or chk-8 (newest, complete) has its
    new shared files listed with shared/, and that listing lacks a file chk-7 and chk-8 both name."""
    root, job_dir, files, meta8 = verified_at_chk7(storage_backend)
    if listing == "its own folder":
        gone = sorted(p for p in files[7] if "/chk-7/" in p)[0]
        remove(storage_backend, gone)
        expected = [("chk-7: 1 of the", gone)]
    else:
        put(storage_backend, {meta8: _metadata8(root)})
        gone = shared(files[8] & files[7])[0]
        remove(storage_backend, gone)
        expected = [("chk-8: 1 of the", gone), ("chk-7: 1 of the", gone)]
    found = lookup(reader(storage_backend), job_dir)
    assert chosen(found).endswith("/chk-5"), found.rejected
    for (start, path), rejected in zip(expected, found.rejected, strict=True):
        assert rejected.startswith(start) and path.rsplit("/", 1)[1] in rejected, rejected


class _Clock:
    """The product's wall and monotonic clocks in the lookup's modules, moved by ``shift``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.shift = timedelta()
        clock = self

        class Shifted(datetime):
            @classmethod
            def now(cls, tz: tzinfo | None = None) -> Shifted:  # type: ignore[override]
                real = datetime.now(tz) + clock.shift
                return cls.fromtimestamp(real.timestamp(), real.tzinfo)

        class Monotonic:
            @staticmethod
            def monotonic() -> float:
                return time.monotonic() + clock.shift.total_seconds()

        for module in (verify_module, listings_module):
            monkeypatch.setattr(module, "datetime", Shifted)
            monkeypatch.setattr(module, "time", Monotonic, raising=False)


@BACKENDS
@pytest.mark.parametrize(
    ("writer_ahead", "read_after"),
    [(timedelta(hours=1), timedelta(minutes=56)), (timedelta(minutes=4), timedelta(minutes=33))],
    ids=["writer 1 h fast", "writer 4 min fast"],
)
def test_the_trust_window_is_counted_on_the_stores_clock_not_the_writers(
    storage_backend: Running, monkeypatch: pytest.MonkeyPatch, writer_ahead: timedelta, read_after: timedelta
) -> None:
    """Issue 46: a writer whose clock is fast stamped its verdict later than its files were seen; read
    ``read_after`` (more than MAX_AGE since, on the store's clock) the verdict covers nothing and a file
    deleted since is found."""
    clock = _Clock(monkeypatch)
    clock.shift = writer_ahead
    job_dir, shared_files = verified_job(storage_backend)
    remove(storage_backend, shared_files[3])
    clock.shift = read_after
    found = lookup(reader(storage_backend), job_dir)
    assert found.checkpoint is None and "is missing" in found.rejected[0], found


@BACKENDS
def test_a_verdict_counts_from_when_its_check_began(
    storage_backend: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 46: a check whose listings took ten minutes (here: its clocks moved on by ten minutes once
    its checkpoint's folder was listed) says its files were seen when it began, not when it ended."""
    clock = _Clock(monkeypatch)
    folder = listings_module.Listings.folder

    def slow(self: listings_module.Listings, path: StoragePath, cursor: Cursor) -> object:
        found = folder(self, path, cursor)
        if path.name == "chk-1":
            clock.shift = timedelta(minutes=10)
        return found

    monkeypatch.setattr(listings_module.Listings, "folder", slow)
    began = datetime.now(UTC)
    job_dir, _ = verified_job(storage_backend)
    monkeypatch.undo()
    stamped = datetime.fromisoformat(
        json.loads(storage_backend.read(f"{job_dir}/{VERDICT_NAME}"))["verifiedAt"]
    )
    assert stamped - began < timedelta(minutes=1), stamped
    verdict = verdict_of(storage_backend, job_dir)
    assert verdict.seen is not None and verdict.stored_at is not None
    assert verdict.stored_at - verdict.seen >= timedelta(minutes=10)


@BACKENDS
@pytest.mark.parametrize("odd", ["no UTC offset", "an unknown field", "begun in the future", "unparsable"])
def test_an_odd_verdict_means_a_full_check_and_the_agents_next_check_writes_over_it(
    storage_backend: Running, odd: str
) -> None:
    """Issue 46: a verdict whose verifiedAt has no UTC offset denied every failover of the job (a
    TypeError, told as a storage error) and the agent never wrote over it. Anything odd is no verdict:
    the full check finds the file deleted since, and the agent's next check writes a good verdict."""
    job_dir, shared_files = verified_job(storage_backend)
    url = f"{job_dir}/{VERDICT_NAME}"
    body = json.loads(storage_backend.read(url))
    if odd == "no UTC offset":
        body["verifiedAt"] = body["verifiedAt"].replace("+00:00", "")
    elif odd == "an unknown field":
        body["trustUntil"] = "2999-01-01T00:00:00+00:00"
    elif odd == "begun in the future":
        body["verifiedAt"] = (datetime.now(UTC) + timedelta(hours=2)).isoformat()
    put(
        storage_backend,
        {url: b"{" + json.dumps(body).encode() if odd == "unparsable" else json.dumps(body).encode()},
    )
    remove(storage_backend, shared_files[3])
    found = lookup(reader(storage_backend), job_dir)
    assert found.checkpoint is None and "is missing" in found.rejected[0], found
    put(storage_backend, {shared_files[3]: bytes(SIZE)})
    writer = CheckpointStorage(storage_backend.storage_options(), write_verdicts=True)  # the agent's check
    assert chosen(lookup(writer, job_dir)).endswith("/chk-1")
    writer.settle()
    good = json.loads(storage_backend.read(f"{job_dir}/{VERDICT_NAME}"))
    assert isinstance(
        decode(json.dumps(good).encode(), StoragePath.parse(job_dir), datetime.now(UTC)), Verdict
    )
    assert good != body  # written over the odd one


# --- pure ------------------------------------------------------------------------------------------


ROOT = StoragePath.parse("s3://b/ck/" + JOB)
CHK = ROOT.child("chk-2")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def needed(path: StoragePath, size: int = SIZE) -> Needed:
    return Needed(path.canonical, size, "a test")


def stored(verdict: Verdict, at: datetime = NOW, before: float = 0.0) -> Verdict:
    """``verdict`` as a reader finds it: stored at ``at`` (the store's clock), its check begun ``before``
    seconds before its write."""
    return replace(verdict, stored_at=at, seen_before=before)


def test_decode_refuses_another_jobs_verdict_and_garbage() -> None:
    verdict = stored(made(CHK, 10, NOW, NamedFiles((needed(ROOT.child("shared", "a")),)), {}, NOW), NOW, 1.5)
    assert decode(encode(verdict), ROOT, NOW) == verdict
    assert "not a checkpoint of" in str(decode(encode(verdict), StoragePath.parse("s3://b/ck/other"), NOW))
    assert decode(b"{", ROOT, NOW) == "unreadable (JSONDecodeError)"
    assert decode(b'{"kind": "x"}', ROOT, NOW) == "not a verdict of this format"
    bad = encode(verdict).replace(b'"a":16', b'"a":-1')
    assert "is not names and sizes" in str(decode(bad, ROOT, NOW))


ODD = {
    "no UTC offset": lambda body: {**body, "verifiedAt": body["verifiedAt"].replace("+00:00", "")},
    "a _metadata time without its offset": lambda body: {
        **body,
        "metadata": {**body["metadata"], "modified": body["metadata"]["modified"].replace("+00:00", "")},
    },
    "an unknown field": lambda body: {**body, "coversEverything": True},
    "a field missing": lambda body: {k: v for k, v in body.items() if k != "seenBeforeSeconds"},
    "begun in the future": lambda body: {**body, "verifiedAt": (NOW + timedelta(hours=1)).isoformat()},
    "a carried time after its own": lambda body: {
        **body,
        "carriedSeen": (NOW + timedelta(hours=1)).isoformat(),
    },
    "a negative duration": lambda body: {**body, "seenBeforeSeconds": -60},
    "a duration that is no number": lambda body: {**body, "seenBeforeSeconds": "soon"},
    "an unparsable time": lambda body: {**body, "verifiedAt": "yesterday"},
    "files that are not folders": lambda body: {**body, "files": []},
}


@pytest.mark.parametrize("odd", ODD, ids=str)
def test_anything_odd_in_a_verdict_is_no_verdict_never_an_error(odd: str) -> None:
    verdict = made(CHK, 10, NOW, NamedFiles((needed(ROOT.child("shared", "a")),)), {}, NOW)
    body = ODD[odd](json.loads(encode(verdict)))
    found = decode(json.dumps(body).encode(), ROOT, NOW)
    assert isinstance(found, str), found


def test_coverage_takes_a_file_only_as_long_as_the_verdict_saw_it() -> None:
    a, b = ROOT.child("shared", "a"), ROOT.child("shared", "b")
    verdict = stored(made(CHK, 10, NOW, NamedFiles((needed(a), needed(b))), {a: 100, b: 5}, NOW))
    named = NamedFiles((needed(a, 100), needed(b, 6), needed(ROOT.child("shared", "c"))))
    found = coverage(named, verdict, ROOT.child("chk-3"), 1, NOW, NOW)
    assert [n.path.name for n in found.covered] == ["a"]
    assert [n.path.name for n in found.unchecked] == ["b", "c"]


def test_coverage_of_the_same_checkpoint_needs_its_metadata_unchanged_and_a_recent_verdict() -> None:
    a = ROOT.child("shared", "a")
    verdict = stored(made(CHK, 10, NOW, NamedFiles((needed(a),)), {}, NOW))
    named = NamedFiles((needed(a),))
    assert coverage(named, verdict, CHK, 10, NOW, NOW).covered
    assert not coverage(named, verdict, CHK, 11, NOW, NOW).covered
    assert not coverage(named, verdict, CHK, 10, NOW + timedelta(seconds=1), NOW).covered
    assert not coverage(named, verdict, CHK, 10, NOW, NOW + MAX_AGE + timedelta(seconds=1)).covered
    assert not coverage(named, verdict, CHK, 10, NOW, NOW - timedelta(hours=1)).covered  # from the future
    assert not coverage(named, replace(verdict, stored_at=None), CHK, 10, NOW, NOW).covered  # no store time


def test_coverage_only_of_the_newest_complete_checkpoint_and_never_of_an_older_one() -> None:
    """Once a checkpoint newer than the verdict's is complete, Flink may have subsumed the verdict's and
    deleted its shared files: a candidate that is not the newest complete one is checked in full."""
    a = ROOT.child("shared", "a")
    verdict = stored(made(CHK, 10, NOW, NamedFiles((needed(a),)), {}, NOW))
    named = NamedFiles((needed(a),))
    assert coverage(named, verdict, CHK, 10, NOW, NOW, newest=True).covered
    passed_over = coverage(named, verdict, CHK, 10, NOW, NOW, newest=False)
    assert not passed_over.covered and "not the newest complete checkpoint" in passed_over.note
    assert coverage(named, verdict, ROOT.child("chk-3"), 1, NOW, NOW, newest=True).covered  # files both name
    assert not coverage(named, verdict, ROOT.child("chk-3"), 1, NOW, NOW, newest=False).covered
    assert not coverage(named, verdict, ROOT.child("chk-1"), 1, NOW, NOW, newest=True).covered  # older


def test_the_window_is_the_stores_clock_from_when_the_files_were_seen() -> None:
    """The verdict object's own storage time less its check's duration (the writer's monotonic clock):
    a writer's wall clock set wrong moves nothing; a check that took 2 minutes counts from its start."""
    a = ROOT.child("shared", "a")
    named = NamedFiles((needed(a),))
    fast_writer = made(CHK, 10, NOW, named, {}, NOW + timedelta(minutes=4))  # its clock 4 minutes ahead
    assert fast_writer.verified_at == NOW + timedelta(minutes=4)  # for people: never compared
    slow_check = stored(fast_writer, NOW, before=120.0)  # seen at NOW - 2 min on the store's clock
    assert slow_check.seen == NOW - timedelta(minutes=2)
    assert coverage(named, slow_check, CHK, 10, NOW, NOW + MAX_AGE - timedelta(minutes=2)).covered
    assert not coverage(named, slow_check, CHK, 10, NOW, NOW + MAX_AGE - timedelta(minutes=1)).covered
    # a reader whose clock is behind the store's: the store's time of the verdict stands for its now
    assert not coverage(
        named,
        stored(fast_writer, NOW, before=MAX_AGE.total_seconds() + 1),
        CHK,
        10,
        NOW,
        NOW - timedelta(minutes=4),
    ).covered


def test_a_verdict_made_on_another_verdicts_word_is_as_old_as_it() -> None:
    a = ROOT.child("shared", "a")
    first = stored(made(CHK, 10, NOW, NamedFiles((needed(a),)), {}, NOW))
    later = NOW + timedelta(minutes=20)
    second = stored(made(ROOT.child("chk-3"), 10, later, NamedFiles((needed(a),)), {}, later, first), later)
    assert second.carried_seen == NOW and second.seen == NOW
    assert decode(encode(second), ROOT, later) == second  # carried over as the store's time
    when = NOW + MAX_AGE + timedelta(minutes=5)  # within MAX_AGE of ``later``, not of NOW
    assert not coverage(NamedFiles((needed(a),)), second, ROOT.child("chk-4"), 1, NOW, when).covered
    fresh = stored(made(ROOT.child("chk-3"), 10, later, NamedFiles((needed(a),)), {}, later), later)
    assert coverage(NamedFiles((needed(a),)), fresh, ROOT.child("chk-4"), 1, NOW, when).covered


def test_plan_asks_few_new_files_by_head_many_folders_by_prefix_many_files_by_listing() -> None:
    shared = ROOT.child("shared")
    new = tuple(needed(shared.child(f"n{i}")) for i in range(200))
    # 200 new files in a folder the verdict knew with 10,000: HEADs (2 budget units, not 10 pages)
    assert len(file_requests(new, (CHK.canonical,), (), {shared.canonical: 10_000}, ROOT).heads) == 200
    # the same 200 in a folder of 100: one listing
    assert file_requests(new, (), (), {shared.canonical: 100}, ROOT).folders == (shared.canonical,)
    # file merging: a folder per subtask below shared/: one prefix listing of shared/
    subtasks = tuple(needed(shared.child(f"op_{i}", "f")) for i in range(128))
    assert file_requests(subtasks, (), (), {}, ROOT) == FileRequests(trees=(shared.canonical,))
    # ... but 128 new files in those folders, which the verdict knew with 10,000: HEADs (2 units, not 10)
    known = {f.path.parent: 10_000 // 128 for f in subtasks}
    assert len(file_requests(subtasks, (), (), known, ROOT).heads) == 128
    # entropy injection: a folder of its own per file, outside the job directory: a HEAD each
    entropy = tuple(needed(StoragePath.parse(f"s3://b/{i:04x}/ck/{JOB}/shared/f{i}")) for i in range(50))
    assert len(file_requests(entropy, (), (), {}, ROOT).heads) == 50
    assert budget_units(pages=3, heads=2 * HEADS_PER_UNIT + 1) == 6


@pytest.mark.parametrize(
    "uri",
    [
        "s3://b/ck/shared/a",
        "s3a://b//ck/./shared/a",
        "s3://b/a",
        "s3://b",
        "s3://b/ck/../a",
        "s3://b/ck/",
        "s3://b/ck/a\x01",
        "file:/tmp/a",
        "/tmp/a",
        "gs://b/" + "x" * 4100,
        "nope://b/a",
    ],
)
def test_named_files_parse_a_folder_once_with_the_same_answer(uri: str) -> None:
    from webhook.common.paths import StoragePathError
    from webhook.restore.checks import _parse

    def outcome(parse: object) -> object:  # the place, canonically spelled (as named_files keeps it)
        try:
            return parse().canonical  # type: ignore[operator]
        except StoragePathError as exc:
            return str(exc)

    folders: dict[str, StoragePath] = {}
    for _ in range(2):  # the second time from the folder parsed the first
        assert outcome(lambda: _parse(uri, folders)) == outcome(lambda: StoragePath.parse(uri))
