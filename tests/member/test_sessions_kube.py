"""Issue 17 item 5, the edge: the member role GETs a FlinkSessionJob's session cluster from its own API
server (a real ``kubernetes`` client against the in-memory API server of tests/certs/fake_kube.py)."""

from __future__ import annotations

from pathlib import Path

from tests.certs.fake_kube import FakeKube
from tests.support.kube import write_kubeconfig
from tests.support.objects import flink_deployment
from tests.support.server import free_port
from webhook.common.kubeclient import ClientConfig
from webhook.member.sessions import KubeSessionClusters

PATH = "/apis/flink.apache.org/v1beta1/namespaces/analytics/flinkdeployments/session-cluster"


def test_the_session_cluster_is_read_from_the_api_server(tmp_path: Path) -> None:
    with FakeKube() as kube:
        kube.objects[PATH] = flink_deployment(name="session-cluster", checkpoint_dir="s3://b/ckpt", job=None)
        clusters = KubeSessionClusters(ClientConfig(str(kube.kubeconfig(tmp_path))))
        found = clusters("analytics", "session-cluster", 2.0)
        assert found.error == "" and found.resource is not None
        assert found.resource.checkpoint_dir == "s3://b/ckpt"
        missing = clusters("analytics", "other", 2.0)
        assert missing.resource is None and missing.error == ""  # 404: not there, not an error
        assert ("GET", PATH, "") in kube.requests


def test_an_unreachable_api_server_is_an_error_value(tmp_path: Path) -> None:
    config = write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{free_port()}")
    found = KubeSessionClusters(ClientConfig(str(config)))("analytics", "session-cluster", 1.0)
    assert found.resource is None and found.error
