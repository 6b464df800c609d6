"""What a full check of a checkpoint found, kept so the next check looks only at what changed.

Pure: ``restore/storage/verify.py`` reads and writes the bytes; this module says what they mean. A verdict is
one JSON object in the job's checkpoint directory (``<jobId>/flink-failover-verdict.json``), written
after a check that confirmed every file a ``chk-N`` names (the fencing agent's lookups write it; the
webhook's member role only reads storage). It records the ``_metadata`` it read (size and storage
time), every named file with the size its listing or HEAD showed, and how long before its write the
check began. A later check takes a named file as present when the verdict holds it at least as long as
the handle reads, only while the checkpoint checked is the job's newest complete one: the verdict's own
(with its ``_metadata`` unchanged: one rewritten since, a copy, a restore tool, is checked in full) or a
newer one (the files both name). Any other candidate is checked in full: once a newer checkpoint is
complete, Flink may have subsumed the verdict's and deleted its shared files. The window is counted on
the store's clock, from when the files were seen (``Verdict.seen``: the verdict object's storage time
less the check's duration), never by the writer's clock; a listing the lookup made wins over it
(``verify.py``). Anything odd in a verdict is no verdict (``decode``): the full check runs, and the
agent's next check writes over it. It checks the rest (:func:`file_requests`), by HEADs where a few files of a
large folder are new, by one prefix listing where many folders share a parent (file merging), on S3 by
listings of the key ranges the names fall in, side by side (:func:`cut`), where those cost less, by a
folder listing otherwise. docs/flink.md "Verdicts" says what a verdict cannot see.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from webhook.common.checkpoints import checkpoint_number
from webhook.common.paths import StoragePath, StoragePathError
from webhook.policy.fencing import MAX_VERDICT_SECONDS
from webhook.restore.checks import NamedFiles, Needed

VERDICT_NAME = "flink-failover-verdict.json"
KIND = "flink-failover-verdict"
VERSION = 2  # 1: trusted its writer's clock (issue 46); read as no verdict, written over
# A verdict larger than this is not read (a job with millions of files): the full check runs.
MAX_VERDICT_BYTES = 32 * 1024 * 1024

# How long a file a verdict confirmed is taken as present without being looked at again. A chain of
# verdicts keeps the time of the oldest confirmation it carries over (``made``): whoever writes them
# lists every file again at least this often, and a verdict older than this covers nothing.
MAX_AGE = timedelta(minutes=30)
# The writer (the fencing agent) trusts a verdict for less, and lists every file again once the verdict
# it would build on is this old: kept every ``fencing.verdictSeconds`` (at most ``MAX_VERDICT_SECONDS``),
# a running job's verdict is never past ``MAX_AGE`` when a failover reads it.
WRITER_MAX_AGE = MAX_AGE - timedelta(seconds=MAX_VERDICT_SECONDS)
# A verdict stored more than this in the reader's future (the reader's clock behind the store's), or
# begun this far after the store stamped it (its writer's clock ahead, a forged one), covers nothing.
MAX_SKEW = timedelta(minutes=5)

# A listing page holds 1,000 keys; a HEAD's answer is a few hundred bytes. Measured on moto (one
# page 0.25-0.46 s, a HEAD 4 ms) and cheaper still against a real store, a hundred HEADs made side by
# side cost no more time than one page: verifyBudget counts HEADs by the hundred (docs/flink.md).
HEADS_PER_UNIT = 100
PAGE = 1000
# A folder's files are asked by HEAD when they are this few, or a tenth of what it holds at most
# (200 new files of a shared folder of 10,000); otherwise its listing is the cheaper answer.
HEAD_FEW = 2
# A parent with this many named folders under it is listed once by prefix (file merging writes one
# folder per operator and subtask under shared/, one per TaskManager under taskowned/).
PREFIX_MIN_FOLDERS = 4
# Range listings (S3, restore/storage/ranges.py): a listing asks for the keys after a name, page by
# page, so the names to confirm of a large folder are cut into ranges of at most RANGE_KEYS keys (as
# far as the names known there say) listed side by side: one round trip, not a page after another.
RANGE_KEYS = 900
# What a range listing costs against HEADs, measured on moto (docs/performance.md, issue 36): ~35 ms
# of the store's CPU a listing request of a 10,000-key bucket and ~0.16 ms a key it returns, ~2.5 ms a
# HEAD. So a range pays where its names are dense (the full check of a folder, new names that sort
# together) and 200 new UUID names spread over 10,000 are cheaper by HEAD.
LIST_COST_HEADS = 14
KEYS_PER_HEAD = 16


@dataclass(frozen=True)
class Verdict:
    checkpoint: StoragePath  # the chk-N whose files were all confirmed (canonical)
    metadata_size: int
    metadata_modified: datetime
    verified_at: datetime  # when the check began (the writer's clock: for people, never compared)
    # canonical folder -> file name -> size confirmed
    files: Mapping[StoragePath, Mapping[str, int]] = field(default_factory=dict)
    # Seconds from the check's start (before its first listing) to the verdict's write, on the writer's
    # monotonic clock: a duration, so a writer's clock set wrong does not move it.
    seen_before: float = 0.0
    # The store's time of the oldest confirmation carried over from the verdict this one built on.
    carried_seen: datetime | None = None
    # The verdict object's modification time as storage reported it to the reader (never written).
    stored_at: datetime | None = None

    @property
    def count(self) -> int:
        return sum(len(names) for names in self.files.values())

    @property
    def seen(self) -> datetime | None:
        """When its files were seen, on the store's clock: the object's own time less the check's
        duration (or the oldest confirmation it carries); None when the store's time is not known."""
        if self.stored_at is None:
            return None
        seen = self.stored_at - timedelta(seconds=self.seen_before)
        return min(seen, self.carried_seen) if self.carried_seen is not None else seen


