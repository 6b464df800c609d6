"""Serving certificates that rotate without a restart.

gunicorn asks for an SSL context on every new connection; we hand back a cached one and rebuild it
when ``tls.crt`` / ``tls.key`` change on disk (a Secret volume swaps a symlink). A half-written pair
that does not load keeps the previous context, so rotation never fails a handshake.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
import time
from pathlib import Path

log = logging.getLogger(__name__)

CHECK_INTERVAL = 1.0  # seconds between stat() calls on the certificate files
# The longest one TLS handshake, request read or response write may block a worker thread.
IO_TIMEOUT = 5.0


class BoundedSSLSocket(ssl.SSLSocket):
    """An SSL socket whose blocking mode always carries a timeout.

    gunicorn's gthread worker handshakes and reads each request on a pool thread with a blocking socket
    and no timeout, so a client that sends a partial ClientHello, or completes the handshake and then
    sends nothing, pins that thread forever: workers x threads such connections stop the webhook
    (tests/fuzz/test_tls.py). Here ``setblocking(True)`` means "block at most IO_TIMEOUT", and the
    handshake is bounded the same way; a timed-out connection is closed by the worker.
    """

    def setblocking(self, flag: bool) -> None:
        self.settimeout(IO_TIMEOUT if flag else 0.0)

    def do_handshake(self, block: bool = False) -> None:
        if self.gettimeout() is None:
            self.settimeout(IO_TIMEOUT)
        super().do_handshake(block)


class CertificateReloader:
    def __init__(self, cert_dir: str | os.PathLike[str], check_interval: float = CHECK_INTERVAL) -> None:
        self.cert_file = Path(cert_dir) / "tls.crt"
        self.key_file = Path(cert_dir) / "tls.key"
        self.check_interval = check_interval
        self._lock = threading.Lock()
        self._context: ssl.SSLContext | None = None
        self._fingerprint: tuple[int, ...] | None = None
        self._checked = 0.0
        self.error = ""

    def _stat(self) -> tuple[int, ...]:
        out: list[int] = []
        for path in (self.cert_file, self.key_file):
            st = path.stat()  # follows the ..data symlink of a Secret volume
            out += [st.st_ino, st.st_mtime_ns, st.st_size]
        return tuple(out)

    def _build(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.options |= ssl.OP_NO_COMPRESSION
        context.load_cert_chain(certfile=str(self.cert_file), keyfile=str(self.key_file))
        context.sslsocket_class = BoundedSSLSocket
        return context

    def context(self) -> ssl.SSLContext:
        now = time.monotonic()
        if self._context is not None and now - self._checked < self.check_interval:
            return self._context
        with self._lock:
            if self._context is not None and now - self._checked < self.check_interval:
                return self._context
            self._checked = now
            try:
                fingerprint = self._stat()
                if fingerprint != self._fingerprint or self._context is None:
                    context = self._build()
                    if self._context is not None:
                        log.info("serving certificate reloaded from %s", self.cert_file)
                    self._context, self._fingerprint, self.error = context, fingerprint, ""
            except (OSError, ssl.SSLError, ValueError) as exc:
                self.error = f"cannot load {self.cert_file}/{self.key_file.name}: {exc}"
                if self._context is None:
                    raise
                log.warning("keeping the previous certificate: %s", self.error)
            return self._context

    def ready(self) -> str | None:
        """None when a certificate is loaded, else why not."""
        try:
            self.context()
        except (OSError, ssl.SSLError, ValueError) as exc:
            return f"certificate not loaded: {exc}"
        return None
