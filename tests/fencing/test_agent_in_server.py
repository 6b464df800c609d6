"""The member role served for real (gunicorn, TLS) with --cluster and --kubeconfig: the webhook holds a
restore while member1 heartbeats, the agent running in one of its workers releases it once member1's
operator reports the old job stopped; an agent in trouble never makes the webhook unready (with
failurePolicy: Fail that would block every failed-over Flink object): a restore it cannot vouch for is
admitted held, with the reason."""

from __future__ import annotations

import json
from pathlib import Path

from tests.controlplane import fakeapi
from tests.support.agents import Driver
from tests.support.objects import (
    JOB_ID,
    apply,
    decode_patch,
    flink_deployment,
    make_checkpoints,
    review,
    running_deployment,
)
from tests.support.operator import operator_stops
from tests.support.production import agent_polled, wait_for
from tests.support.server import generate_certs, serve
from webhook.common.kubeclient import ClientConfig
from webhook.fencing.agent import FencingAgent
from webhook.fencing.flinkapi import FlinkApi, ThreadedApi
from webhook.policy.restore import FencingPolicy, RestorePolicy
from webhook.restore.storage.search import CheckpointStorage

P = "flink-failover.io"


def _policy_file(tmp_path: Path, root: Path) -> Path:
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(
        f"defaultCheckpointDir: {root}\n"
        "fencing: {leaseSeconds: 300, pollSeconds: 2, renewDeadlineSeconds: 100, stopMarginSeconds: 100}\n",
        encoding="utf-8",
    )
    return policy_file


