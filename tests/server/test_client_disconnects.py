"""A client that closes or idles out a keep-alive connection is normal life, not an error in the log.

kube-apiserver keeps webhook connections alive and drops them when idle; the real server must log
that at debug level at most and never with a traceback.
"""

from __future__ import annotations

import json
import logging
import socket
import ssl
import struct
from pathlib import Path

from tests.support.production import wait_for
from tests.support.server import RunningServer, serve
from webhook.server.logs import ClientDisconnects

REQUEST = b"GET /healthz HTTP/1.1\r\nHost: webhook\r\nConnection: keep-alive\r\n\r\n"


def _connect(server: RunningServer) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(server.cert_dir / "ca.crt"))
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    conn = context.wrap_socket(raw, server_hostname="localhost")
    conn.sendall(REQUEST)
    assert conn.recv(4096).startswith(b"HTTP/1.1 200")
    return conn


def _healthz(server: RunningServer) -> tuple[bytes, bytes]:
    """(status line, body) of one GET /healthz on a new connection, read to its end."""
    context = ssl.create_default_context(cafile=str(server.cert_dir / "ca.crt"))
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    with context.wrap_socket(raw, server_hostname="localhost") as conn:
        conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: webhook\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := conn.recv(4096):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return head.split(b"\r\n", 1)[0], body


def _lines(server: RunningServer) -> list[dict[str, object]]:
    out = []
    for line in server.logs().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            out.append({"level": "unparsed", "msg": line})
    return out


def test_closed_reset_and_idle_keep_alive_connections_are_not_errors(cert_dir: Path, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("apiVersion: flink-failover.io/v1alpha1\nkind: RestorePolicy\n")
    with serve(cert_dir, policy, tmp_path / "server.log", extra=["--log-level", "debug"]) as server:
        _connect(server).close()  # closed without close_notify (a dropped idle connection)
        reset = _connect(server)
        reset.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        reset.close()  # TCP reset
        idle = _connect(server)
        idle.sendall(b"GET /healthz HTTP/1.1\r\nHo")  # a request started, then nothing: times out
        # the idle one timing out, by name: only it ends in a TimeoutError (the other two end cleanly)
        timed_out = "client connection ended: TimeoutError"
        assert wait_for(lambda: any(timed_out in str(e.get("msg")) for e in _lines(server)), 60), (
            server.logs()
        )
        idle.close()
        # still serving: a new connection gets its /healthz answered in full
        assert _healthz(server) == (b"HTTP/1.1 200 OK", b"ok\n"), "no answer after the dropped connections"
    lines = _lines(server)
    ended = [e for e in lines if "client connection ended" in str(e.get("msg"))]
    assert ended and all(e["level"] == "debug" for e in ended)
    assert not [e for e in lines if e.get("level") in ("error", "critical", "unparsed")], server.logs()
    assert "Traceback" not in server.logs()


def test_the_filter_drops_disconnects_above_debug_and_keeps_real_errors() -> None:
    logger = logging.getLogger("test.client-disconnects")
    logger.setLevel(logging.INFO)
    quiet = ClientDisconnects()

    def record(error: BaseException) -> logging.LogRecord:
        try:
            raise error
        except BaseException:
            import sys

            return logger.makeRecord(
                logger.name,
                logging.ERROR,
                __file__,
                1,
                "Socket error processing request.",
                (),
                sys.exc_info(),
            )

    for ended in (TimeoutError("The read operation timed out"), ConnectionResetError(104, "reset")):
        assert quiet.filter(record(ended)) is False  # INFO logger: nothing at all
    logger.setLevel(logging.DEBUG)
    kept = record(TimeoutError("The read operation timed out"))
    assert quiet.filter(kept) is True
    assert kept.levelno == logging.DEBUG and kept.exc_info is None
    assert kept.getMessage() == "client connection ended: TimeoutError: The read operation timed out"
    real = record(PermissionError(13, "denied"))
    assert quiet.filter(real) is True and real.levelno == logging.ERROR and real.exc_info is not None
