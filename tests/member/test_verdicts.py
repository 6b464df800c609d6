"""A verdict (restore/verdict.py) spares the next check the files it confirmed, and never more: a
``_metadata`` replaced since, a verdict too old, a verdict of another job, a file it holds shorter than
now named, a new file gone: each is checked, and a missing file passes the checkpoint over. On every
backend's real server (tests/support/backends.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from tests.support.backends import BACKEND_NAMES, Running
from tests.support.jobtrees import (
    JOB,
    SIZE,
    checkpoint,
    chosen,
    lookup,
    put,
    reader,
    remove,
    verdict_of,
    verified_job,
)
from webhook.common.paths import StoragePath
from webhook.restore.checks import NamedFiles, Needed
from webhook.restore.verdict import (
    HEADS_PER_UNIT,
    MAX_AGE,
    VERDICT_NAME,
    Plan,
    budget_units,
    coverage,
    decode,
    encode,
    made,
    plan,
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
    old = verdict_of(storage_backend, job_dir)
    aged = replace(old, verified_at=datetime.now(UTC) - MAX_AGE - timedelta(minutes=1))
    put(storage_backend, {f"{job_dir}/{VERDICT_NAME}": encode(aged)})
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


# --- pure ------------------------------------------------------------------------------------------


ROOT = StoragePath.parse("s3://b/ck/" + JOB)
CHK = ROOT.child("chk-2")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def needed(path: StoragePath, size: int = SIZE) -> Needed:
    return Needed(path.canonical, size, "a test")


def test_decode_refuses_another_jobs_verdict_and_garbage() -> None:
    verdict = made(CHK, 10, NOW, NamedFiles((needed(ROOT.child("shared", "a")),)), {}, NOW)
    assert decode(encode(verdict), ROOT) == verdict
    assert "not a checkpoint of" in str(decode(encode(verdict), StoragePath.parse("s3://b/ck/other")))
    assert decode(b"{", ROOT) == "unreadable (JSONDecodeError)"
    assert decode(b'{"kind": "x"}', ROOT) == "not a verdict of this format"
    bad = encode(verdict).replace(b'"a":16', b'"a":-1')
    assert "is not names and sizes" in str(decode(bad, ROOT))


def test_coverage_takes_a_file_only_as_long_as_the_verdict_saw_it() -> None:
    a, b = ROOT.child("shared", "a"), ROOT.child("shared", "b")
    verdict = made(CHK, 10, NOW, NamedFiles((needed(a), needed(b))), {a: 100, b: 5}, NOW)
    named = NamedFiles((needed(a, 100), needed(b, 6), needed(ROOT.child("shared", "c"))))
    found = coverage(named, verdict, ROOT.child("chk-3"), 1, NOW, NOW)
    assert [n.path.name for n in found.covered] == ["a"]
    assert [n.path.name for n in found.unchecked] == ["b", "c"]


def test_coverage_of_the_same_checkpoint_needs_its_metadata_unchanged_and_a_recent_verdict() -> None:
    a = ROOT.child("shared", "a")
    verdict = made(CHK, 10, NOW, NamedFiles((needed(a),)), {}, NOW)
    named = NamedFiles((needed(a),))
    assert coverage(named, verdict, CHK, 10, NOW, NOW).covered
    assert not coverage(named, verdict, CHK, 11, NOW, NOW).covered
    assert not coverage(named, verdict, CHK, 10, NOW + timedelta(seconds=1), NOW).covered
    assert not coverage(named, verdict, CHK, 10, NOW, NOW + MAX_AGE + timedelta(seconds=1)).covered
    assert not coverage(named, verdict, CHK, 10, NOW, NOW - timedelta(hours=1)).covered  # from the future


def test_a_verdict_made_on_another_verdicts_word_is_as_old_as_it() -> None:
    a = ROOT.child("shared", "a")
    first = made(CHK, 10, NOW, NamedFiles((needed(a),)), {}, NOW)
    later = NOW + timedelta(minutes=20)
    second = made(ROOT.child("chk-3"), 10, later, NamedFiles((needed(a),)), {}, later, first)
    assert second.verified_at == NOW
    when = NOW + MAX_AGE + timedelta(minutes=5)  # within MAX_AGE of ``later``, not of NOW
    assert not coverage(NamedFiles((needed(a),)), second, ROOT.child("chk-4"), 1, NOW, when).covered
    fresh = made(ROOT.child("chk-3"), 10, later, NamedFiles((needed(a),)), {}, later)
    assert coverage(NamedFiles((needed(a),)), fresh, ROOT.child("chk-4"), 1, NOW, when).covered


def test_plan_asks_few_new_files_by_head_many_folders_by_prefix_many_files_by_listing() -> None:
    shared = ROOT.child("shared")
    new = tuple(needed(shared.child(f"n{i}")) for i in range(200))
    # 200 new files in a folder the verdict knew with 10,000: HEADs (2 budget units, not 10 pages)
    assert len(plan(new, (CHK.canonical,), (), {shared.canonical: 10_000}, ROOT).heads) == 200
    # the same 200 in a folder of 100: one listing
    assert plan(new, (), (), {shared.canonical: 100}, ROOT).folders == (shared.canonical,)
    # file merging: a folder per subtask below shared/: one prefix listing of shared/
    subtasks = tuple(needed(shared.child(f"op_{i}", "f")) for i in range(128))
    assert plan(subtasks, (), (), {}, ROOT) == Plan(trees=(shared.canonical,))
    # ... but 128 new files in those folders, which the verdict knew with 10,000: HEADs (2 units, not 10)
    known = {f.path.parent: 10_000 // 128 for f in subtasks}
    assert len(plan(subtasks, (), (), known, ROOT).heads) == 128
    # entropy injection: a folder of its own per file, outside the job directory: a HEAD each
    entropy = tuple(needed(StoragePath.parse(f"s3://b/{i:04x}/ck/{JOB}/shared/f{i}")) for i in range(50))
    assert len(plan(entropy, (), (), {}, ROOT).heads) == 50
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
