"""Every kind of state handle in a ``_metadata`` real Flink wrote, read by the product's reader to its end.

The trees of tests/fixtures/flink/ beyond the three first ones (issue 36) were each made by real Flink
(bench/_make_flink_fixtures.py) to hold one more family of handles: a source's operator state, merged
operator state that is not empty, a FLIP-27 split enumerator's coordinator state, unaligned checkpoints'
channel state, the changelog state backend's handles, finished operators, a master hook's master state,
and Flink 2.0's format 5.
:func:`tests.support.flinktrees.census` counts what the reader met while reading; each test here says
the tree holds what it was made for and that the reader read every byte of it, as Flink does. (That the
files the handles name are the files Flink wrote is checked for every tree by
tests/restore/test_metadata_reader.py.)
"""

from __future__ import annotations

import re

import pytest

from tests.support.flinktrees import Census, Tree, census, trees
from webhook.restore.metadata import FileScope, Metadata, UnreadableMetadata, read_metadata

TREES = trees()

# What each variant was made to hold (in every checkpoint it kept), beside what every tree holds.
MADE_FOR: dict[str, set[str]] = {
    "sources": {"operator state"},
    "sources-file-merging": {"merged operator state", "segment"},
    "unaligned": {"coordinator state", "operator state", "input channel state", "output channel state"},
    "changelog": {"changelog"},
    "finished": {"finished operator"},
    "masterhook": {"master state"},
}
HOOK = "flink-failover-masterhook"  # bench/flink_hooks/MasterHookMap.java: the checkpoint id, 8 bytes
FORMAT = {"1.20": 4, "2.0": 5, "2.3": 6}  # the format version each Flink writes (docs/flink.md)


def _variant(each: Tree) -> str:
    return str(each.info["variant"])


def _checkpoints(each: Tree) -> list[tuple[str, bytes]]:
    return [
        (
            f"ck/{each.job_id}/chk-{n}/_metadata",
            (each.folder / f"ck/{each.job_id}/chk-{n}/_metadata").read_bytes(),
        )
        for n in each.checkpoints()
    ]


def _counted(each: Tree) -> list[tuple[str, Census]]:
    return [(rel, census((each.folder / rel).read_bytes())) for rel in each.metadata_files()]


NEW = [t for t in TREES if _variant(t) in MADE_FOR]


def test_each_family_of_handles_is_in_a_real_fixture() -> None:
    met: set[str] = set()
    for each in TREES:
        for _, found in _counted(each):
            met |= found.families
    assert {
        "master state",
        "operator state",
        "merged operator state",
        "coordinator state",
        "input channel state",
        "output channel state",
        "changelog",
        "finished operator",
        "incremental keyed state",
        "key groups",
        "savepoint key groups",
        "segment",
        "empty segment",
        "byte stream",
        "file",
        "relative file",
        "format 4",
        "format 5",
        "format 6",
    } <= met, met


@pytest.mark.parametrize("each", NEW, ids=lambda t: t.name)
def test_a_fixture_holds_what_it_was_made_for_in_every_checkpoint(each: Tree) -> None:
    kept = _checkpoints(each)
    assert len(kept) >= 2, each.name  # a checkpoint after the first one: the state went on
    for rel, data in kept:
        found = census(data)
        assert MADE_FOR[_variant(each)] <= found.families, (rel, sorted(found.families))
        assert f"format {FORMAT[each.flink.rsplit('.', 1)[0]]}" in found.families, rel


@pytest.mark.parametrize("each", NEW, ids=lambda t: t.name)
def test_every_metadata_of_a_new_fixture_is_read_to_its_last_byte(each: Tree) -> None:
    for rel in each.metadata_files():
        data = (each.folder / rel).read_bytes()
        found = read_metadata(data)
        assert isinstance(found, Metadata), (rel, found)
        assert (found.end, found.trailing, found.size) == (len(data), 0, len(data)), rel
        assert found.version == FORMAT[each.flink.rsplit(".", 1)[0]]
        assert found.properties == ("Savepoint" if rel.startswith("sp/") else "Checkpoint")
        # One byte fewer is refused: the last field read is the last byte of the file.
        assert isinstance(read_metadata(data[:-1]), UnreadableMetadata), rel


def test_merged_operator_state_of_a_source_names_segments_of_shared_files() -> None:
    for each in (t for t in NEW if _variant(t) == "sources-file-merging"):
        for rel, data in _checkpoints(each):
            found = read_metadata(data)
            assert isinstance(found, Metadata)
            operator = [f for f in found.files if "operator state" in f.where]
            assert operator and {f.scope for f in operator} == {FileScope.SEGMENT}, rel
            assert census(data).types.get(17, 0) > 0  # the merged operator state handle itself


