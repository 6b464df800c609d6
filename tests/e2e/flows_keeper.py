"""The lease keeper's scenarios on real Karmada (issue 47): the old cluster's member role is gone, and the
keeper in the job's own pod is what stops the old copy.

The keeper runs as the kubelet would run it (``tests/e2e/kubelet.py``), from the sidecar the member webhook
injected; the job runs only while its JobManager (a stand-in process the keeper can kill) is alive.
"""

from __future__ import annotations

import time
from typing import Any

from tests.e2e import flows
from tests.e2e.scenario import Outcome, World, cleanup, flink_job, propagation_policy

# The tier's policy turns the keeper off in the other scenarios' namespace (``stack.py``): this one's jobs
# get it, as every fenced job does by default.
GUARDED = "guarded"


def role_down(world: World) -> Outcome:
    """Every member-role replica of the job's cluster is killed (its webhook and fencing agent gone), then
    Karmada moves the job away (a NoExecute taint, the shipped cluster-failover policy with purge mode
    Gracefully: the old copy is left running until the new one is healthy): nothing on the old cluster
    but the keeper can stop the old copy. The new cluster fences the job and holds it; the old keeper
    sees the newer fence and kills its JobManager (every restart of it too); with no agent to
    acknowledge, the new copy is released when the old heartbeat's lease expires (its keeper renews it no
    more), and starts from the old job's newest checkpoint: never two RUNNING, no checkpoint lost."""
    name = "role-down"
    key = (GUARDED, name)
    policy = propagation_policy("propagationpolicy-cluster-failover.yaml", [name], "Gracefully")
    policy["metadata"]["namespace"] = GUARDED
    try:
        return _role_down(world, name, key, policy)
    finally:
        cleanup(world, [name], GUARDED)


def _role_down(world: World, name: str, key: tuple[str, str], policy: dict[str, Any]) -> Outcome:
    world.submit([flink_job(name, GUARDED)], policy)
    old_cluster = world.wait_running(key)
    job = world.wait_checkpoints(old_cluster, key, 3)
    world.wait_captured(name, old_cluster, job.job_id, GUARDED)
    kubelet = world.operators[old_cluster].kubelet
    assert kubelet is not None
    pod = kubelet.pod(key)
    assert pod is not None and pod.ready_at is not None and pod.jobmanager_alive, (
        f"{name} runs on {old_cluster} without its keeper holding the lease (was the sidecar injected?)"
    )
    new_cluster = next(c for c in world.operators if c != old_cluster)
    replicas = len(world.member_release(old_cluster).replicas())
    for index in range(replicas):
        world.kill_member_replica(old_cluster, index)
    triggered = time.monotonic()
    world.taint(old_cluster)
    try:
        world.wait_running(key, new_cluster, timeout=240)
        still_running = world.running_job(old_cluster, key) is not None
        new_object = world.member_object(new_cluster, name, GUARDED) or {}
        released = str(((new_object.get("metadata") or {}).get("annotations") or {}).get(flows.RELEASED, ""))
    finally:
        for index in range(replicas):
            world.restart_member_replica(old_cluster, index)
    outcome = flows._outcome(world, name, old_cluster, triggered, namespace=GUARDED)
    world.record(
        outcome.line(
            "member role down (both replicas killed), taint, Gracefully: the keeper stops the old copy"
        )
    )
    assert not still_running, "the old job still ran when the new one started"
    flows._assert_restored_newest(outcome)
    assert released.startswith("lease-expiry"), f"released by {released!r}: no agent could acknowledge"
    started = world.timeline.first_running(key, new_cluster, triggered)
    assert started is not None
    kills = [at for at in pod.kills if at > triggered]
    assert kills and kills[0] < started.at, (
        f"the old JobManager was not killed by its keeper before the new job started (deaths {pod.kills})"
    )
    return outcome
