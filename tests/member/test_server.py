"""End to end against the real gunicorn server over HTTPS, verified the way kube-apiserver verifies it."""

from __future__ import annotations

import json
import re
import ssl
from pathlib import Path

import pytest

from tests.support.objects import JOB_ID, apply, decode_patch, flink_deployment, make_checkpoints, review
from tests.support.production import wait_for
from tests.support.server import ApiServerClient, RunningServer


def labels() -> dict[str, str]:
    return {"flink-failover.io/failover": "true", "flink-failover.io/job-id": JOB_ID}


def test_failover_create_is_restored_over_https(member_server: RunningServer, checkpoint_root: Path) -> None:
    make_checkpoints(checkpoint_root / JOB_ID, [41, 42])
    obj = flink_deployment(labels=labels())  # no dir in the resource: the policy default is used
    client = member_server.client()
    body = review(obj, uid="e2e-create")
    answer = client.admit(body)
    client.close()
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    resp = answer["response"]
    assert resp["uid"] == "e2e-create" and resp["allowed"] is True
    patched = apply(obj, decode_patch(resp))
    assert patched["spec"]["job"]["initialSavepointPath"] == f"{checkpoint_root}/{JOB_ID}/chk-42"


def test_keep_alive_connection_serves_many_requests(member_server: RunningServer) -> None:
    client = member_server.client()
    obj = flink_deployment(labels={"app": "x"})
    for i in range(20):
        resp = client.admit(review(obj, uid=f"ka-{i}"))["response"]
        assert resp == {"uid": f"ka-{i}", "allowed": True}
    client.close()


def test_health_readiness_and_metrics(member_server: RunningServer) -> None:
    client = member_server.client()
    assert client.request("GET", "/healthz")[0] == 200
    assert client.request("GET", "/readyz")[0] == 200
    client.admit(review(flink_deployment(labels={"app": "x"})))
    status, data, headers = client.request("GET", "/metrics")
    client.close()
    assert status == 200 and headers["content-type"].startswith("text/plain")
    text = data.decode()
    assert re.search(r'flink_failover_admissions_total\{decision="skip",role="member"\} [1-9]', text), text[
        :2000
    ]
    assert "flink_failover_admission_duration_seconds_bucket" in text


def test_bad_bodies_get_plain_4xx(member_server: RunningServer) -> None:
    client = member_server.client()
    status, data, _ = client.request("POST", "/mutate", b"{not json")
    assert status == 400 and b"not JSON" in data
    status, data, _ = client.request("POST", "/mutate", json.dumps({"kind": "Pod"}).encode())
    assert status == 400 and b"AdmissionReview" in data
    status, data, _ = client.request(
        "POST",
        "/mutate",
        json.dumps(
            {
                "kind": "AdmissionReview",
                "apiVersion": "admission.k8s.io/v1",
                "request": {"operation": "CREATE"},
            }
        ).encode(),
    )
    assert status == 400 and b"uid" in data
    big = review(flink_deployment(annotations={"big": "x" * (3 * 1024 * 1024)}))
    status, data, _ = client.request("POST", "/mutate", json.dumps(big).encode())
    client.close()
    assert status == 413


def test_certificate_is_checked_against_the_service_name(member_server: RunningServer) -> None:
    client = ApiServerClient(
        member_server.port, member_server.cert_dir / "ca.crt", server_name="evil.example"
    )
    with pytest.raises(ssl.SSLCertVerificationError):
        client.request("GET", "/healthz")


def test_one_json_log_line_per_admission(member_server: RunningServer, checkpoint_root: Path) -> None:
    make_checkpoints(checkpoint_root / JOB_ID, [42])
    client = member_server.client()
    client.admit(review(flink_deployment(name="logged", labels=labels()), uid="log-uid-1"))
    client.close()

    def logged() -> list[dict[str, object]]:
        return [json.loads(line) for line in member_server.logs().splitlines() if '"log-uid-1"' in line]

    assert wait_for(lambda: bool(logged()))
    lines = logged()
    assert len(lines) == 1
    entry = lines[0]
    assert entry["uid"] == "log-uid-1" and entry["kind"] == "FlinkDeployment"
    assert entry["namespace"] == "analytics" and entry["name"] == "logged"
    assert entry["operation"] == "CREATE" and entry["decision"] == "restored"
    assert entry["path"].endswith("chk-42") and isinstance(entry["ms"], float)
