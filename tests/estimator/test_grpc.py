"""The real gRPC server over loopback TLS with client certificates, answering Karmada's recorded bytes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.estimator.conftest import CLUSTER
from tests.estimator.tlsfiles import TlsSet, write_tls
from webhook.estimator import grpcserver
from webhook.estimator.proto import estimator_pb2 as pb
from webhook.estimator.proto import service_pb2_grpc
from webhook.estimator.state import ClusterState

PATH = "/github.com.karmada_io.karmada.pkg.estimator.service.Estimator/"
# Karmada's first fit is exact on these: our answer is the same bytes
SAME_BYTES = ("small", "medium", "large", "small-assumed")


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsSet:
    return write_tls(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def server(recorded_state: ClusterState, tls: TlsSet) -> Iterator[grpcserver.Running]:
    files = grpcserver.TlsFiles(tls.cert, tls.key, tls.ca)
    running = grpcserver.start(recorded_state, "127.0.0.1:0", files, workers=2)
    running.serving(True)
    yield running
    running.stop(0)


def _channel(port: int, tls: TlsSet, cert: Path | None = None, key: Path | None = None) -> grpc.Channel:
    creds = grpc.ssl_channel_credentials(
        root_certificates=tls.ca.read_bytes(),
        private_key=key.read_bytes() if key else None,
        certificate_chain=cert.read_bytes() if cert else None,
    )
    # Like Karmada's scheduler: no ServerName, so the dial target's host is verified (an IP SAN here)
    return grpc.secure_channel(f"127.0.0.1:{port}", creds)


@pytest.fixture(scope="module")
def channel(server: grpcserver.Running, tls: TlsSet) -> Iterator[grpc.Channel]:
    with _channel(server.port, tls, tls.client_cert, tls.client_key) as ch:
        yield ch


def _raw(channel: grpc.Channel, method: str, body: bytes) -> bytes:
    """The recorded request bytes as they are, and the answer's bytes as they came."""
    call = channel.unary_unary(PATH + method, request_serializer=None, response_deserializer=None)
    answer: bytes = call(body, timeout=10, metadata=(("object", "kind=FlinkDeployment, name=analytics/x"),))
    return answer


@pytest.mark.shared
@pytest.mark.parametrize("workload", SAME_BYTES)
def test_recorded_requests_get_karmadas_answer_bytes(
    channel: grpc.Channel, karmada_data: Path, workload: str
) -> None:
    request = (karmada_data / f"request-components-{workload}.bin").read_bytes()
    expected = (karmada_data / f"response-components-{workload}.bin").read_bytes()
    assert _raw(channel, "MaxAvailableComponentSets", request) == expected


@pytest.mark.shared
def test_ha_gets_more_sets_than_karmadas_first_fit(channel: grpc.Channel, karmada_data: Path) -> None:
    raw = _raw(
        channel, "MaxAvailableComponentSets", (karmada_data / "request-components-ha.bin").read_bytes()
    )
    assert pb.MaxAvailableComponentSetsResponse.FromString(raw).maxSets > 4


@pytest.mark.shared
def test_replicas_bytes(channel: grpc.Channel, karmada_data: Path) -> None:
    request = (karmada_data / "request-replicas-taskmanager.bin").read_bytes()
    expected = (karmada_data / "response-replicas-taskmanager.bin").read_bytes()
    assert _raw(channel, "MaxAvailableReplicas", request) == expected


def _bytes_only(claim_holder: pb.ComponentReplicaRequirements | pb.ReplicaRequirements) -> None:
    """What Karmada v1.19 removed (and reserved) from a requirements message: the deprecated
    ``resourceRequest`` and the NodeClaim's ``nodeAffinity`` / ``tolerations``."""
    assert claim_holder.resourceRequestBytes, "the recorded request carries the *Bytes forms"
    claim_holder.ClearField("resourceRequest")
    if claim_holder.HasField("nodeClaim"):
        claim_holder.nodeClaim.ClearField("nodeAffinity")
        claim_holder.nodeClaim.ClearField("tolerations")


