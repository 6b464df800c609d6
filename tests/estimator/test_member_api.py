"""List + watch of nodes and pods against the fake API server: pages, events, 410 Gone, failed lists."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.controlplane import fakeapi
from tests.estimator.support import node, pod
from tests.support.production import wait_for
from webhook.common.kubeclient import ApiFailure, ClientConfig, Page
from webhook.estimator.member_api import NODES, PODS, EstimatorApi, feed
from webhook.estimator.state import ClusterState


@pytest.fixture
def member(tmp_path: Path) -> Iterator[tuple[EstimatorApi, fakeapi.FakeKarmada, fakeapi.FakeKarmada]]:
    nodes, pods = fakeapi.core_collection("nodes"), fakeapi.core_collection("pods")
    for i in range(5):
        nodes.upsert(node(f"n{i}", "4", "8Gi"))
        pods.upsert(pod(f"p{i}", f"n{i}", "1", "1Gi"))
    running = fakeapi.start(extra=(nodes, pods))
    api = EstimatorApi.connect(ClientConfig(kubeconfig=str(running.kubeconfig(tmp_path / "kc")), list_page=2))
    assert isinstance(api, EstimatorApi)
    yield api, nodes, pods
    running.stop()


def test_lists_page_by_page(member: tuple[EstimatorApi, fakeapi.FakeKarmada, fakeapi.FakeKarmada]) -> None:
    api, nodes, pods = member
    pages = list(api.pages(NODES))
    assert [len(p.items) for p in pages if isinstance(p, Page)] == [2, 2, 1]
    assert sum(1 for r in nodes.requests if "limit=2" in r) == 3
    list(api.pages(PODS))
    assert any("fieldSelector=status.phase%21%3DSucceeded" in r for r in pods.requests)


def test_feeds_follow_events_and_relist_after_gone(
    member: tuple[EstimatorApi, fakeapi.FakeKarmada, fakeapi.FakeKarmada],
) -> None:
    api, nodes, pods = member
    state = ClusterState("c1")
    stop = threading.Event()
    feeds = [
        feed(api, NODES, state.replace_nodes, state.node_event, stop),
        feed(api, PODS, state.replace_pods, state.pod_event, stop),
    ]
    threads = [threading.Thread(target=f.run, daemon=True) for f in feeds]
    for t in threads:
        t.start()
    try:
        assert wait_for(lambda: state.synced and state.counts() == (5, 5))
        pods.upsert(pod("p9", "n0", "2", "1Gi"))
        assert wait_for(lambda: state.counts() == (5, 6))
        free = {n.name: n.free["cpu"] for n in state.snapshot().nodes}
        assert free["n0"] == 1000
        pods.upsert_unseen(pod("p10", "n1", "3", "1Gi"))  # happened, then compacted away: 410 Gone
        pods.end_watches()
        assert wait_for(lambda: state.counts() == (5, 7)), "relisted after 410 Gone"
        nodes.delete("", "n4")
        assert wait_for(lambda: state.counts()[0] == 4)
    finally:
        stop.set()
        nodes.end_watches()
        pods.end_watches()
        for t in threads:
            t.join(10)


class _BrokenList:
    """A list that fails after its first page."""

    def pages(self, resource: str) -> Iterator[Page | ApiFailure]:
        yield Page([node("n1", "4", "8Gi")], "7")
        yield ApiFailure(503, "etcd is not ready")


def test_a_list_that_fails_half_way_changes_nothing() -> None:
    state = ClusterState("c1")
    state.replace_nodes([node("n0", "2", "4Gi")])
    loop = feed(_BrokenList(), NODES, state.replace_nodes, state.node_event, threading.Event())  # type: ignore[arg-type]
    assert loop.relist() is False
    assert [n.name for n in state.snapshot().nodes] == ["n0"]
    assert loop.resource_version == ""


def test_unreachable_api_server_is_a_failure_value(tmp_path: Path) -> None:
    from tests.support.kube import write_kubeconfig
    from tests.support.server import free_port

    config = ClientConfig(
        kubeconfig=str(write_kubeconfig(tmp_path / "kc", f"http://127.0.0.1:{free_port()}")),
        request_timeout=2,
    )
    api = EstimatorApi.connect(config)
    assert isinstance(api, EstimatorApi)
    (failure,) = list(api.pages(NODES))
    assert isinstance(failure, ApiFailure) and failure.status == 0
    (broken,) = list(api.watch(PODS, "1"))
    assert isinstance(broken, ApiFailure)