def test_channel_state_names_the_files_of_the_buffers_in_flight() -> None:
    for each in (t for t in NEW if _variant(t) == "unaligned"):
        for rel, data in _checkpoints(each):
            found = read_metadata(data)
            assert isinstance(found, Metadata)
            for side in ("input", "output"):
                assert any(f"{side} channel state" in f.where for f in found.files), (rel, side)


def test_finished_operators_hold_no_state_and_the_rest_is_read_past_them() -> None:
    for each in (t for t in NEW if _variant(t) == "finished"):
        _, data = _checkpoints(each)[0]
        found = read_metadata(data)
        assert isinstance(found, Metadata) and found.end == len(data)
        running = census(data)
        assert "finished operator" in running.families
        assert running.metadata.subtasks < 2 * found.operators  # finished subtasks are not counted


def test_a_master_hook_state_is_read_with_its_identifier_and_size() -> None:
    hooked = [t for t in NEW if _variant(t) == "masterhook"]
    assert {t.flink for t in hooked} == {"1.20.5", "2.0.2", "2.3.0"}
    for each in hooked:
        for rel in each.metadata_files():
            data = (each.folder / rel).read_bytes()
            found = read_metadata(data)
            assert isinstance(found, Metadata), (rel, found)
            assert found.master_states == ((HOOK, 8),), rel
            # The hook's state is the id of the checkpoint (or savepoint) it was taken for, after the
            # identifier (writeUTF) and the state's length.
            state = len(HOOK).to_bytes(2, "big") + HOOK.encode() + (8).to_bytes(4, "big")
            at = data.index(state) + len(state)
            assert data[at : at + 8] == data[8:16], rel  # the checkpoint id of the header
    for each in (t for t in TREES if _variant(t) != "masterhook"):
        found = read_metadata((each.folder / each.metadata_files()[0]).read_bytes())
        assert isinstance(found, Metadata) and found.master_states == (), each.name


def _hook_length(data: bytes, end: int, length: int) -> bytes:
    """``data`` with the length of the hook's 8 bytes of state that end at ``end`` set to ``length``."""
    return data[: end - 12] + length.to_bytes(4, "big") + data[end - 8 :]


def test_a_master_state_flink_would_refuse_is_refused_naming_it() -> None:
    each = next(t for t in NEW if _variant(t) == "masterhook")
    data = (each.folder / f"ck/{each.job_id}/chk-{each.checkpoints()[0]}/_metadata").read_bytes()
    magic = data.index(bytes.fromhex("c96b1696"))
    size = int.from_bytes(data[magic + 4 : magic + 8], "big")
    refused = {
        "without its magic number": data[:magic] + b"\0" + data[magic + 1 :],
        "of 0 bytes": data[: magic + 4] + (0).to_bytes(4, "big") + data[magic + 8 :],
        # The hook's state told one byte longer (it would end past the master state) or shorter.
        "whose content is cut short": _hook_length(data, magic + 8 + size, 9),
        "with trailing bytes": _hook_length(data, magic + 8 + size, 7),
    }
    for why, bad in refused.items():
        found = read_metadata(bad)
        assert isinstance(found, UnreadableMetadata), why
        assert f"holds a master state {why}" in found.reason and "inside master state 1" in found.reason


def _cut_places(data: bytes) -> set[str]:
    places: set[str] = set()
    for cut in range(16, len(data)):
        found = read_metadata(data[:cut])
        assert isinstance(found, UnreadableMetadata), cut
        m = re.fullmatch(r"_metadata ends at byte ([0-9,]+) inside (.+)", found.reason)
        assert m is not None and int(m.group(1).replace(",", "")) == cut, (cut, found.reason)
        places.add(re.sub(r"[0-9]+", "N", re.sub(r" \(.*?\)'s", "'s", m.group(2), count=1)))
    return places


@pytest.mark.parametrize(
    "each", [t for t in NEW if _variant(t) in ("unaligned", "sources", "masterhook")], ids=lambda t: t.name
)
def test_a_cut_anywhere_in_a_new_family_is_refused_naming_it(each: Tree) -> None:
    _, data = _checkpoints(each)[0]
    places = _cut_places(data)
    wanted = {"operator N's state (subtask N, managed operator state)"}
    if _variant(each) == "masterhook":
        wanted = {"the master states", "master state N"}
    if _variant(each) == "unaligned":
        wanted |= {
            "operator N's coordinator state",
            "operator N's state (subtask N, input channel state)",
            "operator N's state (subtask N, output channel state)",
        }
    assert wanted <= places, sorted(places)
