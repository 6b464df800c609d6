"""Range listings of ``verify: files`` on S3 (restore/storage/ranges.py, restore/verdict.py ``cut``): the
named files of a large folder cut into key ranges, listed side by side from after the name before each
range's first, page after page until a key passes its last. On moto with the sizes made small (a page
of 3 keys, ranges of 5, a folder "large" past 10): a missing first or last name of a range, a shorter
file, a name that is the next range's start-after, names that are not hex, a second page; and from a
real HTTP server, a listing that fails and the deadline."""

from __future__ import annotations

import http.server
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.backends import Running
from tests.support.httpd import serving
from tests.support.jobtrees import JOB, SIZE, checkpoint, chosen, lookup, put, remove
from webhook.common.paths import StoragePath
from webhook.restore import verdict
from webhook.restore.checks import Needed
from webhook.restore.snapshots import StorageError
from webhook.restore.storage import presigned, ranges
from webhook.restore.storage.backends import Deadline, DeadlineExceeded
from webhook.restore.storage.requests import Cursor, Ledger
from webhook.restore.storage.search import CheckpointStorage

S3 = pytest.mark.parametrize("storage_backend", ["s3"], indirect=True)
FOLDER = StoragePath.parse("s3://bucket/ck/job/shared")
# not hex, not UUIDs, and not in the order they were written: a store sorts keys by code point
NAMES = [
    f"{w}-{i}" for i, w in enumerate(["Zeta", "alpha", "b.e", "b_e", "éclair", "m~x", "op+1", "x y"] * 3)
]


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verdict, "PAGE", 10)
    monkeypatch.setattr(verdict, "RANGE_KEYS", 5)
    monkeypatch.setattr(verdict, "LIST_COST_HEADS", 1)  # a range of 5 names costs less than 5 HEADs
    monkeypatch.setattr(ranges, "PAGE_KEYS", 3)


def test_cut_starts_each_range_after_the_name_before_it_and_ends_on_a_needed_name() -> None:
    needed = sorted(NAMES)
    parts = verdict.cut(FOLDER, needed, ())
    assert [p.after for p in parts] == ["", *(p.last for p in parts[:-1])]
    assert [n for p in parts for n in p.names] == needed and all(
        len(p.names) <= verdict.RANGE_KEYS for p in parts
    )
    assert all(p.after < p.names[0] and p.names[-1] == p.last for p in parts)
    # known names between: a range starts right after the known name before its first needed one,
    # and a long run of known names ends it (listing them costs more than HEADs of what follows)
    known = [f"k{i:05d}" for i in range(1000)]
    parts = verdict.cut(FOLDER, ["a", "k00003x", "zz"], known)
    assert [(p.after, p.last, p.keys) for p in parts] == [("", "k00003x", 6), ("k00999", "zz", 1)]


def test_plan_lists_ranges_of_a_large_folder_and_heads_a_few_new_names_spread_over_it() -> None:
    def needed(names: list[str]) -> tuple[Needed, ...]:
        return tuple(Needed(FOLDER.child(n), SIZE, "test") for n in names)

    everything = [f"{i:05d}" for i in range(10_000)]
    full = verdict.file_requests(needed(everything), (), (), {}, FOLDER.parent, {}, ("s3",))
    assert not full.heads and not full.folders and len(full.ranges) == 12  # 900 keys a range
    assert verdict.file_requests(needed(everything), (), (), {}, FOLDER.parent).folders == (FOLDER,)  # not S3
    spread = everything[::50]  # 200 new names among 10,000 known: a HEAD each costs less
    known = {FOLDER: [n for n in everything if n not in set(spread)]}
    sizes = {FOLDER: len(known[FOLDER])}
    few = verdict.file_requests(needed(spread), (), (), sizes, FOLDER.parent, known, ("s3",))
    assert len(few.heads) == 200 and not few.ranges
    together = [f"z{i:03d}" for i in range(200)]  # 200 new names that sort together: one range
    bunched = verdict.file_requests(needed(together), (), (), sizes, FOLDER.parent, known, ("s3",))
    assert not bunched.heads and [(p.after, p.last) for p in bunched.ranges] == [("09999", "z199")]


def _job(running: Running, name: str) -> tuple[str, list[str]]:
    job_dir = f"{running.bucket(name)}/ck/{JOB}"
    shared = [f"{job_dir}/shared/{n}" for n in NAMES]
    checkpoint(running, job_dir, 1, shared)
    put(running, {f"{job_dir}/shared/unnamed-{i}": bytes(SIZE) for i in range(4)})  # keys no range needs
    put(running, {f"{job_dir}/shared/sub/inner": bytes(SIZE)})  # a sub-folder among the names
    return job_dir, shared


