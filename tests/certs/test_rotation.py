"""Rotate the serving certificate under load: the real server, a Secret-style volume swap, no failed request.

The certificate directory is laid out the way kubelet lays out a Secret volume: the files live in a
timestamped directory, ``..data`` is a symlink to it, and ``tls.crt``/``tls.key`` are symlinks through
``..data``. Rotation writes a new timestamped directory and atomically replaces ``..data``, then
deletes the old directory, exactly like kubelet's atomic writer.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests
from cryptography import x509

from tests.conftest import REPO
from tests.support.production import wait_for
from tests.support.server import stop_group
from webhook.certs import store
from webhook.policy.load import DEFAULT_POLICY_FILE

pytestmark = pytest.mark.slow

SERVER = REPO / ".venv" / "bin" / "flink-failover"
POLICY = DEFAULT_POLICY_FILE
HOST = "localhost"  # a SAN of the certificate: the client checks the hostname
STARTUP_SECONDS = 30
BEFORE_ROTATION = 5  # requests answered on the old certificate before the swap
# How long the test waits for the new certificate to be served steadily: a bound on the wait, not an
# asserted speed (the pick-up time is printed; a loaded machine may take longer than a quiet one).
PICKUP_WAIT = 120.0
STEADY_AFTER = 25  # consecutive requests that must all see the new certificate

REVIEW = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {
        "uid": "u1",
        "kind": {"group": "flink.apache.org", "version": "v1beta1", "kind": "FlinkDeployment"},
        "resource": {"group": "flink.apache.org", "version": "v1beta1", "resource": "flinkdeployments"},
        "operation": "CREATE",
        "namespace": "ns",
        "object": {
            "apiVersion": "flink.apache.org/v1beta1",
            "kind": "FlinkDeployment",
            "metadata": {"name": "a", "namespace": "ns"},
            "spec": {"job": {"jarURI": "local:///x.jar"}},
        },
    },
}


class SecretVolume:
    """A directory that behaves like a mounted Secret: tls.crt -> ..data/tls.crt -> ..<ts>/tls.crt."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.generation = 0
        root.mkdir()

    def publish(self, files: dict[str, bytes]) -> None:
        self.generation += 1
        target = self.root / f"..2026_01_01_00_00_{self.generation:02d}.{os.getpid()}"
        target.mkdir(mode=0o755)
        for name in (store.TLS_CERT, store.TLS_KEY, store.CA_CERT):
            (target / name).write_bytes(files[name])
        data = self.root / "..data"
        old = data.resolve() if data.is_symlink() else None
        tmp = self.root / "..data_tmp"
        tmp.symlink_to(target.name)
        os.replace(tmp, data)  # the atomic swap
        for name in (store.TLS_CERT, store.TLS_KEY, store.CA_CERT):
            link = self.root / name
            if not link.is_symlink():
                link.symlink_to(f"..data/{name}")
        if old is not None:
            for child in old.iterdir():
                child.unlink()
            old.rmdir()


@dataclass
class Load:
    """Admissions over a new TLS connection each, recording the serial of the certificate served."""

    port: int
    ca_file: Path
    results: list[tuple[float, int]] = field(default_factory=list)  # (time, serial)
    failures: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))  # trust ca.crt only, check hostname
        return ctx

    def once(self) -> None:
        conn = http.client.HTTPSConnection(HOST, self.port, context=self.context(), timeout=10)
        try:
            body = json.dumps(REVIEW)
            conn.request("POST", "/mutate", body=body, headers={"Content-Type": "application/json"})
            assert conn.sock is not None
            der = conn.sock.getpeercert(binary_form=True)
            response = conn.getresponse()
            payload = json.loads(response.read())
            if response.status != 200:
                raise AssertionError(f"HTTP {response.status}: {payload}")
            answer = payload["response"]
            if answer["uid"] != "u1" or answer["allowed"] is not True:
                raise AssertionError(f"unexpected answer {answer}")
            assert der is not None
            self.results.append((time.monotonic(), x509.load_der_x509_certificate(der).serial_number))
        finally:
            conn.close()

    def run(self, deadline: float) -> None:
        while not self.stop.is_set() and time.monotonic() < deadline:
            try:
                self.once()
            except Exception as exc:  # every kind of failure counts
                self.failures.append(f"{time.monotonic():.3f} {type(exc).__name__}: {exc}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_healthy(port: int, ca_file: Path, proc: subprocess.Popen[bytes]) -> None:
    def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"server exited with {proc.returncode}")
        try:
            return (
                requests.get(f"https://{HOST}:{port}/readyz", verify=str(ca_file), timeout=2).status_code
                == 200
            )
        except requests.RequestException:
            return False

    assert wait_for(ready, STARTUP_SECONDS), f"server not ready within {STARTUP_SECONDS} s"


