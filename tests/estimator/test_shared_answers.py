"""The gRPC server's answers shared per (snapshot, request) are the answers computed afresh, and change with
the cluster: a real server on loopback, its state changed the way the watch changes it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.estimator.support import node, pod
from webhook.estimator import answer, grpcserver, wire
from webhook.estimator.proto import estimator_pb2 as pb
from webhook.estimator.proto import service_pb2_grpc
from webhook.estimator.state import ClusterState

CLUSTER = "c1"


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[ClusterState, grpcserver.Running, service_pb2_grpc.EstimatorStub]]:
    state = ClusterState(CLUSTER)
    state.replace_nodes([])
    state.replace_pods([])
    running = grpcserver.start(state, "127.0.0.1:0", workers=4)
    running.serving(True)
    with grpc.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        yield state, running, service_pb2_grpc.EstimatorStub(channel)
    running.stop(0)


def _component(name: str, replicas: int, cpu_m: int, mem_mi: int, zone: str | None) -> pb.Component:
    comp = pb.Component(name=name, replicas=replicas)
    if cpu_m:
        comp.replicaRequirements.resourceRequest["cpu"].string = f"{cpu_m}m"
    if mem_mi:
        comp.replicaRequirements.resourceRequest["memory"].string = f"{mem_mi}Mi"
    if zone is not None:
        comp.replicaRequirements.nodeClaim.nodeSelector["zone"] = zone
    return comp


def _fresh(state: ClusterState, request: pb.MaxAvailableComponentSetsRequest) -> int:
    """The answer computed now from the state's snapshot, without the server (and its memo)."""
    comps = wire.components(request.components)
    assert not isinstance(comps, wire.Invalid)
    return answer.component_sets(state.snapshot(), comps).value


zones = st.sampled_from(["a", "b"])
node_specs = st.lists(
    st.tuples(st.integers(1, 16), st.integers(1, 64), st.integers(1, 12), zones), min_size=1, max_size=8
)
pod_specs = st.lists(st.tuples(st.integers(0, 7), st.integers(0, 3000), st.integers(0, 8192)), max_size=20)
component_specs = st.lists(
    st.tuples(st.integers(1, 4), st.integers(0, 4000), st.integers(0, 16384), st.none() | zones),
    min_size=1,
    max_size=3,
)
changes = st.lists(
    st.one_of(
        st.tuples(st.just("pod"), st.integers(0, 7), st.integers(1, 4000)),
        st.tuples(st.just("delete-node"), st.integers(0, 7), st.just(0)),
        st.tuples(st.just("resize-node"), st.integers(0, 7), st.integers(1, 16)),
    ),
    max_size=4,
)


def _request(spec: list[tuple[int, int, int, str | None]]) -> pb.MaxAvailableComponentSetsRequest:
    return pb.MaxAvailableComponentSetsRequest(
        cluster=CLUSTER, components=[_component(f"c{i}", *s) for i, s in enumerate(spec)]
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(node_specs, pod_specs, st.lists(component_specs, min_size=1, max_size=3), changes, st.data())
def test_shared_answers_equal_fresh_ones_through_watch_changes(
    served: tuple[ClusterState, grpcserver.Running, service_pb2_grpc.EstimatorStub],
    nodes: list[tuple[int, int, int, str]],
    pods: list[tuple[int, int, int]],
    requests: list[list[tuple[int, int, int, str | None]]],
    steps: list[tuple[str, int, int]],
    data: st.DataObject,
) -> None:
    state, _, stub = served
    node_objs: list[dict[str, Any]] = [
        node(f"n{i}", str(cpu), f"{mem}Gi", pods=slots, zone=zone)
        for i, (cpu, mem, slots, zone) in enumerate(nodes)
    ]
    state.replace_nodes(node_objs)
    state.replace_pods(
        [pod(f"p{k}", f"n{i % len(nodes)}", f"{cpu}m", f"{mem}Mi") for k, (i, cpu, mem) in enumerate(pods)]
    )
    asks = [_request(spec) for spec in requests]
    for step in [None, *steps]:
        if step is not None:
            kind, i, amount = step
            name = f"n{i % len(nodes)}"
            if kind == "pod":
                state.pod_event("ADDED", pod(f"added-{data.draw(st.uuids())}", name, f"{amount}m", "1Mi"))
            elif kind == "delete-node":
                state.node_event("DELETED", {"metadata": {"name": name}})
            else:
                resized = next(o for o in node_objs if o["metadata"]["name"] == name)
                state.node_event("MODIFIED", {**resized, "status": node(name, str(amount), "64Gi")["status"]})
        # each request twice, in an order hypothesis picks: the second is the shared answer
        for request in data.draw(st.permutations(asks + asks)):
            got = stub.MaxAvailableComponentSets(request, timeout=10).maxSets
            assert got == _fresh(state, request)


def test_a_node_or_pod_event_changes_the_next_answer(
    served: tuple[ClusterState, grpcserver.Running, service_pb2_grpc.EstimatorStub],
) -> None:
    state, running, stub = served
    state.replace_nodes([node("n0", "4", "16Gi"), node("n1", "4", "16Gi")])
    state.replace_pods([])
    request = pb.MaxAvailableReplicasRequest(cluster=CLUSTER)
    request.replicaRequirements.resourceRequest["cpu"].string = "1"

    def ask() -> int:
        return stub.MaxAvailableReplicas(request, timeout=10).maxReplicas

    assert [ask(), ask()] == [8, 8]
    assert [r["computedForThisCall"] for r in list(running.service.recent)[-2:]] == [True, False]
    state.pod_event("ADDED", pod("p0", "n0", "2", "1Gi"))
    assert ask() == 6
    state.node_event("DELETED", {"metadata": {"name": "n1"}})
    assert ask() == 2
    state.node_event("MODIFIED", node("n0", "8", "16Gi"))
    assert ask() == 6
    state.pod_event("DELETED", pod("p0", "n0", "2", "1Gi"))
    assert ask() == 8
    assert running.service.recent[-1]["computedForThisCall"] is True


def test_an_unreadable_request_is_refused_every_time(
    served: tuple[ClusterState, grpcserver.Running, service_pb2_grpc.EstimatorStub],
) -> None:
    state, _, stub = served
    state.replace_nodes([node("n0", "4", "16Gi")])
    state.replace_pods([])
    request = pb.MaxAvailableComponentSetsRequest(
        cluster=CLUSTER, components=[pb.Component(name="c", replicas=-1)]
    )
    for _ in range(2):
        with pytest.raises(grpc.RpcError) as failed:
            stub.MaxAvailableComponentSets(request, timeout=10)
        assert failed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "replicas: must be >= 0" in str(failed.value.details())
