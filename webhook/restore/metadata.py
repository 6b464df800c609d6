"""Flink's ``_metadata`` file, read from its bytes as Flink reads it (no I/O: the caller reads them).

Pure: ``restore/storage/search.py`` hands it the bytes it read. Flink restores by reading the whole file
(``Checkpoints.loadCheckpointMetadata``): the magic, the format version, then that version's serializer
(``MetadataV2V3SerializerBase`` and ``MetadataV<N>Serializer`` in flink-runtime): the checkpoint id,
the master states, the operator states with each subtask's state handles, and from version 4 on the
checkpoint properties as a Java-serialized object. A file that ends early, or holds a handle type Flink
does not know, fails the job on the new cluster; :func:`read_metadata` says where, and lists the files
the handles name so the caller can check they exist. Layouts as read in Flink 1.20.5's and 2.3.0's
flink-runtime (the handle type bytes are the same in both), docs/flink.md "What is checked".
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field as default_factory_field
from enum import StrEnum

from webhook.common.flink_reads import HandleMet

# Flink's checkpoint metadata file (org.apache.flink.runtime.checkpoint.Checkpoints) starts with this
# 4-byte big-endian magic number, then a 4-byte metadata version (serializers V1..V7 so far: 4 from
# Flink 1.20, 6 from Flink 2.3, measured), then the serializer's first field: the checkpoint id as an
# 8-byte big-endian long (MetadataV2V3SerializerBase, every version since Flink 1.3).
METADATA_MAGIC = 0x4960672D
METADATA_HEADER_BYTES = 16  # magic, version, checkpoint id: the one small read per _metadata
METADATA_MIN_BYTES = 8  # magic and version: a file that ends there is truncated
MAX_METADATA_VERSION = 64  # newer Flink adds versions; far beyond the known ones is not a version
FIRST_VERSION_WITH_ID = 2  # the V1 format (Flink 1.2 and older) is not read for an id
NEWEST_KNOWN_VERSION = 6  # Flink 2.3 writes 6; a released 7 has not been read yet


def metadata_problem(head: bytes, size: int | None) -> str:
    """Why a ``_metadata`` file whose first bytes are ``head`` is not a complete Flink metadata file
    ("" when it can be one). An empty or truncated file (a crash while it was written, a copy cut
    short) passes an existence check, and restoring it fails the job on the new cluster."""
    if size == 0 or not head:
        return "_metadata is empty (0 bytes)"
    if len(head) < METADATA_MIN_BYTES or (size is not None and size <= METADATA_MIN_BYTES):
        return f"_metadata is truncated ({size if size is not None else len(head)} bytes)"
    magic = int.from_bytes(head[:4], "big")
    if magic != METADATA_MAGIC:
        return (
            f"_metadata is not a Flink metadata file (starts with 0x{magic:08x}, not 0x{METADATA_MAGIC:08x})"
        )
    version = int.from_bytes(head[4:8], "big", signed=True)
    if not 0 < version <= MAX_METADATA_VERSION:
        return f"_metadata has no valid Flink metadata version ({version})"
    return ""


def metadata_checkpoint_id(head: bytes) -> int | None:
    """The checkpoint id a complete ``_metadata`` header carries (bytes 8-16), None when it has none
    readable: a header of fewer than 16 bytes, the V1 format, or a negative number."""
    if len(head) < METADATA_HEADER_BYTES or metadata_problem(head, None):
        return None
    if int.from_bytes(head[4:8], "big", signed=True) < FIRST_VERSION_WITH_ID:
        return None
    value = int.from_bytes(head[8:16], "big", signed=True)
    return value if value >= 0 else None


class FileScope(StrEnum):
    """Where a named file lives, as Flink decides it (the folder is the path's own)."""

    EXCLUSIVE = "exclusive"  # relative to the snapshot's own directory (chk-N/ or the savepoint's)
    ABSOLUTE = "file"  # a full path: exclusive files, shared files of incremental checkpoints
    SEGMENT = "segment"  # a segment of a merged file (file merging, Flink 1.20+)


@dataclass(frozen=True)
class NamedFile:
    """A file a state handle names: the restore opens it."""

    path: str  # as Flink wrote it: a full URI or path, or (EXCLUSIVE) a name in the snapshot's directory
    scope: FileScope
    size: int  # bytes the handle reads from it: the file's length, or a segment's end (offset + size)
    where: str  # which state holds it ("operator 2 subtask 1 managed keyed state")


@dataclass(frozen=True)
class Metadata:
    """A ``_metadata`` Flink can load, read to its end."""

    version: int
    checkpoint_id: int
    operators: int
    subtasks: int  # subtask states with state (finished ones not counted)
    files: tuple[NamedFile, ...]
    inline_bytes: int  # state kept in the file itself (byte stream handles)
    end: int  # where Flink stops reading
    size: int  # the file's length
    properties: str = ""  # the checkpoint properties' type (version 4 on): "Checkpoint", "Savepoint", ...
    handles: tuple[HandleMet, ...] = ()  # each handle type held, once, in the order first met
    master_states: tuple[tuple[str, int], ...] = ()  # each master hook's (identifier, bytes of its state)

    @property
    def trailing(self) -> int:
        """Bytes after the end: Flink never reads them (a warning, not a refusal)."""
        return self.size - self.end


@dataclass(frozen=True)
class UnreadableMetadata:
    """A ``_metadata`` Flink cannot load, and why, as the decision tells it."""

    reason: str  # "_metadata ends at byte 4,000 inside operator 3's state (subtask 1, managed keyed state)"


@dataclass(frozen=True)
class NewerFormat:
    """A format version newer than this reader knows: only its header was read."""

    version: int
    checkpoint_id: int | None


MetadataRead = Metadata | UnreadableMetadata | NewerFormat


def read_metadata(data: bytes) -> MetadataRead:
    """Read a whole ``_metadata`` as Flink does; what it holds, or why Flink cannot load it."""
    problem = metadata_problem(data[:METADATA_HEADER_BYTES], len(data))
    if problem:
        return UnreadableMetadata(problem)
    version = int.from_bytes(data[4:8], "big", signed=True)
    if version == 1:
        return UnreadableMetadata(
            "_metadata is in format version 1 (Flink 1.2 and older), which Flink no longer reads"
        )
    if version > NEWEST_KNOWN_VERSION:
        return NewerFormat(version, metadata_checkpoint_id(data))
    reader = _Reader(data, 8)
    try:
        return _Serializer(version, reader).metadata()
    except _Short:
        return UnreadableMetadata(f"_metadata ends at byte {len(data):,} inside {reader.place()}")
    except _Invalid as exc:
        return UnreadableMetadata(f"_metadata {exc} (byte {reader.start:,}, inside {reader.place()})")


class _Short(Exception):
    """The bytes end before the field does."""


class _Invalid(Exception):
    """A value Flink refuses (a wrong magic number, a negative count, an unknown handle type)."""


_U8, _I8, _I16, _U16, _I32, _I64 = (struct.Struct(f">{c}") for c in "BbhHiq")


class _Reader:
    """Java's DataInputStream over bytes, with where it is (for the reason told)."""

    def __init__(self, data: bytes, pos: int = 0, end: int | None = None) -> None:
        self.data = data
        self.pos = pos
        self.start = pos  # the field being read
        self.end = len(data) if end is None else end
        self.context: list[str] = ["the header"]

    def place(self) -> str:
        return self.context[-1]

    def take(self, n: int) -> bytes:
        self.start = pos = self.pos
        if n < 0:
            raise _Invalid(f"holds a negative length ({n})")
        if pos + n > self.end:
            raise _Short
        self.pos = pos + n
        return self.data[pos : pos + n]

    # Fixed-size fields are unpacked where they stand (no slice per field: a 100,000-file _metadata
    # is some 400,000 of them).
    def _fixed(self, shape: struct.Struct) -> int:
        self.start = pos = self.pos
        if pos + shape.size > self.end:
            raise _Short
        self.pos = pos + shape.size
        return int(shape.unpack_from(self.data, pos)[0])

    def u8(self) -> int:
        return self._fixed(_U8)

    def i8(self) -> int:
        return self._fixed(_I8)

    def i16(self) -> int:
        return self._fixed(_I16)

    def u16(self) -> int:
        return self._fixed(_U16)

    def i32(self) -> int:
        return self._fixed(_I32)

    def i64(self) -> int:
        return self._fixed(_I64)

    def skip_longs(self, n: int) -> None:
        if n < 0:
            self.start = self.pos
            raise _Invalid(f"holds a negative count ({n})")
        self.take(8 * n)

    def utf(self) -> str:
        """Java's writeUTF: a 2-byte length, then modified UTF-8."""
        self.start = pos = self.pos
        if pos + 2 > self.end:
            raise _Short
        n = _U16.unpack_from(self.data, pos)[0]
        self.start = pos = pos + 2
        if pos + n > self.end:
            self.pos = pos
            raise _Short
        self.pos = pos + n
        raw = self.data[pos : pos + n]
        try:
            return raw.replace(b"\xc0\x80", b"\x00").decode("utf-8", errors="surrogatepass")
        except UnicodeDecodeError:
            raise _Invalid("holds a malformed string") from None


@dataclass
class _Found:
    files: list[NamedFile]
    inline: int = 0
    subtasks: int = 0
    handles: dict[int, str] = default_factory_field(default_factory=dict)  # type byte -> where first met
    masters: list[tuple[str, int]] = default_factory_field(default_factory=list)  # (identifier, bytes)

    def met(self, kind: int, where: str) -> bool:
        self.handles.setdefault(kind, where)
        return True


# Handle type bytes (MetadataV2V3SerializerBase, the same in 1.20.5 and 2.3.0).
_NULL = 0
_BYTE_STREAM = 1
_FILE = 2
_KEY_GROUPS = 3
_OPERATOR = 4
_INCREMENTAL = 5
_RELATIVE = 6
_SAVEPOINT_KEY_GROUPS = 7
_CHANGELOG = 8
_CHANGELOG_BYTES = 9
_CHANGELOG_FILE = 10
_INCREMENTAL_V2 = 11
_KEY_GROUPS_V2 = 12
_CHANGELOG_FILE_V2 = 13
_CHANGELOG_V2 = 14
_SEGMENT = 15
_EMPTY_SEGMENT = 16
_SEGMENT_OPERATOR = 17
_MASTER_STATE_MAGIC = 0xC96B1696
_OPERATOR_MODES = 3  # OperatorStateHandle.Mode: SPLIT_DISTRIBUTE, UNION, BROADCAST
_CHANNEL_V1_INPUT, _CHANNEL_V1_OUTPUT, _CHANNEL_MERGED_INPUT, _CHANNEL_MERGED_OUTPUT = 1, 2, 3, 4


class _Serializer:
    """One format version's reading (V2: Flink 1.3-1.10; V3: 1.11+; V4: + properties, 1.16+;
    V5: + operator name and uid, 2.0+; V6: channel state handles of the second kind, 2.1+)."""

    def __init__(self, version: int, reader: _Reader) -> None:
        self.version = version
        self.r = reader
        self.found = _Found([])

    def metadata(self) -> Metadata:
        r = self.r
        r.context = ["the header"]
        checkpoint_id = r.i64()
        if checkpoint_id < 0:
            raise _Invalid(f"holds an invalid checkpoint id ({checkpoint_id})")
        for index in range(self._count("master states")):
            r.context = [f"master state {index + 1}"]
            self.master_state()
        operators = self._count("operator states")
        for index in range(operators):
            r.context = [f"operator {index + 1}'s state"]
            self.operator_state(index + 1)
        properties = ""
        if self.version >= 4:
            r.context = ["the checkpoint properties"]
            properties = _JavaObjects(r).checkpoint_type()
        f = self.found
        return Metadata(
            self.version, checkpoint_id, operators, f.subtasks, tuple(f.files), f.inline, r.pos, len(r.data),
            properties, tuple(HandleMet(code, where) for code, where in f.handles.items()),
            tuple(f.masters),
        )  # fmt: skip

    def _count(self, what: str) -> int:
        """How many ``what`` follow (an int), read in their own context; a negative count is invalid."""
        self.r.context = [f"the {what}"]
        count = self.r.i32()
        if count < 0:
            raise _Invalid(f"holds a negative number of {what} ({count})")
        return count

    def master_state(self) -> None:
        r = self.r
        if r.i32() & 0xFFFFFFFF != _MASTER_STATE_MAGIC:
            raise _Invalid("holds a master state without its magic number")
        size = r.i32()
        if size <= 0:
            raise _Invalid(f"holds a master state of {size} bytes")
        blob = r.take(size)
        inner = _Reader(blob)
        try:
            inner.i32()  # the hook serializer's version
            name = inner.utf()  # the hook's identifier
            state = len(inner.take(inner.i32()))
        except (_Short, _Invalid):
            raise _Invalid("holds a master state whose content is cut short") from None
        if inner.pos != len(blob):
            raise _Invalid("holds a master state with trailing bytes")
        self.found.masters.append((name, state))

    def operator_state(self, number: int) -> None:
        r = self.r
        name = ""
        if self.version >= 5:
            name = r.utf()
            r.utf()  # uid
        label = f"operator {number}" + (f" ({name[:80]})" if name else "")
        r.context = [f"{label}'s state"]
        r.i64()  # operator id
        r.i64()
        r.i32()  # parallelism
        r.i32()  # max parallelism
        if self.version == 2:
            r.i32()  # the chain length, unused
            subtasks = r.i32()
            for _ in range(max(subtasks, 0)):
                index = r.i32()
                self.subtask_state(label, index)
            return
        coordinator = self.stream_handle(f"{label}'s coordinator state", coordinator=True)
        subtasks = r.i32()
        if subtasks < 0:
            if coordinator:
                raise _Invalid("holds a fully finished operator with coordinator state")
            return
        for _ in range(subtasks):
            index = r.i32()
            if index < 0:
                continue  # a finished subtask: nothing follows
            self.subtask_state(label, index)

    def subtask_state(self, label: str, index: int) -> None:
        r = self.r
        where = f"{label}'s state (subtask {index}"
        r.context = [f"{where})"]
        self.found.subtasks += 1
        if self.version == 2:
            r.i64()  # the state's duration, unused
            if r.i32() > 0:
                raise _Invalid("holds legacy state (Flink 1.1 and older), which Flink no longer reads")
        if r.i32() != 0:
            self.operator_handle(f"{where}, managed operator state)")
        if r.i32() != 0:
            self.operator_handle(f"{where}, raw operator state)")
        self.keyed_handle(f"{where}, managed keyed state)")
        self.keyed_handle(f"{where}, raw keyed state)")
        if self.version >= 3:
            self.channel_states(f"{where}, input channel state)", input_side=True)
            self.channel_states(f"{where}, output channel state)", input_side=False)

    # --- state handles -------------------------------------------------------------------------------
    def operator_handle(self, where: str) -> None:
        r = self.r
        r.context = [where]
        kind = r.i8()
        if kind == _NULL:
            return
        if kind not in (_OPERATOR, _SEGMENT_OPERATOR):
            raise _Invalid(f"holds an operator state handle of type {kind}, which Flink does not know")
        self.found.met(kind, where)
        for _ in range(max(r.i32(), 0)):
            r.utf()
            mode = r.i8()
            if not 0 <= mode < _OPERATOR_MODES:
                raise _Invalid(f"holds an operator state distribution mode {mode}")
            r.skip_longs(r.i32())
        if kind == _SEGMENT_OPERATOR:
            r.utf()  # the task-owned directory
            r.utf()  # the shared directory
            r.u8()  # empty or not
            if self.stream_handle(where) not in (_SEGMENT, _EMPTY_SEGMENT):
                raise _Invalid("holds a merged operator state without its segment")
            return
        self.stream_handle(where)

    def keyed_handle(self, where: str) -> None:
        r = self.r
        r.context = [where]
        kind = r.i8()
        if kind == _NULL:
            return
        self.found.met(kind, where)
        if kind in (_KEY_GROUPS, _KEY_GROUPS_V2, _SAVEPOINT_KEY_GROUPS):
            r.i32()
            r.skip_longs(r.i32())
            self.stream_handle(where)
            if kind == _KEY_GROUPS_V2:
                r.utf()  # the handle's id
        elif kind in (_INCREMENTAL, _INCREMENTAL_V2):
            r.i64()  # the checkpoint that wrote it
            r.utf()  # the backend's id
            r.i32()
            r.i32()
            if kind == _INCREMENTAL_V2:
                r.i64()  # checkpointed size
            self.stream_handle(f"{where[:-1]}, its metadata)")
            for part in ("shared", "private"):
                self.backend_files(max(r.i32(), 0), f"{where[:-1]}, a {part} file)")
            if kind == _INCREMENTAL_V2:
                r.utf()
        elif kind in (_CHANGELOG, _CHANGELOG_V2):
            r.i32()
            r.i32()
            r.i64()
            for _ in range(max(r.i32(), 0)):
                self.keyed_handle(where)
            for _ in range(max(r.i32(), 0)):
                self.keyed_handle(where)
            r.i64()
            if kind == _CHANGELOG_V2:
                r.i64()
            r.utf()
        elif kind == _CHANGELOG_BYTES:
            r.i32()
            r.i32()
            r.i64()
            r.i64()
            for _ in range(max(r.i32(), 0)):
                r.i32()
                self.found.inline += len(r.take(r.i32()))
            r.utf()
        elif kind in (_CHANGELOG_FILE, _CHANGELOG_FILE_V2):
            r.i32()
            r.i32()
            for _ in range(max(r.i32(), 0)):
                r.i64()
                self.stream_handle(where)
            r.i64()
            r.i64()
            r.utf()
            if kind == _CHANGELOG_FILE_V2:
                r.utf()
        else:
            raise _Invalid(f"holds a keyed state handle of type {kind}, which Flink does not know")
        r.context = [where]

    def backend_files(self, count: int, where: str) -> None:
        """An incremental handle's ``count`` files: each its name in the backend's local directory,
        then its stream handle. A file handle (type 2: a shared file's full path, 10,000s of them) is
        read here as ``stream_handle`` reads it, field for field; any other type by ``stream_handle``."""
        r = self.r
        context = [where]
        data, end = r.data, r.end
        files = self.found.files
        unpack_u16, unpack_i64 = _U16.unpack_from, _I64.unpack_from
        met: object = None  # the file handle type noted (once: only its first place is kept)
        for _ in range(count):
            r.utf()  # the file's name in the backend's local directory
            pos = r.pos
            # the fast path needs the type byte, the size and the path's length before the end
            if pos + 11 > end or data[pos] != _FILE:
                self.stream_handle(where)
                continue
            r.context = context
            if met is None:
                met = self.found.met(_FILE, where)
            size = unpack_i64(data, pos + 1)[0]
            length = unpack_u16(data, pos + 9)[0]
            start = pos + 11
            if start + length > end:
                r.pos = start
                r.start = start
                raise _Short
            raw = data[start : start + length]
            r.pos = start + length
            r.start = start
            try:
                path = raw.replace(b"\xc0\x80", b"\x00").decode("utf-8", errors="surrogatepass")
            except UnicodeDecodeError:
                raise _Invalid("holds a malformed string") from None
            if size < 0:
                raise _Invalid(f"names {path[:200]} with a negative size ({size})")
            files.append(NamedFile(path, FileScope.ABSOLUTE, size, where))

    def stream_handle(self, where: str, coordinator: bool = False) -> int:
        """Read one stream state handle; its type byte (0: none)."""
        r = self.r
        r.context = [where]
        kind = r.u8()
        if kind == _NULL:
            return kind
        if coordinator and kind != _BYTE_STREAM:
            raise _Invalid(f"holds coordinator state of handle type {kind}, not the bytes Flink expects")
        self.found.met(kind, where)
        if kind == _FILE:
            size = r.i64()
            self._named(r.utf(), FileScope.ABSOLUTE, size, where)
        elif kind == _BYTE_STREAM:
            r.utf()
            self.found.inline += len(r.take(r.i32()))
        elif kind == _RELATIVE:
            name = r.utf()
            self._named(name, FileScope.EXCLUSIVE, r.i64(), where)
        elif kind == _KEY_GROUPS:
            r.i32()
            r.skip_longs(r.i32())
            self.stream_handle(where)
        elif kind == _SEGMENT:
            start = r.i64()
            size = r.i64()
            r.i32()  # the scope
            path = r.utf()
            r.utf()  # the logical file's id
            self._named(path, FileScope.SEGMENT, start + size, where)
        elif kind != _EMPTY_SEGMENT:
            raise _Invalid(f"holds a state handle of type {kind}, which Flink does not know")
        return kind

    def channel_states(self, where: str, input_side: bool) -> None:
        r = self.r
        r.context = [where]
        for _ in range(max(r.i32(), 0)):
            kind = (_CHANNEL_V1_INPUT if input_side else _CHANNEL_V1_OUTPUT) if self.version < 6 else r.u8()
            if kind in (_CHANNEL_V1_INPUT, _CHANNEL_V1_OUTPUT) and kind == (
                _CHANNEL_V1_INPUT if input_side else _CHANNEL_V1_OUTPUT
            ):
                r.i32()  # subtask
                r.i32()  # gate / partition
                r.i32()  # channel / subpartition
                r.skip_longs(r.i32())
                r.i64()
                self.stream_handle(where)
            elif kind == (_CHANNEL_MERGED_INPUT if input_side else _CHANNEL_MERGED_OUTPUT):
                r.i32()
                r.i64()
                self.stream_handle(where)
                r.take(r.i32())
            else:
                raise _Invalid(f"holds a channel state handle of type {kind}, which Flink does not know")
            r.context = [where]

    def _named(self, path: str, scope: FileScope, size: int, where: str) -> None:
        if size < 0:
            raise _Invalid(f"names {path[:200]} with a negative size ({size})")
        self.found.files.append(NamedFile(path, scope, size, where))


# Java object serialization (java.io.ObjectStreamConstants), as much as CheckpointProperties needs.
_STREAM_MAGIC, _STREAM_VERSION = 0xACED, 5
_TC_NULL, _TC_REFERENCE, _TC_CLASSDESC, _TC_OBJECT, _TC_STRING, _TC_ARRAY = 0x70, 0x71, 0x72, 0x73, 0x74, 0x75
_TC_CLASS, _TC_BLOCKDATA, _TC_ENDBLOCKDATA, _TC_RESET, _TC_BLOCKDATALONG = 0x76, 0x77, 0x78, 0x79, 0x7A
_TC_LONGSTRING, _TC_PROXYCLASSDESC, _TC_ENUM = 0x7C, 0x7D, 0x7E
_SC_WRITE_METHOD, _SC_SERIALIZABLE, _SC_EXTERNALIZABLE, _SC_BLOCK_DATA = 0x01, 0x02, 0x04, 0x08
_PRIMITIVE_SIZES = {"B": 1, "C": 2, "D": 8, "F": 4, "I": 4, "J": 8, "S": 2, "Z": 1}
_MAX_DEPTH = 32


@dataclass
class _ClassDesc:
    name: str
    flags: int
    fields: list[tuple[str, str]]  # (type code, name)
    parent: _ClassDesc | None


class _JavaObjects:
    """Reads one Java-serialized object (ObjectInputStream's grammar) and keeps the strings it meets."""

    def __init__(self, reader: _Reader) -> None:
        self.r = reader
        self.handles: list[object] = []
        self.strings: dict[str, str] = {}  # field name -> string value, for the checkpoint type

    def checkpoint_type(self) -> str:
        """Read the properties object; the name of its snapshot type ("Checkpoint", "Savepoint", ...)."""
        r = self.r
        if r.u16() != _STREAM_MAGIC or r.i16() != _STREAM_VERSION:
            raise _Invalid("holds checkpoint properties that are not a Java object stream")
        self.content(0)
        return self.strings.get("name", "")

    def content(self, depth: int) -> object:
        r = self.r
        if depth > _MAX_DEPTH:
            raise _Invalid("holds checkpoint properties nested too deep")
        tag = r.u8()
        readers: dict[int, Callable[[int], object]] = {
            _TC_NULL: lambda _d: None,
            _TC_REFERENCE: lambda _d: self.reference(),
            _TC_CLASSDESC: self.class_desc_body,
            _TC_PROXYCLASSDESC: self.proxy_desc_body,
            _TC_OBJECT: self.object_body,
            _TC_STRING: lambda _d: self.string(r.u16()),
            _TC_LONGSTRING: lambda _d: self.string(r.i64()),
            _TC_ENUM: self.enum_body,
            _TC_ARRAY: self.array_body,
            _TC_CLASS: lambda d: self.new_handle(self.class_desc(d + 1)),
            _TC_BLOCKDATA: lambda _d: r.take(r.u8()),
            _TC_BLOCKDATALONG: lambda _d: r.take(r.i32()),
            _TC_RESET: lambda _d: self.handles.clear(),
        }
        read = readers.get(tag)
        if read is None:
            raise _Invalid(f"holds checkpoint properties with Java stream tag 0x{tag:02x}")
        return read(depth)

    def new_handle(self, value: object) -> object:
        self.handles.append(value)
        return value

    def reference(self) -> object:
        index = self.r.i32() - 0x7E0000
        if not 0 <= index < len(self.handles):
            raise _Invalid("holds checkpoint properties with a dangling reference")
        return self.handles[index]

    def string(self, length: int) -> str:
        raw = self.r.take(length)
        value = raw.replace(b"\xc0\x80", b"\x00").decode("utf-8", errors="replace")
        self.handles.append(value)
        return value

    def class_desc(self, depth: int) -> _ClassDesc | None:
        found = self.content(depth)
        if found is not None and not isinstance(found, _ClassDesc):
            raise _Invalid("holds checkpoint properties with a class description of another kind")
        return found

    def class_desc_body(self, depth: int) -> _ClassDesc:
        r = self.r
        name = r.utf()
        r.i64()  # serialVersionUID
        desc = _ClassDesc(name, 0, [], None)
        self.handles.append(desc)
        desc.flags = r.u8()
        for _ in range(max(r.i16(), 0)):
            code = chr(r.u8())
            field = r.utf()
            if code in ("L", "["):
                self.content(depth + 1)  # the field's class name, a string
            elif code not in _PRIMITIVE_SIZES:
                raise _Invalid(f"holds checkpoint properties with a field of type {code!r}")
            desc.fields.append((code, field))
        self.annotations(depth)
        desc.parent = self.class_desc(depth + 1)
        return desc

    def proxy_desc_body(self, depth: int) -> _ClassDesc:
        desc = _ClassDesc("proxy", _SC_SERIALIZABLE, [], None)
        self.handles.append(desc)
        for _ in range(max(self.r.i32(), 0)):
            self.r.utf()
        self.annotations(depth)
        desc.parent = self.class_desc(depth + 1)
        return desc

    def annotations(self, depth: int) -> None:
        while True:
            if self.r.pos < self.r.end and self.r.data[self.r.pos] == _TC_ENDBLOCKDATA:
                self.r.u8()
                return
            self.content(depth + 1)

    def object_body(self, depth: int) -> object:
        desc = self.class_desc(depth + 1)
        self.handles.append(desc)
        chain: list[_ClassDesc] = []
        while desc is not None:
            chain.append(desc)
            desc = desc.parent
        for each in reversed(chain):  # the topmost serializable class first
            if each.flags & _SC_EXTERNALIZABLE:
                if not each.flags & _SC_BLOCK_DATA:
                    raise _Invalid("holds checkpoint properties in the old externalizable form")
                self.annotations(depth)
                continue
            for code, field in each.fields:
                if code in _PRIMITIVE_SIZES:
                    self.r.take(_PRIMITIVE_SIZES[code])
                else:
                    value = self.content(depth + 1)
                    if isinstance(value, str):
                        self.strings.setdefault(field, value)
            if each.flags & _SC_WRITE_METHOD:
                self.annotations(depth)
        return desc

    def enum_body(self, depth: int) -> object:
        self.class_desc(depth + 1)
        self.handles.append("enum")
        return self.content(depth + 1)

    def array_body(self, depth: int) -> object:
        desc = self.class_desc(depth + 1)
        self.handles.append("array")
        length = self.r.i32()
        element = desc.name[1:2] if desc is not None else "L"
        if element in _PRIMITIVE_SIZES:
            self.r.take(_PRIMITIVE_SIZES[element] * length)
        else:
            for _ in range(max(length, 0)):
                self.content(depth + 1)
        return "array"
