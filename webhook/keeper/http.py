"""The keeper's probes and metrics on one small HTTP server (the standard library's, a thread a request):
``/readyz`` answers 200 only while the keeper holds the job's lease (the native sidecar's startup probe:
the JobManager starts only then), ``/healthz`` while its loops go round, ``/metrics`` Prometheus'."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from webhook.keeper import metrics
from webhook.keeper.decide import Decision


class Probed(Protocol):
    """A keeper (a job's, ``keeper.Keeper``, or a session cluster's, ``session_keeper.SessionKeeper``)."""

    def decision(self) -> Decision: ...

    def alive(self) -> bool: ...


class _Handler(BaseHTTPRequestHandler):
    keeper: Probed
    server_version = "flink-failover-keeper"

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/readyz":
            decision = self.keeper.decision()
            body = {"ready": decision.holds, "reason": decision.reason}
            self._answer(200 if decision.holds else 503, json.dumps(body).encode(), "application/json")
        elif path == "/healthz":
            alive = self.keeper.alive()
            self._answer(200 if alive else 503, b"ok\n" if alive else b"loops stalled\n", "text/plain")
        elif path == "/metrics":
            self._answer(200, generate_latest(metrics.REGISTRY), CONTENT_TYPE_LATEST)
        else:
            self._answer(404, b"not found\n", "text/plain")

    def _answer(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return


class ProbeServer:
    def __init__(self, keeper: Probed, host: str, port: int) -> None:
        handler = type("Handler", (_Handler,), {"keeper": keeper})
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="keeper-http", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
