"""The member role served for real (gunicorn, TLS) with --cluster and --kubeconfig: the webhook holds a
restore while member1 heartbeats, and the agent running in one of its workers releases it."""

from __future__ import annotations

import time
from pathlib import Path

from tests.controlplane import fakeapi
from tests.support.objects import (
    JOB_ID,
    apply,
    decode_patch,
    flink_deployment,
    make_checkpoints,
    review,
    running_deployment,
)
from tests.support.server import generate_certs, serve
from webhook.common.kubeclient import ClientConfig
from webhook.member.fencing.agent import FencingAgent
from webhook.member.fencing.flinkapi import FlinkApi
from webhook.member.policy import FencingPolicy, RestorePolicy
from webhook.member.storage import CheckpointStorage

P = "flink-failover.io"


def _wait(predicate: object, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


def test_served_member_role_holds_then_its_agent_releases(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    make_checkpoints(root / JOB_ID, [1, 2])
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(
        f"defaultCheckpointDir: {root}\nfencing: {{leaseSeconds: 300, pollSeconds: 0.5}}\n", encoding="utf-8"
    )
    member1 = fakeapi.start_member_cluster()
    member2 = fakeapi.start_member_cluster()
    try:
        member1.fake.upsert(running_deployment())
        policy = RestorePolicy(default_checkpoint_dir=str(root), fencing=FencingPolicy(300, 0.5))
        api1 = FlinkApi.connect(ClientConfig(str(member1.kubeconfig(tmp_path / "m1.kubeconfig"))))
        assert isinstance(api1, FlinkApi)
        agent1 = FencingAgent("member1", policy, api1, CheckpointStorage())
        assert [s.action for s in agent1.tick()] == ["heartbeat"]

        kubeconfig2 = member2.kubeconfig(tmp_path / "m2.kubeconfig")
        extra = ["--cluster", "member2", "--kubeconfig", str(kubeconfig2), "--workers", "2"]
        certs = generate_certs(tmp_path / "certs")
        with serve(certs, policy_file, tmp_path / "server.log", extra=extra) as server:
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
            time.sleep(1.5)  # a few of the served agent's polls: it must keep holding
            assert member2.fake.get("analytics", "orders")["spec"]["job"]["state"] == "suspended"

            assert [s.action for s in agent1.tick()] == ["stopped"]
            assert _wait(lambda: member2.fake.get("analytics", "orders")["spec"]["job"]["state"] == "running")
            released = member2.fake.get("analytics", "orders")
            assert released["spec"]["job"]["initialSavepointPath"] == str(root / JOB_ID / "chk-3")
            assert released["metadata"]["annotations"][f"{P}/released"].startswith("ack at ")
            metrics = server.client().request("GET", "/metrics")[1].decode()
            assert 'flink_failover_fencing_releases_total{cause="ack"} 1.0' in metrics
            assert "flink_failover_fencing_holds_total 1.0" in metrics
            # Exactly one worker polled: one agent per server, however many workers.
            patches = [p for p in member2.fake.patches if "spec" in p[2]]
            assert len(patches) == 1, patches
    finally:
        member1.stop()
        member2.stop()
