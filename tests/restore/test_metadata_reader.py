"""The ``_metadata`` reader on files real Flink wrote (1.20.5 and 2.3.0): read to the end as Flink
reads them, every cut refused with where it ends, the files the handles name listed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.flinktrees import Tree, materialize, relocated, trees
from webhook.restore.metadata import (
    FileScope,
    Metadata,
    NewerFormat,
    UnreadableMetadata,
    metadata_problem,
    read_metadata,
)

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "flink-real"
TREES = trees()


def _shared_files() -> list[Path]:
    return sorted(SHARED.rglob("_metadata")) if SHARED.is_dir() else []


def test_the_fixtures_cover_both_versions_and_every_kind_of_tree() -> None:
    names = {t.name for t in TREES}
    for version in ("1.20.5", "2.3.0"):
        for variant in ("rocksdb-incremental", "rocksdb-file-merging", "hashmap-files"):
            assert f"{version}-{variant}" in names


@pytest.mark.parametrize("path", _shared_files(), ids=lambda p: str(p.relative_to(SHARED)))
def test_real_inline_state_trees_read_to_their_end(path: Path) -> None:
    data = path.read_bytes()
    found = read_metadata(data)
    assert isinstance(found, Metadata), found
    assert (found.end, found.trailing) == (len(data), 0)
    assert found.checkpoint_id == int.from_bytes(data[8:16], "big")
    assert found.version == (4 if "1.20.5" in str(path) else 6)
    assert found.files == ()  # every state handle inline: nothing else to open
    assert found.inline_bytes > 0
    assert found.properties == ("Savepoint" if "/sp-" in str(path) else "Checkpoint")


@pytest.mark.parametrize("each", TREES, ids=lambda t: t.name)
def test_every_metadata_of_a_real_tree_reads_to_its_end_and_names_files_flink_wrote(each: Tree) -> None:
    written = dict(each.files())
    root = str(each.info["root"])
    for rel in each.metadata_files():
        data = (each.folder / rel).read_bytes()
        found = read_metadata(data)
        assert isinstance(found, Metadata), (rel, found)
        assert found.end == len(data), rel
        snapshot = rel.rsplit("/", 1)[0]
        if snapshot.startswith("ck/"):
            assert found.checkpoint_id == int(snapshot.rsplit("chk-", 1)[1])
        assert found.operators >= 3 and found.subtasks >= 4  # source, two keyed aggregations, sink
        assert found.files, rel
        for named in found.files:
            if named.scope is FileScope.EXCLUSIVE:
                where = f"{snapshot}/{named.path}"
            else:
                assert named.path.startswith(root + "/"), named.path
                where = named.path[len(root) + 1 :]
            assert where in written, (rel, named)
            assert named.size <= written[where], (rel, named)
            if "/dstl/" in named.path:  # a changelog file: its first byte, the format, is no state
                assert named.size == written[where] - 1, (rel, named)
            elif named.scope is not FileScope.SEGMENT:
                assert named.size == written[where]  # a file's handle names its whole length


def test_incremental_checkpoints_name_shared_files_and_savepoints_only_their_own() -> None:
    each = next(t for t in TREES if t.name == "2.3.0-rocksdb-incremental")
    top = each.checkpoints()[0]
    chk = read_metadata((each.folder / f"ck/{each.job_id}/chk-{top}/_metadata").read_bytes())
    assert isinstance(chk, Metadata)
    shared = [f for f in chk.files if f.scope is FileScope.ABSOLUTE and "/shared/" in f.path]
    assert shared and all("a shared file" in f.where or "a private file" in f.where for f in shared)
    for kind in ("native", "canonical"):
        rel = f"sp/{each.savepoint(kind)}/_metadata"
        found = read_metadata((each.folder / rel).read_bytes())
        assert isinstance(found, Metadata) and found.properties == "Savepoint"
        assert {f.scope for f in found.files} == {FileScope.EXCLUSIVE}  # self-contained


def test_file_merging_checkpoints_name_segments_of_merged_files() -> None:
    for version in ("1.20.5", "2.3.0"):
        each = next(t for t in TREES if t.name == f"{version}-rocksdb-file-merging")
        rel = f"ck/{each.job_id}/chk-{each.checkpoints()[0]}/_metadata"
        found = read_metadata((each.folder / rel).read_bytes())
        assert isinstance(found, Metadata)
        assert {f.scope for f in found.files} == {FileScope.SEGMENT}
        assert len({f.path for f in found.files}) < len(found.files)  # several segments per file


def _smallest() -> tuple[str, bytes]:
    first = [
        t
        for t in TREES
        if t.info["variant"] in ("rocksdb-incremental", "rocksdb-file-merging", "hashmap-files")
    ]
    candidates = [(f"{t.name}/{r}", (t.folder / r).read_bytes()) for t in first for r in t.metadata_files()]
    return min(candidates, key=lambda c: len(c[1]))


def test_a_cut_at_every_byte_offset_is_refused_naming_where_it_ends() -> None:
    name, data = _smallest()
    properties_at = data.index(b"\xac\xed\x00\x05")  # where the Java-serialized properties start
    operators_at = data.index(b"\x00\x00\x00\x06", 16)  # the operator count (6) after the master states
    places: set[str] = set()
    for cut in range(len(data)):
        found = read_metadata(data[:cut])
        assert isinstance(found, UnreadableMetadata), (name, cut)
        if cut <= 8:
            assert found.reason == (
                "_metadata is empty (0 bytes)" if cut == 0 else f"_metadata is truncated ({cut} bytes)"
            )
            continue
        m = re.fullmatch(r"_metadata ends at byte ([0-9,]+) inside (.+)", found.reason)
        assert m is not None, (cut, found.reason)
        assert int(m.group(1).replace(",", "")) == cut
        place = m.group(2)
        places.add(re.sub(r"[0-9]+", "N", place))
        if cut < 16:
            assert place == "the header"
        elif cut >= properties_at:
            assert place == "the checkpoint properties", cut
        elif cut > operators_at + 4:
            assert place.startswith("operator "), (cut, place)
    assert {
        "the header",
        "the master states",
        "the operator states",
        "the checkpoint properties",
        "operator N's state",
        "operator N's coordinator state",
        "operator N's state (subtask N, managed keyed state)",
        "operator N's state (subtask N, managed keyed state, a shared file)",
    } <= places, places


def test_bytes_after_the_end_are_read_as_flink_reads_them_with_the_count() -> None:
    _, data = _smallest()
    found = read_metadata(data + b"\x00" * 37)
    assert isinstance(found, Metadata)
    assert (found.end, found.trailing) == (len(data), 37)


def test_a_newer_format_version_is_told_with_its_header_id() -> None:
    _, data = _smallest()
    newer = data[:4] + (7).to_bytes(4, "big") + data[8:]
    found = read_metadata(newer)
    assert found == NewerFormat(7, int.from_bytes(data[8:16], "big"))
    assert read_metadata(data[:4] + (1).to_bytes(4, "big") + data[8:]) == UnreadableMetadata(
        "_metadata is in format version 1 (Flink 1.2 and older), which Flink no longer reads"
    )


def test_a_handle_type_flink_does_not_know_is_refused_naming_it() -> None:
    each = next(t for t in TREES if t.name == "2.3.0-hashmap-files")
    data = bytearray((each.folder / f"ck/{each.job_id}/chk-{each.checkpoints()[0]}/_metadata").read_bytes())
    relative = re.search(rb"\x06\x00\x24[0-9a-f-]{36}", bytes(data))  # a relative file handle, its UUID name
    assert relative is not None
    data[relative.start()] = 0x63
    found = read_metadata(bytes(data))
    assert isinstance(found, UnreadableMetadata)
    assert re.fullmatch(
        r"_metadata holds a state handle of type 99, which Flink does not know \(byte [0-9,]+, inside "
        r"operator [0-9]+ \(GroupAggregate\[[0-9]+\]\)'s state \(subtask [0-9]+, managed keyed state\)\)",
        found.reason,
    ), found.reason


def test_the_header_check_alone_still_passes_a_cut_file() -> None:
    """What verify: header keeps: the 16 bytes only (the issue's first finding)."""
    _, data = _smallest()
    assert metadata_problem(data[:16], 4000) == ""
    assert isinstance(read_metadata(data[: len(data) // 2]), UnreadableMetadata)


def test_relocating_a_tree_moves_every_named_file_and_nothing_else(tmp_path: Path) -> None:
    each = next(t for t in TREES if t.name == "1.20.5-rocksdb-incremental")
    url = materialize(each, tmp_path)
    for rel in each.metadata_files():
        moved = read_metadata((tmp_path / rel).read_bytes())
        first = read_metadata((each.folder / rel).read_bytes())
        assert isinstance(moved, Metadata) and isinstance(first, Metadata)
        assert len(moved.files) == len(first.files)
        for a, b in zip(moved.files, first.files, strict=True):
            assert a.path == b.path.replace(str(each.info["root"]), url)
            assert (a.size, a.scope, a.where) == (b.size, b.scope, b.where)
    assert relocated(b"\x00\x03abc", "zzz", "y") == b"\x00\x03abc"


def _generic_backend_files(self: object, count: int, where: str) -> None:
    """An incremental handle's files as the reader read them before ``backend_files``: each name, then
    ``stream_handle`` (the reference the fast path must agree with)."""
    for _ in range(count):
        self.r.utf()  # type: ignore[attr-defined]
        self.stream_handle(where)  # type: ignore[attr-defined]


def test_the_fast_read_of_a_backends_files_says_what_the_general_reader_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``_Serializer.backend_files`` reads file handles (type 2) inline: the same files, and at every cut
    and every damaged byte of an incremental _metadata the same answer, word for word."""
    from tests.support.flinktrees import incremental_metadata
    from webhook.restore import metadata as module

    shared = [f"s3://b/ck/job/shared/{i:04d}-\u00e9" for i in range(3)]
    data = incremental_metadata(7, shared, ["x0", "x1"])
    fast = read_metadata(data)
    assert isinstance(fast, Metadata) and [f.path for f in fast.files][1:4] == shared
    variants = [data[:cut] for cut in range(len(data))]
    # damage: each byte of the shared files' part set to a type byte, a large length, an invalid one
    first = data.index(b"s3://") - 11
    for at in range(first, first + 3 * 60):
        for value in (0x00, 0x01, 0x02, 0x06, 0x0F, 0x7F, 0xC0, 0xFF):
            variants.append(data[:at] + bytes([value]) + data[at + 1 :])
    fast_answers = [read_metadata(v) for v in variants]
    monkeypatch.setattr(module._Serializer, "backend_files", _generic_backend_files)
    assert read_metadata(data) == fast
    assert [read_metadata(v) for v in variants] == fast_answers
