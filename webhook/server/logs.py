"""One JSON object per log line, so cluster log pipelines need no parsing rules."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import ssl
import sys
from datetime import UTC, datetime
from typing import Any

_NO_LOCK = contextlib.nullcontext()


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry.update(fields)
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, separators=(",", ":"))


class LineHandler(logging.Handler):
    """Writes each record as one line with one ``write(2)``, without holding the handler lock.

    A StreamHandler holds its lock across the write and flush; under load every admission thread of a
    worker then queues behind whichever thread is waiting to get the GIL back after its write
    (bench/latency.py measured most request-thread samples there). A single write of a line up to
    PIPE_BUF bytes is atomic on a pipe (a container's stdout) and on an O_APPEND file, so lines do not
    interleave; longer records (tracebacks) still take the lock.
    """

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd

    def handle(self, record: logging.LogRecord) -> bool:
        if not self.filter(record):
            return False
        try:
            data = (self.format(record) + "\n").encode("utf-8", "backslashreplace")
        except Exception:
            self.handleError(record)
            return True
        if len(data) <= 4096:
            self._write(record, data)
        else:
            with self.lock or _NO_LOCK:
                self._write(record, data)
        return True

    def emit(self, record: logging.LogRecord) -> None:  # the logging API; handle() does the work
        self.handle(record)

    def _write(self, record: logging.LogRecord, data: bytes) -> None:
        try:
            while data:
                data = data[os.write(self.fd, data) :]
        except OSError:
            self.handleError(record)


# How a client ends a connection: it idles out (our I/O bound), resets it, or closes TLS uncleanly.
_CLIENT_ENDED = (TimeoutError, ConnectionError, ssl.SSLEOFError, ssl.SSLZeroReturnError)


class ClientDisconnects(logging.Filter):
    """gunicorn logs a keep-alive connection that a client closed or let idle out as an ERROR with a
    traceback ("Socket error processing request."). kube-apiserver does that all day: it becomes one
    debug line without a traceback, and nothing at all above debug."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if not isinstance(error, _CLIENT_ENDED):
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        record.msg, record.args = f"client connection ended: {type(error).__name__}: {error}", ()
        record.exc_info, record.exc_text = None, None
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


def configure(level: str = "INFO") -> None:
    handler: logging.Handler
    try:
        sys.stderr.flush()
        handler = LineHandler(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):  # stderr replaced by something without a descriptor
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("botocore", "aiobotocore", "s3fs", "gcsfs", "fsspec", "urllib3", "kubernetes"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
