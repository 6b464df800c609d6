"""HEADs of many S3 objects by presigned URL over one pooled HTTP client (``verify: files`` on S3); the
same client GETs the range listings of ``ranges.py``.

A verdict leaves a few hundred new files to ask one by one. Through s3fs each HEAD is a botocore call
(signing, event hooks, parsing: 2-4 ms of CPU) and a hop to fsspec's event loop; 200 of them cost the
admission about a second of CPU on two cores (docs/performance.md). Here the same client (its
credentials, region and endpoint, through s3fs's own ``_url``) signs the first key of a bucket, and
``Presigner`` signs the others in the calling thread with botocore's own query signer on the client's
frozen credentials (checked to give the client's URL exactly); plain HEADs go out over kept-alive
``http.client`` connections (``HeadClient.head``). The range listings' GETs go over a urllib3 pool.

Used only where a presigned URL asks exactly what ``head_object`` would (``usable``): no
requester-pays or extra request parameters (SSE-C keys travel as headers), no proxy, an http endpoint
or an https one with a CA bundle named (``client_kwargs.verify``, ``AWS_CA_BUNDLE``) or a system trust
store (botocore brings its own bundle; urllib3 has none). Anywhere else ``verify.py`` asks
through s3fs as before. Every request has the client's connect and read timeouts and never outlives
the lookup's deadline.
"""

from __future__ import annotations

import http.client
import os
import socket
import ssl
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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


_RETRIED = (500, 502, 503, 504)
# A kept connection the server closed meanwhile: nothing of an answer came (not a timeout).
_DROPPED = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


class Presigner:
    """Presigned HEAD URLs of one lookup's keys: the client (aiobotocore, on the filesystem's loop)
    signs the first key of each bucket; the rest are signed in the calling thread by botocore's own
    query signers (``_Signing``) on the client's credentials, frozen once per bucket and lookup, with
    the region, signature version and addressing the client's URL shows, only where signing that
    first key so gives exactly the client's URL. Anywhere else (another signature version, anonymous
    access, an endpoint with a path) the client signs every key, as ``presign``.

    Why: through aiobotocore a signature resolves the endpoint rules and runs the event hooks for
    every key (~0.2 ms of CPU each, 200 of them a quarter of an admission's CPU: docs/performance.md);
    here one hop to the loop per bucket, then botocore's signer alone per key."""

    def __init__(self, filesystem: Any, seconds_left: float) -> None:
        self.filesystem = filesystem
        self.seconds_left = seconds_left
        self.signings: dict[str, _Signing | None] = {}

    def sign(self, keys: Sequence[str]) -> list[str]:
        out: list[str] = []
        unsigned: list[int] = []  # where the client signs
        for key in keys:
            bucket = key.partition("/")[0]
            if bucket not in self.signings:
                url, self.signings[bucket] = self._first(key)
                out.append(url)
                continue
            signing = self.signings[bucket]
            if signing is None:
                unsigned.append(len(out))
            out.append(signing.sign(key) if signing is not None else "")
        if unsigned:
            signed = presign(self.filesystem, [keys[i] for i in unsigned], self.seconds_left)
            for i, url in zip(unsigned, signed, strict=True):
                out[i] = url
        return out

    def _first(self, key: str) -> tuple[str, _Signing | None]:
        """The client's URL of ``key`` and how to sign its bucket's other keys (None: by the client)."""
        from fsspec.asyn import sync

        fs = self.filesystem

        async def first() -> tuple[str, _Signing | None]:
            await fs.set_session()
            s3 = await fs.get_s3(key.partition("/")[0])
            credentials = getattr(getattr(s3, "_request_signer", None), "_credentials", None)
            frozen = await credentials.get_frozen_credentials() if credentials is not None else None
            url = ""
            for _ in range(2):  # a second time where the clock's second turned between the two
                url = await fs._url(key, expires=EXPIRES_SECONDS, client_method="head_object")
                signing = _Signing.of(url, key, frozen)
                if signing is None:
                    return url, None
                if signing.sign(key) == url:
                    return url, signing
            return url, None

        out: tuple[str, _Signing | None] = sync(fs.loop, first, timeout=max(self.seconds_left, 0.001))
        return out


@dataclass(frozen=True)
class _Signing:
    """How the client signs one bucket's keys, as its URL of one key shows: that URL up to the key,
    and botocore's query signer of the same signature version (SigV2 ``HmacV1QueryAuth``, SigV4
    ``S3SigV4QueryAuth`` with the URL's region and service) on the client's frozen credentials."""

    prefix: str  # the URL before the key: "http://host:port/bucket/" or "https://bucket.host/"
    bucket: str
    auth: Any  # botocore.auth.HmacV1QueryAuth | botocore.auth.S3SigV4QueryAuth

    @staticmethod
    def of(url: str, key: str, credentials: Any) -> _Signing | None:
        """The signing of ``url`` (the client's for ``key``, ``bucket/key``), None where botocore's
        query signers cannot sign as it does (no secret key, another version, headers signed)."""
        from urllib.parse import parse_qsl, urlsplit

        from botocore.auth import HmacV1QueryAuth, S3SigV4QueryAuth
        from botocore.utils import percent_encode

        if not getattr(credentials, "secret_key", None) or not getattr(credentials, "access_key", None):
            return None
        bucket, _, name = key.partition("/")
        base, _, query = url.partition("?")
        quoted = percent_encode(name, safe="/~")
        if not base.endswith(quoted):
            return None
        prefix = base[: len(base) - len(quoted)]
        path = urlsplit(prefix).path
        values = dict(parse_qsl(query, keep_blank_values=True))
        auth: Any
        if "X-Amz-Signature" in values:
            scope = values.get("X-Amz-Credential", "").rsplit("/", 4)
            if (
                values.get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256"
                or values.get("X-Amz-SignedHeaders") != "host"
                or len(scope) != 5
                or scope[4] != "aws4_request"
                or path not in ("/", f"/{bucket}/")
            ):
                return None
            auth = S3SigV4QueryAuth(credentials, scope[3], scope[2], expires=EXPIRES_SECONDS)
        elif "Signature" in values and "Expires" in values and path in ("/", f"/{bucket}/"):
            auth = HmacV1QueryAuth(credentials, expires=EXPIRES_SECONDS)
        else:
            return None
        return _Signing(prefix, bucket, auth)

    def sign(self, key: str) -> str:
        from botocore.awsrequest import AWSRequest
        from botocore.utils import percent_encode

        bucket, _, name = key.partition("/")
        if bucket != self.bucket:
            raise ValueError(f"{key} is not in bucket {self.bucket}")
        quoted = percent_encode(name, safe="/~")
        # SigV2 signs the bucket in the path on a virtual host too (botocore's ``auth_path``)
        request = AWSRequest(method="HEAD", url=self.prefix + quoted, auth_path=f"/{bucket}/{quoted}")
        self.auth.add_auth(request)
        url: str = request.url
        return url


