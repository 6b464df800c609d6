"""A stand-in session cluster JobManager for the session keeper's tests: a process whose command line
carries Flink's session entrypoint (so the keeper finds it) and which serves the two calls of Flink's
REST API the keeper makes, ``GET /jobs/overview`` and ``PATCH /jobs/<jobId>?mode=cancel``.

Its jobs are its "HA data", a JSON file ``{jobId: state}`` that outlives the process, as Flink's HA
store outlives a JobManager: at each start it recovers every job not in a globally terminal state, and a
cancel is written there (Flink's JobResultStore), so a JobManager that restarts does not run it again.
A test that writes a job back as RUNNING plays HA data written before a cancel (a JobManager killed
first, superseded meanwhile).
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

from webhook.keeper.jobmanager import ENTRYPOINTS

SESSION = ENTRYPOINTS[1]  # KubernetesSessionClusterEntrypoint

_SERVER = r"""
import json, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
port, ha = int(sys.argv[3]), sys.argv[4]
lock = threading.Lock()
def load():
    with open(ha) as f:
        return json.load(f)
with lock:
    jobs = {jid: state for jid, state in load().items() if state not in ("CANCELED", "FINISHED", "FAILED")}
class H(BaseHTTPRequestHandler):
    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        if self.path != "/jobs/overview":
            return self.answer(404, {"errors": ["not found"]})
        with lock:
            listed = [{"jid": jid, "name": jid[:6], "state": state} for jid, state in jobs.items()]
        self.answer(200, {"jobs": listed})
    def do_PATCH(self):
        path, _, query = self.path.partition("?")
        jid = path.rsplit("/", 1)[-1]
        if query != "mode=cancel":
            return self.answer(400, {"errors": ["mode"]})
        with lock:
            if jid not in jobs:
                return self.answer(404, {"errors": ["no such job"]})
            jobs[jid] = "CANCELED"
            stored = load()
            stored[jid] = "CANCELED"
            with open(ha + ".tmp", "w") as f:
                json.dump(stored, f)
            import os
            os.replace(ha + ".tmp", ha)
        self.answer(202, {})
    def log_message(self, *args):
        pass
ThreadingHTTPServer.allow_reuse_address = True
ThreadingHTTPServer((("127.0.0.1", port)), H).serve_forever()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def session_argv(python: str, marker: str, port: int, ha: Path) -> list[str]:
    """The stand-in's command line (for ``keeper.Supervised(argv=...)``)."""
    return [python, "-c", _SERVER, SESSION, f"--marker={marker}", str(port), str(ha)]


def write_jobs(ha: Path, jobs: dict[str, str]) -> None:
    ha.write_text(json.dumps(jobs))


def read_jobs(ha: Path) -> dict[str, str]:
    found: dict[str, str] = json.loads(ha.read_text())
    return found
