"""GetUnschedulableReplicas as Karmada's estimator answers it: the pods of a Deployment's current
ReplicaSet that have been unschedulable longer than the threshold; Karmada's errors for the rest."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import pytest

from tests.controlplane import fakeapi
from tests.estimator.support import node, pod
from tests.support.production import wait_for
from webhook.common.kubeclient import ClientConfig
from webhook.estimator import grpcserver
from webhook.estimator.member_api import DEPLOYMENTS, NODES, PODS, REPLICASETS, EstimatorApi, feed
from webhook.estimator.proto import estimator_pb2 as pb
from webhook.estimator.proto import service_pb2_grpc
from webhook.estimator.state import ClusterState
from webhook.estimator.workloads import Unanswerable, Workloads, template_digest

NOW = datetime(2026, 6, 1, 12, 0, 0, tzinfo=UTC).timestamp()
MINUTE = 60 * 10**9  # the threshold is a Go time.Duration: nanoseconds
TEMPLATE = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {"containers": [{"name": "web", "image": "nginx:1", "resources": {"requests": {"cpu": "1"}}}]},
}


def deployment(name: str = "web", template: dict[str, Any] | None = None, uid: str = "d-1") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "shop", "uid": uid},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template or TEMPLATE},
    }


def replicaset(
    name: str, created: str, template: dict[str, Any] | None = None, owner: str = "d-1", hash_: str = "h"
) -> dict[str, Any]:
    tpl = copy.deepcopy(template or TEMPLATE)
    tpl["metadata"]["labels"]["pod-template-hash"] = hash_
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": f"rs-{name}",
            "creationTimestamp": created,
            "labels": {"app": "web", "pod-template-hash": hash_},
            "ownerReferences": [{"kind": "Deployment", "name": "web", "uid": owner, "controller": True}],
        },
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": tpl},
    }


def pending(name: str, rs: str, since: str, reason: str = "Unschedulable", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": f"uid-{name}",
            "labels": labels or {"app": "web"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": rs, "uid": f"rs-{rs}", "controller": True}],
        },
        "spec": {"containers": [{"name": "web"}]},
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": reason, "lastTransitionTime": since}
            ],
        },
    }


def loaded(
    *pods: dict[str, Any], rs: list[dict[str, Any]] | None = None, dep: dict[str, Any] | None = None
) -> Workloads:
    state = ClusterState("member1")
    state.replace_nodes([])
    state.replace_pods(list(pods))
    state.workloads.replace_deployments([dep or deployment()])
    state.workloads.replace_replicasets(
        rs if rs is not None else [replicaset("web-new", "2026-05-01T00:00:00Z")]
    )
    return state.workloads


def count(workloads: Workloads, threshold_ns: int = MINUTE, name: str = "web") -> int | Unanswerable:
    return workloads.unschedulable("apps/v1", "Deployment", "shop", name, threshold_ns, NOW)


def test_counts_pods_unschedulable_longer_than_the_threshold() -> None:
    workloads = loaded(
        pending("a", "web-new", "2026-06-01T11:50:00Z"),  # 10 minutes: counts
        pending("b", "web-new", "2026-06-01T11:59:30Z"),  # 30 s: not yet
        pending("c", "web-new", "2026-06-01T11:00:00Z", reason="SchedulingGated"),  # not Unschedulable
        pending("d", "web-old", "2026-06-01T11:00:00Z"),  # the old ReplicaSet's pod
        pending("e", "web-new", "2026-06-01T11:00:00Z", app="other"),  # outside the selector
    )
    assert count(workloads) == 1
    assert count(workloads, threshold_ns=0) == 2
    assert count(workloads, threshold_ns=-5) == 2  # negative reads as 0, as in Karmada
    assert count(workloads, threshold_ns=600 * 10**9) == 0  # exactly 10 minutes: not longer


def test_the_current_replicaset_is_the_oldest_with_the_deployments_template() -> None:
    old_template = copy.deepcopy(TEMPLATE)
    old_template["spec"]["containers"][0]["image"] = "nginx:0"
    sets = [
        replicaset("web-old", "2026-01-01T00:00:00Z", old_template, hash_="o"),
        replicaset("web-twin", "2026-05-02T00:00:00Z", hash_="t"),  # same template, newer
        replicaset("web-new", "2026-05-01T00:00:00Z", hash_="n"),
        replicaset("web-foreign", "2025-01-01T00:00:00Z", owner="someone-else", hash_="f"),
    ]
    pods = [
        pending(f"p-{rs}", rs, "2026-06-01T00:00:00Z")
        for rs in ("web-old", "web-twin", "web-new", "web-foreign")
    ]
    assert count(loaded(*pods, rs=sets)) == 1  # only web-new's pod
    assert count(loaded(*pods, rs=[sets[0], sets[3]])) == 0  # no current ReplicaSet yet: 0, no error


def test_templates_compare_as_kubernetes_compares_them() -> None:
    """pod-template-hash ignored, nil equal to empty, quantities by value (Semantic.DeepEqual)."""
    same = copy.deepcopy(TEMPLATE)
    same["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1000m"
    same["spec"]["volumes"] = []
    same["metadata"]["annotations"] = {}
    same["metadata"]["labels"]["pod-template-hash"] = "abc"
    assert template_digest(same) == template_digest(TEMPLATE)
    other = copy.deepcopy(TEMPLATE)
    other["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    assert template_digest(other) != template_digest(TEMPLATE)


def test_karmadas_errors_for_other_kinds_and_missing_deployments() -> None:
    workloads = loaded()
    assert workloads.unschedulable(
        "flink.apache.org/v1beta1", "FlinkDeployment", "shop", "f", 0, NOW
    ) == Unanswerable("kind(FlinkDeployment) of workload(shop/f) is not supported")
    assert workloads.unschedulable("apps/v1", "StatefulSet", "", "s", 0, NOW) == Unanswerable(
        "kind(StatefulSet) of workload(s) is not supported"
    )
    assert count(workloads, name="nope") == Unanswerable('deployments.apps "nope" not found')


def test_watch_events_keep_the_count_current() -> None:
    state = ClusterState("member1")
    state.replace_nodes([])
    state.replace_pods([])
    state.workloads.replace_deployments([])
    state.workloads.replace_replicasets([])
    state.workloads.deployment_event("ADDED", deployment())
    state.workloads.replicaset_event("ADDED", replicaset("web-new", "2026-05-01T00:00:00Z"))
    state.pod_event("ADDED", pending("a", "web-new", "2026-06-01T11:00:00Z"))
    assert count(state.workloads) == 1
    scheduled = pending("a", "web-new", "2026-06-01T11:00:00Z")
    scheduled["status"]["conditions"][0].update(status="True", reason="")
    scheduled["spec"]["nodeName"] = "n1"
    state.pod_event("MODIFIED", scheduled)
    assert count(state.workloads) == 0
    state.pod_event("MODIFIED", pending("a", "web-new", "2026-06-01T11:00:00Z"))
    state.workloads.replicaset_event("DELETED", replicaset("web-new", "2026-05-01T00:00:00Z"))
    assert count(state.workloads) == 0
    state.workloads.deployment_event("DELETED", deployment())
    assert count(state.workloads, name="web") == Unanswerable('deployments.apps "web" not found')


# --- over gRPC, from a (fake) member API server ------------------------------------------------------


@pytest.fixture
def watched(
    tmp_path: Path,
) -> Iterator[tuple[ClusterState, grpcserver.Running, dict[str, fakeapi.FakeKarmada]]]:
    stores = {
        NODES: fakeapi.core_collection("nodes"),
        PODS: fakeapi.core_collection("pods"),
        DEPLOYMENTS: fakeapi.FakeKarmada(
            path="/apis/apps/v1/deployments", api_version="apps/v1", list_kind="DeploymentList"
        ),
        REPLICASETS: fakeapi.FakeKarmada(
            path="/apis/apps/v1/replicasets", api_version="apps/v1", list_kind="ReplicaSetList"
        ),
    }
    stores[NODES].upsert(node("n1", "1", "1Gi"))
    stores[PODS].upsert(pod("busy", "n1", "1", "512Mi"))
    stores[DEPLOYMENTS].upsert(deployment())
    stores[REPLICASETS].upsert(replicaset("web-new", "2026-05-01T00:00:00Z"))
    long_ago = "2026-01-01T00:00:00Z"
    for i in range(3):
        stores[PODS].upsert(pending(f"w{i}", "web-new", long_ago))
    running_api = fakeapi.start(extra=tuple(stores.values()))
    api = EstimatorApi.connect(ClientConfig(kubeconfig=str(running_api.kubeconfig(tmp_path / "kc"))))
    assert isinstance(api, EstimatorApi)
    state = ClusterState("member1")
    stop = threading.Event()
    feeds = [
        feed(api, NODES, state.replace_nodes, state.node_event, stop),
        feed(api, PODS, state.replace_pods, state.pod_event, stop),
        feed(api, DEPLOYMENTS, state.workloads.replace_deployments, state.workloads.deployment_event, stop),
        feed(api, REPLICASETS, state.workloads.replace_replicasets, state.workloads.replicaset_event, stop),
    ]
    threads = [threading.Thread(target=f.run, daemon=True) for f in feeds]
    for t in threads:
        t.start()
    server = grpcserver.start(state, "127.0.0.1:0", workers=2)
    server.serving(True)
    try:
        yield state, server, stores
    finally:
        stop.set()
        for store in stores.values():
            store.end_watches()
        for t in threads:
            t.join(10)
        server.stop(0)
        running_api.stop()


def _ask(
    server: grpcserver.Running, kind: str = "Deployment", api_version: str = "apps/v1", name: str = "web"
) -> int:
    """The request as karmada-descheduler's client encodes it (cluster, object reference, threshold ns)."""
    request = pb.UnschedulableReplicasRequest(
        cluster="member1",
        resource=pb.ObjectReference(apiVersion=api_version, kind=kind, namespace="shop", name=name),
        unschedulableThreshold=5 * MINUTE,
    )
    body = request.SerializeToString(deterministic=True)
    assert pb.UnschedulableReplicasRequest.FromString(body) == request
    return _ask_port(server.port, request)


