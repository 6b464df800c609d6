"""HEADs of many S3 objects by presigned URL over one pooled HTTP client (``verify: files`` on S3); the
same client GETs the range listings of ``ranges.py``.

A verdict leaves a few hundred new files to ask one by one. Through s3fs each HEAD is a botocore call
(signing, event hooks, parsing: 2-4 ms of CPU) and a hop to fsspec's event loop; 200 of them cost the
admission about a second of CPU on two cores (docs/performance.md). Here the same client (its
credentials, region and endpoint, through s3fs's own ``_url``) signs the first key of a bucket, and
``Presigner`` signs the others in the calling thread from that URL (checked to give it exactly); plain
HEADs go out over sockets of the client's own pool (``HeadClient.head``): an answer is a status line
and a Content-Length. The range listings' GETs go over a urllib3 pool.

Used only where a presigned URL asks exactly what ``head_object`` would (``usable``): no
requester-pays or extra request parameters (SSE-C keys travel as headers), no proxy, an http endpoint
or an https one with a CA bundle named (``client_kwargs.verify``, ``AWS_CA_BUNDLE``) or a system trust
store (botocore brings its own bundle; urllib3 has none). Anywhere else ``verify.py`` asks
through s3fs as before. Every request has the client's connect and read timeouts and never outlives
the lookup's deadline.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import socket
import ssl
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

import urllib3

# A presigned URL lives this long: an admission is over in seconds.
EXPIRES_SECONDS = 300
_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
# s3fs's own parameters and botocore's client settings that a presigned URL still honours (anything
# else in the options, e.g. a requester-pays flag or extra request arguments, sends it back to s3fs).
_NEUTRAL = frozenset(
    {
        "key",
        "secret",
        "token",
        "anon",
        "endpoint_url",
        "client_kwargs",
        "config_kwargs",
        "use_listings_cache",
        "skip_instance_cache",
        "default_block_size",
        "default_fill_cache",
        "default_cache_type",
        "cache_regions",
        "listings_expiry_time",
        "max_concurrency",
        "profile",
        "session",
        "use_ssl",
        "asynchronous",
        "loop",
        "version_aware",
    }
)


class HeadFailed(Exception):
    """A HEAD answered with a status that is neither 200 nor 404 (a 403 is a PermissionError)."""


def usable(options: Mapping[str, Any], filesystem: Any) -> bool:
    """Whether presigned HEADs ask what s3fs's ``head_object`` would, (``filesystem``: from ``options``)."""
    if (
        set(options) - _NEUTRAL
        or getattr(filesystem, "req_kw", None)
        or getattr(filesystem, "s3_additional_kwargs", None)
    ):
        return False
    config = options.get("config_kwargs") or {}
    if config.get("proxies") or any(os.environ.get(v) for v in _PROXY_VARIABLES):
        return False
    endpoint = str(
        options.get("endpoint_url") or (options.get("client_kwargs") or {}).get("endpoint_url") or ""
    )
    return not endpoint or endpoint.startswith(("http://", "https://"))


def presign(filesystem: Any, keys: Sequence[str], seconds_left: float) -> list[str]:
    """Presigned HEAD URLs of ``keys`` (``bucket/key``), signed together on the filesystem's event loop
    (no request: the credentials are the client's; a refresh of them waits at most ``seconds_left``)."""
    import asyncio

    from fsspec.asyn import sync

    async def sign_all() -> list[str]:
        return list(
            await asyncio.gather(
                *(filesystem._url(key, expires=EXPIRES_SECONDS, client_method="head_object") for key in keys)
            )
        )

    signed: list[str] = sync(filesystem.loop, sign_all, timeout=max(seconds_left, 0.001))
    return signed


def _v2_parts(
    bucket: str, host: str, path: str, values: Mapping[str, str], secret: str
) -> tuple[str, str, str, bytes] | None:
    """SigV2 query auth: the canonical resource's start, no query, the string to sign's start, the key."""
    if set(values) - {"AWSAccessKeyId", "Signature", "Expires", "x-amz-security-token"}:
        return None
    resource = f"/{bucket}{path}" if host.startswith(f"{bucket}.") else path  # virtual host or path style
    token = values.get("x-amz-security-token")
    stamp = f"HEAD\n\n\n{values['Expires']}\n" + (f"x-amz-security-token:{token}\n" if token else "")
    return resource, "", stamp, secret.encode()


