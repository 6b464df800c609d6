"""The real-Flink trees of tests/fixtures/flink/, made again wherever a test wants them.

Each fixture keeps every ``_metadata`` Flink wrote and ``files.tsv``, the other files with their sizes
(tests/fixtures/flink/README.md). :func:`materialize` writes the tree under a root (a local directory or
an fsspec URL such as ``s3://bucket/prefix``): the ``_metadata`` files with the root Flink wrote into
their handles replaced by the new one, every other file again with its size (zero bytes: only names and
sizes are checked before a restore).

The replacement knows nothing of the product's reader: a Java ``writeUTF`` string is a 2-byte length
and its bytes, so every string that starts with the old root gets the new root and a new length.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.repo import REPO
from webhook.restore.metadata import Metadata

FIXTURES = REPO / "tests" / "fixtures" / "flink"


@dataclass(frozen=True)
class Tree:
    name: str  # "2.3.0-rocksdb-incremental"
    folder: Path
    info: dict[str, Any]

    @property
    def job_id(self) -> str:
        return str(self.info["jobId"])

    @property
    def flink(self) -> str:
        return str(self.info["flink"])

    def savepoint(self, kind: str) -> str:
        """The savepoint directory's name, by format (canonical, native)."""
        return str(self.info["savepoints"][kind])

    def metadata_files(self) -> list[str]:
        return sorted(str(p.relative_to(self.folder)) for p in self.folder.rglob("_metadata"))

    def checkpoints(self) -> list[int]:
        """chk-N numbers, highest first."""
        ids = [int(p.parent.name[4:]) for p in self.folder.glob(f"ck/{self.job_id}/chk-*/_metadata")]
        return sorted(ids, reverse=True)

    def files(self) -> list[tuple[str, int]]:
        rows = (line.split("\t") for line in (self.folder / "files.tsv").read_text().splitlines() if line)
        return [(path, int(size)) for path, size in rows]

    def metadata(self, rel: str, root: str) -> bytes:
        """A ``_metadata`` with the root moved to ``root`` (a URL without a trailing slash)."""
        return relocated((self.folder / rel).read_bytes(), str(self.info["root"]), root)


def trees() -> list[Tree]:
    out = []
    for folder in sorted(FIXTURES.iterdir()):
        if (folder / "tree.json").is_file():
            out.append(Tree(folder.name, folder, json.loads((folder / "tree.json").read_text())))
    return out


def tree(name: str) -> Tree:
    for each in trees():
        if each.name == name:
            return each
    raise KeyError(name)


def relocated(data: bytes, old_root: str, new_root: str) -> bytes:
    """``data`` with every writeUTF string that starts with ``old_root`` starting with ``new_root``."""
    old, new = old_root.encode(), new_root.encode()
    out = bytearray()
    pos = 0
    for start in _occurrences(data, old):
        if start < 2 or start - 2 < pos:
            continue
        length = int.from_bytes(data[start - 2 : start], "big")
        if length < len(old) or start + length > len(data):
            continue
        out += data[pos : start - 2]
        text = new + data[start + len(old) : start + length]
        out += len(text).to_bytes(2, "big") + text
        pos = start + length
    out += data[pos:]
    return bytes(out)


def _occurrences(data: bytes, needle: bytes) -> Iterator[int]:
    start = data.find(needle)
    while start != -1:
        yield start
        start = data.find(needle, start + 1)


def materialize(each: Tree, root: Path, skip: frozenset[str] = frozenset()) -> str:
    """Write ``each`` under the local directory ``root``, leaving out the files in ``skip`` (paths
    relative to the tree); the root's URL as Flink writes it (``file:/...``)."""
    url = "file:" + str(root)
    for rel, blob in _blobs(each, url, skip):
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(blob)
    return url


def upload(each: Tree, fs: Any, root: str, skip: frozenset[str] = frozenset()) -> str:
    """Write ``each`` under ``root`` (``bucket/prefix``) of the S3 filesystem ``fs``; the root's URL."""
    url = f"s3://{root}"
    fs.pipe({f"{root}/{rel}": blob for rel, blob in _blobs(each, url, skip)})
    return url


def _blobs(each: Tree, url: str, skip: frozenset[str]) -> Iterator[tuple[str, bytes]]:
    for rel in each.metadata_files():
        if rel not in skip:
            yield rel, each.metadata(rel, url)
    for rel, size in each.files():
        if rel not in skip:
            yield rel, b"\0" * size