def serial_of(files: dict[str, bytes]) -> int:
    return x509.load_pem_x509_certificate(files[store.TLS_CERT]).serial_number


def test_rotation_under_load_loses_no_request(tmp_path: Path) -> None:
    if not SERVER.exists():
        pytest.fail(f"{SERVER} missing: install the package (make venv)")
    first = store.generate({}, "flink-failover", "flink-failover", [HOST, "127.0.0.1"]).files
    volume = SecretVolume(tmp_path / "certs")
    volume.publish(first)
    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(first[store.CA_CERT])

    port = free_port()
    env = {**os.environ, "TMPDIR": str(tmp_path), "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics")}
    cmd = [
        str(SERVER),
        "serve",
        "--role",
        "member",
        "--policy",
        str(POLICY),
        "--cert-dir",
        str(volume.root),
        "--bind",
        f"127.0.0.1:{port}",
        "--log-level",
        "warning",
    ]
    log = (tmp_path / "server.log").open("wb")
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        wait_healthy(port, ca_file, proc)
        load = Load(port, ca_file)
        worker = threading.Thread(
            target=load.run, args=(time.monotonic() + STARTUP_SECONDS + PICKUP_WAIT + 10,)
        )
        worker.start()
        # traffic on the old certificate first: wait for it (before: a 1.5 s sleep, which a loaded
        # machine could fill with fewer requests than the test then required)
        traffic = wait_for(
            lambda: len(load.results) >= BEFORE_ROTATION or bool(load.failures), STARTUP_SECONDS
        )
        assert traffic, "no traffic on the old certificate"

        renewed = store.renew(first, force=True).files  # same CA, new key, new serial
        assert renewed[store.TLS_KEY] != first[store.TLS_KEY]
        old_serial, new_serial = serial_of(first), serial_of(renewed)
        rotated_at = time.monotonic()
        volume.publish(renewed)

        # keep going until the new certificate is served steadily (or the time limit; judged below)
        def steady() -> bool:
            recent = load.results[-STEADY_AFTER:]
            return (
                len(recent) == STEADY_AFTER
                and {s for _, s in recent} == {new_serial}
                and recent[0][0] > rotated_at
            )

        wait_for(steady, PICKUP_WAIT)
        load.stop.set()
        worker.join(30)
        assert not worker.is_alive()

        before = [s for t, s in load.results if t < rotated_at]
        after = [(t, s) for t, s in load.results if t >= rotated_at]
        first_new = next((t for t, s in after if s == new_serial), None)
        sent = len(load.results) + len(load.failures)
        print(  # the figures of the rotation (pytest -s shows them)
            f"\nrotation: {sent} requests, {len(load.failures)} failed, {len(before)} before the swap, "
            f"new certificate first served "
            f"{None if first_new is None else round(first_new - rotated_at, 3)} s after the swap"
        )
        assert load.failures == [], load.failures[:5]
        assert len(before) >= BEFORE_ROTATION and set(before) == {old_serial}
        assert first_new is not None, "the new certificate was never served"
        assert [s for _, s in load.results[-STEADY_AFTER:]] == [new_serial] * STEADY_AFTER
        assert proc.poll() is None, "the server restarted or died"

        # and a plain client (requests, verify=ca.crt, hostname checked) agrees
        answer = requests.post(f"https://{HOST}:{port}/mutate", json=REVIEW, verify=str(ca_file), timeout=10)
        assert answer.status_code == 200 and answer.json()["response"]["allowed"] is True
    finally:
        stop_group(proc)
        log.close()
