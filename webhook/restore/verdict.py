"""What a full check of a checkpoint found, kept so the next check looks only at what changed.

Pure: ``restore/storage/verify.py`` reads and writes the bytes; this module says what they mean. A verdict is
one JSON object in the job's checkpoint directory (``<jobId>/flink-failover-verdict.json``), written
after a check that confirmed every file a ``chk-N`` names (the fencing agent's lookups write it; the
webhook's member role only reads storage). It records the ``_metadata`` it read (size and storage
time) and every named file with the size its listing or HEAD showed. A later check of that or a newer
checkpoint takes a named file as present when the verdict holds it at least as long as the handle
reads; it checks the rest (:func:`plan`), by HEADs where a few files of a large folder are new, by
one prefix listing where many folders share a parent (file merging), on S3 by listings of the key
ranges the names fall in, side by side (:func:`cut`), where those cost less, by a folder listing otherwise.
A verdict about the very ``chk-N`` being checked counts only while its ``_metadata`` has the size and
time it had: one rewritten since (a copy, a restore tool) is checked in full. docs/flink.md "Verdicts"
says what a verdict cannot see.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from webhook.common.paths import StoragePath, StoragePathError
from webhook.restore.checks import NamedFiles, Needed
from webhook.restore.fencing_policy import MAX_VERDICT_SECONDS

VERDICT_NAME = "flink-failover-verdict.json"
KIND = "flink-failover-verdict"
VERSION = 1
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
# A verdict confirmed more than this in the reader's future (another clock, a forged one) covers nothing.
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
    verified_at: datetime  # when the confirming listings and HEADs finished (the writer's clock)
    # canonical folder -> file name -> size confirmed
    files: Mapping[StoragePath, Mapping[str, int]] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return sum(len(names) for names in self.files.values())


def encode(verdict: Verdict) -> bytes:
    body = {
        "kind": KIND,
        "version": VERSION,
        "checkpoint": str(verdict.checkpoint),
        "metadata": {"size": verdict.metadata_size, "modified": verdict.metadata_modified.isoformat()},
        "verifiedAt": verdict.verified_at.isoformat(),
        "files": {str(folder): dict(sorted(names.items())) for folder, names in verdict.files.items()},
    }
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


def decode(data: bytes, job_dir: StoragePath) -> Verdict | str:
    """The verdict in ``data``, or why it is not one this lookup may use (then the full check runs)."""
    if len(data) > MAX_VERDICT_BYTES:
        return f"larger than {MAX_VERDICT_BYTES // 2**20} MiB"
    try:
        body = json.loads(data)
        if not isinstance(body, dict) or body.get("kind") != KIND or body.get("version") != VERSION:
            return "not a verdict of this format"
        checkpoint = StoragePath.parse(body["checkpoint"]).canonical
        meta = body["metadata"]
        size, modified = meta["size"], datetime.fromisoformat(meta["modified"])
        verified_at = datetime.fromisoformat(body["verifiedAt"])
        files: dict[StoragePath, dict[str, int]] = {}
        for folder, names in body["files"].items():
            path = StoragePath.parse(folder).canonical
            if not isinstance(names, dict) or not all(
                isinstance(n, str) and isinstance(s, int) and not isinstance(s, bool) and s >= 0
                for n, s in names.items()
            ):
                return f"its entry for {folder[:200]} is not names and sizes"
            files[path] = names
    except (ValueError, KeyError, TypeError, AttributeError, StoragePathError) as exc:
        return f"unreadable ({type(exc).__name__})"
    if checkpoint.parent != job_dir.canonical:
        return f"it is about {checkpoint}, not a checkpoint of {job_dir}"
    if not isinstance(size, int) or isinstance(size, bool) or modified.tzinfo is None:
        return "its _metadata entry is not a size and a time"
    return Verdict(checkpoint, size, modified, verified_at, files)


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
) -> Coverage:
    """Which of ``named`` (the files of ``snapshot``'s ``_metadata``) the verdict vouches for at ``now``
    (``max_age``: the writer's is shorter, ``WRITER_MAX_AGE``)."""
    if verdict is None:
        return Coverage((), named.files)
    if not now - max_age <= verdict.verified_at <= now + MAX_SKEW:
        return Coverage(
            (),
            named.files,
            f"the verdict of {verdict.checkpoint} confirmed its files at {verdict.verified_at.isoformat()}, "
            f"not within {int(max_age.total_seconds() // 60)} minutes: checked in full",
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
    for needed in named.files:
        size = verdict.files.get(needed.path.parent, {}).get(needed.path.name)
        (covered if size is not None and size >= needed.size else unchecked).append(needed)
    return Coverage(tuple(covered), tuple(unchecked))


@dataclass(frozen=True)
class Plan:
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


def plan(
    unchecked: tuple[Needed, ...],
    listed: tuple[StoragePath, ...],
    trees: tuple[StoragePath, ...],
    known_sizes: Mapping[StoragePath, int],
    inside: StoragePath,
    known_names: Mapping[StoragePath, Collection[str]] | None = None,
    ranged: Collection[str] = (),
) -> Plan:
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
    return Plan(tuple(heads), tuple(folders), new_trees, tuple(ranges))


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


def made(
    snapshot: StoragePath,
    metadata_size: int,
    metadata_modified: datetime,
    named: NamedFiles,
    sizes: Mapping[StoragePath, int],
    now: datetime,
    carried: Verdict | None = None,
) -> Verdict:
    """The verdict of a check that confirmed every file of ``named`` (``sizes``: what was seen) at
    ``now``, some of them on the word of ``carried``: then it is as old as that one."""
    files: dict[StoragePath, dict[str, int]] = {}
    for needed in named.files:
        files.setdefault(needed.path.parent, {})[needed.path.name] = sizes.get(needed.path, needed.size)
    verified_at = min(now, carried.verified_at) if carried is not None else now
    return Verdict(snapshot.canonical, metadata_size, metadata_modified, verified_at, files)