def as_v119(request: pb.MaxAvailableComponentSetsRequest) -> bytes:
    """The request as a v1.19 scheduler sends it: only the ``*Bytes`` forms of the requirements."""
    for component in [*request.components, *(c for w in request.assumedWorkloads for c in w.components)]:
        _bytes_only(component.replicaRequirements)
    return request.SerializeToString(deterministic=True)


@pytest.mark.shared
@pytest.mark.parametrize("workload", [*SAME_BYTES, "ha"])
def test_v119_bytes_only_requests_get_the_same_answer(
    channel: grpc.Channel, karmada_data: Path, workload: str
) -> None:
    recorded = (karmada_data / f"request-components-{workload}.bin").read_bytes()
    request = pb.MaxAvailableComponentSetsRequest.FromString(recorded)
    had_claims = any(c.replicaRequirements.nodeClaim.tolerations for c in request.components)
    body = as_v119(request)
    stripped = pb.MaxAvailableComponentSetsRequest.FromString(body)
    assert all(not c.replicaRequirements.resourceRequest for c in stripped.components)
    assert had_claims == any(c.replicaRequirements.nodeClaim.tolerationsBytes for c in stripped.components)
    assert _raw(channel, "MaxAvailableComponentSets", body) == _raw(
        channel, "MaxAvailableComponentSets", recorded
    )


@pytest.mark.shared
def test_v119_bytes_only_replicas_request(channel: grpc.Channel, karmada_data: Path) -> None:
    request = pb.MaxAvailableReplicasRequest.FromString(
        (karmada_data / "request-replicas-taskmanager.bin").read_bytes()
    )
    assert request.replicaRequirements.nodeClaim.tolerations  # the v1.18 request carried both forms
    _bytes_only(request.replicaRequirements)
    expected = (karmada_data / "response-replicas-taskmanager.bin").read_bytes()
    assert _raw(channel, "MaxAvailableReplicas", request.SerializeToString(deterministic=True)) == expected


@pytest.mark.shared
def test_stub_errors_and_health(channel: grpc.Channel, server: grpcserver.Running) -> None:
    stub = service_pb2_grpc.EstimatorStub(channel)
    with pytest.raises(grpc.RpcError) as wrong:
        stub.MaxAvailableComponentSets(pb.MaxAvailableComponentSetsRequest(cluster="other"), timeout=10)
    assert wrong.value.code() == grpc.StatusCode.UNKNOWN
    assert "cluster name does not match, got: other, desire: c-1000" in str(wrong.value.details())
    bad = pb.MaxAvailableComponentSetsRequest(
        cluster=CLUSTER, components=[pb.Component(name="c", replicas=-2)]
    )
    with pytest.raises(grpc.RpcError) as invalid:
        stub.MaxAvailableComponentSets(bad, timeout=10)
    assert invalid.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    ref = pb.ObjectReference(
        apiVersion="flink.apache.org/v1beta1", kind="FlinkDeployment", namespace="a", name="b"
    )
    with pytest.raises(grpc.RpcError) as unknown:
        stub.GetUnschedulableReplicas(
            pb.UnschedulableReplicasRequest(cluster=CLUSTER, resource=ref), timeout=10
        )
    assert unknown.value.code() == grpc.StatusCode.UNKNOWN
    health = health_pb2_grpc.HealthStub(channel)
    for service in ("", grpcserver.SERVICE):
        reply = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    assert server.service.recent, "answers are kept for /debug/estimates"
    assert server.service.recent[-1]["assignment"]


@pytest.mark.shared
@pytest.mark.parametrize("who", ["nobody", "stranger"])
def test_clients_without_a_trusted_certificate_are_refused(
    server: grpcserver.Running, tls: TlsSet, who: str
) -> None:
    cert, key = (None, None) if who == "nobody" else (tls.other_client_cert, tls.other_client_key)
    with _channel(server.port, tls, cert, key) as ch:
        health = health_pb2_grpc.HealthStub(ch)
        with pytest.raises(grpc.RpcError) as refused:
            health.Check(health_pb2.HealthCheckRequest(), timeout=10)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


