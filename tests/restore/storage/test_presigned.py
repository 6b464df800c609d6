"""The S3 fast path of ``verify: files`` (restore/storage/presigned.py): the new files a verdict leaves are
asked by presigned HEADs over a pooled client, and find what s3fs's HEADs found (a file gone, a file
shorter than named) on moto; an answer other than 200 or 404, a hung server and a spent deadline become
the same storage errors as before, from a real HTTP server answering each way."""

from __future__ import annotations

import http.server
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.backends import Running
from tests.support.httpd import serving
from tests.support.jobtrees import SIZE, checkpoint, chosen, lookup, put, remove, verified_job
from tests.support.server import generate_certs
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


# --- signed in the calling thread, as the client signs --------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {"endpoint_url": "http://127.0.0.1:9000", "token": "session/token+="},  # SigV2, path style
        {"client_kwargs": {"region_name": "eu-west-1"}},  # SigV2, virtual host
        {
            "endpoint_url": "http://127.0.0.1:9000",
            "config_kwargs": {"signature_version": "s3v4"},
            "token": "t/k",
        },
        {"client_kwargs": {"region_name": "eu-west-1"}, "config_kwargs": {"signature_version": "s3v4"}},
    ],
)
def test_the_presigner_signs_every_key_as_the_client_does(
    options: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client (aiobotocore) signs each bucket's first key; the rest are signed here by botocore's
    query signers on the client's credentials.
    At one fixed time both give the same URL for every key, spaces, plus signs and UTF-8 included."""
    import datetime

    import botocore.auth
    import s3fs

    now = datetime.datetime(2026, 12, 7, 21, 0, 0)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: now)  # SigV4's time
    monkeypatch.setattr(botocore.auth.HmacV1QueryAuth, "_get_date", lambda self: "1796677500")  # SigV2's
    fs = s3fs.S3FileSystem(skip_instance_cache=True, key="AKIDEXAMPLE", secret="secret/key+", **options)
    keys = [
        "jobs/ck/job/shared/first",
        "jobs/ck/job/shared/a b+c~d%e",
        "jobs/ck/job/shared/Ünï/çode",
        "other/ck/job/shared/x",
    ]
    signer = presigned.Presigner(fs, 10)
    assert signer.sign(keys) == presigned.presign(fs, keys, 10)
    assert all(signer.signings.values())  # signed here, not by the client, after each bucket's first
    assert signer.sign(keys[1:3]) == presigned.presign(fs, keys[1:3], 10)


def test_where_the_presigner_cannot_sign_the_client_signs_every_key() -> None:
    import s3fs

    fs = s3fs.S3FileSystem(skip_instance_cache=True, anon=True, endpoint_url="http://127.0.0.1:9000")
    keys = ["jobs/a", "jobs/b"]
    signer = presigned.Presigner(fs, 10)
    assert (
        signer.sign(keys)
        == presigned.presign(fs, keys, 10)
        == [
            "http://127.0.0.1:9000/jobs/a",
            "http://127.0.0.1:9000/jobs/b",
        ]
    )
    assert signer.signings == {"jobs": None}


# --- the HEADs' own connections -------------------------------------------------------------------


class _KeptAlive(http.server.BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive (as S3 answers): counts connections; /flaky answers 503 once."""

    protocol_version = "HTTP/1.1"
    connections = 0
    flaky = 0

    def setup(self) -> None:
        type(self).connections += 1
        super().setup()

    def do_HEAD(self) -> None:
        if self.path.startswith("/flaky"):
            type(self).flaky += 1
            status = 503 if type(self).flaky == 1 else 200
        else:
            status = 200 if self.path.startswith("/here") else 404
        self.send_response(status)
        self.send_header("Content-Length", "1234")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A TLS server for 127.0.0.1 signed by a CA of the test's own (the project's ``certs generate``)."""

    certs = generate_certs(tmp_path / "certs")
    _KeptAlive.connections, _KeptAlive.flaky = 0, 0
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _KeptAlive)
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs / "tls.crt", certs / "tls.key")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", str(certs / "ca.crt")
    finally:
        server.shutdown()
        server.server_close()


def test_heads_over_tls_keep_their_connection_and_retry_once(tls_server: tuple[str, str]) -> None:
    """Verified against the CA bundle named, one connection for HEADs one after another (HTTP/1.1),
    a 503 asked again; a kept connection that broke meanwhile is replaced, never an error."""
    url, ca = tls_server
    client = presigned.HeadClient(4, connect_timeout=2, read_timeout=5, verify=ca)
    assert [client.head(f"{url}/here/{i}?X-Amz-Signature=s", 10) for i in range(3)] == [1234] * 3
    assert client.head(f"{url}/gone", 10) is False
    assert _KeptAlive.connections == 1
    assert client.head(f"{url}/flaky", 10) == 1234 and _KeptAlive.flaky == 2
    for idle in client._idle.values():  # a kept connection broke meanwhile
        for conn in idle:
            assert conn.sock is not None
            conn.sock.shutdown(2)
    assert client.head(f"{url}/here/again", 10) == 1234
    untrusted = presigned.HeadClient(4, connect_timeout=2, read_timeout=5, verify=None)  # the system's
    with pytest.raises(ssl.SSLError):
        untrusted.head(f"{url}/here", 10)
