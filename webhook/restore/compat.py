"""Which Flink reads which ``_metadata``: per Flink minor version, the format versions and the state
handle types its ``Checkpoints.loadCheckpointMetadata`` accepts, and the judgement of one snapshot
against the Flink that will restore it.

Pure: a table and comparisons. A snapshot written by a newer Flink passes every check of its own
(``restore/checks.py``) and still fails the job on an older one: Flink 1.20 refuses a format version 5
or 6 ("Unrecognized checkpoint version number"), Flink 1.19 a handle of type 15 ("Unknown
implementation of StreamStateHandle, code: 15"). Read from the ``flink-dist`` jar of each minor's
newest patch release (``MetadataSerializers``' registered serializers, ``MetadataV2V3SerializerBase``'s
handle type constants); docs/flink.md "Which Flink reads what" has the table and how it was read.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass

# The state handle type bytes of MetadataV2V3SerializerBase, by code (0 is "no handle").
HANDLE_NAMES: Mapping[int, str] = {
    1: "ByteStreamStateHandle",
    2: "FileStateHandle",
    3: "KeyGroupsStateHandle",
    4: "OperatorStreamStateHandle",
    5: "IncrementalRemoteKeyedStateHandle",
    6: "RelativeFileStateHandle",
    7: "KeyGroupsSavepointStateHandle",
    8: "ChangelogStateBackendHandle",
    9: "InMemoryChangelogStateHandle",
    10: "ChangelogStateHandleStreamImpl",
    11: "IncrementalRemoteKeyedStateHandle (v2)",
    12: "KeyGroupsStateHandle (v2)",
    13: "ChangelogStateHandleStreamImpl (v2)",
    14: "ChangelogStateBackendHandle (v2)",
    15: "SegmentFileStateHandle",
    16: "EmptySegmentFileStateHandle",
    17: "FileMergingOperatorStreamStateHandle",
}


@dataclass(frozen=True)
class HandleMet:
    """A state handle type a ``_metadata`` holds (its type byte), where it was first met."""

    code: int
    where: str


@dataclass(frozen=True)
class FlinkReads:
    """What one Flink minor version loads: the ``_metadata`` format versions (``MetadataSerializers``)
    and the handle types (up to ``newest_handle``: the codes were only ever added, never removed)."""

    version: str  # as the Flink operator's spec.flinkVersion spells it: "v1_20"
    formats: frozenset[int]
    newest_handle: int

    @property
    def release(self) -> str:
        """ "1.20" for "v1_20"."""
        return self.version[1:].replace("_", ".")

    def reads_handle(self, code: int) -> bool:
        return 0 <= code <= self.newest_handle


def _reads(version: str, newest_format: int, newest_handle: int) -> FlinkReads:
    # Format 1 (Flink 1.2 and older) is registered but refused by every Flink read here.
    return FlinkReads(version, frozenset(range(2, newest_format + 1)), newest_handle)


# Per minor version, from its newest patch release's flink-dist (docs/flink.md "Which Flink reads
# what" names them): format 4 from 1.16 (checkpoint properties), 5 from 2.0 (operator name and uid),
# 6 from 2.1 (merged channel state handles); handle types 8-10 (changelog) from 1.14, 11-12 from
# 1.15, 13-14 from 1.16, 15-17 (file merging) from 1.20.
FLINK_READS: Mapping[str, FlinkReads] = {
    r.version: r
    for r in (
        _reads("v1_13", 3, 7),
        _reads("v1_14", 3, 10),
        _reads("v1_15", 3, 12),
        _reads("v1_16", 4, 14),
        _reads("v1_17", 4, 14),
        _reads("v1_18", 4, 14),
        _reads("v1_19", 4, 14),
        _reads("v1_20", 4, 17),
        _reads("v2_0", 5, 17),
        _reads("v2_1", 6, 17),
        _reads("v2_2", 6, 17),
        _reads("v2_3", 6, 17),
    )
}
_VERSION_RE = re.compile(r"^v(\d+)_(\d+)$")


def known_version(name: str) -> FlinkReads | None:
    """The table's row for a ``spec.flinkVersion`` value, None when it has none."""
    return FLINK_READS.get(name.strip())


