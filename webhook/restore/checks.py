"""Is a snapshot one Flink can restore? Its ``_metadata`` as read, and the files it names, judged.

Pure: ``restore/storage/`` reads the bytes and lists the folders; these functions say what that shows.
A snapshot is passed over, with the reason the decision tells, when its ``_metadata`` cannot be loaded
(``restore/metadata.py``) or cannot be by the Flink that will restore it (``common/flink_reads.py``), says
another checkpoint id than its ``chk-N`` directory, or names a file its folder's listing does not hold
(or holds shorter than the handle reads).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from webhook.common.flink_reads import NOT_STATED, SNAPSHOT_ID, Target, cannot_read
from webhook.common.paths import CONTROL_CHARACTERS, StoragePath, StoragePathError
from webhook.policy.restore import NewerMetadata
from webhook.restore.metadata import FileScope, Metadata, MetadataRead, NewerFormat, UnreadableMetadata


@dataclass(frozen=True)
class Judged:
    """What a ``_metadata`` read to its end says about its snapshot."""

    problem: str = ""  # why it is passed over ("" when it is not)
    note: str = ""  # what a person should know about one that is not (bytes after the end, newer format)
    checkpoint_id: int | None = None
    metadata: Metadata | None = None  # None: only the header was read (a newer format trusted)


def judge(
    read: MetadataRead, directory_id: int | None, newer: NewerMetadata, target: Target = NOT_STATED
) -> Judged:
    """``read`` for a snapshot whose directory says ``directory_id`` (``chk-N``; None for a savepoint),
    to be restored by ``target`` (its format version and handle types; unknown: not judged)."""
    if isinstance(read, UnreadableMetadata):
        return Judged(read.reason)
    # Damage first: a snapshot passed over for damage is passed over whatever Flink restores it; one
    # only the restoring Flink cannot load holds the job rather than rewind it (restore/decide.py).
    if directory_id is not None and read.checkpoint_id is not None and read.checkpoint_id != directory_id:
        return Judged(_other_id(read.checkpoint_id, directory_id))
    why = cannot_read(target, read.version, read.handles if isinstance(read, Metadata) else ())
    if why:
        # A savepoint's name says no id: the decision needs it to tell how much newer it is.
        if directory_id is None and read.checkpoint_id is not None:
            why = f"{why}{SNAPSHOT_ID.format(read.checkpoint_id)}"
        return Judged(why)
    if isinstance(read, NewerFormat):
        what = f"_metadata is in format version {read.version}, newer than this release reads"
        if newer is NewerMetadata.SKIP:
            return Judged(f"{what} (policy onNewerMetadata: skip)")
        note = f"{what}: only its header was checked (policy onNewerMetadata: trust)"
        return Judged(note=note, checkpoint_id=read.checkpoint_id)
    note = ""
    if read.trailing:
        note = (
            f"_metadata has {read.trailing:,} bytes after its end at byte {read.end:,} (Flink ignores them)"
        )
    return Judged(note=note, checkpoint_id=read.checkpoint_id, metadata=read)


def _other_id(found: int, directory: int) -> str:
    return (
        f"_metadata is that of checkpoint {found}, not {directory} (a file copied or written in the wrong "
        "place)"
    )


@dataclass(frozen=True)
class Needed:
    """A file a restore opens, where the new cluster reads it."""

    path: StoragePath
    size: int  # at least this many bytes
    where: str  # which state names it


@dataclass(frozen=True)
class NamedFiles:
    files: tuple[Needed, ...] = ()
    problem: str = ""  # a name that is no path this member can read

    @property
    def folders(self) -> tuple[StoragePath, ...]:
        """The folders to list, in the order they are first named."""
        return tuple(dict.fromkeys(f.path.parent for f in self.files))  # paths are canonical


def named_files(metadata: Metadata, snapshot: StoragePath, allowed_schemes: tuple[str, ...]) -> NamedFiles:
    """Every file ``metadata`` names, once each (a merged file's largest segment end), as paths: a
    relative name is in the snapshot's own directory, as Flink resolves it."""
    # A file is known by its canonical folder (one object per folder: ``folders``, ``canon``) and its
    # name: 100,000 files, a few folders, and no path hashed (a StoragePath's hash is Python code).
    found: dict[tuple[int, str], Needed] = {}
    folders: dict[str, StoragePath] = {}  # each folder's URI parsed once, canonical
    canon: dict[StoragePath, StoragePath] = {}  # each canonical folder, one object
    ours: set[int] = set()  # the ids of canon's folders (alive as long as canon)
    for named in metadata.files:
        if named.scope is FileScope.EXCLUSIVE:
            if "/" in named.path.strip("/") or named.path in ("", ".", ".."):
                return NamedFiles(
                    problem=f"_metadata names {named.path[:200]!r} as a file of its own directory"
                )
            path = snapshot.child(named.path.strip("/")).canonical
        else:
            try:
                path = _parse(named.path, folders, canon)
            except StoragePathError as exc:
                return NamedFiles(problem=f"_metadata names {named.path[:200]!r}, which is no path: {exc}")
            if path.scheme not in allowed_schemes:
                return NamedFiles(
                    problem=f"_metadata names {named.path[:200]}, on {path.scheme}://, which the policy's "
                    "allowedSchemes do not include: its files cannot be checked"
                )
        folder = path.parent
        if id(folder) not in ours:  # not one of ``canon``'s folders (hashed once each)
            folder = canon.setdefault(folder, folder)
            ours.add(id(folder))
        key = (id(folder), path.name)
        known = found.get(key)
        if known is None or named.size > known.size:
            found[key] = _needed(path, named.size, named.where)
    return NamedFiles(tuple(found.values()))


def _parse(
    uri: str, folders: dict[str, StoragePath], canon: dict[StoragePath, StoragePath] | None = None
) -> StoragePath:
    """``StoragePath.parse(uri).canonical``, its folder parsed once for all its files (the same errors);
    ``canon``: one object per canonical folder."""
    canon = {} if canon is None else canon
    head, _, name = uri.rpartition("/")
    _scheme, sep, rest = head.partition("://")
    if not sep or "/" not in rest or name in ("", ".", "..") or len(uri) > 4096:
        return StoragePath.parse(uri).canonical
    if CONTROL_CHARACTERS.search(name):
        return StoragePath.parse(uri).canonical
    folder = folders.get(head)
    if folder is None:
        try:
            folder = StoragePath.parse(head).canonical
        except StoragePathError:
            return StoragePath.parse(uri).canonical
        folder = folders[head] = canon.setdefault(folder, folder)
    return _child(folder, name)


_new = object.__new__


def _needed(path: StoragePath, size: int, where: str) -> Needed:
    """``Needed(path, size, where)`` without the frozen dataclass's per-field ``object.__setattr__``."""
    needed = _new(Needed)
    fields = needed.__dict__
    fields["path"] = path
    fields["size"] = size
    fields["where"] = where
    return needed


def _child(folder: StoragePath, name: str) -> StoragePath:
    """``folder.child(name)`` for a canonical ``folder`` and a ``name`` that is one segment (no ``/``,
    not empty, ``.`` or ``..``), its ``parent`` and ``name`` known: the fields a StoragePath's
    constructor would set, without its frozen dataclass's per-field ``object.__setattr__`` (a
    ``_metadata`` of 100,000 files makes 100,000 of them)."""
    path = _new(StoragePath)
    fields = path.__dict__
    fields["scheme"] = folder.scheme
    fields["authority"] = folder.authority
    fields["path"] = f"{folder.path.rstrip('/')}/{name}"
    fields["explicit_scheme"] = folder.explicit_scheme
    fields["parent"] = folder
    fields["name"] = name
    return path


# canonical folder -> (name -> size, None when the listing gives none); None: the folder does not exist.
Listings = Mapping[StoragePath, Mapping[str, int | None] | None]


def missing(named: NamedFiles, listings: Listings) -> str:
    """Why the files are not all there ("" when they are): the first missing one and the count."""
    gone: list[Needed] = []
    short: list[tuple[Needed, int]] = []
    folder: StoragePath | None = None  # the files come folder by folder: each folder looked up once
    listing: Mapping[str, int | None] | None = None
    for needed in named.files:
        if needed.path.parent is not folder:
            folder = needed.path.parent
            listing = listings.get(folder)
        size = listing.get(needed.path.name, -1) if listing is not None else -1
        if size == -1:
            gone.append(needed)
        elif size is not None and size < needed.size:
            short.append((needed, size))
    total = len(named.files)
    if gone:
        first = gone[0]
        return (
            f"{len(gone)} of the {total} files its _metadata names {'is' if len(gone) == 1 else 'are'} "
            f"missing, the first {first.path} ({first.where})"
        )
    if short:
        first, size = short[0]
        return (
            f"{len(short)} of the {total} files its _metadata names {'is' if len(short) == 1 else 'are'} "
            f"shorter than Flink reads, the first {first.path} ({size:,} bytes, {first.size:,} named; "
            f"{first.where})"
        )
    return ""
