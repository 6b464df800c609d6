"""``/healthz`` and ``/readyz`` on a port of their own, answered by a thread in each worker.

On the webhook port a probe waits for a gunicorn worker thread like any admission; with every thread
waiting on a hung storage until the deadline, the kubelet's probe timed out (issue 17: 2.7 s at a 3 s
deadline, 7.2 s at 8 s) and a healthy pod was restarted. Here the listening socket is made once in the
master, before the workers fork, and each worker accepts on it from a small thread of its own, which
no admission ever occupies: the answer comes at once, whatever storage does.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 8  # kubelet probes one at a time per probe; more waiting is someone else's traffic
READ_TIMEOUT = 5.0  # as on the webhook port: a stalled client never pins a probe thread for long

# path -> (status, text): the same answers the webhook port gives (``webhook.server.app``).
ProbeAnswers = dict[str, Callable[[], tuple[int, str]]]


def listen(bind: str) -> socket.socket:
    """The probe port's listening socket, made in the master so every worker can accept on it."""
    host, _, port = bind.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit():
        raise ValueError("must be HOST:PORT, e.g. 0.0.0.0:8081")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, int(port)))
    sock.listen(64)
    sock.set_inheritable(True)
    return sock


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, sock: socket.socket, answers: ProbeAnswers, context: Callable[[], ssl.SSLContext] | None
    ) -> None:
        super().__init__(sock.getsockname()[:2], _Handler, bind_and_activate=False)
        self.socket.close()
        self.socket = sock
        self.answers = answers
        self.context = context
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            request.settimeout(READ_TIMEOUT)
            if self.context is not None:
                request = self.context().wrap_socket(request, server_side=True)
            super().process_request_thread(request, client_address)
        except (OSError, ssl.SSLError):
            self.shutdown_request(request)
        finally:
            self.slots.release()


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        answer = self.server.answers.get(self.path.split("?", 1)[0])
        status, text = answer() if answer is not None else (404, "not found")
        body = (text + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # probes are not logged, as on the main port
        return


def start(
    sock: socket.socket, answers: ProbeAnswers, context: Callable[[], ssl.SSLContext] | None
) -> threading.Thread:
    """Serve the probes from ``sock`` on a daemon thread of this (worker) process."""
    server = _Server(sock, answers, context)
    thread = threading.Thread(target=server.serve_forever, name="probes", daemon=True)
    thread.start()
    return thread