def test_answered_from_the_watched_api_server(
    watched: tuple[ClusterState, grpcserver.Running, dict[str, fakeapi.FakeKarmada]],
) -> None:
    state, server, stores = watched
    assert wait_for(lambda: state.synced and state.workloads.synced and state.workloads.counts()[2] == 3)
    assert _ask(server) == 3
    # Each change waited for by what only it makes true (issue 27: one wait for both, on a count the pair
    # leaves as it was, went on before the watch had applied either).
    stores[PODS].delete("shop", "w0")
    assert wait_for(lambda: state.workloads.counts()[2] == 2)
    stores[PODS].upsert(
        pending("w9", "web-new", datetime.fromtimestamp(time.time(), UTC).isoformat())
    )  # fresh: pending, not yet past the threshold
    assert wait_for(lambda: state.workloads.counts()[2] == 3)
    assert _ask(server) == 2
    with pytest.raises(grpc.RpcError) as flink:
        _ask(server, kind="FlinkDeployment", api_version="flink.apache.org/v1beta1")
    assert flink.value.code() == grpc.StatusCode.UNKNOWN
    assert flink.value.details() == "kind(FlinkDeployment) of workload(shop/web) is not supported"
    with pytest.raises(grpc.RpcError) as missing:
        _ask(server, name="gone")
    assert missing.value.details() == 'deployments.apps "gone" not found'


