"""The S3 fast path of ``verify: files`` (restore/storage/presigned.py): the new files a verdict leaves are
asked by presigned HEADs over a pooled client, and find what s3fs's HEADs found (a file gone, a file
shorter than named) on moto; an answer other than 200 or 404, a hung server and a spent deadline become
the same storage errors as before, from a real HTTP server answering each way."""

from __future__ import annotations

import http.server
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.backends import Running
from tests.support.httpd import serving
from tests.support.jobtrees import SIZE, checkpoint, chosen, lookup, put, remove, verified_job
from webhook.common.paths import StoragePath
from webhook.restore.snapshots import StorageError
from webhook.restore.storage import presigned
from webhook.restore.storage.backends import Deadline
from webhook.restore.storage.requests import Cursor, Ledger
from webhook.restore.storage.search import CheckpointStorage

S3 = pytest.mark.parametrize("storage_backend", ["s3"], indirect=True)


@S3
def test_new_files_asked_by_presigned_head_find_one_gone_and_one_shorter(storage_backend: Running) -> None:
    job_dir, shared = verified_job(storage_backend)
    new = [f"{job_dir}/shared/new-{i}" for i in range(3)]
    checkpoint(storage_backend, job_dir, 2, shared + new)
    reader = CheckpointStorage(storage_backend.storage_options())
    found = lookup(reader, job_dir)
    assert chosen(found) == f"{job_dir}/chk-2" and found.trips.requests == 4 + len(new)
    assert reader.files.head_clients["s3"] is not None  # the presigned path answered them
    put(storage_backend, {new[2]: bytes(SIZE - 1)})
    found = lookup(CheckpointStorage(storage_backend.storage_options()), job_dir)
    assert chosen(found) == f"{job_dir}/chk-1"
    assert "shorter than Flink reads, the first" in found.rejected[0] and "new-2" in found.rejected[0]
    remove(storage_backend, new[1])
    found = lookup(CheckpointStorage(storage_backend.storage_options()), job_dir)
    assert chosen(found) == f"{job_dir}/chk-1"
    assert "is missing, the first" in found.rejected[0] and "new-1" in found.rejected[0]


def test_options_a_presigned_url_would_not_honour_go_through_s3fs(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = {"endpoint_url": "http://127.0.0.1:9000", "key": "k", "secret": "s"}
    fs = type("Fs", (), {"req_kw": {}, "s3_additional_kwargs": {}})()
    assert presigned.usable(plain, fs)
    assert not presigned.usable({**plain, "requester_pays": True}, fs)
    assert not presigned.usable({**plain, "s3_additional_kwargs": {"SSECustomerKey": "x"}}, fs)
    assert not presigned.usable({**plain, "config_kwargs": {"proxies": {"https": "http://proxy:3128"}}}, fs)
    requester = type("Fs", (), {"req_kw": {"RequestPayer": "requester"}, "s3_additional_kwargs": {}})()
    assert not presigned.usable(plain, requester)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    assert not presigned.usable(plain, fs)


class _Answers(http.server.BaseHTTPRequestHandler):
    """A HEAD of /<status> answers that status; /hang never answers in time."""

    def do_HEAD(self) -> None:
        if self.path.startswith("/hang"):
            time.sleep(3)
        status = 200 if self.path.startswith("/hang") else int(self.path.strip("/").split("?")[0])
        self.send_response(status)
        self.send_header("Content-Length", "7")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def answering() -> Iterator[str]:
    with serving(_Answers) as url:
        yield url


def _head(url: str, seconds: float = 30) -> int | bool | None:
    storage = CheckpointStorage()
    client = presigned.HeadClient(4, connect_timeout=2, read_timeout=1, verify=None)
    path = StoragePath.parse("s3://bucket/ck/job/shared/file")
    return storage.files.head_url(path, url, client, Deadline(seconds), Cursor(Ledger(100)))


def test_a_head_answers_a_size_or_not_there(answering: str) -> None:
    assert _head(f"{answering}/200") == 7
    assert _head(f"{answering}/404") is False


@pytest.mark.parametrize(
    ("answer", "told"),
    [
        ("403", "permission denied checking s3://bucket/ck/job/shared/file"),
        ("500", "checking s3://bucket/ck/job/shared/file:"),
        ("400", "checking s3://bucket/ck/job/shared/file: HTTP 400"),
        ("hang", "checking s3://bucket/ck/job/shared/file:"),
    ],
)
def test_a_head_that_fails_is_a_storage_error_naming_the_file(answering: str, answer: str, told: str) -> None:
    with pytest.raises(StorageError) as raised:
        _head(f"{answering}/{answer}")
    assert str(raised.value).startswith(told)


def test_a_head_never_outlives_the_lookups_deadline(answering: str) -> None:
    with pytest.raises(StorageError, match="no time left"):
        _head(f"{answering}/200", seconds=0)
    with pytest.raises(StorageError, match="checking s3://bucket"):  # read timeout cut to the time left
        _head(f"{answering}/hang", seconds=0.2)