_FIELDS = {"kind", "version", "checkpoint", "metadata", "verifiedAt", "seenBeforeSeconds", "files"}
_OPTIONAL = {"carriedSeen"}
# The store stamps the _metadata and the verdict itself; these come no later than this after the verdict.
_STORE_SLACK = timedelta(seconds=2)


def encode(verdict: Verdict) -> bytes:
    body = {
        "kind": KIND,
        "version": VERSION,
        "checkpoint": str(verdict.checkpoint),
        "metadata": {"size": verdict.metadata_size, "modified": verdict.metadata_modified.isoformat()},
        "verifiedAt": verdict.verified_at.isoformat(),
        "seenBeforeSeconds": math.ceil(max(verdict.seen_before, 0.0) * 1000) / 1000,
        "files": {str(folder): dict(sorted(names.items())) for folder, names in verdict.files.items()},
    }
    if verdict.carried_seen is not None:
        body["carriedSeen"] = verdict.carried_seen.isoformat()
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


def _time(value: object) -> datetime:
    """An ISO 8601 time with its UTC offset (a time without one is no verdict's: ValueError)."""
    if not isinstance(value, str):
        raise TypeError("not a time")
    found = datetime.fromisoformat(value)
    if found.tzinfo is None or found.utcoffset() is None:
        raise ValueError("a time without its UTC offset")
    return found


