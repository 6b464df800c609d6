"""The estimator-at-scale bench's inventory (``bench._inventory``) and its request rewrite.

The bench writes these objects straight into etcd, where nothing checks them: a name or uid shared by two
tiles, or a pod left on a node of another tile, would silently shrink or skew the cluster both estimators
answer for.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench._inventory import tiled
from bench.estimator_scale import decode, for_cluster
from tests.estimator.support import node, pod
from webhook.estimator.proto import estimator_pb2 as pb


def _recorded() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = [node(f"node-{i}", "8", "32Gi") for i in (1, 2)]
    for i, n in enumerate(nodes, 1):
        n["metadata"]["uid"] = f"00000000-0000-0000-0000-00000000000{i}"
    pods = [pod(f"node-{n}-p{k}", f"node-{n}", "1", "1Gi") for n in (1, 2) for k in (1, 2, 3)]
    for i, p in enumerate(pods):
        p["metadata"]["uid"] = f"00000000-0000-0000-0001-00000000000{i}"
        p["metadata"]["resourceVersion"] = "7"
    return nodes, pods


def test_tiles_are_distinct_copies_whose_pods_stay_on_their_own_tiles_nodes() -> None:
    nodes, pods = _recorded()
    out = list(tiled(nodes, pods, 3))
    keys = [k for k, _ in out]
    assert len(keys) == len(set(keys)) == 3 * (2 + 6)
    assert keys[:6] == [f"/minions/{p}node-{i}" for p in ("", "t1-", "t2-") for i in (1, 2)]  # nodes first
    uids = [o["metadata"]["uid"] for _, o in out]
    assert len(set(uids)) == len(uids)
    node_names = {o["metadata"]["name"] for k, o in out if k.startswith("/minions/")}
    for key, obj in out:
        if key.startswith("/pods/"):
            assert key == f"/pods/default/{obj['metadata']['name']}"
            assert obj["spec"]["nodeName"] in node_names
            tile = obj["metadata"]["name"].split("-node-")[0] if obj["metadata"]["name"][0] == "t" else ""
            assert obj["spec"]["nodeName"].startswith(f"{tile}-node-" if tile else "node-")
            assert "resourceVersion" not in obj["metadata"]  # etcd's revision is the version
            assert obj["kind"] == "Pod"
    assert pods[0]["metadata"]["name"] == "node-1-p1"  # the recording is not changed in place
    assert pods[0]["metadata"]["resourceVersion"] == "7"


def test_pods_per_node_keeps_the_first_pods_of_each_node() -> None:
    nodes, pods = _recorded()
    kept = [
        o["metadata"]["name"] for k, o in tiled(nodes, pods, 2, pods_per_node=1) if k.startswith("/pods/")
    ]
    assert kept == ["node-1-p1", "node-2-p1", "t1-node-1-p1", "t1-node-2-p1"]


def test_a_recorded_request_is_readdressed_with_every_other_field_kept() -> None:
    recorded = pb.MaxAvailableComponentSetsRequest(
        cluster="c-1000", namespace="analytics", components=[pb.Component(name="jobmanager", replicas=1)]
    ).SerializeToString()
    moved = pb.MaxAvailableComponentSetsRequest.FromString(for_cluster(recorded, "c-10000"))
    assert moved.cluster == "c-10000"
    assert moved.namespace == "analytics"
    assert [c.name for c in moved.components] == ["jobmanager"]
    with pytest.raises(ValueError):
        for_cluster(recorded.replace(b"c-1000", b"c-2000"), "c-10000")


def test_an_empty_reply_is_zero() -> None:
    assert decode("MaxAvailableComponentSets", b"") == 0  # proto3 writes 0 as nothing
    assert (
        decode("MaxAvailableReplicas", pb.MaxAvailableReplicasResponse(maxReplicas=817).SerializeToString())
        == 817
    )
