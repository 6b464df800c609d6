from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.witness import free_of
from webhook.placement.cluster import (
    cluster_from_kubectl,
    clusters_from_snapshot,
    load_cluster_file,
    load_clusters,
    pod_requests,
)
from webhook.placement.errors import PlacementInputError
from webhook.placement.model import Taint

GI = 1024**3


def snapshot(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    return {"clusters": [{"name": "m1", "nodes": nodes}]}


def test_snapshot_node() -> None:
    (cluster,) = clusters_from_snapshot(
        snapshot(
            [
                {
                    "name": "node-1",
                    "labels": {"topology.kubernetes.io/zone": "a"},
                    "taints": [{"key": "dedicated", "value": "flink", "effect": "NoSchedule"}],
                    "unschedulable": False,
                    "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "2"},
                    "requested": {"cpu": "2", "memory": "4Gi", "pods": "12"},
                }
            ]
        ),
        "s",
    )
    (node,) = cluster.nodes
    assert dict(node.free) == {"cpu": 14000, "memory": 60 * GI, "pods": 98, "nvidia.com/gpu": 2}
    assert node.taints == (Taint("dedicated", "flink", "NoSchedule"),)
    assert node.labels["topology.kubernetes.io/zone"] == "a"


def test_overcommitted_node_has_zero_free() -> None:
    (cluster,) = clusters_from_snapshot(
        snapshot([{"name": "n", "allocatable": {"cpu": "1"}, "requested": {"cpu": "2"}}]), "s"
    )
    assert cluster.nodes[0].free["cpu"] == 0


@pytest.mark.parametrize(
    ("node", "message"),
    [
        (
            {"name": "n", "allocatable": {"memory": "64Gx"}},
            "clusters\\[0\\].nodes\\[0\\].allocatable.memory: malformed quantity '64Gx'",
        ),
        ({"name": "n", "alocatable": {}}, "unknown field 'alocatable'"),
        ({"name": "n", "taints": [{"key": "a", "effect": "Sometimes"}]}, "unknown taint effect"),
        ({"name": "n", "unschedulable": "yes"}, "unschedulable"),
        ({"allocatable": {}}, "a node needs a name"),
    ],
)
def test_snapshot_errors(node: dict[str, Any], message: str) -> None:
    with pytest.raises(PlacementInputError, match=message):
        clusters_from_snapshot(snapshot([node]), "clusters.yaml")


def test_duplicate_node_names_rejected() -> None:
    with pytest.raises(PlacementInputError, match="duplicate node"):
        clusters_from_snapshot(snapshot([{"name": "n"}, {"name": "n"}]), "s")


def container(name: str, **requests: str) -> dict[str, Any]:
    return {"name": name, "resources": {"requests": dict(requests)}}


def test_pod_requests_like_the_scheduler() -> None:
    spec = {
        "containers": [container("a", cpu="500m", memory="1Gi"), container("b", cpu="250m")],
        "initContainers": [container("init-big", cpu="2"), container("init-mem", memory="3Gi")],
        "overhead": {"cpu": "100m"},
    }
    # max(sum(containers), max(init)) + overhead, per resource
    assert pod_requests(spec, "p") == {"cpu": 2100, "memory": 3 * GI}


def test_pod_requests_with_sidecar() -> None:
    spec = {
        "containers": [container("a", cpu="1")],
        "initContainers": [
            {**container("proxy", cpu="500m"), "restartPolicy": "Always"},
            container("migrate", cpu="1200m"),
        ],
    }
    # the sidecar runs beside the later init container (1.7) and the app (1.5)
    assert pod_requests(spec, "p")["cpu"] == 1700


def test_limits_stand_in_for_missing_requests() -> None:
    spec = {
        "containers": [
            {
                "name": "a",
                "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "2"}, "requests": {"cpu": "1"}},
            }
        ]
    }
    assert pod_requests(spec, "p") == {"nvidia.com/gpu": 1, "cpu": 1000}


def kubectl_list() -> dict[str, Any]:
    def pod(node: str | None, phase: str, cpu: str) -> dict[str, Any]:
        spec: dict[str, Any] = {"containers": [container("c", cpu=cpu)]}
        if node:
            spec["nodeName"] = node
        return {"kind": "Pod", "metadata": {"name": "p"}, "spec": spec, "status": {"phase": phase}}

    return {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "kind": "Node",
                "metadata": {"name": "n1", "labels": {"pool": "flink"}},
                "spec": {
                    "taints": [
                        {"key": "dedicated", "value": "flink", "effect": "NoSchedule", "timeAdded": None}
                    ],
                    "unschedulable": True,
                },
                "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
            },
            {
                "kind": "Node",
                "metadata": {"name": "n2"},
                "spec": {},
                "status": {"allocatable": {"cpu": "2", "pods": "10"}},
            },
            pod("n1", "Running", "1"),
            pod("n1", "Pending", "500m"),  # bound but not started yet: holds its request
            pod("n1", "Succeeded", "2"),  # finished: holds nothing
            pod(None, "Pending", "3"),  # not bound: holds nothing
            pod("n2", "Failed", "1"),
        ],
    }


