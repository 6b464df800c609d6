"""Done when: the real server (gunicorn, TLS) and ``review --role control-plane`` inject the old jobId into
the Work for the new cluster, with an eviction task or with none left, and the record survives a restart.

The Karmada API is the local fake (tests/controlplane/fakeapi.py); the server is the installed
``flink-failover`` command in a subprocess.
"""

from __future__ import annotations

import base64
import copy
import json
import socket
from pathlib import Path

import pytest
import requests
import yaml

from tests.controlplane import fakeapi
from tests.controlplane import support as s
from tests.controlplane.server import NS, Server, ours, review_offline, stored_record
from tests.support.production import wait_for

pytestmark = [pytest.mark.shared, pytest.mark.slow]


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
        labels, annotations = ours(first.admit(app_work), app_work)
        assert labels == {"failover": "true", "job-id": "1127e5e2ae706c014bdd6b0de37fc6af"}
        assert annotations["reason"] == "ApplicationFailure" and annotations["source-cluster"] == "member1"
        # Capture sees the job run on member1, then the failover with its eviction task.
        assert fake.wait_for(
            lambda: (
                (r := stored_record(fake, "orders-flinkdeployment")) is not None and r.cluster("member1").good
            )
        )
        fake.upsert(s.binding(shared_data, "scenA/rb-after-failover.json"))
        assert fake.wait_for(
            lambda: (r := stored_record(fake, "orders-flinkdeployment")) is not None and r.failover_count == 1
        )
        metrics = first.metrics()
        assert 'flink_failover_work_injections_total{injected="job-id"} 1.0' in metrics
        assert 'flink_failover_capture_patches_total{result="ok"}' in metrics
    finally:
        first.stop()
    assert first.proc.returncode == 0, first.log.read_text()

    # While the component is down the task expires and member1's Work (and status) are gone first.
    fake.upsert(s.binding(shared_data, "scenA/rb-final.json"))
    stored = stored_record(fake, "orders-flinkdeployment")
    assert stored is not None and stored.cluster("member1").job_id == s.JOB_A

    second = Server(kubeconfig, certs, tmp_path)
    try:
        second.wait_ready()
        served = second.admit(work2)
        labels, annotations = ours(served, work2)
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
    offline_answer = review_offline(
        tmp_path,
        [fake.get(NS, "orders-flinkdeployment"), fake.get(NS, "orders-app-flinkdeployment")],
        s.admission_review(work2),
    )
    assert ours(offline_answer, work2) == ours(served, work2)


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
        labels, annotations = ours(server.admit(work), work)
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


def test_karmada_unreachable_keeps_the_server_unready_and_refuses_flink_works_retriably(
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
        answers: list[requests.Response] = []

        def answered() -> bool:  # any answer: this server stays unready
            got = server.get("/readyz")
            answers.extend([got] if got is not None else [])
            return bool(answers)

        assert wait_for(answered, 60)
        ready = answers[0]
        # Not ready: kube-apiserver's failurePolicy Fail delays Flink Works until the cache has synced.
        assert ready.status_code == 503 and "not synced" in ready.text
        # Called anyway (a stale endpoint): a Flink Work is refused with 503 so that Karmada retries it,
        # never admitted without the labels it may need; any other Work is allowed untouched.
        work = s.flink_work(shared_data, "scenA/works-member2-final.json", "orders-flinkdeployment")
        refused = server.admit(work)["response"]
        assert refused["allowed"] is False and "patch" not in refused
        assert refused["status"]["code"] == 503 and "retried" in refused["status"]["message"]
        for other in s.other_works(shared_data, "scenA/works-member2-final.json"):
            assert server.admit(other)["response"] == {"uid": "uid-1", "allowed": True}
    finally:
        server.stop()
