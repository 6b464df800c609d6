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

from webhook.common.checkpoints import checkpoint_number

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
# The claim mode's keys. Flink 1.15 to 1.19 read only the first spelling (SavepointConfigOptions
# RESTORE_MODE, no deprecated keys); 1.20 and 2.x read StateRecoveryOptions RESTORE_MODE, the second
# spelling, with the first as its deprecated key (read only where the second is not set). Flink before
# 1.15 has no claim mode.
RESTORE_MODE_KEY = "execution.savepoint-restore-mode"
CLAIM_MODE_KEY = "execution.state-recovery.claim-mode"
CLAIM_MODE_KEYS = (CLAIM_MODE_KEY, RESTORE_MODE_KEY)  # as 1.20+ reads them: the first set counts


@dataclass(frozen=True)
class ClaimReading:
    """How one family of Flink versions reads the claim mode: the keys it reads, first set counting."""

    releases: str  # "1.20+", "1.15-1.19", "1.13-1.14"
    keys: tuple[str, ...]  # () : it has no claim mode (it restores as LEGACY does)


_CLAIM_READINGS = (
    ClaimReading("1.20+", CLAIM_MODE_KEYS),
    ClaimReading("1.15-1.19", (RESTORE_MODE_KEY,)),
    ClaimReading("1.13-1.14", ()),
)


def claim_reading(version: str) -> ClaimReading:
    """How the Flink of a ``spec.flinkVersion`` ("v1_19") reads its claim mode."""
    order = version_order(version)
    if order >= (1, 20):
        return _CLAIM_READINGS[0]
    if order >= (1, 15):
        return _CLAIM_READINGS[1]
    return _CLAIM_READINGS[2]


# Where a setting of the restoring job's configuration comes from, highest precedence first: (where,
# as a person finds it: "flinkConfiguration", "policy flinkDefaults ..."; the settings).
Layer = tuple[str, Mapping[str, str]]


@dataclass(frozen=True)
class Target:
    """The restoring side's Flink: every version it is said to run (each must read the snapshot),
    or why none is known (then nothing is judged, as before this check existed), and the claim mode
    its configuration restores in ("" when its configuration was not read: not judged)."""

    readers: tuple[Reader, ...] = ()
    unknown: str = ""  # why no version is known ("" when one is)
    # The claim mode as the restoring Flink reads it ("CLAIM", "NO_CLAIM", "LEGACY"; upper case): CLAIM
    # only where every Flink it may run reads CLAIM, else the first that does not.
    claim_mode: str = ""
    claim_source: str = ""  # where it was said ("flinkConfiguration execution...", "Flink's default")
    claim_fix: str = ""  # what makes it CLAIM ("set execution.savepoint-restore-mode: CLAIM")

    @property
    def known(self) -> bool:
        return bool(self.readers)


# The default where no caller said which Flink restores (the fencing agent's checks): nothing judged.
NOT_STATED = Target(unknown="which Flink restores it was not stated")


def claim_mode_of(
    configuration: Mapping[str, str] | tuple[Layer, ...],
    keys: tuple[str, ...] = CLAIM_MODE_KEYS,
    unread: str = "",
) -> tuple[str, str]:
    """(mode, where it was said) as a Flink reading ``keys`` (first set counting, as Flink reads a key
    and its deprecated ones) finds it in ``configuration`` (one flinkConfiguration, or its layers,
    highest precedence first: each key is looked for in every layer before the next key). NO_CLAIM,
    Flink's default, where none is set (``unread``: what could not be read, told with it); LEGACY
    where the Flink reads no key (before 1.15: no claim mode)."""
    layers: tuple[Layer, ...] = (
        configuration if isinstance(configuration, tuple) else (("flinkConfiguration", configuration),)
    )
    if not keys:
        return "LEGACY", "Flink before 1.15 has no claim mode: it restores as LEGACY does"
    for key in keys:
        for where, settings in layers:
            value = str(settings.get(key, "")).strip()
            if value:
                return value.upper().replace("-", "_"), f"{where} {key}: {value[:40]}"
    what = "claim mode" if len(keys) > 1 else keys[0]
    said = f"Flink's default, no {what} in {', '.join(where for where, _ in layers)}"
    return "NO_CLAIM", f"{said}{'; ' + unread if unread else ''}"


