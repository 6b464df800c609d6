"""The live edge without a cluster: the kubernetes client is replaced by canned API objects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from webhook.placement.errors import PlacementInputError
from webhook.placement.live import cluster_from_context, clusters_from_contexts


class FakeCore:
    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client

    def list_node(self) -> client.V1NodeList:
        node = client.V1Node(
            metadata=client.V1ObjectMeta(name="n1", labels={"pool": "flink"}),
            spec=client.V1NodeSpec(
                taints=[client.V1Taint(key="dedicated", value="flink", effect="NoSchedule")]
            ),
            status=client.V1NodeStatus(allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"}),
        )
        return client.V1NodeList(items=[node])

    def list_pod_for_all_namespaces(self, field_selector: str) -> client.V1PodList:
        assert "Succeeded" in field_selector and "Failed" in field_selector
        container = client.V1Container(
            name="c", resources=client.V1ResourceRequirements(requests={"cpu": "1500m", "memory": "2Gi"})
        )
        pod = client.V1Pod(
            metadata=client.V1ObjectMeta(name="p"),
            spec=client.V1PodSpec(node_name="n1", containers=[container]),
            status=client.V1PodStatus(phase="Running"),
        )
        return client.V1PodList(items=[pod])


def test_live_context_reads_nodes_and_pods(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "load_kube_config", lambda **_: None)  # the rest of the one constructor runs
    monkeypatch.setattr(client, "CoreV1Api", FakeCore)
    (cluster,) = clusters_from_contexts(["prod-eu"])
    assert cluster.name == "prod-eu"
    (node,) = cluster.nodes
    assert dict(node.free) == {"cpu": 2500, "memory": 14 * 1024**3, "pods": 109}
    assert node.labels["pool"] == "flink" and node.taints[0].key == "dedicated"


def test_live_bad_kubeconfig_is_input_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-kubeconfig"
    with pytest.raises(PlacementInputError, match="context 'x': cannot load kubeconfig"):
        cluster_from_context("x", str(missing))