@S3
@pytest.mark.usefixtures("small")
def test_ranges_confirm_a_full_check_and_page_on(
    storage_backend: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_dir, _shared = _job(storage_backend, "ranges")
    storage = CheckpointStorage(storage_backend.storage_options())
    pages: list[str] = []
    get = presigned.HeadClient.get

    def counted(client: presigned.HeadClient, url: str, seconds_left: float) -> tuple[int, bytes]:
        pages.append(url)
        return get(client, url, seconds_left)

    monkeypatch.setattr(presigned.HeadClient, "get", counted)
    found = lookup(storage, job_dir)
    assert sum("continuation-token" in url for url in pages) >= len(verdict.cut(FOLDER, NAMES, ()))
    assert chosen(found) == f"{job_dir}/chk-1", found.rejected
    parts = verdict.cut(FOLDER, NAMES, ())
    # the verdict's read and the job directory, chk-1's folder and _metadata, then each range of 5
    # names at 3 keys a page (2 pages at least), the ranges side by side
    assert len(parts) == 5 and found.trips.requests >= 4 + 2 * len(parts)
    assert found.trips.rounds <= 2 + 4, found.trips


@S3
@pytest.mark.usefixtures("small")
@pytest.mark.parametrize("which", ["first", "last"])
def test_a_range_finds_its_first_or_last_name_gone_the_last_being_the_next_ranges_start_after(
    storage_backend: Running, which: str
) -> None:
    job_dir, _shared = _job(storage_backend, f"gone-{which}")
    parts = verdict.cut(FOLDER, NAMES, ())
    assert parts[2].after == parts[1].last  # listed by the range it ends, never by the next
    name = {"first": parts[1].names[0], "last": parts[1].last}[which]
    remove(storage_backend, f"{job_dir}/shared/{name}")
    found = lookup(CheckpointStorage(storage_backend.storage_options()), job_dir)
    assert chosen(found) == ""
    assert "1 of the" in found.rejected[0] and "is missing, the first" in found.rejected[0], found.rejected
    assert name in found.rejected[0]


@S3
@pytest.mark.usefixtures("small")
def test_a_range_finds_a_shorter_file(storage_backend: Running) -> None:
    job_dir, _shared = _job(storage_backend, "shorter")
    name = verdict.cut(FOLDER, NAMES, ())[-1].last
    put(storage_backend, {f"{job_dir}/shared/{name}": bytes(SIZE - 1)})
    found = lookup(CheckpointStorage(storage_backend.storage_options()), job_dir)
    assert (
        chosen(found) == "" and "shorter than Flink reads" in found.rejected[0] and name in found.rejected[0]
    )


class _Lists(http.server.BaseHTTPRequestHandler):
    """A GET of /<status> answers that status with an S3 error body; /garbage 200 with no XML; /aws a
    ListObjectsV2 page as AWS writes it with ``encoding-type=url`` (``AWS_PAGE``)."""

    def do_GET(self) -> None:
        what = self.path.strip("/").split("?")[0]
        if what == "aws":
            self.send_response(200)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(AWS_PAGE)))
            self.end_headers()
            self.wfile.write(AWS_PAGE)
            return
        status = 200 if what == "garbage" else int(what)
        body = b"not xml" if what == "garbage" else b"<Error><Code>SlowDown</Code></Error>"
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def answering() -> Iterator[str]:
    with serving(_Lists) as url:
        yield url


def _list(
    url: str, seconds: float = 30, part: verdict.Range | None = None
) -> tuple[dict[str, int | None], str | None]:
    storage = CheckpointStorage()
    client = presigned.HeadClient(4, connect_timeout=2, read_timeout=1, verify=None)
    part = part or verdict.Range(FOLDER, "", "b", ("a", "b"), 2)
    return storage.files.list_range(part, url, client, None, Deadline(seconds), Cursor(Ledger(100)))


@pytest.mark.parametrize(
    ("answer", "told"),
    [
        ("403", "permission denied listing s3://bucket/ck/job/shared"),
        ("503", "listing s3://bucket/ck/job/shared: HTTP 503 SlowDown"),
        ("400", "listing s3://bucket/ck/job/shared: HTTP 400 SlowDown"),
        ("garbage", "listing s3://bucket/ck/job/shared: the answer is not XML"),
    ],
)
def test_a_listing_that_fails_is_a_storage_error_naming_the_folder(
    answering: str, answer: str, told: str
) -> None:
    with pytest.raises(StorageError) as raised:
        _list(f"{answering}/{answer}")
    assert str(raised.value).startswith(told)