def test_served_member_role_holds_then_its_agent_releases_once_the_old_job_stopped(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    make_checkpoints(root / JOB_ID, [1, 2])
    member1 = fakeapi.start_member_cluster()
    member2 = fakeapi.start_member_cluster()
    try:
        member1.fake.upsert(running_deployment())
        policy = RestorePolicy(default_checkpoint_dir=str(root), fencing=FencingPolicy(lease_seconds=300))
        api1 = FlinkApi.connect(ClientConfig(str(member1.kubeconfig(tmp_path / "m1.kubeconfig"))))
        assert isinstance(api1, FlinkApi)
        agent1 = Driver(FencingAgent("member1", policy, ThreadedApi(api1, 5.0), CheckpointStorage()))
        assert [s.action for s in agent1.tick()] == ["heartbeat"]

        kubeconfig2 = member2.kubeconfig(tmp_path / "m2.kubeconfig")
        extra = ["--cluster", "member2", "--kubeconfig", str(kubeconfig2), "--workers", "2"]
        certs = generate_certs(tmp_path / "certs")
        with serve(certs, _policy_file(tmp_path, root), tmp_path / "server.log", extra=extra) as server:
            assert wait_for(lambda: agent_polled(server))  # before that, restores are held for the agent
            obj = flink_deployment(
                labels={f"{P}/failover": "true", f"{P}/job-id": JOB_ID},
                annotations={f"{P}/failover-count": "1"},
            )
            answer = server.client().admit(review(obj))["response"]
            admitted = apply(obj, decode_patch(answer))
            assert admitted["spec"]["job"]["state"] == "suspended"
            assert "waiting for member1" in admitted["metadata"]["annotations"][f"{P}/hold"]
            member2.fake.upsert(admitted)
            make_checkpoints(root / JOB_ID, [3])  # the stale copy runs on for a while

            def hold() -> str:
                return str(
                    member2.fake.get("analytics", "orders")["metadata"]["annotations"].get(f"{P}/hold", "")
                )

            # The served agent has polled: it rewrote the hold with member1's heartbeat age, and held.
            assert wait_for(lambda: "s old" in hold()), hold()
            status, body, _ = server.client().request("GET", "/fencing/status?held=true")
            assert status == 200, body
            shown = json.loads(body)
            assert shown["cluster"] == "member2"
            assert [(j["name"], j["state"], j["waiting_for"]) for j in shown["jobs"]] == [
                ("orders", "held", ["member1"])
            ]
            assert [s.action for s in agent1.tick()] == ["stopping"]
            # member1 asked its job to stop; its operator still reports RUNNING: member2 keeps holding.
            assert wait_for(lambda: "member1 (stopping its job)" in hold()), hold()
            assert member2.fake.get("analytics", "orders")["spec"]["job"]["state"] == "suspended"

            operator_stops(member1.fake)
            assert [s.action for s in agent1.tick()] == ["acked"]
            assert wait_for(
                lambda: member2.fake.get("analytics", "orders")["spec"]["job"]["state"] == "running"
            )
            released = member2.fake.get("analytics", "orders")
            assert released["spec"]["job"]["initialSavepointPath"] == str(root / JOB_ID / "chk-3")
            assert released["metadata"]["annotations"][f"{P}/released"].startswith("ack at ")
            metrics = server.client().request("GET", "/metrics")[1].decode()
            assert 'flink_failover_fencing_releases_total{cause="ack"} 1.0' in metrics
            assert "flink_failover_fencing_holds_total 1.0" in metrics
            assert "flink_failover_fencing_agent_ready 1.0" in metrics
            assert "flink_failover_fencing_poll_seconds_count" in metrics
            # Exactly one worker polled: one agent per server, however many workers.
            patches = [p for p in member2.fake.patches if "spec" in p[2]]
            assert len(patches) == 1, patches
            # What `kubectl describe` shows on member2: the admission's hold, the agent's hold (with the
            # object's uid) and the release, as events.k8s.io/v1 Events written by the served role.
            uid = released["metadata"]["uid"]
            assert wait_for(lambda: "Released" in member2.event_reasons()), member2.events
            reasons = member2.event_reasons()
            assert reasons.count("Held") >= 1 and reasons[-1] == "Released", reasons
            described = [e for e in member2.events if e["regarding"].get("uid") == uid]
            assert {"Held", "Released"} <= {e["reason"] for e in described}, described
            assert all(e["reportingController"] == "flink-failover.io/member" for e in member2.events)
    finally:
        agent1.close()
        member1.stop()
        member2.stop()


def test_a_cluster_without_the_session_job_crd_still_fences_deployments_and_says_so_once(
    tmp_path: Path,
) -> None:
    root = tmp_path / "checkpoints"
    make_checkpoints(root / JOB_ID, [1])
    only_deployments = fakeapi.start(fakeapi.flink_collection("flinkdeployments"))
    try:
        only_deployments.fake.upsert(running_deployment())
        kubeconfig = only_deployments.kubeconfig(tmp_path / "m1.kubeconfig")
        extra = ["--cluster", "member1", "--kubeconfig", str(kubeconfig), "--workers", "2"]
        certs = generate_certs(tmp_path / "certs")
        log_file = tmp_path / "server.log"
        with serve(certs, _policy_file(tmp_path, root), log_file, extra=extra) as server:
            beat = (
                root
                / "flink-failover"
                / "analytics"
                / "flinkdeployment"
                / "orders"
                / "heartbeat-member1.json"
            )
            assert wait_for(beat.exists)  # the FlinkDeployment heartbeats although the other kind is missing
            status, body, _ = server.client().request("GET", "/readyz")
            assert status == 200, body
            metrics = server.client().request("GET", "/metrics")[1].decode()
            assert 'flink_failover_fencing_kind_listed{kind="FlinkSessionJob"} 0.0' in metrics
            assert 'flink_failover_fencing_kind_listed{kind="FlinkDeployment"} 1.0' in metrics
            polls = "flink_failover_fencing_poll_seconds_count"
            assert wait_for(
                lambda: _count(server.client().request("GET", "/metrics")[1].decode(), polls) >= 4
            )
        said = [line for line in log_file.read_text().splitlines() if "cannot watch FlinkSessionJob" in line]
        assert len(said) == 1, said  # once, not every poll
        assert "CRD installed" in said[0]
    finally:
        only_deployments.stop()


def _count(metrics: str, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines() if line.startswith(name + " "))


def _agent_in_trouble(tmp_path: Path, kubeconfig: Path, reason: str) -> str:
    """Serve the member role with ``--cluster``; once its agent has tried, /readyz still answers 200 and
    a failover CREATE is admitted held, naming ``reason``. Returns the metrics then."""
    root = tmp_path / "checkpoints"
    make_checkpoints(root / JOB_ID, [1, 2])
    extra = ["--cluster", "member1", "--kubeconfig", str(kubeconfig), "--workers", "1"]
    certs = generate_certs(tmp_path / "certs")
    policy = _policy_file(tmp_path, root)
    with serve(certs, policy, tmp_path / "server.log", extra=extra) as server:
        metric = "flink_failover_fencing_agent_ready 0.0"
        assert wait_for(lambda: metric in server.client().request("GET", "/metrics")[1].decode())
        status, body, _ = server.client().request("GET", "/readyz")
        assert status == 200, body  # before this change: 503, and every failover CREATE refused
        obj = flink_deployment(
            labels={f"{P}/failover": "true", f"{P}/job-id": JOB_ID},
            annotations={f"{P}/failover-count": "1"},
        )
        answer = server.client().admit(review(obj))["response"]
        admitted = apply(obj, decode_patch(answer))
        assert admitted["spec"]["job"]["state"] == "suspended"
        assert admitted["spec"]["job"]["initialSavepointPath"] == str(root / JOB_ID / "chk-2")
        hold = admitted["metadata"]["annotations"][f"{P}/hold"]
        assert hold.startswith("epoch 1: waiting for this cluster's fencing agent") and reason in hold, hold
        assert any(reason in w for w in answer.get("warnings", [])), answer
        return server.client().request("GET", "/metrics")[1].decode()


def test_an_agent_that_cannot_reach_its_api_server_leaves_the_webhook_ready_and_restores_held(
    tmp_path: Path,
) -> None:
    gone = fakeapi.start_member_cluster()
    kubeconfig = gone.kubeconfig(tmp_path / "m1.kubeconfig")
    gone.stop()  # nothing answers there any more
    metrics = _agent_in_trouble(tmp_path, kubeconfig, "cannot list any Flink kind")
    assert "flink_failover_fencing_holds_total 1.0" in metrics


def test_an_agent_without_credentials_leaves_the_webhook_ready_and_restores_held(tmp_path: Path) -> None:
    _agent_in_trouble(tmp_path, tmp_path / "missing.kubeconfig", "cannot build its Kubernetes client")
