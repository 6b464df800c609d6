"""Run the real `flink-failover serve` (gunicorn, TLS) as a subprocess and talk to it like kube-apiserver.

kube-apiserver dials the Service, verifies the serving certificate against the webhook's caBundle and
checks the name <service>.<namespace>.svc; :class:`ApiServerClient` does the same over loopback.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import signal
import socket
import ssl
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.repo import REPO

SERVICE_NAME = "flink-failover.flink-failover.svc"


_HANDED_OUT: set[int] = set()
_PORTS = random.Random()  # seeded from the system's randomness: two processes pick apart


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A free loopback port below the kernel's ephemeral range, never the same twice in one process.
    A port the kernel handed out (bind to port 0) can be taken by any outgoing connection before the
    server binds it: the end-to-end tier once lost a whole stack to a probe port a client connection
    had taken ("Address already in use"). Below the ephemeral range only another picker could."""
    high = _ephemeral_low() - 1
    low = 20000
    for _ in range(500 if high - low > 1000 else 0):
        port = _PORTS.randint(low, high)
        if port in _HANDED_OUT:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def executable() -> str:
    return str(Path(sys.executable).parent / "flink-failover")


def generate_certs(out: Path) -> Path:
    """Certificates made exactly as `make run` makes them (the console script, same arguments)."""
    subprocess.run(
        [
            executable(),
            "certs",
            "generate",
            "--service",
            "flink-failover",
            "--namespace",
            "flink-failover",
            "--out",
            str(out),
            "--extra-san",
            "localhost",
            "--extra-san",
            "127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    return out


class ApiServerClient:
    """Keep-alive HTTPS client verifying the server like kube-apiserver (CA bundle + service name)."""

    def __init__(
        self, port: int, ca_file: Path, server_name: str = SERVICE_NAME, timeout: float = 15
    ) -> None:
        self.port = port
        self.server_name = server_name
        self.context = ssl.create_default_context(cafile=str(ca_file))
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.timeout = timeout
        self._conn: http.client.HTTPSConnection | None = None

    def _connection(self) -> http.client.HTTPSConnection:
        if self._conn is None:
            conn = http.client.HTTPSConnection(
                "127.0.0.1", self.port, timeout=self.timeout, context=self.context
            )
            sock = socket.create_connection(("127.0.0.1", self.port), self.timeout)
            conn.sock = self.context.wrap_socket(sock, server_hostname=self.server_name)
            self._conn = conn
        return self._conn

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes, dict[str, str]]:
        for attempt in (0, 1):
            conn = self._connection()
            try:
                try:
                    conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
                except (ssl.SSLEOFError, BrokenPipeError, ConnectionResetError):
                    # The server answered (413) and closed before the whole body was sent; like Go's
                    # client, read the answer it left rather than failing on the write.
                    if body is None or len(body) < 1024 * 1024:
                        raise
                resp = conn.getresponse()
                data = resp.read()
                headers = {k.lower(): v for k, v in resp.getheaders()}
                if headers.get("connection", "").lower() == "close":
                    self.close()
                return resp.status, data, headers
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.close()  # server closed an idle keep-alive connection: retry once, like Go's client
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def admit(self, review: dict[str, Any], path: str = "/mutate") -> dict[str, Any]:
        status, data, _ = self.request("POST", path, json.dumps(review).encode())
        assert status == 200, (status, data[:300])
        return json.loads(data)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


@dataclass
class RunningServer:
    process: subprocess.Popen[bytes]
    port: int
    cert_dir: Path
    log_file: Path

    def client(self, **kw: Any) -> ApiServerClient:
        return ApiServerClient(self.port, self.cert_dir / "ca.crt", **kw)

    def logs(self) -> str:
        return self.log_file.read_text(errors="replace")


def wait_ready(
    port: int,
    ca_file: Path | None,
    process: subprocess.Popen[bytes],
    timeout: float = 30,
    statuses: tuple[int, ...] = (200,),
) -> None:
    """Until ``/readyz`` answers with one of ``statuses`` (503 too: a server that answers, not ready)."""
    from tests.support.production import wait_for  # production serves its members with this module

    def answered() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        try:
            if ca_file is None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/readyz")
                return conn.getresponse().status in statuses
            client = ApiServerClient(port, ca_file, timeout=2)
            status, _, _ = client.request("GET", "/readyz")
            client.close()
            return status in statuses
        except OSError:
            return False

    if not wait_for(answered, timeout):
        raise TimeoutError("server did not become ready")


def stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's process group (gunicorn and its workers), SIGKILL when it lingers."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


@contextmanager
def serve(
    cert_dir: Path,
    policy_file: Path,
    log_file: Path,
    *,
    role: str = "member",
    extra: list[str] | None = None,
    env: dict[str, str] | None = None,
    ready_statuses: tuple[int, ...] = (200,),
) -> Iterator[RunningServer]:
    port = free_port()
    cmd = [
        executable(),
        "serve",
        "--role",
        role,
        "--policy",
        str(policy_file),
        "--cert-dir",
        str(cert_dir),
        "--bind",
        f"127.0.0.1:{port}",
        *(extra or []),
    ]
    with open(log_file, "wb") as log:
        process = subprocess.Popen(
            cmd,
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
    try:
        plain = "--insecure-plain-http" in (extra or [])
        wait_ready(port, None if plain else cert_dir / "ca.crt", process, statuses=ready_statuses)
        yield RunningServer(process, port, cert_dir, log_file)
    finally:
        stop_group(process)


@contextmanager
def admitting(root: Path, policy: str = "{}") -> Iterator[Callable[[dict[str, Any]], Any]]:
    """The member role served for real (gunicorn, TLS) under ``policy`` (JSON or YAML text), as a function
    from an object to the AdmissionReview response of its CREATE."""
    from tests.support.objects import review

    policy_file = root / "policy.json"
    policy_file.write_text(policy)
    with serve(generate_certs(root / "certs"), policy_file, root / "server.log") as server:
        client = server.client()
        try:
            yield lambda obj: client.admit(review(obj))["response"]
        finally:
            client.close()