def _claim(readers: list[Reader], layers: tuple[Layer, ...], unread: str) -> tuple[str, str, str]:
    """(mode, source, fix) of the Flink ``readers`` run, from ``layers``: CLAIM only where every
    reading finds CLAIM. No version known: as both 1.15-1.19 and 1.20+ would read it."""
    if readers:
        readings = list(dict.fromkeys(claim_reading(r.reads.version) for r in readers))
        named = {claim_reading(r.reads.version): f"Flink {r.reads.release}" for r in reversed(readers)}
    else:
        readings = list(_CLAIM_READINGS[:2])
        named = {r: f"Flink {r.releases}" for r in readings}
    found = [(reading, *claim_mode_of(layers, reading.keys, unread)) for reading in readings]
    if all(mode == "CLAIM" for _, mode, _ in found):
        return "CLAIM", found[0][2], ""
    reading, mode, source = next(f for f in found if f[1] != "CLAIM")
    who = named[reading] if readers else f"Flink {reading.releases} (the version is not known)"
    if len(reading.keys) == 1:
        ignored = [
            f"{key}: {str(settings[key]).strip()[:40]} ({where}) is read from Flink 1.20 on"
            for key in CLAIM_MODE_KEYS
            if key not in reading.keys
            for where, settings in layers
            if str(settings.get(key, "")).strip()
        ][:1]
        source = f"{who} reads only {reading.keys[0]}: {source}" + (f"; {ignored[0]}" if ignored else "")
    elif not reading.keys:
        source = f"{who}: {source}"
    unclaimed = [each for each, mode_found, _ in found if mode_found != "CLAIM"]
    keys = [f"{each.keys[0]}: CLAIM" for each in unclaimed if each.keys]
    fix = f"set {' and '.join(dict.fromkeys(keys))}" if keys else ""
    if any(not each.keys for each in unclaimed):
        fix = "; ".join(
            f
            for f in (
                fix,
                f"run Flink 1.15+ with {RESTORE_MODE_KEY}: CLAIM (1.13 and 1.14 have no claim mode)",
            )
            if f
        )
    return mode, source, fix


def target_of(
    flink_version: str,
    image: str,
    image_versions: tuple[tuple[str, str], ...],
    where: str = "",
    configuration: Mapping[str, str] | tuple[Layer, ...] | None = None,
    unread: str = "",
) -> Target:
    """The Flink that restores an object whose ``spec.flinkVersion`` is ``flink_version`` and whose
    image is ``image``; ``image_versions`` is the policy's ``flinkVersions`` (pattern, version), the
    first pattern the image matches counting. ``where`` prefixes the sources ("session cluster x/y ").
    ``configuration``: the Flink configuration it restores with (its claim mode), one mapping or its
    layers (highest precedence first), None when not read; ``unread``: a layer that could not be read
    (told where the claim mode is Flink's default)."""
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
    claim = ("", "", "")
    if configuration is not None:
        layers = (
            configuration if isinstance(configuration, tuple) else (("flinkConfiguration", configuration),)
        )
        claim = _claim(readers, layers, unread)
    if readers:
        return Target(tuple(readers), claim_mode=claim[0], claim_source=claim[1], claim_fix=claim[2])
    if not declared:
        notes.append(f"{where}spec.flinkVersion is not set")
    if image_versions:
        notes.append(f"no policy flinkVersions pattern matches the image {image[:200] or '(none)'}")
    return Target(unknown="; ".join(notes), claim_mode=claim[0], claim_source=claim[1], claim_fix=claim[2])