def version_order(name: str) -> tuple[int, int]:
    """(major, minor) of a ``v<major>_<minor>`` spelling; (0, 0) when it is not one."""
    m = _VERSION_RE.fullmatch(name)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


@dataclass(frozen=True)
class Reader:
    """One Flink that will read the snapshot, and where that was said."""

    reads: FlinkReads
    source: str  # "spec.flinkVersion v1_20", "image flink:1.20 (policy flinkVersions)"


# Changelog state backend handles (ChangelogStateBackendHandle, InMemoryChangelogStateHandle,
# ChangelogStateHandleStreamImpl and their v2 forms): Flink restores them only in CLAIM mode. In
# NO_CLAIM, its default, the restore succeeds and the first checkpoint after it fails the job
# ("ChangelogStateBackend does not support enforcing a full snapshot"), again after each restart
# (measured with Flink 2.3.0: docs/flink.md).
CHANGELOG_HANDLES = frozenset({8, 9, 10, 13, 14})
# The claim mode's key (Flink 1.20+, and 2.x) and its older spelling (1.15 to 1.20; an alias in 2.x).
CLAIM_MODE_KEYS = ("execution.state-recovery.claim-mode", "execution.savepoint-restore-mode")


@dataclass(frozen=True)
class Target:
    """The restoring side's Flink: every version it is said to run (each must read the snapshot),
    or why none is known (then nothing is judged, as before this check existed), and the claim mode
    its configuration restores in ("" when its configuration was not read: not judged)."""

    readers: tuple[Reader, ...] = ()
    unknown: str = ""  # why no version is known ("" when one is)
    claim_mode: str = ""  # "CLAIM", "NO_CLAIM", "LEGACY", as configured, upper case
    claim_source: str = ""  # where it was said ("spec.flinkConfiguration execution...", "Flink's default")

    @property
    def known(self) -> bool:
        return bool(self.readers)


# The default where no caller said which Flink restores (the fencing agent's checks): nothing judged.
NOT_STATED = Target(unknown="which Flink restores it was not stated")


def claim_mode_of(configuration: Mapping[str, str]) -> tuple[str, str]:
    """(mode, where it was said) from a Flink configuration: the newer key wins, as in Flink; Flink
    reads the value in any case. NO_CLAIM, Flink's default, where neither key is set."""
    for key in CLAIM_MODE_KEYS:
        value = str(configuration.get(key, "")).strip()
        if value:
            return value.upper().replace("-", "_"), f"flinkConfiguration {key}: {value[:40]}"
    return "NO_CLAIM", "Flink's default, no claim mode in flinkConfiguration"


def target_of(
    flink_version: str,
    image: str,
    image_versions: tuple[tuple[str, str], ...],
    where: str = "",
    configuration: Mapping[str, str] | None = None,
) -> Target:
    """The Flink that restores an object whose ``spec.flinkVersion`` is ``flink_version`` and whose
    image is ``image``; ``image_versions`` is the policy's ``flinkVersions`` (pattern, version), the
    first pattern the image matches counting. ``where`` prefixes the sources ("session cluster x/y ").
    ``configuration``: the Flink configuration it restores with (its claim mode), None when not read."""
    claim = claim_mode_of(configuration) if configuration is not None else ("", "")
    readers: list[Reader] = []
    notes: list[str] = []
    declared = flink_version.strip()
    if declared:
        row = known_version(declared)
        if row is not None:
            readers.append(Reader(row, f"{where}spec.flinkVersion {declared}"))
        else:
            notes.append(f"{where}spec.flinkVersion {declared[:40]!r} is not a version this release knows")
    if image and image_versions:
        for pattern, version in image_versions:
            if fnmatch.fnmatchcase(image, pattern):
                row = known_version(version)
                if row is not None and all(r.reads != row for r in readers):
                    readers.append(
                        Reader(row, f"{where}image {image[:200]} (policy flinkVersions {pattern!r})")
                    )
                break
    if readers:
        return Target(tuple(readers), claim_mode=claim[0], claim_source=claim[1])
    if not declared:
        notes.append(f"{where}spec.flinkVersion is not set")
    if image_versions:
        notes.append(f"no policy flinkVersions pattern matches the image {image[:200] or '(none)'}")
    return Target(unknown="; ".join(notes), claim_mode=claim[0], claim_source=claim[1])


