"""The watched state: free capacity follows each node and pod event, and equals the offline reader."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.estimator.support import node, pod
from webhook.estimator.state import ClusterState
from webhook.placement.cluster import cluster_from_kubectl
from webhook.placement.model import Cluster

GIB = 1 << 30


def _free(cluster: Cluster) -> dict[str, dict[str, int]]:
    return {n.name: dict(n.free) for n in cluster.nodes}


def _state(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], **kw: Any) -> ClusterState:
    state = ClusterState("c1", **kw)
    state.replace_nodes(nodes)
    state.replace_pods(pods)
    return state


@pytest.mark.shared
def test_recorded_cluster_equals_the_offline_reader(
    recorded_objects: tuple[list[dict[str, Any]], list[dict[str, Any]]], recorded_state: ClusterState
) -> None:
    nodes, pods = recorded_objects
    items = [{**n, "kind": "Node"} for n in nodes] + [{**p, "kind": "Pod"} for p in pods]
    offline = cluster_from_kubectl({"items": items}, "c-1000", "recorded")
    live = recorded_state.snapshot()
    assert _free(live) == _free(offline)
    assert [n.name for n in live.nodes] == [n.name for n in offline.nodes]
    assert recorded_state.counts() == (1000, 34079)


def test_events_move_free_capacity() -> None:
    state = _state([node("n1", "4", "8Gi", pods=10), node("n2", "2", "4Gi")], [pod("p1", "n1", "1", "1Gi")])
    assert state.synced
    assert _free(state.snapshot())["n1"] == {"cpu": 3000, "memory": 7 * GIB, "pods": 9}
    state.pod_event("ADDED", pod("p2", "n1", "500m", "1Gi"))
    assert _free(state.snapshot())["n1"] == {"cpu": 2500, "memory": 6 * GIB, "pods": 8}
    done = pod("p2", "n1", "500m", "1Gi")
    done["status"]["phase"] = "Succeeded"
    state.pod_event("MODIFIED", done)  # a finished pod holds nothing
    assert _free(state.snapshot())["n1"]["cpu"] == 3000
    state.pod_event("DELETED", pod("p1", "n1", "1", "1Gi"))
    assert _free(state.snapshot())["n1"] == {"cpu": 4000, "memory": 8 * GIB, "pods": 10}
    pending = pod("p3", "n1", "1", "1Gi")
    del pending["spec"]["nodeName"]
    state.pod_event("ADDED", pending)  # not bound: holds nothing
    assert _free(state.snapshot())["n1"]["cpu"] == 4000
    cordoned = node("n2", "2", "4Gi")
    cordoned["spec"] = {"unschedulable": True, "taints": [{"key": "k", "effect": "NoSchedule"}]}
    state.node_event("MODIFIED", cordoned)
    n2 = next(n for n in state.snapshot().nodes if n.name == "n2")
    assert n2.unschedulable and n2.taints[0].key == "k"
    state.node_event("DELETED", node("n1", "4", "8Gi"))
    assert [n.name for n in state.snapshot().nodes] == ["n2"]
    assert state.counts() == (1, 0)


def test_incremental_snapshots_equal_a_fresh_build() -> None:
    nodes = [node(f"n{i}", "8", "16Gi", pods=20) for i in range(6)]
    pods = [pod(f"p{i}", f"n{i % 6}", "250m", "512Mi") for i in range(30)]
    state = _state(nodes, pods)
    state.snapshot()
    for i in range(0, 30, 3):
        state.pod_event("DELETED", pods[i])
    state.pod_event("ADDED", pod("extra", "n2", "3", "1Gi"))
    state.node_event("MODIFIED", node("n4", "16", "16Gi", pods=20))
    kept = [p for i, p in enumerate(pods) if i % 3] + [pod("extra", "n2", "3", "1Gi")]
    fresh = _state([*nodes[:4], node("n4", "16", "16Gi", pods=20), nodes[5]], kept)
    assert _free(state.snapshot()) == _free(fresh.snapshot())


def test_refresh_bounds_how_often_a_busy_state_is_rebuilt() -> None:
    now = [100.0]
    state = _state([node("n1", "4", "8Gi")], [], clock=lambda: now[0], refresh_s=1.0)
    first = state.snapshot()
    state.pod_event("ADDED", pod("p1", "n1", "1", "1Gi"))
    assert state.snapshot() is first  # younger than refresh_s: reused
    now[0] += 1.5
    assert _free(state.snapshot())["n1"]["cpu"] == 3000
    assert state.age() == 1.5


def test_unreadable_objects_are_skipped_not_fatal() -> None:
    bad_pod = pod("p1", "n1", "lots", "1Gi")
    bad_node = copy.deepcopy(node("n2", "x", "1Gi"))
    state = _state([node("n1", "4", "8Gi"), bad_node], [bad_pod, pod("p2", "n1", "1", "1Gi")])
    assert state.skipped == 2
    assert _free(state.snapshot()) == {"n1": {"cpu": 3000, "memory": 7 * GIB, "pods": 109}}


def test_not_synced_until_both_lists() -> None:
    state = ClusterState("c1")
    state.replace_pods([])
    assert not state.synced
    state.replace_nodes([])
    assert state.synced