def test_nothing_is_answered_before_the_first_full_list() -> None:
    state = ClusterState("c1")
    state.replace_nodes([])  # pods not listed yet
    running = grpcserver.start(state, "127.0.0.1:0")
    try:
        with grpc.insecure_channel(f"127.0.0.1:{running.port}") as ch:
            reply = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=10)
            assert reply.status == health_pb2.HealthCheckResponse.NOT_SERVING
            stub = service_pb2_grpc.EstimatorStub(ch)
            with pytest.raises(grpc.RpcError) as early:
                stub.MaxAvailableReplicas(pb.MaxAvailableReplicasRequest(cluster="c1"), timeout=10)
            assert early.value.code() == grpc.StatusCode.UNAVAILABLE
            state.replace_pods([])
            answer = stub.MaxAvailableReplicas(pb.MaxAvailableReplicasRequest(cluster="c1"), timeout=10)
            assert answer.maxReplicas == 0  # an empty cluster, as Karmada answers it
    finally:
        running.stop(0)


def test_rotated_certificates_are_served_without_a_restart(tmp_path: Path) -> None:
    first, second = write_tls(tmp_path / "first"), write_tls(tmp_path / "second")
    live = tmp_path / "live"
    live.mkdir()
    for name in ("tls.crt", "tls.key"):
        (live / name).write_bytes((first.cert.parent / name).read_bytes())
    state = ClusterState("c1")
    state.replace_nodes([])
    state.replace_pods([])
    running = grpcserver.start(state, "127.0.0.1:0", grpcserver.TlsFiles(live / "tls.crt", live / "tls.key"))
    running.serving(True)

    def check(ca: TlsSet) -> int:
        with _channel(running.port, ca) as ch:
            reply = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=10)
            return int(reply.status)

    try:
        assert check(first) == health_pb2.HealthCheckResponse.SERVING
        for name in ("tls.key", "tls.crt"):  # as a Secret volume update lands
            tmp = live / f".{name}"
            tmp.write_bytes((second.cert.parent / name).read_bytes())
            tmp.replace(live / name)
        assert check(second) == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.RpcError):
            check(first)  # the old CA no longer verifies the server
    finally:
        running.stop(0)


def test_concurrent_calls_while_pods_come_and_go() -> None:
    """Every answer is one of the two states the cluster is ever in: snapshots are never half-updated."""
    import threading

    from tests.estimator.support import node, pod

    state = ClusterState("c1")
    state.replace_nodes([node(f"n{i}", "4", "16Gi", pods=50) for i in range(20)])
    state.replace_pods([])
    request = pb.MaxAvailableReplicasRequest(cluster="c1")
    request.replicaRequirements.resourceRequest["cpu"].string = "1"
    churn = [pod(f"p{i}", f"n{i}", "2", "1Gi") for i in range(20)]  # takes 2 cpu on every node
    running = grpcserver.start(state, "127.0.0.1:0", workers=4)
    running.serving(True)
    stop = threading.Event()
    answers: list[int] = []

    def flip() -> None:
        while not stop.is_set():
            state.replace_pods(churn)
            state.replace_pods([])

    flipper = threading.Thread(target=flip, daemon=True)
    flipper.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{running.port}") as ch:
            stub = service_pb2_grpc.EstimatorStub(ch)

            def client() -> None:
                for _ in range(15):
                    answers.append(stub.MaxAvailableReplicas(request, timeout=10).maxReplicas)

            clients = [threading.Thread(target=client) for _ in range(4)]
            for c in clients:
                c.start()
            for c in clients:
                c.join(60)
    finally:
        stop.set()
        flipper.join(10)
        running.stop(0)
    assert len(answers) == 60
    assert set(answers) <= {80, 40}  # all pods gone, or all 20 present
