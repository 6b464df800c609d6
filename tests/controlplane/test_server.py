"""Done when: the real server (gunicorn, TLS) and ``review --role control-plane`` inject the old jobId into
the Work for the new cluster, with an eviction task or with none left, and the record survives a restart.

The Karmada API is the local fake (tests/controlplane/fakeapi.py); the server is the installed
``flink-failover`` command in a subprocess.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from tests.controlplane import fakeapi
from tests.controlplane import support as s
from tests.support.server import free_port, generate_certs
from webhook.controlplane.record import Record
from webhook.policy import DEFAULT_POLICY_FILE

pytestmark = [pytest.mark.shared, pytest.mark.slow]

BIN = Path(sys.executable).parent / "flink-failover"
KEY = "flink-failover.io/last-known-state"
NS = "analytics"
P = "flink-failover.io/"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = generate_certs(tmp_path_factory.mktemp("certs"))
    assert (out / "tls.crt").is_file() and (out / "tls.key").is_file() and (out / "ca.crt").is_file()
    return out


class Server:
    def __init__(self, kubeconfig: Path, certs: Path, workdir: Path, *extra: str) -> None:
        self.port = free_port()
        self.ca = str(certs / "ca.crt")
        self.log = workdir / f"server-{self.port}.log"
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(workdir / f"metrics-{self.port}")}
        command = [
            str(BIN), "serve", "--role", "control-plane", "--kubeconfig", str(kubeconfig),
            "--cert-dir", str(certs), "--bind", f"127.0.0.1:{self.port}",
            "--policy", str(DEFAULT_POLICY_FILE), "--threads", "2", *extra,
        ]  # fmt: skip
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=workdir)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited {self.proc.returncode}:\n{self.log.read_text()}")
            try:
                if requests.get(self.url + "/readyz", verify=self.ca, timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        raise AssertionError(f"server not ready:\n{self.log.read_text()}")

    def admit(self, work: dict[str, Any], operation: str = "CREATE") -> dict[str, Any]:
        response = requests.post(
            self.url + "/mutate-work", json=s.admission_review(work, operation), verify=self.ca, timeout=10
        )
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    def metrics(self) -> str:
        return requests.get(self.url + "/metrics", verify=self.ca, timeout=5).text

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture
def karmada(tmp_path: Path) -> Iterator[fakeapi.RunningFake]:
    server = fakeapi.start()
    yield server
    server.stop()


def _record(fake: fakeapi.FakeKarmada, name: str) -> Record | None:
    obj = fake.objects.get((NS, name))
    raw = obj and obj["metadata"].get("annotations", {}).get(KEY)
    parsed = Record.loads(raw) if raw else None
    return parsed if isinstance(parsed, Record) else None


def _ours(review: dict[str, Any], work: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    import jsonpatch

    response = review["response"]
    assert response["allowed"] is True
    patched = (
        jsonpatch.apply_patch(work, json.loads(base64.b64decode(response["patch"])))
        if "patch" in response
        else work
    )
    meta = s.flink_metadata(patched)
    pick = lambda m: {k[len(P) :]: v for k, v in m.items() if k.startswith(P)}  # noqa: E731
    return pick(meta.get("labels", {})), pick(meta.get("annotations", {}))


def test_server_and_review_inject_and_the_record_survives_a_restart(
    karmada: fakeapi.RunningFake, certs: Path, tmp_path: Path, shared_data: Path
) -> None:
    fake = karmada.fake
    kubeconfig = karmada.kubeconfig(tmp_path / "kubeconfig")
    fake.upsert(s.binding(shared_data, "scenA/rb-before-failure.json"))
    app = s.binding(shared_data, "scenD-appfailover/rb-after-failover.json")
    fake.upsert(app)
    work2 = s.flink_work(shared_data, "scenA/works-member2-final.json", "orders-flinkdeployment")
    app_work = copy.deepcopy(work2)
    app_work["metadata"]["annotations"]["resourcebinding.karmada.io/name"] = "orders-app-flinkdeployment"

    first = Server(kubeconfig, certs, tmp_path)
    try:
        first.wait_ready()
        # With an eviction task (application failover, Directly): injected at once.
        labels, annotations = _ours(first.admit(app_work), app_work)
        assert labels == {"failover": "true", "job-id": "1127e5e2ae706c014bdd6b0de37fc6af"}
        assert annotations["reason"] == "ApplicationFailure" and annotations["source-cluster"] == "member1"
        # Capture sees the job run on member1, then the failover with its eviction task.
        assert fake.wait_for(
            lambda: (r := _record(fake, "orders-flinkdeployment")) is not None and r.cluster("member1").good
        )
        fake.upsert(s.binding(shared_data, "scenA/rb-after-failover.json"))
        assert fake.wait_for(
            lambda: (r := _record(fake, "orders-flinkdeployment")) is not None and r.failover_count == 1
        )
        metrics = first.metrics()
        assert 'flink_failover_work_injections_total{injected="job-id"} 1.0' in metrics
        assert 'flink_failover_capture_patches_total{result="ok"}' in metrics
    finally:
        first.stop()
    assert first.proc.returncode == 0, first.log.read_text()

    # While the component is down the task expires and member1's Work (and status) are gone first.
    fake.upsert(s.binding(shared_data, "scenA/rb-final.json"))
    stored = _record(fake, "orders-flinkdeployment")
    assert stored is not None and stored.cluster("member1").job_id == s.JOB_A

    second = Server(kubeconfig, certs, tmp_path)
    try:
        second.wait_ready()
        served = second.admit(work2)
        labels, annotations = _ours(served, work2)
        assert labels == {"failover": "true", "job-id": s.JOB_A}
        assert annotations == {
            "source-cluster": "member1",
            "failover-time": "2026-11-29T14:01:53Z",
            "failover-count": "1",
            "reason": "TaintUntolerated",
        }
        # Idempotent: the labelled Work again, as an UPDATE, needs nothing.
        import jsonpatch

        labelled = jsonpatch.apply_patch(work2, json.loads(base64.b64decode(served["response"]["patch"])))
        assert "patch" not in second.admit(labelled, "UPDATE")["response"]
        # The placement API is served beside the webhook (it answers, even if only to refuse this body).
        assert (
            requests.post(
                second.url + "/placement", data=b"not json", verify=second.ca, timeout=5
            ).status_code
            == 400
        )
        # A Work that is not Flink's: allowed, untouched.
        other = s.other_works(shared_data, "scenA/works-member2-final.json")[0]
        assert second.admit(other)["response"] == {"uid": "uid-1", "allowed": True}
    finally:
        second.stop()

    # The same answer offline, from the binding as the fake API stores it (record included).
    objects = tmp_path / "bindings.yaml"
    objects.write_text(
        yaml.safe_dump_all(
            [fake.get(NS, "orders-flinkdeployment"), fake.get(NS, "orders-app-flinkdeployment")]
        )
    )
    review_file = tmp_path / "review.json"
    review_file.write_text(json.dumps(s.admission_review(work2)))
    offline = subprocess.run(
        [str(BIN), "review", "--role", "control-plane", "--objects", str(objects), str(review_file)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert offline.returncode == 0, offline.stderr
    offline_answer = json.loads(offline.stdout)
    assert _ours(offline_answer, work2) == _ours(served, work2)


def test_no_capture_serves_the_webhook_alone(
    karmada: fakeapi.RunningFake, certs: Path, tmp_path: Path, shared_data: Path
) -> None:
    fake = karmada.fake
    fake.upsert(s.binding(shared_data, "scenB-graceful/rb-after-failover.json"))
    work = s.flink_work(
        shared_data, "scenB-graceful/works-member2-after-failover.json", "orders-grace-flinkdeployment"
    )
    server = Server(karmada.kubeconfig(tmp_path / "kubeconfig"), certs, tmp_path, "--no-capture")
    try:
        server.wait_ready()
        labels, annotations = _ours(server.admit(work), work)
        assert labels["job-id"] == "a31b89ec42b1f335258909778303fcfc"
        assert annotations["source-cluster"] == "member1"
    finally:
        server.stop()
    assert not fake.patches  # no capture: nothing written
    assert not any("watch=" in r for r in fake.requests)
    assert any(
        r.startswith("GET /apis/work.karmada.io/v1alpha2/namespaces/analytics/resourcebindings/")
        for r in fake.requests
    )


def test_karmada_unreachable_keeps_the_server_unready_and_never_blocks(
    certs: Path, tmp_path: Path, shared_data: Path
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "k", "cluster": {"server": dead}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "k", "context": {"cluster": "k", "user": "u"}}],
                "current-context": "k",
            }
        )
    )
    server = Server(kubeconfig, certs, tmp_path)
    try:
        ready = None
        deadline = time.monotonic() + 60
        while ready is None and time.monotonic() < deadline:
            assert server.proc.poll() is None, server.log.read_text()
            try:
                ready = requests.get(server.url + "/readyz", verify=server.ca, timeout=2)
            except requests.RequestException:
                time.sleep(0.1)
        assert ready is not None
        # Not ready: kube-apiserver's failurePolicy Fail delays Flink Works until the cache has synced.
        assert ready.status_code == 503 and "not synced" in ready.text
        # Called anyway (a stale endpoint): allowed, no patch, never a denial.
        work = s.flink_work(shared_data, "scenA/works-member2-final.json", "orders-flinkdeployment")
        assert server.admit(work)["response"] == {"uid": "uid-1", "allowed": True}
    finally:
        server.stop()