def incremental_metadata(
    checkpoint_id: int, shared: list[str], exclusive: list[str], size: int = 16
) -> bytes:
    """A format-6 ``_metadata`` (Flink 2.3) of one operator whose single subtask holds an incremental
    keyed state naming the ``shared`` files (full URLs) and the ``exclusive`` ones (names in the
    checkpoint's own directory), each of ``size`` bytes: the layout of the real trees above, at any
    number of files (bench/restore_trips.py). The properties are those real Flink 2.3.0 wrote."""

    def utf(text: str) -> bytes:
        raw = text.encode()
        return len(raw).to_bytes(2, "big") + raw

    def i32(n: int) -> bytes:
        return n.to_bytes(4, "big", signed=True)

    def i64(n: int) -> bytes:
        return n.to_bytes(8, "big", signed=True)

    def file_handle(url: str) -> bytes:
        return b"\x02" + i64(size) + utf(url)

    def relative(name: str) -> bytes:
        return b"\x06" + utf(name) + i64(size)

    keyed = b"\x0b" + i64(checkpoint_id) + utf("2ae3bd9e-6e80-4a57-9a8f-7a1c2a0b7f11") + i32(0) + i32(128)
    keyed += i64(size * (len(shared) + len(exclusive)))
    keyed += relative(exclusive[0]) if exclusive else b"\x00"  # the backend's own metadata
    keyed += i32(len(shared)) + b"".join(utf(f"{i:06d}.sst") + file_handle(u) for i, u in enumerate(shared))
    rest = exclusive[1:]
    keyed += i32(len(rest)) + b"".join(utf(f"MANIFEST-{i:06d}") + relative(n) for i, n in enumerate(rest))
    keyed += utf("4f5a6b7c-0000-0000-0000-000000000000")
    subtask = i32(0) + i32(0) + keyed + b"\x00" + i32(0) + i32(0)
    operator = utf("GroupAggregate[2]") + utf("") + i64(1) + i64(2) + i32(1) + i32(128) + b"\x00"
    operator += i32(1) + i32(0) + subtask
    body = bytes.fromhex("4960672d") + i32(6) + i64(checkpoint_id) + i32(0) + i32(1) + operator
    real = next((FIXTURES / "2.3.0-hashmap-files").rglob("chk-*/_metadata")).read_bytes()
    return body + real[real.index(bytes.fromhex("aced0005")) :]


@dataclass(frozen=True)
class Census:
    """What one ``_metadata`` holds, as the product's reader met it while reading it to its end."""

    metadata: Metadata
    types: dict[int, int]  # handle type byte -> how many (MetadataV2V3SerializerBase's numbering)
    families: frozenset[str]  # "operator state", "coordinator state", "input channel state", ...


# Handle type bytes -> the family the tests name (the same in 1.18 to 2.3).
FAMILIES = {
    1: "byte stream",
    2: "file",
    3: "key groups",
    4: "operator state",
    5: "incremental keyed state",
    6: "relative file",
    7: "savepoint key groups",
    8: "changelog",
    9: "changelog bytes",
    10: "changelog file",
    11: "incremental keyed state",
    12: "key groups",
    13: "changelog file",
    14: "changelog",
    15: "segment",
    16: "empty segment",
    17: "merged operator state",
}


def census(data: bytes) -> Census:
    """Read ``data`` with the product's reader (``webhook/restore/metadata.py``), counting on the way
    each handle type, master state, coordinator state, channel state and finished operator or subtask it
    reads past: a fixture is then checked to hold what it was made for, by the code that reads it."""
    from webhook.restore import metadata as m

    types: Counter[int] = Counter()
    families: set[str] = set()

    class Counting(m._Serializer):
        declared: int | None = None
        seen = 0

        def _peek(self, size: int = 1) -> int:
            r = self.r
            return int.from_bytes(r.data[r.pos : r.pos + size], "big", signed=size > 1)

        def master_state(self) -> None:
            families.add("master state")
            super().master_state()

        def operator_state(self, number: int) -> None:
            self.declared, self.seen = None, 0
            super().operator_state(number)
            if self.declared is not None and self.declared < 0:
                families.add("finished operator")
            elif self.declared is not None and self.seen < self.declared:
                families.add("finished subtask")

        def subtask_state(self, label: str, index: int) -> None:
            self.seen += 1
            super().subtask_state(label, index)

        def operator_handle(self, where: str) -> None:
            types[self._peek()] += 1
            super().operator_handle(where)

        def keyed_handle(self, where: str) -> None:
            types[self._peek()] += 1
            super().keyed_handle(where)

        def stream_handle(self, where: str, coordinator: bool = False) -> int:
            kind = super().stream_handle(where, coordinator)
            types[kind] += 1
            if coordinator:
                self.declared = self._peek(4)  # the subtask count follows: -1 when all finished
                if kind:
                    families.add("coordinator state")
            return kind

        def channel_states(self, where: str, input_side: bool) -> None:
            if self._peek(4) > 0:
                families.add("input channel state" if input_side else "output channel state")
            super().channel_states(where, input_side)

    problem = m.metadata_problem(data[: m.METADATA_HEADER_BYTES], len(data))
    if problem:
        raise ValueError(problem)
    version = int.from_bytes(data[4:8], "big")
    found = Counting(version, m._Reader(data, 8)).metadata()
    types.pop(0, None)
    families |= {FAMILIES[t] for t in types}
    families.add(f"format {version}")
    return Census(found, dict(types), frozenset(families))