def decode(data: bytes, job_dir: StoragePath, stored_at: datetime | None = None) -> Verdict | str:
    """The verdict in ``data`` (``stored_at``: the object's modification time as storage reports it),
    or why it is not one this lookup may use: anything odd (a field unknown or missing, a time without
    its offset or after the object's own, a number that is not one) is no verdict, and the full check
    runs; the agent's next check writes a good one over it."""
    if len(data) > MAX_VERDICT_BYTES:
        return f"larger than {MAX_VERDICT_BYTES // 2**20} MiB"
    try:
        body = json.loads(data)
        if not isinstance(body, dict) or body.get("kind") != KIND or body.get("version") != VERSION:
            return "not a verdict of this format"
        if not _FIELDS <= body.keys() <= _FIELDS | _OPTIONAL:
            odd = sorted((body.keys() - _FIELDS - _OPTIONAL) | (_FIELDS - body.keys()))
            return f"its fields are not a verdict's ({', '.join(o[:40] for o in odd[:5])})"
        checkpoint = StoragePath.parse(body["checkpoint"]).canonical
        meta = body["metadata"]
        if not isinstance(meta, dict) or meta.keys() != {"size", "modified"}:
            return "its _metadata entry is not a size and a time"
        size, modified = meta["size"], _time(meta["modified"])
        verified_at = _time(body["verifiedAt"])
        before = body["seenBeforeSeconds"]
        if not isinstance(before, int | float) or isinstance(before, bool) or not 0 <= before <= 86400:
            return "its seenBeforeSeconds is not a duration"
        carried = _time(body["carriedSeen"]) if "carriedSeen" in body else None
        files: dict[StoragePath, dict[str, int]] = {}
        if not isinstance(body["files"], dict):
            return "its files are not folders of names and sizes"
        for folder, names in body["files"].items():
            path = StoragePath.parse(folder).canonical
            # JSON's values are exactly str, int, float, bool, None, list or dict: checked by type, at
            # C speed (a verdict of 100,000 names is read per admission)
            if not isinstance(names, dict) or not (
                set(map(type, names)) <= {str}
                and set(map(type, names.values())) <= {int}
                and (not names or min(names.values()) >= 0)
            ):
                return f"its entry for {folder[:200]} is not names and sizes"
            files[path] = names
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError, StoragePathError) as exc:
        return f"unreadable ({type(exc).__name__})"
    if checkpoint.parent != job_dir.canonical:
        return f"it is about {checkpoint}, not a checkpoint of {job_dir}"
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        return "its _metadata entry is not a size and a time"
    if stored_at is not None:
        if stored_at.tzinfo is None:
            return "its storage time has no UTC offset"
        if modified > stored_at + _STORE_SLACK or (
            carried is not None and carried > stored_at + _STORE_SLACK
        ):
            return f"it names a storage time after its own ({stored_at.isoformat()})"
        if verified_at > stored_at + MAX_SKEW:
            return f"it was begun at {verified_at.isoformat()}, after it was stored ({stored_at.isoformat()})"
    return Verdict(checkpoint, size, modified, verified_at, files, float(before), carried, stored_at)


@dataclass(frozen=True)
class Coverage:
    covered: tuple[Needed, ...] = ()  # named files the verdict holds at least as long as needed
    unchecked: tuple[Needed, ...] = ()  # the rest: checked now
    note: str = ""  # why the verdict covers nothing, when it does not


def coverage(
    named: NamedFiles,
    verdict: Verdict | None,
    snapshot: StoragePath,
    metadata_size: int | None,
    metadata_modified: datetime | None,
    now: datetime,
    max_age: timedelta = MAX_AGE,
    newest: bool = True,
) -> Coverage:
    """Which of ``named`` (the files of ``snapshot``'s ``_metadata``) the verdict vouches for at ``now``
    (``max_age``: the writer's is shorter, ``WRITER_MAX_AGE``). Only while ``snapshot`` is the job's
    ``newest`` complete checkpoint (Flink never deletes a file the newest names; once a newer one is
    complete, Flink may have subsumed it), the one the verdict was written for or a newer one (then the
    files both name); counted on the store's clock from when the verdict's files were seen."""
    if verdict is None:
        return Coverage((), named.files)
    seen = verdict.seen
    if seen is None or verdict.stored_at is None:
        return Coverage(
            (), named.files, f"the verdict of {verdict.checkpoint} has no storage time: checked in full"
        )
    if verdict.stored_at > now + MAX_SKEW:
        return Coverage(
            (),
            named.files,
            f"the verdict of {verdict.checkpoint} was stored at {verdict.stored_at.isoformat()}, "
            f"in this reader's future: checked in full",
        )
    if max(now, verdict.stored_at) - seen > max_age:
        return Coverage(
            (),
            named.files,
            f"the verdict of {verdict.checkpoint} saw its files at {seen.isoformat()} (storage time), "
            f"not within {int(max_age.total_seconds() // 60)} minutes: checked in full",
        )
    if not newest:
        return Coverage(
            (),
            named.files,
            f"{snapshot} is not the newest complete checkpoint (Flink may have subsumed it): checked in full",
        )
    ours, theirs = checkpoint_number(snapshot.name), checkpoint_number(verdict.checkpoint.name)
    if ours is None or theirs is None or ours < theirs:
        return Coverage(
            (), named.files, f"the verdict is of {verdict.checkpoint}, newer than {snapshot}: checked in full"
        )
    if verdict.checkpoint == snapshot.canonical and (
        metadata_size != verdict.metadata_size or metadata_modified != verdict.metadata_modified
    ):
        return Coverage(
            (),
            named.files,
            f"the verdict about {snapshot} is of another _metadata ({verdict.metadata_size:,} bytes at "
            f"{verdict.metadata_modified.isoformat()}; now {metadata_size} bytes at "
            f"{metadata_modified.isoformat() if metadata_modified else None}): checked in full",
        )
    covered: list[Needed] = []
    unchecked: list[Needed] = []
    folder: StoragePath | None = None  # the files come folder by folder: each folder looked up once
    sizes: Mapping[str, int] = {}
    for needed in named.files:
        path = needed.path
        if path.parent is not folder:
            folder = path.parent
            sizes = verdict.files.get(folder, {})
        size = sizes.get(path.name)
        (covered if size is not None and size >= needed.size else unchecked).append(needed)
    return Coverage(tuple(covered), tuple(unchecked))