def _v4_parts(
    path: str, fields: list[tuple[str, str, str]], values: Mapping[str, str], secret: str
) -> tuple[str, str, str, bytes] | None:
    """SigV4 query auth (signing the host header only): the path before the key, the canonical query,
    the string to sign's start, the signing key of the credential scope."""
    if values.get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" or values.get("X-Amz-SignedHeaders") != "host":
        return None
    scope = values["X-Amz-Credential"].split("/", 1)[1]
    day, region, service, end = scope.split("/")
    if end != "aws4_request":
        return None
    pairs = sorted(
        (quote(unquote(n), safe="-_.~"), quote(unquote(v), safe="-_.~"))
        for n, _, v in fields
        if n != "X-Amz-Signature"
    )
    key = f"AWS4{secret}".encode()
    for part in (day, region, service, end):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    stamp = f"AWS4-HMAC-SHA256\n{values['X-Amz-Date']}\n{scope}\n"
    return path, "&".join(f"{n}={v}" for n, v in pairs), stamp, key


_RETRIED = (500, 502, 503, 504)
_MAX_HEAD = 65536


def _left(seconds: float) -> float:
    if seconds <= 0:
        raise TimeoutError("no time left for the HEAD")
    return seconds


def _address(netloc: str, default: int) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``) as a host and a port."""
    host, colon, port = netloc.rpartition(":")
    if not colon or "]" in port:
        host, port = netloc, ""
    host = host.strip("[]")
    return host, int(port) if port else default


def _answer(head: bytes) -> tuple[int, bytes | None, bool]:
    """The status, Content-Length and whether the connection may be used again, of an answer's head
    (a HEAD's answer has no body, whatever its Content-Length says)."""
    at = head.index(b"\r\n\r\n")
    lines = head[:at].split(b"\r\n")
    version, _, rest = lines[0].partition(b" ")
    code = rest[:3]
    if not version.startswith(b"HTTP/") or not code.isdigit():
        raise ConnectionError(f"not an HTTP answer: {lines[0][:40]!r}")
    length: bytes | None = None
    connection = b""
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = value.strip()
        elif name == b"connection":
            connection = value.strip().lower()
    keep = len(head) == at + 4 and (
        connection == b"keep-alive" if version == b"HTTP/1.0" else connection != b"close"
    )
    return int(code), length, keep


class Presigner:
    """Presigned HEAD URLs of one lookup's keys: the client (aiobotocore, on the filesystem's loop)
    signs the first key of each bucket; the rest are signed in the calling thread from what that URL
    carries (its endpoint, credential scope, time and expiry: ``_Template``), only where signing that
    first key the same way gives exactly the client's URL. Anywhere else (another signature version,
    anonymous access, an endpoint with a path) the client signs every key, as ``presign``.

    Why: through aiobotocore a signature resolves the endpoint rules and runs the event hooks for
    every key (~0.2 ms of CPU each, 200 of them a quarter of an admission's CPU: docs/performance.md);
    here one hop to the loop per bucket, then a hash or two per key."""

    def __init__(self, filesystem: Any, seconds_left: float) -> None:
        self.filesystem = filesystem
        self.seconds_left = seconds_left
        self.templates: dict[str, _Template | None] = {}

    def sign(self, keys: Sequence[str]) -> list[str]:
        out: list[str] = []
        unsigned: list[int] = []  # where the client signs
        for key in keys:
            bucket = key.partition("/")[0]
            if bucket not in self.templates:
                url, self.templates[bucket] = self._first(key)
                out.append(url)
                continue
            template = self.templates[bucket]
            if template is None:
                unsigned.append(len(out))
            out.append(template.sign(key) if template is not None else "")
        if unsigned:
            signed = presign(self.filesystem, [keys[i] for i in unsigned], self.seconds_left)
            for i, url in zip(unsigned, signed, strict=True):
                out[i] = url
        return out

    def _first(self, key: str) -> tuple[str, _Template | None]:
        from fsspec.asyn import sync

        fs = self.filesystem

        async def first() -> tuple[str, Any]:
            url = await fs._url(key, expires=EXPIRES_SECONDS, client_method="head_object")
            s3 = await fs.get_s3(key.partition("/")[0])
            credentials = getattr(getattr(s3, "_request_signer", None), "_credentials", None)
            frozen = await credentials.get_frozen_credentials() if credentials is not None else None
            return url, frozen

        url, frozen = sync(fs.loop, first, timeout=max(self.seconds_left, 0.001))
        secret = getattr(frozen, "secret_key", None)
        return url, (_Template.of(url, key, secret) if isinstance(secret, str) and secret else None)


@dataclass(frozen=True)
class _Template:
    """A presigned HEAD URL (SigV2 or SigV4 query auth, as botocore writes them) with its key and
    signature left out: ``sign`` puts another key of the same bucket in, signed with the same scope,
    time and expiry."""

    prefix: str  # the URL before the key: "http://host:port/bucket/" or "https://bucket.host/"
    bucket: str
    host: str
    before: str  # the query before the signature's value
    after: str  # the query after it
    v4: bool
    resource: str  # SigV2: the canonical resource's start ("/bucket/"); SigV4: the path before the key
    query: str  # SigV4: the canonical query (the URL's, without the signature)
    stamp: str  # SigV2: Expires and the security token's line; SigV4: the algorithm, date and scope
    secret: bytes  # SigV2: the secret key; SigV4: the signing key of the scope's day, region, service

    @staticmethod
    def of(url: str, key: str, secret: str) -> _Template | None:
        """The template of ``url`` (the client's for ``key``, ``bucket/key``), None where signing
        ``key`` from it would not give ``url`` exactly."""
        bucket, _, name = key.partition("/")
        scheme, sep, rest = url.partition("://")
        address, _, query = rest.partition("?")
        host, slash, path = address.partition("/")
        quoted = quote(name, safe="/~")
        if not sep or not slash or not path.endswith(quoted):
            return None
        before_key = "/" + path[: len(path) - len(quoted)]
        prefix = f"{scheme}://{host}{before_key}"
        raw = query.split("&")
        fields = [part.partition("=") for part in raw]
        names = [f[0] for f in fields]
        v4 = "X-Amz-Signature" in names
        mark = "X-Amz-Signature" if v4 else "Signature"
        if mark not in names:
            return None
        at = names.index(mark)
        before, after = "&".join(raw[:at]), "&".join(raw[at + 1 :])
        values = {n: unquote(v) for n, _, v in fields}
        try:
            parts = (
                _v4_parts(before_key, fields, values, secret)
                if v4
                else _v2_parts(bucket, host, before_key, values, secret)
            )
        except (KeyError, ValueError):
            return None
        if parts is None:
            return None
        template = _Template(prefix, bucket, host, before, after, v4, *parts)
        return template if template.sign(key) == url else None

    def sign(self, key: str) -> str:
        bucket, _, name = key.partition("/")
        if bucket != self.bucket:
            raise ValueError(f"{key} is not in bucket {self.bucket}")
        quoted = quote(name, safe="/~")
        if self.v4:
            path = self.resource + quoted
            canonical = f"HEAD\n{path}\n{self.query}\nhost:{self.host}\n\nhost\nUNSIGNED-PAYLOAD"
            digest = hashlib.sha256(canonical.encode()).hexdigest()
            signature = hmac.new(self.secret, (self.stamp + digest).encode(), hashlib.sha256).hexdigest()
        else:
            mac = hmac.new(self.secret, (self.stamp + self.resource + quoted).encode(), hashlib.sha1).digest()
            signature = quote(base64.b64encode(mac).decode(), safe="-_.~")
        tail = f"&{self.after}" if self.after else ""
        head = f"{self.before}&" if self.before else ""
        mark = "X-Amz-Signature" if self.v4 else "Signature"
        return f"{self.prefix}{quoted}?{head}{mark}={signature}{tail}"


class HeadClient:
    """One urllib3 pool per process (made again after a fork), as many connections as lookup requests."""

    def __init__(self, connections: int, connect_timeout: float, read_timeout: float, verify: Any) -> None:
        self.connections = connections
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.verify = verify
        self._pid = -1
        self._pool: urllib3.PoolManager | None = None
        self._sockets: dict[tuple[str, str], list[socket.socket]] = {}  # HEADs' idle connections
        self._context: ssl.SSLContext | None = None
        self._lock = threading.Lock()

    def _forked(self) -> None:
        """After a fork (under the lock): the parent's pool and sockets are not this process's."""
        if self._pid != os.getpid():
            self._pid, self._pool, self._sockets = os.getpid(), None, {}

    def _manager(self) -> urllib3.PoolManager:
        with self._lock:
            self._forked()
            if self._pool is None:
                tls: dict[str, Any] = {}  # the system's trust store (``usable`` made sure it has one)
                if self.verify is False:
                    tls = {"cert_reqs": "CERT_NONE"}
                elif isinstance(self.verify, str):
                    tls = {"ca_certs": self.verify}
                self._pool = urllib3.PoolManager(num_pools=8, maxsize=self.connections, block=False, **tls)
            return self._pool

    def _timeouts(self, seconds_left: float, method: str) -> tuple[urllib3.Timeout, urllib3.Retry]:
        if seconds_left <= 0:
            raise TimeoutError(f"no time left for the {method}")
        timeout = urllib3.Timeout(
            connect=min(self.connect_timeout, seconds_left),
            read=min(self.read_timeout, seconds_left),
            total=seconds_left,
        )
        retries = urllib3.Retry(
            total=1,
            connect=1,
            read=1,
            status=1,
            status_forcelist=(500, 502, 503, 504),
            backoff_factor=0,
            raise_on_status=False,
            allowed_methods=frozenset({method}),
        )
        return timeout, retries

    def get(self, url: str, seconds_left: float) -> tuple[int, bytes]:
        """A GET's status and body (a listing page: ``ranges.py``), retried and timed as ``head``."""
        timeout, retries = self._timeouts(seconds_left, "GET")
        answer = self._manager().request("GET", url, timeout=timeout, retries=retries)
        return answer.status, answer.data

    def head(self, url: str, seconds_left: float) -> int | bool | None:
        """The object's size (None: no Content-Length), False when there is none (404).

        One retry on a dropped connection, a timeout or a 5xx answer (botocore's standard mode tries
        twice too); neither the connection nor the answer may take longer than the client's timeouts or
        the time left. Sent on a socket of its own pool, not urllib3's: a HEAD is one request line and
        one header out, a status line and a Content-Length back, and urllib3's URL parsing, retry and
        header objects cost more CPU than the rest of the HEAD (docs/performance.md)."""
        if seconds_left <= 0:
            raise TimeoutError("no time left for the HEAD")
        end = time.monotonic() + seconds_left
        scheme, _, rest = url.partition("://")
        netloc, _, target = rest.partition("/")
        request = f"HEAD /{target} HTTP/1.1\r\nHost: {netloc}\r\n\r\n".encode()
        status = 0
        length: bytes | None = None
        for attempt in (1, 2):
            try:
                status, length = self._ask(scheme, netloc, request, end)
            except OSError:
                if attempt == 2 or time.monotonic() >= end:
                    raise
                continue
            if status not in _RETRIED or time.monotonic() >= end:
                break
        if status == 200:
            return int(length) if length is not None and length.isdigit() else None
        if status == 404:
            return False
        if status == 403:
            raise PermissionError("HTTP 403")
        raise HeadFailed(f"HTTP {status}")

    def _ask(self, scheme: str, netloc: str, request: bytes, end: float) -> tuple[int, bytes | None]:
        """One HEAD on a pooled connection (a new one when none is idle): its status and Content-Length."""
        where = (scheme, netloc)
        conn = self._idle(where)
        fresh = conn is None
        head = b""
        try:
            if conn is None:
                conn = self._connect(scheme, netloc, end)
            conn.settimeout(_left(min(self.read_timeout, end - time.monotonic())))
            conn.sendall(request)
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(4096)
                if not chunk:
                    raise ConnectionResetError("the connection closed before the answer")
                head += chunk
                if len(head) > _MAX_HEAD:
                    raise ConnectionError("an answer's head longer than 64 KiB")
            status, length, keep = _answer(head)
        except OSError as exc:
            if conn is not None:
                conn.close()
            if not fresh and not head and not isinstance(exc, TimeoutError):
                # a kept connection the server had closed meanwhile: asked again on a new one
                return self._ask(scheme, netloc, request, end)
            raise
        if keep:
            self._keep(where, conn)
        else:
            conn.close()
        return status, length

    def _idle(self, where: tuple[str, str]) -> socket.socket | None:
        with self._lock:
            self._forked()
            idle = self._sockets.get(where)
            return idle.pop() if idle else None

    def _keep(self, where: tuple[str, str], conn: socket.socket) -> None:
        with self._lock:
            idle = self._sockets.setdefault(where, [])
            if len(idle) < self.connections:
                idle.append(conn)
                return
        conn.close()

    def _connect(self, scheme: str, netloc: str, end: float) -> socket.socket:
        host, port = _address(netloc, 443 if scheme == "https" else 80)
        conn = socket.create_connection(
            (host, port), timeout=_left(min(self.connect_timeout, end - time.monotonic()))
        )
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if scheme != "https":
            return conn
        try:
            return self._tls().wrap_socket(conn, server_hostname=host)
        except BaseException:
            conn.close()
            raise

    def _tls(self) -> ssl.SSLContext:
        with self._lock:
            if self._context is None:
                if self.verify is False:
                    context = ssl.create_default_context()
                    context.check_hostname = False
                    context.verify_mode = ssl.CERT_NONE
                else:  # the CA bundle named, else the system's trust store (``usable`` made sure of one)
                    context = ssl.create_default_context(
                        cafile=self.verify if isinstance(self.verify, str) else None
                    )
                self._context = context
            return self._context