def test_kubectl_list() -> None:
    cluster = cluster_from_kubectl(kubectl_list(), "member1", "f")
    n1, n2 = cluster.nodes
    assert dict(n1.free) == {"cpu": 2500, "memory": 16 * GI, "pods": 108}
    assert n1.unschedulable and n1.taints == (Taint("dedicated", "flink", "NoSchedule"),)
    assert dict(n2.free) == {"cpu": 2000, "pods": 10}


def test_a_malformed_taint_is_an_input_error_in_every_reader() -> None:
    """One v1 Node reader: the CLI and the HTTP API used to raise AttributeError here (a 500), while the
    estimator dropped the taint and kept the node; now both see an input error naming the field."""
    from webhook.estimator.state import ClusterState

    doc = kubectl_list()
    doc["items"][0]["spec"]["taints"] = ["dedicated=flink:NoSchedule"]
    with pytest.raises(PlacementInputError, match=r"f\.items\[0\]\.spec\.taints\[0\]: expected a mapping"):
        cluster_from_kubectl(doc, "member1", "f")
    state = ClusterState("member1")
    state.replace_nodes([item for item in doc["items"] if item["kind"] == "Node"])
    assert [n.name for n in state.snapshot().nodes] == ["n2"] and state.skipped == 1


def test_kubectl_file_named_after_file_or_override(tmp_path: Path) -> None:
    path = tmp_path / "member7.json"
    path.write_text(json.dumps(kubectl_list()))
    assert [c.name for c in load_cluster_file(path)] == ["member7"]
    assert [c.name for c in load_cluster_file(f"east={path}")] == ["east"]


def karmada_cluster(name: str, ready: bool, counts: list[int]) -> dict[str, Any]:
    return {
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {
            "resourceModels": [
                {
                    "grade": 0,
                    "ranges": [
                        {"name": "cpu", "min": "0", "max": "2"},
                        {"name": "memory", "min": "0", "max": "8Gi"},
                    ],
                },
                {
                    "grade": 1,
                    "ranges": [
                        {"name": "cpu", "min": "2", "max": "8"},
                        {"name": "memory", "min": "8Gi", "max": "32Gi"},
                    ],
                },
            ]
        },
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True" if ready else "False", "reason": "ClusterNotReachable"}
            ],
            "resourceSummary": {
                "allocatableModelings": [{"grade": g, "count": c} for g, c in enumerate(counts)]
            },
        },
    }


def test_karmada_cluster_virtual_nodes() -> None:
    (cluster,) = load_clusters(karmada_cluster("m2", True, [3, 2]), "c")
    assert len(cluster.nodes) == 5
    grade1 = [n for n in cluster.nodes if "grade-1" in n.name]
    assert len(grade1) == 2
    assert dict(grade1[0].free) == {"cpu": 2000, "memory": 8 * GI}  # the grade's minimums
    assert free_of(grade1[0], "pods") is None  # resource models carry no pod limit
    assert not cluster.not_ready
    (down,) = load_clusters(karmada_cluster("m1", False, [0, 1]), "c")
    assert "not Ready" in down.not_ready and "ClusterNotReachable" in down.not_ready


def test_karmada_cluster_list_and_unknown_grade() -> None:
    doc = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [karmada_cluster("a", True, [1]), karmada_cluster("b", True, [0, 1])],
    }
    assert [c.name for c in load_clusters(doc, "c")] == ["a", "b"]
    with pytest.raises(PlacementInputError, match="grade 5 has no resource model"):
        load_clusters(karmada_cluster("a", True, [0, 0, 0, 0, 0, 1]), "c")


@pytest.mark.shared
def test_real_karmada_cluster_objects(shared_data: Path) -> None:
    path = shared_data / "karmada-observed" / "scenA" / "clusters-after-failover.json"
    clusters = load_cluster_file(path)
    assert [c.name for c in clusters] == ["member1", "member2"]
    member1, member2 = clusters
    assert "not Ready" in member1.not_ready  # member1's API server was stopped
    assert not member2.not_ready
    # the recorded resource summaries count no nodes in any grade
    assert member1.nodes == () and member2.nodes == ()


def test_not_a_cluster_input() -> None:
    with pytest.raises(PlacementInputError, match="not a cluster input"):
        load_clusters({"kind": "Deployment"}, "c")