@dataclass(frozen=True)
class FileRequests:
    """How the unchecked files are confirmed, each way in requests made side by side."""

    heads: tuple[StoragePath, ...] = ()  # files asked one by one
    folders: tuple[StoragePath, ...] = ()  # folders listed (their direct files)
    trees: tuple[StoragePath, ...] = ()  # parents listed by prefix (every file below them)
    ranges: tuple[Range, ...] = ()  # key ranges of a folder listed (S3)


@dataclass(frozen=True)
class Range:
    """The keys of ``folder`` after the name ``after`` ("": from its first), listed page by page until
    one passes ``last``; ``names``: the names to confirm in it (``after`` < each <= ``last``)."""

    folder: StoragePath
    after: str
    last: str
    names: tuple[str, ...]
    keys: int  # how many keys it is expected to hold (the names known there)


def file_requests(
    unchecked: tuple[Needed, ...],
    listed: tuple[StoragePath, ...],
    trees: tuple[StoragePath, ...],
    known_sizes: Mapping[StoragePath, int],
    inside: StoragePath,
    known_names: Mapping[StoragePath, Collection[str]] | None = None,
    ranged: Collection[str] = (),
) -> FileRequests:
    """The fewest requests that confirm ``unchecked``: folders already ``listed`` and parents whose
    prefix listing (``trees``) is under way answer theirs; a parent inside ``inside`` (the job
    directory) holding ``PREFIX_MIN_FOLDERS`` named folders or more is listed by prefix when its pages
    cost no more than HEADs of their files would (``_tree_pays``); a folder
    whose files to check are ``HEAD_FEW`` or a tenth of its size at most (``known_sizes``: its size
    as the verdict knew it), and at most ``HEADS_PER_UNIT`` per page of its listing, is asked file by
    file; any other folder is listed. A folder of a ``ranged`` scheme (S3 listed by presigned URL) that
    one page does not hold is asked by whichever costs less: its names cut into key ranges (``cut``,
    ``known_names``: the names the verdict holds there), each range listed or its names asked by
    HEAD."""
    by_folder: dict[StoragePath, list[Needed]] = {}
    for needed in unchecked:
        folder = needed.path.parent
        if folder in listed or any(folder.is_within(t) for t in trees):
            continue
        by_folder.setdefault(folder, []).append(needed)
    by_parent: dict[StoragePath, list[StoragePath]] = {}
    for folder in by_folder:
        if folder != inside and folder.is_within(inside):
            by_parent.setdefault(folder.parent, []).append(folder)
    new_trees = tuple(
        parent
        for parent, kids in by_parent.items()
        if len(kids) >= PREFIX_MIN_FOLDERS and _tree_pays(kids, by_folder, known_sizes)
    )
    heads: list[StoragePath] = []
    folders: list[StoragePath] = []
    ranges: list[Range] = []
    for folder, files in by_folder.items():
        if any(folder.is_within(t) for t in new_trees):
            continue
        size = max(len(files), known_sizes.get(folder, 0))
        pages = max(1, -(-size // PAGE))
        if pages > 1 and folder.scheme in ranged:
            for part in cut(folder, [f.path.name for f in files], (known_names or {}).get(folder, ())):
                if range_cost(part.keys) < len(part.names):
                    ranges.append(part)
                else:
                    heads.extend(folder.child(name) for name in part.names)
        elif len(files) <= HEADS_PER_UNIT * pages and (len(files) <= HEAD_FEW or len(files) * 10 <= size):
            heads.extend(f.path for f in files)
        else:
            folders.append(folder)
    return FileRequests(tuple(heads), tuple(folders), new_trees, tuple(ranges))


def range_cost(keys: int) -> int:
    """A range listing of ``keys`` keys, in HEADs (``LIST_COST_HEADS``, ``KEYS_PER_HEAD``)."""
    return LIST_COST_HEADS + -(-keys // KEYS_PER_HEAD)


def cut(folder: StoragePath, needed: Collection[str], known: Collection[str]) -> list[Range]:
    """The names ``needed`` in ``folder`` as key ranges, in the order a store sorts keys (by code
    point: UTF-8's byte order): a range ends at its last needed name before it holds ``RANGE_KEYS``
    keys (``known``: the other names known there) or before a run of more known names than a listing
    costs in HEADs; each starts after the name just before its first (any naming, not only hex)."""
    wanted = set(needed)
    merged = sorted(wanted | set(known))
    gap = LIST_COST_HEADS * KEYS_PER_HEAD
    out: list[Range] = []
    first = -1  # index in merged of the open range's first needed name
    last = -1  # ... and of its last
    names: list[str] = []

    def close() -> None:
        after = merged[first - 1] if first > 0 else ""
        out.append(Range(folder, after, merged[last], tuple(names), last - first + 1))

    for i, name in enumerate(merged):
        if name not in wanted:
            continue
        if first >= 0 and (i - first + 1 > RANGE_KEYS or i - last - 1 > gap):
            close()
            first, names = -1, []
        if first < 0:
            first = i
        last = i
        names.append(name)
    if first >= 0:
        close()
    return out


def _tree_pays(
    kids: list[StoragePath], by_folder: Mapping[StoragePath, list[Needed]], known: Mapping[StoragePath, int]
) -> bool:
    """A prefix listing of the parent of ``kids`` costs no more than HEADs of their files (a verdict's
    200 new files spread over 128 subtask folders holding 10,000: HEADs)."""
    asked = sum(len(by_folder[k]) for k in kids)
    pages = -(-max(asked, sum(known.get(k, 0) for k in kids)) // PAGE)
    return pages <= budget_units(0, asked)


def budget_units(pages: int, heads: int) -> int:
    """What verifyBudget counts: listing pages, and HEADs by the hundred (rounded up)."""
    return pages + -(-heads // HEADS_PER_UNIT)


@dataclass(frozen=True)
class VerdictWrite:
    """An effect a check returns for its caller to execute: write ``verdict`` beside the checkpoints of
    ``job_dir`` (``started``: when the check began, on the monotonic clock: how long before the write
    its files were seen)."""

    job_dir: StoragePath
    verdict: Verdict
    started: float


def due(
    named: NamedFiles,
    snapshot: StoragePath,
    entry: tuple[int | None, datetime | None],
    seen: Mapping[StoragePath, Mapping[str, int | None]],
    covers: Coverage,
    verdict: Verdict | None,
    started: datetime,
) -> Verdict | None:
    """The verdict a check of ``snapshot`` that found every file of ``named`` leaves (``entry``: its
    ``_metadata``'s size and storage time; ``seen``: the sizes it saw), or None: none is new (the one
    read covered every file of this very checkpoint) or the ``_metadata``'s size or time is unknown."""
    size, stamped = entry
    fresh = covers.unchecked or verdict is None or verdict.checkpoint != snapshot.canonical
    if not fresh or size is None or not stamped:
        return None
    sizes = {f.path: seen[f.path.parent][f.path.name] for f in named.files}
    confirmed = {p: s for p, s in sizes.items() if s is not None}
    return made(snapshot, size, stamped, named, confirmed, started, verdict if covers.covered else None)


def made(
    snapshot: StoragePath,
    metadata_size: int,
    metadata_modified: datetime,
    named: NamedFiles,
    sizes: Mapping[StoragePath, int],
    started: datetime,
    carried: Verdict | None = None,
) -> Verdict:
    """The verdict of a check begun at ``started`` (the writer's clock, for people) that confirmed every
    file of ``named`` (``sizes``: what was seen), some of them on the word of ``carried``: then it is as
    old as that one (its ``seen``, the store's time). ``seen_before`` is set as it is written."""
    files: dict[StoragePath, dict[str, int]] = {}
    for needed in named.files:
        files.setdefault(needed.path.parent, {})[needed.path.name] = sizes.get(needed.path, needed.size)
    carried_seen = carried.seen if carried is not None else None
    return Verdict(
        snapshot.canonical, metadata_size, metadata_modified, started, files, carried_seen=carried_seen
    )