class HeadClient:
    """The HEADs' and range listings' connections of one process (made again after a fork): the HEADs
    over a keep-alive pool of the standard library's ``http.client`` connections per endpoint, the
    listings' GETs over a urllib3 pool."""

    def __init__(self, connections: int, connect_timeout: float, read_timeout: float, verify: Any) -> None:
        self.connections = connections
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.verify = verify
        self._pid = -1
        self._pool: urllib3.PoolManager | None = None
        self._idle: dict[tuple[str, str], list[http.client.HTTPConnection]] = {}  # HEADs' kept connections
        self._context: ssl.SSLContext | None = None
        self._lock = threading.Lock()

    def _forked(self) -> None:
        """After a fork (under the lock): the parent's pools are not this process's."""
        if self._pid != os.getpid():
            self._pid, self._pool, self._idle = os.getpid(), None, {}

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

    def get(self, url: str, seconds_left: float) -> tuple[int, bytes]:
        """A GET's status and body (a listing page: ``ranges.py``), retried and timed as ``head``."""
        if seconds_left <= 0:
            raise TimeoutError("no time left for the GET")
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
            status_forcelist=_RETRIED,
            backoff_factor=0,
            raise_on_status=False,
            allowed_methods=frozenset({"GET"}),
        )
        answer = self._manager().request("GET", url, timeout=timeout, retries=retries)
        return answer.status, answer.data

    def head(self, url: str, seconds_left: float) -> int | bool | None:
        """The object's size (None: no Content-Length), False when there is none (404).

        One retry on a dropped connection, a timeout or a 5xx answer (botocore's standard mode tries
        twice too); neither the connection nor the answer may take longer than the client's timeouts or
        the time left. Sent over ``http.client`` directly, not urllib3: urllib3's URL parsing, retry
        and timeout objects cost more CPU than the rest of the HEAD (docs/performance.md)."""
        if seconds_left <= 0:
            raise TimeoutError("no time left for the HEAD")
        end = time.monotonic() + seconds_left
        scheme, _, rest = url.partition("://")
        netloc, _, target = rest.partition("/")
        status, length = 0, None
        for attempt in (1, 2):
            try:
                status, length = self._ask(scheme, netloc, "/" + target, end)
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

    def _ask(self, scheme: str, netloc: str, target: str, end: float) -> tuple[int, str | None]:
        """One HEAD on a kept connection (a new one when none is idle): its status and Content-Length."""
        where = (scheme, netloc)
        conn = self._take(where)
        kept = conn is not None
        try:
            if conn is None:
                conn = self._connect(scheme, netloc, end)
            if conn.sock is not None:
                conn.sock.settimeout(_left(min(self.read_timeout, end - time.monotonic())))
            conn.request("HEAD", target)
            answer = conn.getresponse()
            answer.read()  # nothing (a HEAD's answer has no body): frees the connection for the next
        except (OSError, http.client.HTTPException) as exc:
            if conn is not None:
                conn.close()
            if kept and isinstance(exc, _DROPPED):
                return self._ask(scheme, netloc, target, end)  # the server closed it meanwhile
            if isinstance(exc, OSError):
                raise
            raise ConnectionError(f"no HTTP answer: {exc!r}"[:200]) from None
        if conn.sock is not None and not answer.will_close:
            self._keep(where, conn)
        else:
            conn.close()
        return answer.status, answer.getheader("Content-Length")

    def _take(self, where: tuple[str, str]) -> http.client.HTTPConnection | None:
        with self._lock:
            self._forked()
            idle = self._idle.get(where)
            return idle.pop() if idle else None

    def _keep(self, where: tuple[str, str], conn: http.client.HTTPConnection) -> None:
        with self._lock:
            idle = self._idle.setdefault(where, [])
            if len(idle) < self.connections:
                idle.append(conn)
                return
        conn.close()

    def _connect(self, scheme: str, netloc: str, end: float) -> http.client.HTTPConnection:
        """A new connection to ``netloc``, connected within the connect timeout and the time left."""
        timeout = _left(min(self.connect_timeout, end - time.monotonic()))
        conn = (
            http.client.HTTPSConnection(netloc, timeout=timeout, context=self._tls())
            if scheme == "https"
            else http.client.HTTPConnection(netloc, timeout=timeout)
        )
        try:
            conn.connect()
            if conn.sock is not None:
                conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except BaseException:
            conn.close()
            raise
        return conn

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


def _left(seconds: float) -> float:
    if seconds <= 0:
        raise TimeoutError("no time left for the HEAD")
    return seconds
