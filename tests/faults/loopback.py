"""Storage that misbehaves, on 127.0.0.1 only: a port nobody answers on, a server that accepts and never
answers, and a proxy in front of moto's S3 that fails calls the way networks and S3 do."""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from tests.support.production import wait_for

ACCESS_DENIED = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
    b"<Message>Access Denied</Message><RequestId>F417</RequestId></Error>"
)
INTERNAL_ERROR = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InternalError</Code>'
    b"<Message>We encountered an internal error. Please try again.</Message></Error>"
)


@dataclass
class Blackhole:
    """A TCP port that accepts connections and never sends a byte, and how many it has accepted."""

    port: int
    accepted: int = 0  # written by the accepting thread only
    _awaited: int = 0

    def wait_for_connections(self, count: int, timeout: float) -> bool:
        """True once ``count`` more connections than all waited for before were accepted, False at
        ``timeout``."""
        self._awaited += count
        awaited = self._awaited
        return wait_for(lambda: self.accepted >= awaited, timeout)


@contextmanager
def counting_blackhole() -> Iterator[Blackhole]:
    """Storage slower than any deadline: connections are accepted, never answered, and counted."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    server.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()
    hole = Blackhole(int(server.getsockname()[1]))

    def accept() -> None:
        while not stop.is_set() and len(held) < 1000:
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            held.append(conn)  # read nothing, answer nothing
            hole.accepted += 1

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield hole
    finally:
        stop.set()
        thread.join(2)
        for conn in held:
            conn.close()
        server.close()


@contextmanager
def blackhole() -> Iterator[int]:
    """A TCP port that accepts connections and never sends a byte (storage slower than any deadline)."""
    with counting_blackhole() as hole:
        yield hole.port


def closed_port() -> int:
    """A loopback port with no listener (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class S3Proxy(ThreadingHTTPServer):
    """Forwards S3 calls to moto; ``mode`` says how to fail them.

    * ``pass``: forward unchanged;
    * ``page2-500``: ListObjectsV2 pages of two entries, and every request for a later page gets S3's
      500 InternalError (the listing fails half-way);
    * ``cut-list``: the ListObjectsV2 response is cut off half-way through its body (connection closed);
    * ``deny``: every call gets S3's 403 AccessDenied (a bucket policy or IAM denies the reader).

    Whatever the mode, a call to a bucket in ``hung`` is never answered (until ``release`` is set): one
    bucket of an endpoint hangs beside healthy ones (``held`` counts such calls).
    """

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, upstream: str) -> None:
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        split = urlsplit(upstream)
        self.upstream = (split.hostname or "127.0.0.1", split.port or 80)
        self.mode = "pass"
        self.failed = 0  # requests this proxy failed on purpose
        self.hung: set[str] = set()
        self.held = 0  # requests to a hung bucket, never answered
        self.release = threading.Event()
        self.lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that gave up on a call (its deadline cancelled it) is not the proxy's error."""
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: S3Proxy

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._forward()

    def do_HEAD(self) -> None:
        self._forward()

    def do_PUT(self) -> None:
        self._forward()

    def do_POST(self) -> None:
        self._forward()

    def do_DELETE(self) -> None:
        self._forward()

    def _fail(self, status: int, body: bytes) -> None:
        with self.server.lock:
            self.server.failed += 1
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        mode = self.server.mode
        split = urlsplit(self.path)
        if split.path.lstrip("/").split("/", 1)[0] in self.server.hung:
            with self.server.lock:
                self.server.held += 1
            self.server.release.wait()
            self.close_connection = True
            return
        query = parse_qs(split.query, keep_blank_values=True)
        listing = self.command == "GET" and query.get("list-type") == ["2"]
        if mode == "deny":
            return self._fail(403, ACCESS_DENIED)
        path = self.path
        if listing and mode == "page2-500":
            if "continuation-token" in query:
                return self._fail(500, INTERNAL_ERROR)
            path += "&max-keys=2"  # moto checks no signatures; real S3 pages at 1,000
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        upstream = http.client.HTTPConnection(*self.server.upstream, timeout=10)
        try:
            upstream.request(self.command, path, body=body or None, headers=headers)
            resp = upstream.getresponse()
            data = resp.read()
            self.send_response(resp.status)
            for key, value in resp.getheaders():
                if key.lower() not in ("connection", "transfer-encoding", "content-length", "server", "date"):
                    self.send_header(key, value)
            # A HEAD answer has no body but the object's length (what a size check reads).
            length_header = resp.getheader("Content-Length") if self.command == "HEAD" else None
            self.send_header("Content-Length", length_header or str(len(data)))
            self.end_headers()
            if listing and mode == "cut-list":
                with self.server.lock:
                    self.server.failed += 1
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if self.command != "HEAD":
                self.wfile.write(data)
        finally:
            upstream.close()


@contextmanager
def s3_proxy(upstream: str) -> Iterator[S3Proxy]:
    proxy = S3Proxy(upstream)
    thread = threading.Thread(target=proxy.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        proxy.release.set()
        proxy.shutdown()
        proxy.server_close()
        thread.join(5)