def test_a_range_listing_never_outlives_the_deadline(answering: str) -> None:
    with pytest.raises(StorageError, match="listing s3://bucket/ck/job/shared: no time left"):
        _list(f"{answering}/200", seconds=0)
    assert issubclass(DeadlineExceeded, StorageError)


def test_a_page_that_declares_entities_is_refused() -> None:
    body = b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><ListBucketResult/>'
    with pytest.raises(ranges.ListingFailed, match="document type"):
        ranges.parse(body, "shared/")


# A ListObjectsV2 page of ``ck/job/shared/`` as AWS S3 answers it with ``encoding-type=url``: keys are
# form-encoded, a space as ``+`` and a literal ``+`` as ``%2B`` (moto writes ``%20`` for a space).
AWS_PAGE = b"""<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>bucket</Name>\
<Prefix>ck%2Fjob%2Fshared%2F</Prefix><KeyCount>4</KeyCount><MaxKeys>1000</MaxKeys>\
<Delimiter>%2F</Delimiter><EncodingType>url</EncodingType><IsTruncated>false</IsTruncated>\
<Contents><Key>ck/job/shared/a+b%2Bc</Key><LastModified>2026-12-07T10:00:00.000Z</LastModified>\
<ETag>&quot;x&quot;</ETag><Size>16</Size><StorageClass>STANDARD</StorageClass></Contents>\
<Contents><Key>ck/job/shared/op%2B1-6</Key><LastModified>2026-12-07T10:00:00.000Z</LastModified>\
<ETag>&quot;x&quot;</ETag><Size>16</Size><StorageClass>STANDARD</StorageClass></Contents>\
<Contents><Key>ck/job/shared/x+y-7</Key><LastModified>2026-12-07T10:00:00.000Z</LastModified>\
<ETag>&quot;x&quot;</ETag><Size>16</Size><StorageClass>STANDARD</StorageClass></Contents>\
<Contents><Key>ck/job/shared/%C3%A9clair+%25</Key><LastModified>2026-12-07T10:00:00.000Z</LastModified>\
<ETag>&quot;x&quot;</ETag><Size>7</Size><StorageClass>STANDARD</StorageClass></Contents>\
<CommonPrefixes><Prefix>ck/job/shared/sub+dir%2F</Prefix></CommonPrefixes></ListBucketResult>"""
AWS_NAMES = {"a b+c": 16, "op+1-6": 16, "x y-7": 16, "éclair %": 7}


def test_keys_are_decoded_as_s3_encodes_them_a_space_as_plus() -> None:
    """Issue 46: with ``encoding-type=url`` S3 writes a space as ``+`` and a ``+`` as ``%2B``; decoded by
    ``unquote`` a checkpoint path holding a space read every file as missing (moto's ``%20`` hid it)."""
    page = ranges.parse(AWS_PAGE, "ck/job/shared/")
    assert page.files == AWS_NAMES
    assert page.greatest == "ck/job/shared/éclair %" and page.token is None
    plain = AWS_PAGE.replace(b"<EncodingType>url</EncodingType>", b"")  # not encoded: taken as written
    assert "a+b%2Bc" in ranges.parse(plain, "ck/job/shared/").files


def test_a_range_listing_served_as_aws_writes_it_finds_names_with_spaces_and_plus(answering: str) -> None:
    names = tuple(sorted(AWS_NAMES))
    part = verdict.Range(FOLDER, "", names[-1], names, len(names))
    listed = _list(f"{answering}/aws", part=part)
    assert listed[0] == AWS_NAMES and listed[1] is None  # to the folder's end: the last page


@S3
@pytest.mark.usefixtures("small")
def test_a_range_listing_that_lacks_a_covered_name_finds_it_missing(storage_backend: Running) -> None:
    """Issue 46: a key range listed for chk-2's new names spans names chk-1's verdict covers; one of
    them gone from the listing is missing (merged into what was seen, it used to stay)."""
    job_dir, shared = _job(storage_backend, "covered")
    writer = CheckpointStorage(storage_backend.storage_options(), write_verdicts=True)
    assert chosen(lookup(writer, job_dir)) == f"{job_dir}/chk-1"
    writer.settle()
    new = [f"{n}~new" for n in NAMES]  # each sorts right after a covered name
    checkpoint(storage_backend, job_dir, 2, shared + [f"{job_dir}/shared/{n}" for n in new])
    parts = verdict.cut(FOLDER, new, NAMES)
    inside = [n for n in NAMES if any(p.after < n < p.last for p in parts)]
    assert inside, parts
    remove(storage_backend, f"{job_dir}/shared/{inside[0]}")
    found = lookup(CheckpointStorage(storage_backend.storage_options()), job_dir)
    assert found.rejected and found.rejected[0].startswith("chk-2: 1 of the"), found.rejected
    assert inside[0] in found.rejected[0]
