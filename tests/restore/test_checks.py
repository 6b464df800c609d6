"""The judgement of a snapshot from what storage showed (pure): named files resolved as Flink resolves
them, each found in its folder's listing at its length, the checkpoint id its directory says."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.common.paths import StoragePath, StoragePathError
from webhook.policy.restore import DEFAULT_ALLOWED_SCHEMES, NewerMetadata
from webhook.restore.checks import judge, missing, named_files
from webhook.restore.metadata import FileScope, Metadata, NamedFile, NewerFormat, UnreadableMetadata

SNAPSHOT = StoragePath.parse("s3a://state/ck/job/chk-4")


def metadata(*files: NamedFile, checkpoint_id: int = 4, size: int = 100) -> Metadata:
    return Metadata(6, checkpoint_id, 1, 1, files, 0, 100, size, "Checkpoint")


def test_relative_names_resolve_in_the_snapshots_own_directory_and_full_paths_stay() -> None:
    found = named_files(
        metadata(
            NamedFile("a1", FileScope.EXCLUSIVE, 10, "op"),
            NamedFile("s3://state/ck/job/shared/x", FileScope.ABSOLUTE, 20, "op"),
            NamedFile("s3://state/ck/job/shared/m", FileScope.SEGMENT, 30, "op"),
            NamedFile("s3://state/ck/job/shared/m", FileScope.SEGMENT, 90, "op"),  # a later segment
        ),
        SNAPSHOT,
        DEFAULT_ALLOWED_SCHEMES,
    )
    assert found.problem == ""
    assert [(str(f.path), f.size) for f in found.files] == [
        ("s3://state/ck/job/chk-4/a1", 10),
        ("s3://state/ck/job/shared/x", 20),
        ("s3://state/ck/job/shared/m", 90),
    ]
    assert [str(f) for f in found.folders] == ["s3://state/ck/job/chk-4", "s3://state/ck/job/shared"]


def test_a_name_that_is_no_file_of_its_directory_or_on_a_scheme_not_allowed_is_a_problem() -> None:
    sneaky = named_files(metadata(NamedFile("../x/y", FileScope.EXCLUSIVE, 1, "op")), SNAPSHOT, ("s3",))
    assert "as a file of its own directory" in sneaky.problem
    other = named_files(metadata(NamedFile("hdfs://nn/x", FileScope.ABSOLUTE, 1, "op")), SNAPSHOT, ("s3",))
    assert "on hdfs://, which the policy's allowedSchemes do not include" in other.problem


def test_missing_and_short_files_are_told_by_the_first_and_the_count() -> None:
    found = named_files(
        metadata(
            NamedFile("a1", FileScope.EXCLUSIVE, 10, "subtask 0"),
            NamedFile("a2", FileScope.EXCLUSIVE, 10, "subtask 1"),
            NamedFile("s3://state/ck/job/shared/x", FileScope.ABSOLUTE, 20, "subtask 2"),
        ),
        SNAPSHOT,
        DEFAULT_ALLOWED_SCHEMES,
    )
    chk, shared = found.folders
    assert missing(found, {chk: {"a1": 10, "a2": 10}, shared: {"x": 20}}) == ""
    assert missing(found, {chk: {"a1": 10, "a2": None}, shared: {"x": 25}}) == ""  # no size listed: fine
    assert missing(found, {chk: {"a1": 10}, shared: None}) == (
        "2 of the 3 files its _metadata names are missing, the first s3://state/ck/job/chk-4/a2 (subtask 1)"
    )
    assert missing(found, {chk: {"a1": 10, "a2": 10}, shared: {"x": 7}}) == (
        "1 of the 3 files its _metadata names is shorter than Flink reads, the first "
        "s3://state/ck/job/shared/x (7 bytes, 20 named; subtask 2)"
    )


def test_the_id_a_checkpoints_metadata_carries_must_be_its_directorys() -> None:
    assert judge(metadata(checkpoint_id=4), 4, NewerMetadata.TRUST).problem == ""
    assert judge(metadata(checkpoint_id=3), 4, NewerMetadata.TRUST).problem.startswith(
        "_metadata is that of checkpoint 3, not 4"
    )
    assert judge(metadata(checkpoint_id=3), None, NewerMetadata.TRUST).checkpoint_id == 3  # a savepoint
    grown = judge(metadata(size=130), 4, NewerMetadata.TRUST)
    assert (grown.problem, grown.note) == (
        "",
        "_metadata has 30 bytes after its end at byte 100 (Flink ignores them)",
    )
    assert judge(UnreadableMetadata("cut"), 4, NewerMetadata.TRUST).problem == "cut"


def test_a_newer_format_is_trusted_by_its_header_only_or_skipped() -> None:
    trusted = judge(NewerFormat(8, 4), 4, NewerMetadata.TRUST)
    assert (trusted.problem, trusted.metadata, trusted.checkpoint_id) == ("", None, 4)
    assert "only its header was checked (policy onNewerMetadata: trust)" in trusted.note
    assert judge(NewerFormat(8, 5), 4, NewerMetadata.TRUST).problem.startswith(
        "_metadata is that of checkpoint 5"
    )
    assert judge(NewerFormat(8, 4), 4, NewerMetadata.SKIP).problem.endswith("(policy onNewerMetadata: skip)")


# Names as a _metadata may carry them: schemes, folders and file names made of path-ish characters,
# controls, dots and slashes, so that both the shortcut and its fall-backs to StoragePath.parse run.
_PIECE = st.text(st.sampled_from([*"ab9-_.:/@", "\x00", "\x1f", "\x7f", "\u00e9", " "]), max_size=6)
_URI = st.builds(
    lambda scheme, parts: f"{scheme}{'/'.join(parts)}",
    st.sampled_from(["s3://", "s3a://", "gs://", "file://", "file:/", "/", "ftp://", "s3:/", ""]),
    st.lists(_PIECE, max_size=5),
)


@given(st.lists(_URI, min_size=1, max_size=6))
def test_a_named_absolute_file_is_the_path_parse_makes_of_it_or_the_same_refusal(uris: list[str]) -> None:
    """named_files parses each folder once and checks names by regex: the same places as parsing every
    URI in full, canonically spelled, and a refusal exactly where parsing refuses."""
    files = [NamedFile(uri, FileScope.ABSOLUTE, 1, "op") for uri in uris]
    found = named_files(metadata(*files), SNAPSHOT, ("s3", "s3a", "gs", "file"))
    expected: dict[StoragePath, None] = {}
    for uri in uris:
        try:
            path = StoragePath.parse(uri)
        except StoragePathError:
            assert found.problem.startswith(f"_metadata names {uri[:200]!r}, which is no path"), found
            return
        if path.scheme not in ("s3", "s3a", "gs", "file"):
            assert "allowedSchemes" in found.problem, found
            return
        expected[path.canonical] = None
    assert found.problem == ""
    assert [f.path for f in found.files] == list(expected)
    for f in found.files:  # the parent and name kept on the path are what its text says
        folder, _, name = f.path.path.rpartition("/")
        parent = f.path.parent
        assert (parent.path, parent.authority, f.path.name) == (folder or "/", f.path.authority, name)
        assert f.path.canonical is f.path


@pytest.mark.parametrize(
    "uri",
    ["s3://state/ck/job/shared/x", "s3a://state//ck/./job/shared/x", "s3://state/x", "gs://b/a b/c+d%20"],
)
def test_a_named_path_built_fast_is_the_path_parse_gives(uri: str) -> None:
    """``named_files`` builds a shared file's path from its folder's (``checks._child``): equal, hashed
    alike, with the same parent, name, string and canonical spelling as ``StoragePath.parse``."""
    from webhook.restore.checks import _parse

    folders: dict[str, StoragePath] = {}
    for _ in range(2):
        fast, parsed = _parse(uri, folders), StoragePath.parse(uri).canonical
        assert (fast, hash(fast), str(fast), fast.name) == (parsed, hash(parsed), str(parsed), parsed.name)
        assert fast.parent == parsed.parent and fast.canonical is fast
        assert vars(fast) == {**vars(parsed), "parent": parsed.parent, "name": parsed.name}


def test_a_needed_file_built_fast_is_the_one_the_constructor_makes() -> None:
    from webhook.restore.checks import Needed, _needed

    path = StoragePath.parse("s3://state/ck/job/shared/x")
    fast, made = _needed(path, 7, "op"), Needed(path, 7, "op")
    assert (fast, hash(fast), repr(fast), vars(fast)) == (made, hash(made), repr(made), vars(made))
