"""Karmada's recorded requests answered from the recorded cluster: sets >= Karmada's, witnesses valid."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.estimator.conftest import WORKLOADS
from tests.placement import validator
from webhook.estimator import answer, wire
from webhook.estimator.proto import estimator_pb2 as pb
from webhook.estimator.state import ClusterState
from webhook.placement.model import Cluster, Component, Node, Taint, Toleration

KARMADA = {"small": 204, "medium": 16, "large": 1, "ha": 4}
EXACT = {"small", "medium", "large"}  # Karmada's first fit meets the upper bound on these


def _components(karmada_data: Path, name: str) -> pb.MaxAvailableComponentSetsRequest:
    return pb.MaxAvailableComponentSetsRequest.FromString((karmada_data / f"{name}.bin").read_bytes())


@pytest.mark.shared
@pytest.mark.parametrize("workload", WORKLOADS)
def test_sets_never_below_karmadas_answer(
    karmada_data: Path, recorded_state: ClusterState, workload: str
) -> None:
    request = _components(karmada_data, f"request-components-{workload}")
    comps = wire.components(request.components)
    assert not isinstance(comps, wire.Invalid)
    cluster = recorded_state.snapshot()
    result = answer.component_sets(cluster, comps)
    validator.check(cluster, comps, result.value, result.estimate.assignment)
    assert result.value >= KARMADA[workload]
    if workload in EXACT:
        assert result.value == KARMADA[workload] == result.estimate.upper_bound


@pytest.mark.shared
def test_ha_beats_karmadas_first_fit(karmada_data: Path, recorded_state: ClusterState) -> None:
    comps = wire.components(_components(karmada_data, "request-components-ha").components)
    assert not isinstance(comps, wire.Invalid)
    assert answer.component_sets(recorded_state.snapshot(), comps).value > KARMADA["ha"]


@pytest.mark.shared
def test_assumed_workloads_are_deducted(karmada_data: Path, recorded_state: ClusterState) -> None:
    request = _components(karmada_data, "request-components-small-assumed")
    comps = wire.components(request.components)
    assumed = wire.assumed(request.assumedWorkloads)
    assert not isinstance(comps, wire.Invalid) and not isinstance(assumed, wire.Invalid)
    assert len(assumed) == 2
    result = answer.component_sets(recorded_state.snapshot(), comps, assumed)
    assert result.deducted_sets == 2
    assert result.value == 202  # Karmada's estimator with SchedulingOvercommitProtection


@pytest.mark.shared
def test_replicas_as_recorded(karmada_data: Path, recorded_state: ClusterState) -> None:
    request = pb.MaxAvailableReplicasRequest.FromString(
        (karmada_data / "request-replicas-taskmanager.bin").read_bytes()
    )
    comp = wire.replica_component(request.replicaRequirements)
    assert isinstance(comp, Component)
    result = answer.replicas(recorded_state.snapshot(), comp)
    assert result.value == 817
    summary = answer.witness_summary(result)
    assert summary["sets"] == 817


def _cluster(*nodes: Node) -> Cluster:
    return Cluster("c", nodes)


def test_filters_karmada_honours() -> None:
    gpu = Node("gpu", {"cpu": 8000, "nvidia.com/gpu": 2, "pods": 10}, {"pool": "gpu"})
    tainted = Node("tainted", {"cpu": 8000, "nvidia.com/gpu": 4, "pods": 10}, {"pool": "gpu"}, (Taint("t"),))
    cordoned = Node("cordoned", {"cpu": 8000, "nvidia.com/gpu": 4, "pods": 10}, {"pool": "gpu"}, (), True)
    full = Node("full", {"cpu": 8000, "nvidia.com/gpu": 4, "pods": 1}, {"pool": "gpu"})
    other = Node("other", {"cpu": 8000, "nvidia.com/gpu": 4, "pods": 10}, {"pool": "cpu"})
    cluster = _cluster(gpu, tainted, cordoned, full, other)
    comp = Component("c", 1, {"cpu": 1000, "nvidia.com/gpu": 1}, {"pool": "gpu"})
    # gpu: 2; tainted: untolerated; cordoned: unschedulable; full: 1 pod slot; other: selector
    assert answer.replicas(cluster, comp).value == 3
    tolerant = Component(
        "c", 1, {"cpu": 1000, "nvidia.com/gpu": 1}, {"pool": "gpu"}, (Toleration("t", "Exists"),)
    )
    assert answer.replicas(cluster, tolerant).value == 7
    no_gpu_nodes = _cluster(Node("n", {"cpu": 8000, "pods": 10}))
    assert answer.replicas(no_gpu_nodes, Component("c", 1, {"nvidia.com/gpu": 1})).value == 0


def test_empty_cluster_answers_zero() -> None:
    assert answer.component_sets(_cluster(), (Component("c", 2, {"cpu": 1}),)).value == 0


def test_assumed_set_that_does_not_fit_deducts_nothing() -> None:
    cluster = _cluster(Node("n", {"cpu": 4000, "pods": 10}))
    big = (Component("big", 1, {"cpu": 5000}),)
    small = (Component("small", 1, {"cpu": 1000}),)
    left, placed = answer.deduct(cluster, [big, small, small])
    assert placed == 2
    assert left.nodes[0].free["cpu"] == 2000 and left.nodes[0].free["pods"] == 8
    assert answer.component_sets(cluster, small, [big, small, small]).value == 2


def test_no_cycle_collection_while_answers_are_in_flight() -> None:
    """Collections wait while any answer is computed (a full one put tens of ms into the p99), and
    resume once none is; a collector the process had switched off stays off."""
    import gc

    from webhook.estimator.answer import _no_cycle_collection

    assert gc.isenabled()
    with _no_cycle_collection():
        assert not gc.isenabled()
        with _no_cycle_collection():  # a second call in another gRPC worker
            assert not gc.isenabled()
        assert not gc.isenabled()  # the first is still computing
    assert gc.isenabled()
    gc.disable()
    try:
        with _no_cycle_collection():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_busiest_nodes_are_the_sorted_ones() -> None:
    from webhook.estimator.answer import _busiest

    cases = [
        {},
        {"a": 1},
        {f"n{i:04d}": (i * 7919) % 13 for i in range(2000)},
        {f"n{i}": 2 for i in range(300)},  # all tied: by name
        {"b": 3, "a": 3, "c": 1, "d": 3, "e": 2, "f": 3, "g": 3},
    ]
    for nodes in cases:
        assert _busiest(nodes, 5) == sorted(nodes.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
