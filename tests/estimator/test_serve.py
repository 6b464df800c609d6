"""``serve --role estimator`` as a process: watches a (fake) member API server, serves TLS gRPC."""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.controlplane import fakeapi
from tests.estimator.support import node, pod, serve_command
from tests.estimator.tlsfiles import TlsSet, write_tls
from tests.support.production import wait_for
from tests.support.server import executable, free_port, wait_ready
from webhook.estimator.proto import estimator_pb2 as pb
from webhook.estimator.proto import service_pb2_grpc


def _request() -> pb.MaxAvailableReplicasRequest:
    req = pb.MaxAvailableReplicasRequest(cluster="member-1")
    req.replicaRequirements.resourceRequest["cpu"].string = "1"
    req.replicaRequirements.resourceRequest["memory"].string = "1Gi"
    return req


@pytest.fixture
def member(tmp_path: Path) -> Iterator[tuple[fakeapi.RunningFake, fakeapi.FakeKarmada, fakeapi.FakeKarmada]]:
    nodes, pods = fakeapi.core_collection("nodes"), fakeapi.core_collection("pods")
    nodes.upsert(node("n1", "4", "8Gi"))
    nodes.upsert(node("n2", "2", "8Gi"))
    pods.upsert(pod("p1", "n1", "1", "1Gi"))
    running = fakeapi.start(extra=(nodes, pods))
    yield running, nodes, pods
    running.stop()


def test_serves_tls_and_follows_the_watch(
    member: tuple[fakeapi.RunningFake, fakeapi.FakeKarmada, fakeapi.FakeKarmada], tmp_path: Path
) -> None:
    running, nodes, pods = member
    tls: TlsSet = write_tls(tmp_path / "tls")
    port, side = free_port(), free_port()
    log_file = tmp_path / "estimator.log"
    cmd = serve_command(
        "member-1",
        running.kubeconfig(tmp_path / "kubeconfig"),
        port,
        side,
        "--grpc-auth-cert-file",
        str(tls.cert),
        "--grpc-auth-key-file",
        str(tls.key),
        "--state-refresh-seconds",
        "0",  # every answer sees the latest event
    )
    with log_file.open("wb") as log:
        process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ})
    try:
        wait_ready(side, None, process)
        creds = grpc.ssl_channel_credentials(root_certificates=tls.ca.read_bytes())
        with grpc.secure_channel(f"127.0.0.1:{port}", creds) as channel:
            health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
            assert health.status == health_pb2.HealthCheckResponse.SERVING
            stub = service_pb2_grpc.EstimatorStub(channel)

            def replicas() -> int:
                return int(stub.MaxAvailableReplicas(_request(), timeout=10).maxReplicas)

            assert replicas() == 3 + 2  # n1: 3 cpu left; n2: 2 cpu
            pods.upsert(pod("p2", "n2", "1500m", "1Gi"))
            assert wait_for(lambda: replicas() == 3), "a new pod is deducted"
            nodes.upsert(node("n3", "8", "4Gi", dedicated="yes"))
            assert wait_for(lambda: replicas() == 7), "a new node adds its room (memory-bound: 4)"
            nodes.delete("", "n1")
            assert wait_for(lambda: replicas() == 4), "a deleted node takes its room away"
            pods.delete("default", "p2")
            assert wait_for(lambda: replicas() == 6), "a deleted pod frees its room"
        conn = http.client.HTTPConnection("127.0.0.1", side, timeout=10)
        conn.request("GET", "/metrics")
        metrics = conn.getresponse().read().decode()
        assert 'flink_failover_estimator_requests_total{code="OK",method="MaxAvailableReplicas"}' in metrics
        assert "flink_failover_estimator_cache_age_seconds" in metrics
        assert "flink_failover_estimator_pods 1.0" in metrics
        conn.request("GET", "/debug/estimates")
        assert b'"sets": 6' in conn.getresponse().read()
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=20)
    assert code == 0, log_file.read_text()


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        ([], "needs --cluster"),
        (["--cluster", "c", "--grpc-auth-cert-file", "x"], "go together"),
        (["--cluster", "c", "--grpc-client-ca-file", "ca.crt"], "needs --grpc-auth-cert-file"),
        (
            ["--cluster", "c", "--grpc-auth-cert-file", "nope.crt", "--grpc-auth-key-file", "nope.key"],
            "no such file",
        ),
        (
            ["--cluster", "c", "--kubeconfig", "/nonexistent/kubeconfig"],
            "cannot load member cluster credentials",
        ),
    ],
)
def test_bad_options_exit_2_with_a_reason(extra: list[str], error: str) -> None:
    result = subprocess.run(
        [executable(), "serve", "--role", "estimator", *extra], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert error in result.stderr


def test_a_port_in_use_exits_2(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        kubeconfig = tmp_path / "kubeconfig"
        from tests.support.kube import write_kubeconfig

        write_kubeconfig(kubeconfig, "http://127.0.0.1:1")
        command = serve_command("c", kubeconfig, port, free_port())
        result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "cannot listen" in result.stderr