def cannot_read(target: Target, format_version: int, handles: tuple[HandleMet, ...] = ()) -> str:
    """Why the target's Flink cannot load a ``_metadata`` of ``format_version`` holding ``handles``
    ("" when every version it is said to run can, or none is known); the versions first, for the
    warning kubectl shows cut short."""
    for reader in target.readers:
        reads = reader.reads
        who = f"Flink {reads.release} ({reader.source}) {TARGET_CANNOT_READ}"
        if format_version not in reads.formats:
            return (
                f"{who} format version {format_version} ({_first_reader(format_version=format_version)}; "
                f"{reads.release} reads up to {max(reads.formats)})"
            )
        for met in handles:
            if not reads.reads_handle(met.code):
                name = HANDLE_NAMES.get(met.code, "an unknown handle")
                return (
                    f"{who} state handle type {met.code}, {name} "
                    f"({_first_reader(handle=met.code)}; {reads.release} knows up to "
                    f"{reads.newest_handle}), in {met.where}"
                )
    return _claim_problem(target, handles)


def _claim_problem(target: Target, handles: tuple[HandleMet, ...]) -> str:
    """Why a changelog checkpoint would fail the job after its restore: not restored in CLAIM mode."""
    if not target.claim_mode or target.claim_mode == "CLAIM":
        return ""
    met = next((m for m in handles if m.code in CHANGELOG_HANDLES), None)
    if met is None:
        return ""
    modern = any(version_order(r.reads.version) >= (2, 0) for r in target.readers)
    keys = CLAIM_MODE_KEYS[0] if modern else f"{CLAIM_MODE_KEYS[1]} (1.20+, 2.x: {CLAIM_MODE_KEYS[0]})"
    return (
        f"Flink in {target.claim_mode} mode ({target.claim_source}) {TARGET_CANNOT_READ} changelog state "
        f"handle type {met.code}, {HANDLE_NAMES[met.code]}, in {met.where}: a changelog checkpoint "
        f"restores only in CLAIM mode (its first checkpoint after a restore in another mode fails the "
        f"job); set {keys}: CLAIM"
    )


# Every reason :func:`cannot_read` gives holds this: a snapshot passed over for it is one the restoring
# Flink cannot load (``restore/decide.py`` holds the job when that leaves none).
TARGET_CANNOT_READ = "cannot load it:"


def is_target_problem(reason: str) -> bool:
    """Was a snapshot passed over because the restoring Flink cannot load it (``reason`` as the
    lookup tells it: "chk-5: ..." or "savepoint <path>: ...")?"""
    return TARGET_CANNOT_READ in reason


def _first_reader(format_version: int | None = None, handle: int | None = None) -> str:
    """ "Flink 2.1+ reads it": the oldest Flink in the table that reads the format version or handle."""
    readers = [
        r
        for r in FLINK_READS.values()
        if (format_version is None or format_version in r.formats)
        and (handle is None or r.reads_handle(handle))
    ]
    if not readers:
        return "no Flink this release knows reads it"
    first = min(readers, key=lambda r: version_order(r.version))
    return f"Flink {first.release}+ reads it"