def cannot_read(target: Target, format_version: int, handles: tuple[HandleMet, ...] = ()) -> str:
    """Why the target's Flink cannot load a ``_metadata`` of ``format_version`` holding ``handles``
    ("" when every version it is said to run can, or none is known); the versions first, for the
    warning kubectl shows cut short. Each reason says what would load it (a version, a key)."""
    for reader in target.readers:
        reads = reader.reads
        who = f"Flink {reads.release} ({reader.source}) {TARGET_CANNOT_READ}"
        if format_version not in reads.formats:
            return (
                f"{who} format version {format_version} ({_first_reader(format_version=format_version)}; "
                f"{reads.release} reads up to {max(reads.formats)})"
            )
        if version_order(reads.version) >= (2, 0) and format_version <= MAX_1X_FORMAT:
            return (
                f"{who} format version {format_version}, written by Flink 1.x (Flink 2.x writes 5 and "
                f"newer): Flink 2 does not promise to restore the state of Flink 1.x; a Flink 1.x that "
                f"reads it loads it ({_newest_1x(format_version, handles)})"
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


# The newest _metadata format version a Flink 1.x writes (1.16 to 1.20: MetadataV4Serializer); 2.0
# writes 5. Flink 2 still registers the 1.x serializers, but its release promises no state
# compatibility with 1.x (its release notes: migrate through a savepoint taken by hand).
MAX_1X_FORMAT = 4


def _newest_1x(format_version: int, handles: tuple[HandleMet, ...]) -> str:
    """ "spec.flinkVersion v1_20": the newest 1.x that reads the format and every handle."""
    fits = [
        r
        for r in FLINK_READS.values()
        if version_order(r.version) < (2, 0)
        and format_version in r.formats
        and all(r.reads_handle(m.code) for m in handles)
    ]
    if not fits:
        return "no Flink 1.x this release knows reads it"
    return f"spec.flinkVersion {max(fits, key=lambda r: version_order(r.version)).version}"


def _claim_problem(target: Target, handles: tuple[HandleMet, ...]) -> str:
    """Why a changelog checkpoint would fail the job after its restore: not restored in CLAIM mode."""
    if not target.claim_mode or target.claim_mode == "CLAIM":
        return ""
    met = next((m for m in handles if m.code in CHANGELOG_HANDLES), None)
    if met is None:
        return ""
    return (
        f"Flink in {target.claim_mode} mode ({target.claim_source}) {TARGET_CANNOT_READ} changelog state "
        f"handle type {met.code}, {HANDLE_NAMES[met.code]}, in {met.where}: a changelog checkpoint "
        f"restores only in CLAIM mode (its first checkpoint after a restore in another mode fails the "
        f"job); {target.claim_fix or 'set ' + CLAIM_MODE_KEY + ': CLAIM'}"
    )


# Every reason :func:`cannot_read` gives holds this: a snapshot passed over for it is one the restoring
# Flink cannot load (``restore/decide.py`` holds the job when that leaves none).
TARGET_CANNOT_READ = "cannot load it:"


def is_target_problem(reason: str) -> bool:
    """Was a snapshot passed over because the restoring Flink cannot load it (``reason`` as the
    lookup tells it: "chk-5: ..." or "savepoint <path>: ...")?"""
    return TARGET_CANNOT_READ in reason


# Told after the reason a savepoint is passed over for (its name says no checkpoint id).
SNAPSHOT_ID = "; checkpoint id {}"
_SNAPSHOT_ID_RE = re.compile(r"; checkpoint id (\d+)$")


@dataclass(frozen=True)
class Unloadable:
    """A snapshot of the job's own that the lookup passed over because the restoring Flink cannot load
    it (not for damage), read back from the lookup's reason."""

    kind: str  # "checkpoint" | "savepoint"
    name: str  # "chk-11", or the savepoint's path
    checkpoint_id: int | None  # None: not told (a savepoint checked by its header only)
    why: str  # the reason, with the fix (the version or the key that loads it)


_FIXES = (
    (re.compile(r"; (set \S+: CLAIM(?: and \S+: CLAIM)?)"), "{}"),
    (re.compile(r"; (run Flink 1\.15\+ with \S+: CLAIM)"), "{}"),
    (
        re.compile(r"a Flink 1\.x that reads it loads it \((spec\.flinkVersion v\d+_\d+)\)"),
        "run Flink 1.x ({})",
    ),
    (re.compile(r"\((Flink \d+\.\d+\+) reads it;"), "run {}"),
)


def what_loads(why: str) -> str:
    """What would load a snapshot passed over for ``why`` (a :func:`cannot_read` reason), in the few
    words a held job's warning leads with: "set execution.savepoint-restore-mode: CLAIM", "run Flink
    2.1+", "run Flink 1.x (spec.flinkVersion v1_20)"; "" when the reason does not say."""
    for pattern, said in _FIXES:
        found = pattern.search(why)
        if found:
            return said.format(found.group(1))
    return ""


def unloadable(reason: str) -> Unloadable | None:
    """The lookup's "chk-11: ..." or "savepoint <path>: ..." as an :class:`Unloadable`, None when it
    was passed over for another reason or is not one of the job's own (the snapshot it started from)."""
    if not is_target_problem(reason):
        return None
    name, sep, why = reason.partition(": ")
    if not sep:
        return None
    number = checkpoint_number(name)
    if number is not None:
        return Unloadable("checkpoint", name, number, why)
    if name.startswith("savepoint "):
        found = _SNAPSHOT_ID_RE.search(why)
        checkpoint_id = int(found.group(1)) if found else None
        return Unloadable("savepoint", name.removeprefix("savepoint "), checkpoint_id, why)
    return None


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
