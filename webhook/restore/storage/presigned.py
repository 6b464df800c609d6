"""HEADs of many S3 objects by presigned URL over one pooled HTTP client (``verify: files`` on S3); the
same client GETs the range listings of ``ranges.py``.

A verdict leaves a few hundred new files to ask one by one. Through s3fs each HEAD is a botocore call
(signing, event hooks, parsing: 2-4 ms of CPU) and a hop to fsspec's event loop; 200 of them cost the
admission about a second of CPU on two cores (docs/performance.md). Here the same client (its
credentials, region and endpoint, through s3fs's own ``_url``) signs all of them in one batch on that
loop, and plain HEADs go out over a urllib3 pool: an answer is a status line and a Content-Length.

Used only where a presigned URL asks exactly what ``head_object`` would (``usable``): no
requester-pays or extra request parameters (SSE-C keys travel as headers), no proxy, an http endpoint
or an https one with a CA bundle named (``client_kwargs.verify``, ``AWS_CA_BUNDLE``) or a system trust
store (botocore brings its own bundle; urllib3 has none). Anywhere else ``verify.py`` asks
through s3fs as before. Every request has the client's connect and read timeouts and never outlives
the lookup's deadline.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
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


class HeadClient:
    """One urllib3 pool per process (made again after a fork), as many connections as lookup requests."""

    def __init__(self, connections: int, connect_timeout: float, read_timeout: float, verify: Any) -> None:
        self.connections = connections
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.verify = verify
        self._pid = -1
        self._pool: urllib3.PoolManager | None = None
        self._lock = threading.Lock()

    def _manager(self) -> urllib3.PoolManager:
        with self._lock:
            if self._pool is None or self._pid != os.getpid():
                self._pid = os.getpid()
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

        One retry on a dropped connection or a 5xx answer (botocore's standard mode tries twice too);
        neither the connection nor the answer may take longer than the client's timeouts or the time left.
        """
        timeout, retries = self._timeouts(seconds_left, "HEAD")
        answer = self._manager().request("HEAD", url, timeout=timeout, retries=retries, preload_content=False)
        try:
            status = answer.status
            length = answer.headers.get("Content-Length")
        finally:
            answer.release_conn()
        if status == 200:
            return int(length) if length is not None and length.isdigit() else None
        if status == 404:
            return False
        if status == 403:
            raise PermissionError("HTTP 403")
        raise HeadFailed(f"HTTP {status}")
