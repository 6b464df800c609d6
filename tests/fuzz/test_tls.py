"""Transport: TLS 1.2+ only, no plain HTTP unless --insecure-plain-http says so, and clients that stall
cannot pin the server's worker threads."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import subprocess
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fuzz.conftest import THREADS, WORKERS
from tests.support.objects import flink_deployment, review
from tests.support.production import wait_for
from tests.support.server import SERVICE_NAME, RunningServer, executable, free_port, serve
from webhook.server.tls import IO_TIMEOUT

MARGIN = 5.0  # beyond the server's I/O timeout, for a busy machine


def legacy_client(ca: Path) -> ssl.SSLContext:
    """A client that offers only TLS 1.0/1.1, at OpenSSL security level 0 so that the client side
    does not refuse first: a failed handshake is then the server's refusal."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1
        ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    ctx.set_ciphers("ALL:@SECLEVEL=0")
    ctx.load_verify_locations(str(ca))
    return ctx


@pytest.fixture(scope="module")
def legacy_server(fuzz_certs: Path) -> Iterator[int]:
    """Control: a loopback TLS server that does speak TLS 1.0/1.1, proving the legacy client can."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1
        ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    ctx.set_ciphers("ALL:@SECLEVEL=0")
    ctx.load_cert_chain(str(fuzz_certs / "tls.crt"), str(fuzz_certs / "tls.key"))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(10)

    def accept() -> None:
        for _ in range(2):
            try:
                conn, _ = listener.accept()
                with ctx.wrap_socket(conn, server_side=True):
                    pass
            except OSError:
                pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    listener.close()


@pytest.mark.parametrize("version", ["TLSv1", "TLSv1_1"])
def test_tls_1_0_and_1_1_are_refused(
    fuzz_server: RunningServer, fuzz_certs: Path, legacy_server: int, version: str
) -> None:
    ctx = legacy_client(fuzz_certs / "ca.crt")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ctx.minimum_version = ctx.maximum_version = getattr(ssl.TLSVersion, version)
    try:
        with ctx.wrap_socket(
            socket.create_connection(("127.0.0.1", legacy_server), 10), server_hostname=SERVICE_NAME
        ) as control:
            assert control.version() in ("TLSv1", "TLSv1.1")
    except ssl.SSLError as exc:
        pytest.skip(f"this OpenSSL cannot speak {version} even to a willing server: {exc}")
    with pytest.raises(ssl.SSLError):
        ctx.wrap_socket(
            socket.create_connection(("127.0.0.1", fuzz_server.port), 10), server_hostname=SERVICE_NAME
        )


@pytest.mark.parametrize("version", ["TLSv1_2", "TLSv1_3"])
def test_tls_1_2_and_1_3_are_served(fuzz_server: RunningServer, fuzz_certs: Path, version: str) -> None:
    ctx = ssl.create_default_context(cafile=str(fuzz_certs / "ca.crt"))
    ctx.minimum_version = ctx.maximum_version = getattr(ssl.TLSVersion, version)
    conn = http.client.HTTPSConnection("127.0.0.1", fuzz_server.port, timeout=10, context=ctx)
    conn.sock = ctx.wrap_socket(
        socket.create_connection(("127.0.0.1", fuzz_server.port), 10), server_hostname=SERVICE_NAME
    )
    assert conn.sock.version() == version.replace("_", ".")
    conn.request("GET", "/healthz")
    assert conn.getresponse().status == 200
    conn.close()


def test_plain_http_to_the_tls_port_fails_without_a_hang(fuzz_server: RunningServer) -> None:
    with socket.create_connection(("127.0.0.1", fuzz_server.port), 10) as sock:
        sock.settimeout(IO_TIMEOUT + MARGIN)  # a hang would raise TimeoutError here
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while chunk := sock.recv(4096):
            data += chunk
            if len(data) > 65536:
                break
    assert not data.startswith(b"HTTP/1.1 200"), data[:100]


def test_plain_http_only_with_the_development_flag(fuzz_certs: Path, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("apiVersion: flink-failover.io/v1alpha1\nkind: RestorePolicy\n")
    # Without certificates and without the flag the server refuses to start rather than fall back.
    empty = tmp_path / "no-certs"
    empty.mkdir()
    port = free_port()
    run = subprocess.run(
        [
            executable(),
            "serve",
            "--role",
            "member",
            "--policy",
            str(policy),
            "--cert-dir",
            str(empty),
            "--bind",
            f"127.0.0.1:{port}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and "certificate" in run.stderr
    with serve(
        fuzz_certs, policy, tmp_path / "plain.log", extra=["--insecure-plain-http", "--workers", "1"]
    ) as plain:
        conn = http.client.HTTPConnection("127.0.0.1", plain.port, timeout=10)
        conn.request("POST", "/mutate", json.dumps(review(flink_deployment(), uid="plain")).encode())
        resp = conn.getresponse()
        assert resp.status == 200 and json.loads(resp.read())["response"]["uid"] == "plain"
        conn.close()
        ctx = ssl.create_default_context(cafile=str(fuzz_certs / "ca.crt"))
        with pytest.raises((ssl.SSLError, ConnectionError)):
            ctx.wrap_socket(
                socket.create_connection(("127.0.0.1", plain.port), 10), server_hostname=SERVICE_NAME
            )


def accept_queue(port: int) -> int | None:
    """Connections waiting in the accept queue of the socket listening on ``port`` (Linux
    /proc/net/tcp: a LISTEN socket's rx_queue), None when no such socket is found."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, queues = fields[1], fields[3], fields[4]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                return int(queues.split(":")[1], 16)
    return None


def test_stalled_clients_cannot_pin_every_worker_thread(fuzz_server: RunningServer, fuzz_certs: Path) -> None:
    """Connections that finish the handshake and then say nothing, and connections that send a third
    of a TLS record header and stop, each hold a worker thread: together as many as the server has.
    A real request must still be answered once the server's I/O timeout frees them (before the fix it
    waited forever)."""
    ctx = ssl.create_default_context(cafile=str(fuzz_certs / "ca.crt"))
    held: list[socket.socket] = []
    stalled = WORKERS * THREADS
    try:
        for _ in range(stalled // 2):  # handshake while threads are free, then silence
            raw = socket.create_connection(("127.0.0.1", fuzz_server.port), 10)
            held.append(ctx.wrap_socket(raw, server_hostname=SERVICE_NAME))
        for _ in range(stalled - stalled // 2):
            raw = socket.create_connection(("127.0.0.1", fuzz_server.port), 10)
            raw.sendall(b"\x16\x03\x01")  # the first bytes of a TLS record, then silence
            held.append(raw)
        # The event the real request must come after: the server has accepted every stalled connection
        # (its listening socket's accept queue is empty). Before: a 0.3 s sleep.
        accepted = wait_for(lambda: accept_queue(fuzz_server.port) == 0, 60)
        assert accepted, "the server did not accept the stalls"
        # Answered at all (the client's timeout bounds the wait): the I/O timeout freed the threads.
        # Before the fix it waited forever; how long it takes is not asserted (a loaded machine).
        client = fuzz_server.client(timeout=3 * (IO_TIMEOUT + MARGIN))
        answer = client.admit(review(flink_deployment(), uid="after-stall"))
        client.close()
        assert answer["response"]["uid"] == "after-stall"
    finally:
        for sock in held:
            sock.close()


def test_no_gunicorn_control_socket(fuzz_server: RunningServer) -> None:
    """gunicorn's runtime control socket (adjust workers, reload, shut down) stays closed."""
    assert fuzz_server.client().request("GET", "/healthz")[0] == 200
    assert "Control socket listening" not in fuzz_server.logs()