def test_unavailable_until_deployments_and_replicasets_are_listed() -> None:
    state = ClusterState("member1")
    state.replace_nodes([])
    state.replace_pods([])
    server = grpcserver.start(state, "127.0.0.1:0", workers=1)
    try:
        with pytest.raises(grpc.RpcError) as waiting:
            _ask(server)
        assert waiting.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "apps/v1 deployments and replicasets" in str(waiting.value.details())
    finally:
        server.stop(0)


def test_the_serve_process_answers_it(tmp_path: Path) -> None:
    """``serve --role estimator`` lists and watches Deployments and ReplicaSets next to nodes and pods."""
    import os
    import signal
    import subprocess

    from tests.estimator.support import serve_command
    from tests.support.server import free_port, wait_ready

    stores = (
        fakeapi.core_collection("nodes"),
        fakeapi.core_collection("pods"),
        fakeapi.FakeKarmada(
            path="/apis/apps/v1/deployments", api_version="apps/v1", list_kind="DeploymentList"
        ),
        fakeapi.FakeKarmada(
            path="/apis/apps/v1/replicasets", api_version="apps/v1", list_kind="ReplicaSetList"
        ),
    )
    nodes, pods, deployments, replicasets = stores
    nodes.upsert(node("n1", "1", "1Gi"))
    deployments.upsert(deployment())
    replicasets.upsert(replicaset("web-new", "2026-05-01T00:00:00Z"))
    pods.upsert(pending("w1", "web-new", "2026-01-01T00:00:00Z"))
    running = fakeapi.start(extra=stores)
    port, side = free_port(), free_port()
    log_file = tmp_path / "estimator.log"
    cmd = serve_command("member1", running.kubeconfig(tmp_path / "kc"), port, side)
    with log_file.open("wb") as log:
        process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ})
    try:
        wait_ready(side, None, process)

        def answered() -> int:
            try:
                return _ask_port(port)
            except grpc.RpcError:
                return -1  # deployments or replicasets not listed yet

        assert wait_for(lambda: answered() == 1)
        pods.upsert(pending("w2", "web-new", "2026-01-01T00:00:00Z"))
        assert wait_for(lambda: answered() == 2)
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=20)
        running.stop()
    assert code == 0, log_file.read_text()


def _ask_port(port: int, request: pb.UnschedulableReplicasRequest | None = None) -> int:
    request = request or pb.UnschedulableReplicasRequest(
        cluster="member1",
        resource=pb.ObjectReference(apiVersion="apps/v1", kind="Deployment", namespace="shop", name="web"),
        unschedulableThreshold=MINUTE,
    )
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        return int(
            service_pb2_grpc.EstimatorStub(channel)
            .GetUnschedulableReplicas(request, timeout=10)
            .unschedulableReplicas
        )
