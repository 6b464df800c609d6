"""The scenarios, written once and run on each Karmada version (``tests/e2e/v1_18``, ``tests/e2e/v1_19``).

Each takes a :class:`~tests.e2e.scenario.World` and the list the ``jobs`` fixture cleans up, drives one
failover (or move) on real Karmada, returns its figures and asserts, by the status sampled on both
members, that the old job's newest checkpoint was restored, counted once, and never ran twice.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from tests.e2e.apiserver import ALICE_TOKEN
from tests.e2e.informer import Key
from tests.e2e.procs import wait_until
from tests.e2e.rest import ApiError, flink_path
from tests.e2e.scenario import (
    CHECKPOINTS,
    NAMESPACE,
    PREFIX,
    SAVEPOINTS,
    SESSION_JOB,
    TAINT_PREFIX,
    Outcome,
    World,
    flink_job,
    lost_after,
    propagation_policy,
    session_cluster,
    session_job,
)
from tests.e2e.stack import BUCKET
from tests.support.exact import exact_sets
from tests.support.karmada_first_fit import karmada_first_fit
from tests.support.operator import Job
from tests.support.witness import witness_problems
from webhook.placement.cluster import cluster_from_kubectl
from webhook.placement.components import load_workload
from webhook.placement.estimate import estimate
from webhook.placement.model import Cluster, Component


def _start(world: World, name: str, shipped: str, purge_mode: str | None = None) -> tuple[str, object]:
    key = (NAMESPACE, name)
    world.submit([flink_job(name)], propagation_policy(shipped, [name], purge_mode))
    cluster = world.wait_running(key)
    return cluster, _running_captured(world, key, cluster)


def _gone(world: World, cluster: str, name: str, namespace: str = NAMESPACE) -> bool:
    return world.member_object(cluster, name, namespace) is None


def _outcome(
    world: World,
    name: str,
    old_cluster: str,
    triggered: float,
    old_job: Job | None = None,
    namespace: str = NAMESPACE,
) -> Outcome:
    """``old_job``: the job the new one is judged against, where the old cluster ran none (by default its
    last)."""
    key = (namespace, name)
    new_cluster = next(c for c in world.operators if c != old_cluster)
    world.wait_running(key, new_cluster, timeout=180)
    wait_until(f"{name} gone from {old_cluster}", lambda: _gone(world, old_cluster, name, namespace), 120)
    old = old_job or world.operators[old_cluster].jobs_of(*key)[-1]
    new = world.operators[new_cluster].jobs_of(*key)[-1]
    started = world.timeline.first_running(key, new_cluster, triggered)
    assert started is not None
    new_object = world.member_object(new_cluster, name, namespace) or {}
    annotations = new_object.get("metadata", {}).get("annotations") or {}
    return Outcome(
        old,
        new,
        old_cluster,
        new_cluster,
        world.timeline.two_running_seconds(key),
        lost_after(old, new),
        started.at - triggered,
        dict(annotations),
    )


def _assert_restored_newest(outcome: Outcome, count: int = 1) -> None:
    newest = outcome.old.checkpoints[-1][0]
    assert outcome.new.started_from.endswith(f"/{outcome.old.job_id}/chk-{newest}"), (
        f"restored {outcome.new.started_from!r}, the old job's newest is chk-{newest}"
    )
    assert outcome.lost == []
    assert outcome.two_running_seconds == 0.0
    assert outcome.annotations.get(f"{PREFIX}/failover-count") == str(count)
    assert outcome.annotations.get(f"{PREFIX}/restored-job-id") == outcome.old.job_id


def cluster_failover(world: World, jobs: list[str], purge_mode: str) -> Outcome:
    name = f"taint-{purge_mode.lower()}"
    jobs.append(name)
    old_cluster, _ = _start(world, name, "propagationpolicy-cluster-failover.yaml", purge_mode)
    triggered = time.monotonic()
    world.taint(old_cluster)
    outcome = _outcome(world, name, old_cluster, triggered)
    world.record(outcome.line(f"cluster failover by NoExecute taint, {purge_mode}"))
    _assert_restored_newest(outcome)
    return outcome


def application_failover(world: World, jobs: list[str]) -> Outcome:
    """The job stays unhealthy longer than the policy tolerates (the shipped policy, Gracefully, with
    tolerationSeconds lowered from 120 to 20 for the test's sake). The toleration must outlast a restore's
    hold (the old job's stop, a poll, the new job's start): Karmada reads the held copy as unhealthy too,
    and with 5 s it evicted the new cluster as well and left the job nowhere."""
    name = "app-failover"
    jobs.append(name)
    policy = propagation_policy("propagationpolicy-application-failover.yaml", [name])
    policy["spec"]["failover"]["application"]["decisionConditions"]["tolerationSeconds"] = 20
    key = (NAMESPACE, name)
    world.submit([flink_job(name)], policy)
    old_cluster = world.wait_running(key)
    job = world.wait_checkpoints(old_cluster, key, 3)
    world.wait_captured(name, old_cluster, job.job_id)
    triggered = time.monotonic()
    world.operators[old_cluster].fail(*key)
    outcome = _outcome(world, name, old_cluster, triggered)
    world.record(outcome.line("application failover, Gracefully"))
    _assert_restored_newest(outcome)
    assert outcome.annotations.get(f"{PREFIX}/reason") == "ApplicationFailure"
    return outcome


def policy_move(world: World, jobs: list[str]) -> Outcome:
    """No eviction task, the old Work deleted at once: Karmada alone would start the job empty."""
    name = "moved"
    jobs.append(name)
    policy = propagation_policy("propagationpolicy-cluster-failover.yaml", [name])
    old_cluster, _ = _start(world, name, "propagationpolicy-cluster-failover.yaml")
    new_cluster = next(c for c in world.operators if c != old_cluster)
    policy["spec"]["placement"]["clusterAffinity"]["clusterNames"] = [new_cluster]
    triggered = time.monotonic()
    world.stack.apply_karmada([policy])
    outcome = _outcome(world, name, old_cluster, triggered)
    world.record(outcome.line("a move by a PropagationPolicy change"))
    _assert_restored_newest(outcome)
    return outcome


def return_to_previous(world: World, jobs: list[str]) -> Outcome:
    """member A -> B -> A: the return restores the newest checkpoint of the job on B, not A's old one,
    and counts the second failover."""
    name = "returned"
    jobs.append(name)
    key = (NAMESPACE, name)
    first, _ = _start(world, name, "propagationpolicy-cluster-failover.yaml")
    triggered = time.monotonic()
    world.taint(first)
    away = _outcome(world, name, first, triggered)
    _assert_restored_newest(away)
    second = away.new_cluster
    job = world.wait_checkpoints(second, key, away.new.first_id + 2)
    world.wait_captured(name, second, job.job_id)
    world.untaint(first)
    triggered = time.monotonic()
    world.taint(second)
    back = _outcome(world, name, second, triggered)
    world.record(back.line("a return to the cluster the job ran on before (second failover)"))
    assert back.new_cluster == first
    _assert_restored_newest(back, count=2)
    return back


SESSION_CHECKPOINTS = f"s3://{BUCKET}/session-checkpoints"
SESSION_SAVEPOINTS = f"s3://{BUCKET}/session-savepoints"
NOT_YET = {"key": f"{TAINT_PREFIX}not-yet", "effect": "NoSchedule"}


def session_cluster_policy(name: str) -> dict[str, Any]:
    """A session cluster on both members at once (Duplicated), tolerating every taint: it is there before
    any of its jobs fails over to a member, and stays where a job may still run on it."""
    return {
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": f"{name}-everywhere", "namespace": NAMESPACE},
        "spec": {
            "resourceSelectors": [
                {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment", "name": name}
            ],
            "placement": {
                "clusterAffinity": {"clusterNames": ["member1", "member2"]},
                "replicaScheduling": {"replicaSchedulingType": "Duplicated"},
                "clusterTolerations": [{"operator": "Exists"}],
            },
        },
    }


def _partition_policy(names: list[str], kind: str = "FlinkDeployment") -> dict[str, Any]:
    """The shipped cluster-failover policy (Directly) selecting ``names`` of ``kind``, its not-ready
    toleration lowered from 60 s to 5 s."""
    policy = propagation_policy("propagationpolicy-cluster-failover.yaml", names)
    for selector in policy["spec"]["resourceSelectors"]:
        selector["kind"] = kind
    for toleration in policy["spec"]["placement"]["clusterTolerations"]:
        toleration["tolerationSeconds"] = 5
    return policy


def partition(
    world: World,
    jobs: list[str],
    checkpoint_dir: str = CHECKPOINTS,
    savepoint_dir: str = SAVEPOINTS,
    backend: str = "s3",
    with_session_job: bool = False,
) -> Outcome:
    """Karmada loses the member the job runs on while the job keeps running: Karmada's way to that member
    is cut (its own components, the operator and the product's member role still reach it). The shipped
    cluster-failover policy (Directly), its not-ready toleration lowered from 60 s to 5 s: Karmada taints
    the cluster, evicts, and creates the new Work after the graceful-eviction timeout; the new copy must
    not run before the old one has stopped, and must start from the old one's last checkpoint. The job's
    checkpoints, savepoints and fencing records are in ``checkpoint_dir`` and ``savepoint_dir``, on the
    storage ``backend`` (s3, gcs, azure) names.

    ``with_session_job``: the same cut fails over, beside the FlinkDeployment, a FlinkSessionJob whose
    checkpoint directory is set only on its session cluster (a FlinkDeployment without ``spec.job`` on
    both members, on S3): the member webhook on the new side reads the session cluster for the job's
    folder, fences and holds there, the old side's agent finds the folder through its own session cluster
    and stops its copy, and the new job starts from the old job's newest checkpoint in the session
    cluster's directory (issue 45). Both are placed on member1 (member2 kept out by a NoSchedule taint
    until they run) so that one cut takes both."""
    name = "partitioned" if backend == "s3" else f"partitioned-{backend}"
    jobs.append(name)
    key = (NAMESPACE, name)
    session = _submit_session_job(world, jobs, name) if with_session_job else None
    world.submit(
        [flink_job(name, checkpoint_dir=checkpoint_dir, savepoint_dir=savepoint_dir)],
        _partition_policy([name]),
    )
    old_cluster = world.wait_running(key, "member1" if session else None)
    job = world.wait_checkpoints(old_cluster, key, 3)
    world.wait_captured(name, old_cluster, job.job_id)
    keys = [key]
    if session is not None:
        keys.append(_session_job_running(world, session, old_cluster))
        world.untaint("member2", NOT_YET["key"])
    new_cluster = next(c for c in world.operators if c != old_cluster)
    proxy = world.stack.karmada.members[old_cluster].proxy
    triggered = time.monotonic()
    proxy.cut()
    try:
        for k in keys:
            world.wait_running(k, new_cluster, timeout=240)
        still_running = [k[1] for k in keys if world.running_job(old_cluster, k) is not None]
    finally:
        proxy.heal()
    outcome = _outcome(world, name, old_cluster, triggered)
    world.record(
        outcome.line(f"partition on {backend} (Karmada cut off from the member, the job still running)")
    )
    sessions = [_outcome(world, k[1], old_cluster, triggered) for k in keys[1:]]
    for session_outcome in sessions:
        world.record(
            session_outcome.line(
                "partition, a FlinkSessionJob whose checkpoint directory is its session cluster's"
            )
        )
    assert not still_running, f"the old job still ran when the new one started: {still_running}"
    _assert_restored_newest(outcome)
    for session_outcome in sessions:
        _assert_session_job_restored(world, session_outcome, session or ("", ""))
    return outcome


def _submit_session_job(
    world: World, jobs: list[str], name: str, on: str = "member1", checkpoint_dir: str = ""
) -> tuple[str, str]:
    """A session cluster on both members and a FlinkSessionJob on it, both named after ``name``: the
    session job (and whatever is submitted until ``NOT_YET`` is lifted) on ``on`` only; the job's own
    ``checkpoint_dir`` when given, else its cluster's."""
    cluster, job = f"{name}-cluster", f"{name}-session"
    jobs.extend([f"{SESSION_JOB}/{job}", cluster])
    world.taint(next(c for c in world.operators if c != on), NOT_YET)
    world.submit(
        [session_cluster(cluster, checkpoint_dir=SESSION_CHECKPOINTS, savepoint_dir=SESSION_SAVEPOINTS)],
        session_cluster_policy(cluster),
    )
    world.submit(
        [session_job(job, cluster, checkpoint_dir=checkpoint_dir)], _partition_policy([job], SESSION_JOB)
    )
    return cluster, job


def _session_job_running(world: World, session: tuple[str, str], old_cluster: str) -> Key:
    """Until the session cluster is deployed on both members and its job runs, checkpoints and is
    captured on ``old_cluster``; the job's key."""
    cluster, job = session
    key = (NAMESPACE, job)

    def deployed(member: str) -> bool:
        status = (world.member_object(member, cluster) or {}).get("status") or {}
        return bool(status.get("jobManagerDeploymentStatus") == "READY")

    wait_until(
        f"session cluster {cluster} deployed on both", lambda: all(map(deployed, world.operators)), 120
    )
    world.wait_running(key, old_cluster)
    running = world.wait_checkpoints(old_cluster, key, 3)
    world.wait_captured(job, old_cluster, running.job_id, kind=SESSION_JOB)
    return key


def _assert_session_job_restored(world: World, outcome: Outcome, session: tuple[str, str]) -> None:
    """As every failover (the newest checkpoint, none lost, never two RUNNING, counted once), and: the
    path is in the session cluster's directory, the restore recorded the session cluster and its
    directory, and the new job was released by the old side's acknowledgement (its agent found the
    job's folder through its own session cluster)."""
    cluster, job = session
    _assert_restored_newest(outcome)
    newest = outcome.old.checkpoints[-1][0]
    spec = (world.member_object(outcome.new_cluster, job) or {}).get("spec") or {}
    spec_path = (spec.get("job") or {}).get("initialSavepointPath")
    assert spec_path == f"{SESSION_CHECKPOINTS}/{outcome.old.job_id}/chk-{newest}", spec_path
    record = json.loads(outcome.annotations.get(f"{PREFIX}/restore-record") or "{}")
    assert record.get("sessionCluster") == cluster, record
    assert record.get("checkpointDir") == SESSION_CHECKPOINTS, record
    assert outcome.annotations.get(RELEASED, "").startswith("ack"), (
        f"released otherwise than by the old side's ack: {outcome.annotations.get(RELEASED)!r}"
    )


@dataclass
class FleetRun:
    """A fleet's eviction as it happened: what a test asserts and a soak (bench/karmada_fleet.py) reports."""

    size: int
    source: str
    target: str
    triggered: float  # monotonic time of the NoExecute taint
    since: dict[str, int]  # the control-plane pods' log lines before the taint
    outcomes: list[Outcome]
    phases: dict[str, float]  # seconds each step took (submit, running, checkpoints, captured, evicted)


def evict_fleet(
    world: World,
    jobs: list[str],
    size: int,
    say: Callable[[str], None] = lambda _: None,
    bound: float = 0.0,
) -> FleetRun:
    """``size`` jobs on one member, evicted at once by a NoExecute taint, each restored on the other.

    Every wait is over the whole fleet (the informers' caches, one list of bindings a round), never a
    poll per job: at thousands of jobs a wait per job costs more than the failover it waits for."""
    width = max(3, len(str(size - 1)))
    names = [f"fleet-{i:0{width}d}" for i in range(size)]
    jobs.extend(names)
    keys = [(NAMESPACE, n) for n in names]
    source, target = sorted(world.operators)
    # each wait's timeout (``bound`` unless 0): minutes at thousands of jobs on two shared cores
    bound = bound or 300 + size * 0.6
    phases: dict[str, float] = {}

    def phase(what: str, began: float) -> None:
        phases[what] = time.monotonic() - began
        say(f"{what}: {phases[what]:.1f} s")

    world.taint(target, {"key": "e2e.flink-failover.io/not-yet", "effect": "NoSchedule"})
    began = time.monotonic()
    _submit_all(world, names, fleet_dirs(world, size))
    phase("submitted", began)
    began = time.monotonic()
    wait_until(f"{size} RUNNING on {source}", lambda: _running_all(world, source, keys), bound, interval=0.5)
    phase("running", began)
    began = time.monotonic()
    wait_until(
        f"2 checkpoints of each of {size} on {source}",
        lambda: all(len(getattr(world.running_job(source, k), "checkpoints", ())) >= 2 for k in keys),
        bound,
        interval=0.5,
    )
    phase("checkpointed", began)
    began = time.monotonic()
    wait_until(
        f"{size} captured on {source}", lambda: not _uncaptured(world, source, keys), bound, interval=2.0
    )
    phase("captured", began)
    world.untaint(target, "e2e.flink-failover.io/not-yet")
    since = world.work_webhook_lines()
    triggered = time.monotonic()
    world.taint(source)
    wait_until(
        f"{size} RUNNING on {target}, gone from {source}",
        lambda: _running_all(world, target, keys) and _gone_all(world, source, keys),
        bound,
        interval=0.5,
    )
    phase("evicted", triggered)
    outcomes = [_outcome(world, name, source, triggered) for name in names]
    return FleetRun(size, source, target, triggered, since, outcomes, phases)


def fleet_dirs(world: World, size: int) -> list[tuple[str, str]]:
    """Each job's checkpoint and savepoint directories: CHECKPOINTS and SAVEPOINTS in the tier; at scale,
    with S3 spread over K buckets (``Stack.s3_buckets``), job i's in bucket i mod K."""
    buckets = world.stack.s3_buckets
    if buckets == [BUCKET]:
        return [(CHECKPOINTS, SAVEPOINTS)] * size
    return [
        (f"s3://{buckets[i % len(buckets)]}/checkpoints", f"s3://{buckets[i % len(buckets)]}/savepoints")
        for i in range(size)
    ]


def _submit_all(world: World, names: list[str], dirs: list[tuple[str, str]], threads: int = 8) -> None:
    """The policy, then every job (its checkpoint and savepoint directories ``dirs``), created on the
    Karmada API server a few at a time (kubectl applies one object after another: minutes at thousands)."""
    world.ensure_namespace(NAMESPACE)
    api = world.stack.karmada_api()
    policy = propagation_policy("propagationpolicy-cluster-failover.yaml", names)
    api.create(f"/apis/policy.karmada.io/v1alpha1/namespaces/{NAMESPACE}/propagationpolicies", policy)
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        created = pool.map(
            lambda n, d: api.create(
                flink_path("FlinkDeployment", NAMESPACE),
                flink_job(n, checkpoint_dir=d[0], savepoint_dir=d[1]),
            ),
            names,
            dirs,
        )
        for _ in created:  # an error fails the fleet here
            pass


def _running_all(world: World, cluster: str, keys: list[tuple[str, str]]) -> bool:
    objects = world.timeline.informers[cluster].snapshot()
    return all(
        (((objects.get(k) or {}).get("status") or {}).get("jobStatus") or {}).get("state") == "RUNNING"
        for k in keys
    )


def _gone_all(world: World, cluster: str, keys: list[tuple[str, str]]) -> bool:
    objects = world.timeline.informers[cluster].snapshot()
    return not any(k in objects for k in keys)


def _uncaptured(world: World, cluster: str, keys: list[tuple[str, str]]) -> list[str]:
    """Jobs whose binding does not yet record their running job on ``cluster`` (one list of bindings)."""
    listed = world.stack.karmada_api().get(
        f"/apis/work.karmada.io/v1alpha2/namespaces/{NAMESPACE}/resourcebindings"
    )
    records = {
        str((b.get("metadata") or {}).get("name") or ""): str(
            ((b.get("metadata") or {}).get("annotations") or {}).get(f"{PREFIX}/last-known-state") or ""
        )
        for b in listed.get("items") or []
    }
    out = []
    for namespace, name in keys:
        running = world.running_job(cluster, (namespace, name))
        record = records.get(f"{name}-flinkdeployment", "")
        if running is None or running.job_id not in record or cluster not in record:
            out.append(name)
    return out


def fleet(world: World, jobs: list[str], size: int) -> tuple[int, float, float]:
    """``size`` jobs on one member, evicted at once by a NoExecute taint: every one restored from its own
    newest checkpoint, none RUNNING twice; the Work webhook's latency from its audit lines (a figure,
    recorded: speed is measured in bench/, never asserted)."""
    run = evict_fleet(world, jobs, size)
    outcomes = run.outcomes
    admissions = world.work_webhook_latencies(run.since)
    latencies = sorted(ms for ms, _ in admissions)
    fresh = sum(1 for _, source in admissions if "api" in source)
    restored_in = max(o.restore_seconds for o in outcomes)
    overlap = sum(o.two_running_seconds for o in outcomes)
    p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
    world.record(
        f"fleet of {size} evicted at once: {sum(1 for o in outcomes if not o.lost)} restored from the newest "
        f"checkpoint, all RUNNING on {run.target} within {restored_in:.1f} s, "
        f"two RUNNING {overlap:.2f} s in all; "
        f"Work webhook {len(latencies)} admissions ({fresh} read the binding fresh), p50 {p50:.1f} ms, "
        f"p99 {p99:.1f} ms"
    )
    for outcome in outcomes:
        _assert_restored_newest(outcome)
    assert latencies, "no Work admission was logged"
    return size, p50, p99


def percentile(values: list[float], q: int) -> float:
    if not values:
        return 0.0
    index = min(len(values) - 1, max(0, round(q / 100 * len(values) + 0.5) - 1))
    return values[index]


# --- placement by complete sets: the packing trap ------------------------------------------------


def placed_job(
    name: str, scheduling: dict[str, Any], taskmanagers: int = 2
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A FlinkDeployment of two components, memory in both notations (the job manager's in Flink's:
    2048m is 2 GiB; the task managers' in Kubernetes': 4Gi), a job manager of 1 cpu and task managers
    of 2, and the shipped policy with ``scheduling`` as its replicaScheduling. Against ``stack.NODES``
    and ``stack.LOAD`` (two task managers) one set fits member2 only by packing (Karmada's first fit
    finds none) and none fits member1, though Karmada's totals and resource models count one there."""
    job = flink_job(name)
    job["spec"]["jobManager"]["resource"] = {"cpu": 1, "memory": "2048m"}
    job["spec"]["taskManager"] = {"replicas": taskmanagers, "resource": {"cpu": 2, "memory": "4Gi"}}
    policy = propagation_policy("propagationpolicy-cluster-failover.yaml", [name])
    policy["spec"]["placement"]["replicaScheduling"] = scheduling
    return job, policy


SCHEDULING: dict[str, dict[str, Any]] = {
    "Duplicated": {"replicaSchedulingType": "Duplicated"},
    "Divided-dynamic-weight": {
        "replicaSchedulingType": "Divided",
        "replicaDivisionPreference": "Weighted",
        "weightPreference": {"dynamicWeight": "AvailableReplicas"},
    },
    "Divided-aggregated": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"},
}


@dataclass(frozen=True)
class SetCounts:
    """One member's complete sets of a binding's components, four ways, on the nodes and pods it has."""

    answered: int  # what the product's estimator answered the real scheduler (its "estimated" log line)
    ours: int  # the product's placement (webhook/placement) on the member's objects, witness checked
    first_fit: int  # Karmada's own estimator (tests/support/karmada_first_fit.py, its SimulateScheduling)
    optimum: int  # exhaustive search (tests/support/exact.py)
    reason: str  # the product's limit: why not one set more

    def line(self) -> str:
        return f"ours {self.ours} / first fit {self.first_fit} / optimum {self.optimum}"


@dataclass(frozen=True)
class Placement:
    placed: list[str]  # the clusters of the binding as the real scheduler wrote them
    counts: dict[str, SetCounts]  # per member

    def fits(self, count: str) -> list[str]:
        """The members where ``count`` (a SetCounts field) finds at least one set."""
        return [c for c, n in sorted(self.counts.items()) if getattr(n, count) > 0]


def member_cluster(world: World, cluster: str) -> Cluster:
    """A member's nodes (listed by name: the order Karmada's estimator walks them here) and its pods,
    read as ``kubectl get nodes,pods -A -o json`` is read, so as the estimators read them."""
    api = world.stack.member_api(cluster)
    items = [{**n, "kind": "Node"} for n in api.get("/api/v1/nodes")["items"]]
    items += [{**p, "kind": "Pod"} for p in api.get("/api/v1/pods")["items"]]
    return cluster_from_kubectl({"kind": "List", "items": items}, cluster, cluster)


def set_counts(
    world: World, components: tuple[Component, ...], answered: dict[str, int]
) -> dict[str, SetCounts]:
    counts = {}
    for name in sorted(world.operators):
        cluster = member_cluster(world, name)
        ours = estimate(cluster, components)
        assert witness_problems(cluster, components, ours.sets, ours.assignment) == [], name
        counts[name] = SetCounts(
            answered.get(name, -1),
            ours.sets,
            karmada_first_fit(cluster, components),
            exact_sets(cluster, components),
            ours.limit.message,
        )
    return counts


def _binding_components(world: World, name: str) -> tuple[dict[str, Any], tuple[Component, ...]]:
    binding = world.binding(name) or {}
    components = {c["name"]: c for c in binding["spec"].get("components") or []}
    assert sorted(components) == ["jobmanager", "taskmanager"]
    return components, load_workload(binding, "binding")


def placement(world: World, jobs: list[str], scheduling: str) -> Placement:
    """The real scheduler, the shipped components customization and the product's estimators place the
    packing trap: the binding's components as Karmada built them, the sets each estimator answered
    beside the product's, Karmada's first fit's and the optimum's counts on the members' objects, and
    where Karmada put it."""
    name = f"placed-{scheduling.lower()}"
    jobs.append(name)
    job, policy = placed_job(name, SCHEDULING[scheduling])
    world.submit([job], policy)
    wait_until(f"{name} scheduled", lambda: bool(world.placed_on(name)), 120)
    raw, components = _binding_components(world, name)
    wait_until(f"both estimators asked about {name}", lambda: len(world.estimates(name)) == 2, 60)
    result = Placement(world.placed_on(name), set_counts(world, components, world.estimates(name)))
    world.record(
        f"packing trap, {scheduling}: placed on {','.join(result.placed)}; complete sets "
        + "; ".join(f"{c} {n.line()}" for c, n in result.counts.items())
        + f"; Karmada's first fit would fit it {' '.join(result.fits('first_fit')) or 'nowhere'}"
    )
    jm, tm = raw["jobmanager"], raw["taskmanager"]
    assert (jm["replicas"], tm["replicas"]) == (1, 2)
    assert quantities(jm["replicaRequirements"]["resourceRequest"]) == {"cpu": 1, "memory": 2 * 2**30}
    assert quantities(tm["replicaRequirements"]["resourceRequest"]) == {"cpu": 2, "memory": 4 * 2**30}
    for cluster, n in result.counts.items():
        # the estimator answered the scheduler what the product counts on what the member holds, and
        # that is the optimum, its witness checked
        assert n.answered == n.ours == n.optimum, (cluster, n)
    # the trap is set: the optimum fits member2 only, where Karmada's first fit finds no set
    assert result.fits("optimum") == ["member2"] and result.fits("first_fit") == [], result.counts
    # and the binding follows ours: where Karmada's first fit counts no set anywhere
    assert result.placed == ["member2"] == result.fits("ours"), result
    return result


def unplaceable(
    world: World, jobs: list[str], scheduling: str
) -> tuple[dict[str, Any], dict[str, SetCounts]]:
    """The trap's job with three task managers: no set fits anywhere (the optimum says so). The job stays
    pending: the binding gets no cluster, its Scheduled condition is False with the scheduler's message,
    and each estimator's limit says what stops a set there. Returns the condition and the counts."""
    name = "placed-nowhere"
    jobs.append(name)
    job, policy = placed_job(name, SCHEDULING[scheduling], taskmanagers=3)
    world.submit([job], policy)

    def condition() -> dict[str, Any]:
        conditions = ((world.binding(name) or {}).get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c.get("type") == "Scheduled"), {})

    wait_until(f"{name} tried by the scheduler", lambda: bool(condition()), 120)
    _, components = _binding_components(world, name)
    wait_until(f"both estimators asked about {name}", lambda: len(world.estimates(name)) == 2, 60)
    counts = set_counts(world, components, world.estimates(name))
    scheduled = condition()
    world.record(
        f"fits nowhere, {scheduling}: placed on {','.join(world.placed_on(name)) or 'no cluster'}; "
        f"Scheduled={scheduled.get('status')} {scheduled.get('reason')}: {scheduled.get('message')}; "
        + "; ".join(f"{c} {n.line()} ({n.reason})" for c, n in counts.items())
    )
    for cluster, n in counts.items():
        assert n.answered == n.ours == n.optimum == 0, (cluster, n)
        # the reason names what stops a set: three task managers where two fit
        assert "taskmanager" in n.reason, (cluster, n)
    assert world.placed_on(name) == []
    assert scheduled["status"] == "False" and scheduled.get("message"), scheduled
    return scheduled, counts


def quantities(requests: dict[str, str]) -> dict[str, Decimal]:
    """Kubernetes quantities as numbers (cpu in cores, the rest in units), to compare whatever notation."""
    from webhook.placement.quantity import parse_decimal

    return {name: parse_decimal(value, name) for name, value in requests.items()}


# --- one running copy when the agent itself is in trouble (issue 28) ------------------------------

RELEASED = f"{PREFIX}/released"
HOLD = f"{PREFIX}/hold"
STEPPED_DOWN = f"{PREFIX}/stepped-down"
RESUMED = f"{PREFIX}/resumed"
FENCED = f"{PREFIX}/fenced"


def _held(world: World, cluster: str, name: str) -> bool:
    obj = world.member_object(cluster, name) or {}
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    state = ((obj.get("spec") or {}).get("job") or {}).get("state")
    return bool(annotations.get(HOLD)) and state == "suspended"


def _annotation(world: World, cluster: str, name: str, key: str) -> str:
    obj = world.member_object(cluster, name) or {}
    return str(((obj.get("metadata") or {}).get("annotations") or {}).get(key) or "")


def forged_release(world: World, jobs: list[str]) -> Outcome:
    """While the new cluster holds a restore (the old copy is slow to stop), an ordinary user sets the
    agent's release marker and ``state: running`` herself: the job stays held, an Event names her, and
    it starts only once the old copy has stopped, released by the acknowledgement. (The old operator
    begins the stop only once her edits are judged: no fixed delay to outlast them.)"""
    name = "forged"
    jobs.append(name)
    old_cluster, _ = _start(world, name, "propagationpolicy-cluster-failover.yaml", "Gracefully")
    new_cluster = next(c for c in world.operators if c != old_cluster)
    old_operator = world.operators[old_cluster]
    old_operator.withheld.add((NAMESPACE, name))
    try:
        triggered = time.monotonic()
        world.taint(old_cluster)
        wait_until(f"{name} held on {new_cluster}", lambda: _held(world, new_cluster, name), 120)
        alice = world.stack.member_api(new_cluster).as_user(ALICE_TOKEN)
        forged = {
            "metadata": {"annotations": {RELEASED: "ack at 2026-12-02T00:00:00Z (set by hand)"}},
            "spec": {"job": {"state": "running"}},
        }
        alice.merge_patch(flink_path("FlinkDeployment", NAMESPACE, name), forged)
        wait_until(
            "a ReleaseIgnored Event naming alice",
            lambda: any(
                "alice" in e.get("note", "") for e in world.events(new_cluster, name, "ReleaseIgnored")
            ),
            60,
        )
        assert _held(world, new_cluster, name), "the forged release started the held job"
        _moves_refused(alice, name)  # issue 45, by the served webhook on the real API server
        assert _held(world, new_cluster, name), "an edit of where its state lives started the held job"
        old_operator.withheld.discard((NAMESPACE, name))  # the old copy's stop begins
        outcome = _outcome(world, name, old_cluster, triggered)
    finally:
        old_operator.withheld.discard((NAMESPACE, name))
    world.record(outcome.line("a forged release by an ordinary user while held"))
    _assert_restored_newest(outcome)
    assert _annotation(world, new_cluster, name, RELEASED).startswith("ack"), (
        "released otherwise than by the ack"
    )
    return outcome


def _moves_refused(alice: Any, name: str) -> None:
    """While held, an edit that moves where the job's state lives or who owns it is refused, naming what
    it changes and the ways out (put it back, release the hold, abandon the restore)."""
    path = flink_path("FlinkDeployment", NAMESPACE, name)
    moves = (
        (
            "checkpoint directory",
            {"spec": {"flinkConfiguration": {"execution.checkpointing.dir": "s3://x/y"}}},
        ),
        (f"label {PREFIX}/job-id", {"metadata": {"labels": {f"{PREFIX}/job-id": "b" * 32}}}),
        ("removes spec.job", {"spec": {"job": None}}),
    )
    for what, edit in moves:
        try:
            alice.merge_patch(path, edit)
        except ApiError as exc:
            assert what in exc.body and "flink-failover release" in exc.body, exc.body
        else:
            raise AssertionError(f"an edit of a held job ({what}) was admitted")


def replica_killed(world: World, jobs: list[str]) -> Outcome:
    """One of the old cluster's two member-role replicas (each runs a fencing agent) is killed just after
    the stop was asked: the other one carries the failover through, acknowledged. (The old operator
    begins the stop once the replica is killed: the stop completes after the kill, whatever the load.)"""
    name = "replica-killed"
    jobs.append(name)
    old_cluster, _ = _start(world, name, "propagationpolicy-cluster-failover.yaml", "Gracefully")
    new_cluster = next(c for c in world.operators if c != old_cluster)
    old_operator = world.operators[old_cluster]
    old_operator.withheld.add((NAMESPACE, name))
    killed = None
    try:
        triggered = time.monotonic()
        world.taint(old_cluster)
        wait_until(
            f"{name} asked to stop on {old_cluster}",
            lambda: bool(
                ((world.member_object(old_cluster, name) or {}).get("metadata") or {})
                .get("labels", {})
                .get(FENCED)
            ),
            120,
        )
        killed = world.kill_member_replica(old_cluster, 0)
        old_operator.withheld.discard((NAMESPACE, name))
        outcome = _outcome(world, name, old_cluster, triggered)
    finally:
        old_operator.withheld.discard((NAMESPACE, name))
        if killed is not None:
            world.restart_member_replica(old_cluster, 0)
    world.record(outcome.line("one of two agent replicas killed mid-failover"))
    _assert_restored_newest(outcome)
    assert _annotation(world, new_cluster, name, RELEASED).startswith("ack"), (
        "released otherwise than by the ack"
    )
    return outcome


def hung_storage(world: World, jobs: list[str], held: int = 3) -> tuple[float, float]:
    """member2 holds restores whose storage then hangs for member2 only (``s3a://`` through a proxy): a
    job it runs on another storage keeps renewing its heartbeat on time and never steps down; a job it
    runs on the hung storage steps down within its bound. (Seconds: the healthy heartbeat's longest gap,
    the hung holder's step-down after the hang.)"""
    fencing = world.stack.fencing
    steady, holder = "steady", "hung-holder"
    names = [f"held-{i}" for i in range(held)]
    jobs.extend([steady, holder, *names])
    hung_dir = f"s3a://{BUCKET}/checkpoints-a"
    # the held-to-be jobs on member1 first (member2 kept out by a NoSchedule taint meanwhile)...
    world.taint("member2", {"key": "e2e.flink-failover.io/not-yet", "effect": "NoSchedule"})
    gracefully = propagation_policy("propagationpolicy-cluster-failover.yaml", names, "Gracefully")
    world.submit([flink_job(n, checkpoint_dir=hung_dir) for n in names], gracefully)
    for name in names:
        world.wait_running((NAMESPACE, name), "member1")
    world.untaint("member2", "e2e.flink-failover.io/not-yet")
    # ...then member2's own: one on healthy storage, one on the storage that will hang for member2
    on_member2 = propagation_policy("propagationpolicy-cluster-failover.yaml", [steady, holder])
    on_member2["spec"]["placement"]["clusterAffinity"]["clusterNames"] = ["member2"]
    world.submit([flink_job(steady), flink_job(holder, checkpoint_dir=hung_dir)], on_member2)
    for name in (steady, holder):
        world.wait_running((NAMESPACE, name), "member2")
        world.wait_checkpoints("member2", (NAMESPACE, name), 2)
    for name in names:
        job = world.wait_checkpoints("member1", (NAMESPACE, name), 2)
        world.wait_captured(name, "member1", job.job_id)
    world.operators["member1"].stop_seconds = 300  # the old copies stay stopping: their restores stay held
    proxy = world.stack.s3a_proxy
    assert proxy is not None
    try:
        world.taint("member1")
        for name in names:
            wait_until(f"{name} held on member2", lambda n=name: _held(world, "member2", n), 120)
        # what the hang is measured from: both of member2's own jobs running and renewing (on a loaded
        # machine a renewal can miss its deadline before any hang: such a copy steps down and resumes
        # by itself, and is said in the figures)
        for name in (steady, holder):
            wait_until(
                f"{name} running on member2, not stepped down, before the hang",
                lambda n=name: (
                    not _annotation(world, "member2", n, STEPPED_DOWN)
                    and world.running_job("member2", (NAMESPACE, n)) is not None
                ),
                120,
            )
        before = [n for n in (steady, holder) if _annotation(world, "member2", n, RESUMED)]
        beats = HeartbeatSampler(
            world, f"{CHECKPOINTS}/flink-failover/{NAMESPACE}/flinkdeployment/{steady}", "member2"
        )
        beats.start()
        hung_at = time.monotonic()
        proxy.slow(
            600
        )  # every chunk waits ten minutes: calls to s3a hang, as to a bucket that stopped answering
        wait_until(
            f"{holder} stepped down", lambda: bool(_annotation(world, "member2", holder, STEPPED_DOWN)), 120
        )
        stepped = time.monotonic() - hung_at
        # the healthy job's heartbeat over as long again, and every member2 replica ready all along
        wait_until(
            "a while of heartbeats after the step-down", lambda: time.monotonic() - hung_at > 2 * stepped, 120
        )
        ready = world.member_replicas_ready("member2")
        gap = beats.stop()
    finally:
        proxy.heal()
        world.operators["member1"].stop_seconds = 4.0
    world.record(
        f"storage hung for member2 with {held} held restores on it: the healthy job's heartbeat renewed "
        f"every {fencing['pollSeconds']} s, longest gap {gap:.1f} s (renew deadline "
        f"{fencing['renewDeadlineSeconds']} s), never stepped down; the job on the hung storage stepped down "
        f"{stepped:.1f} s after the hang (bound {fencing['renewDeadlineSeconds'] + fencing['pollSeconds']} s)"
        + (f"; stepped down and resumed before the hang: {', '.join(before)}" if before else "")
    )
    assert not _annotation(world, "member2", steady, STEPPED_DOWN), "a healthy job stepped down"
    assert world.timeline.running_on((NAMESPACE, steady)) == ["member2"]
    assert gap < fencing["renewDeadlineSeconds"], f"the healthy heartbeat went {gap:.1f} s without renewal"
    assert stepped <= fencing["renewDeadlineSeconds"] + 2 * fencing["pollSeconds"], (
        f"stepped down after {stepped:.1f} s"
    )
    assert ready, "a member2 replica turned not ready while its agent's storage hung"
    for name in names:
        assert world.timeline.two_running_seconds((NAMESPACE, name)) == 0.0
    return gap, stepped


class HeartbeatSampler:
    """The storage's modification time of one heartbeat record, sampled: the longest it stood still."""

    def __init__(self, world: World, folder: str, cluster: str) -> None:
        self.world, self.path = world, f"{folder}/heartbeat-{cluster}.json"
        self.changes: list[float] = []
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, name="heartbeat-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> float:
        """The longest interval between two renewals seen (its storage times), in seconds."""
        self._halt.set()
        self._thread.join(10)
        times = sorted(set(self.changes))
        return max((b - a for a, b in itertools.pairwise(times)), default=float("inf"))

    def _run(self) -> None:
        while not self._halt.wait(0.25):
            modified = self.world.modified_time(self.path)
            if modified is not None:
                self.changes.append(modified)


# --- stopped means stopped, gone means gone (issue 45) --------------------------------------------

GONE, LEADER_LOST, DELETING = "gone-early", "leader-lost", "deleting"


@dataclass(frozen=True)
class Ends:
    """The three returns of :func:`stopped_and_gone`, each from member2 to member1."""

    gone: Outcome  # a copy released on member2, evicted before it ran: its return to member1
    suspended: Outcome  # the old copy's job SUSPENDED while fenced
    deleting: Outcome  # the old FlinkSessionJob being deleted, its job SUSPENDED meanwhile


def stopped_and_gone(world: World, jobs: list[str]) -> Ends:
    """Three jobs, one NoExecute taint of member2 that sends each back to member1 (issue 45: "stopped
    means stopped, and gone means gone"), each restored from its old job's newest checkpoint, counted,
    never RUNNING twice:

    - ``gone-early`` (Directly) first moves from member1 to member2 by a policy change (member1's copy
      kept by the operator's finalizer while it is cancelled, so the restore on member2 is held, then
      released: the release writes member2's heartbeat), where the operator does not get to start it; the
      taint evicts it before it runs, and before member2's agents poll again (their replicas frozen, SIGSTOP,
      from the release until the copy is gone and its return admitted on member1: otherwise whether a
      poll comes first is a race).
      member2's agent drops the heartbeat its release wrote at its next poll, so the return is released
      by ``no-heartbeat``. Measured on Karmada v1.18.2 before: the
      heartbeat stayed and the return waited the whole lease (``lease-expiry``, 31.6 s, where the first
      failover took 1.7 s).
    - ``leader-lost`` (Gracefully): fenced on member2, its JobManager loses the leadership as the suspend
      is asked and Flink says SUSPENDED, which a new leader resumes: the job runs and checkpoints on. Its
      restore on member1 stays held (member2 renews its heartbeat, writes no ack) until the stop
      completes (FINISHED); before, SUSPENDED was a stop and the restore was released.
    - ``deleting-session``, a FlinkSessionJob (its own checkpoint directory, Directly): deleted on member2
      and kept by the operator's finalizer while its cancel waits for the session cluster's new JobManager
      leader, its status SUSPENDED, its job running on. Its restore on member1 stays held until the cancel
      completes and the object goes; before, a deleted session job that said SUSPENDED had ended."""
    gone, lost = (NAMESPACE, GONE), (NAMESPACE, LEADER_LOST)
    jobs.extend([GONE, LEADER_LOST])
    op1, op2 = world.operators["member1"], world.operators["member2"]
    shipped = "propagationpolicy-cluster-failover.yaml"
    try:
        # gone-early on member1 (member2 kept out until it is placed), the other two on member2
        op1.finalized.add(gone)
        world.taint("member2", NOT_YET)
        policy = propagation_policy(shipped, [GONE])
        world.submit([flink_job(GONE)], policy)
        wait_until(f"{GONE} placed on member1", lambda: world.placed_on(GONE) == ["member1"], 60)
        world.untaint("member2", NOT_YET["key"])
        session = _submit_session_job(world, jobs, DELETING, on="member2", checkpoint_dir=CHECKPOINTS)
        deleting = (NAMESPACE, session[1])
        op2.finalized.add(deleting)
        world.submit([flink_job(LEADER_LOST)], propagation_policy(shipped, [LEADER_LOST], "Gracefully"))
        first = _running_captured(world, gone, "member1")
        _running_captured(world, lost, "member2")
        _session_job_running(world, session, "member2")
        world.untaint("member1", NOT_YET["key"])

        # member1 -> member2 for gone-early only, by a policy change (a taint's eviction task would keep
        # member1 out of the return until the graceful-eviction timeout): held there while member1's copy
        # is cancelled, then released
        op2.withheld.add(gone)
        _place(world, policy, ["member2"])
        wait_until(f"{GONE} held on member2", lambda: _held(world, "member2", GONE), 120)
        _place(world, policy, ["member1", "member2"])  # it stays (Karmada keeps a placement that fits)
        wait_until(
            f"{GONE} released on member2",
            lambda: bool(_annotation(world, "member2", GONE, RELEASED)),
            120,
            interval=0.02,
        )
        # member2 -> member1 for all three, gone-early before it ran there, and before member2's agents
        # poll again: as measured on Karmada (frozen from the release on; a poll in between would see the
        # copy run)
        world.freeze_member_role("member2")
        try:
            away = _annotation(world, "member2", GONE, RELEASED)
            folder = _fencing_folder(CHECKPOINTS, "FlinkDeployment", GONE)
            written = world.record_names(folder)
            op2.leader_lost.update({lost, deleting})
            triggered = time.monotonic()
            world.taint("member2")
            # and its return admitted on member1 (which reads member2's heartbeat) before they poll
            wait_until(
                f"{GONE} gone from member2 and back on member1",
                lambda: _gone(world, "member2", GONE) and world.member_object("member1", GONE) is not None,
                60,
            )
        finally:
            world.freeze_member_role("member2", frozen=False)
        # judged against the job that ran on member1 (none ran on member2)
        back = _outcome(world, GONE, "member2", triggered, old_job=first)
        held = {
            key: _kept_while_old_runs(world, key, kind)
            for key, kind in ((lost, "FlinkDeployment"), (deleting, SESSION_JOB))
        }
        op2.leader_lost.clear()  # the new leaders' stops complete: FINISHED, the deletion's cancel CANCELED
        suspended = _outcome(world, LEADER_LOST, "member2", triggered)
        ended = _outcome(world, session[1], "member2", triggered)
    finally:
        op1.finalized.discard(gone)
        op2.withheld.discard(gone)
        op2.leader_lost.clear()
        op2.finalized.clear()
    released = _released_after(world, gone, "member1", triggered)
    world.record(
        back.line(
            f"a copy released on member2 ({away.split(' at ')[0]}) and evicted (Directly) before it ran, "
            f"back on member1: released by {_annotation(world, 'member1', GONE, RELEASED).split(' at ')[0]} "
            f"{released:.1f} s after the taint"
        )
    )
    whats = {
        LEADER_LOST: "the old job SUSPENDED (its JobManager's leadership lost) while fenced",
        session[1]: "the old FlinkSessionJob being deleted, its job SUSPENDED",
    }
    for outcome in (suspended, ended):
        name = outcome.new.key[1]
        reason = outcome.annotations.get(RELEASED, "").split(" at ")[0]
        world.record(outcome.line(f"{whats[name]}: released by {reason}"))
    # every case judged, so that one that fails hides none of the others
    problems = [p for found in held.values() for p in found]
    if "heartbeat-member2.json" not in written:
        problems.append(f"{GONE}: the release on member2 wrote no heartbeat: {written}")
    reason = _annotation(world, "member1", GONE, RELEASED)
    if not reason.startswith("no-heartbeat"):
        problems.append(
            f"{GONE}: the return was released otherwise than by no-heartbeat (member2's heartbeat "
            f"outlived its copy): {reason!r}"
        )
    problems += _failed(lambda: _assert_restored_newest(back, count=2), GONE)
    for outcome in (suspended, ended):
        problems += _failed(lambda o=outcome: _assert_restored_newest(o), outcome.new.key[1])
        problems += _failed(lambda o=outcome: _assert_started_after_the_old_ended(o), outcome.new.key[1])
    assert not problems, "\n".join(problems)
    return Ends(back, suspended, ended)


def _place(world: World, policy: dict[str, Any], clusters: list[str]) -> None:
    policy["spec"]["placement"]["clusterAffinity"]["clusterNames"] = clusters
    world.stack.apply_karmada([policy])


def _fencing_folder(checkpoint_dir: str, kind: str, name: str) -> str:
    """Where a job's fencing records live (webhook/fencing/layout.py)."""
    return f"{checkpoint_dir}/flink-failover/{NAMESPACE}/{kind.lower()}/{name}"


def _running_captured(world: World, key: Key, cluster: str) -> Job:
    world.wait_running(key, cluster)
    job = world.wait_checkpoints(cluster, key, 3)
    world.wait_captured(key[1], cluster, job.job_id)
    return job


def _released_after(world: World, key: Key, cluster: str, after: float) -> float:
    """Seconds from ``after`` to the first status sample on ``cluster`` carrying the released marker."""
    for sample in world.timeline.of(key, cluster):
        if sample.at >= after and sample.annotations.get(RELEASED):
            return sample.at - after
    return float("nan")


def _job_state(world: World, cluster: str, name: str) -> str:
    obj = world.member_object(cluster, name) or {}
    return str(((obj.get("status") or {}).get("jobStatus") or {}).get("state") or "")


def _kept_while_old_runs(world: World, key: Key, kind: str) -> list[str]:
    """The restore of ``key`` held on member1 while its old copy on member2 says SUSPENDED and runs on:
    until member2's agent has renewed that copy's heartbeat twice since (two polls that read SUSPENDED),
    or the restore is no longer held, or the heartbeat is gone. What is wrong then (the restore released,
    the heartbeat gone, an ack of member2's written, the old job ended)."""
    name = key[1]
    folder = _fencing_folder(CHECKPOINTS, kind, name)
    beat = f"{folder}/heartbeat-member2.json"
    # its restore admitted on member1 (held from its CREATE on, unless the old heartbeat was gone by then)
    wait_until(f"{name} restored on member1", lambda: world.member_object("member1", name) is not None, 120)
    wait_until(
        f"{name} SUSPENDED on member2 (or released on member1)",
        lambda: _job_state(world, "member2", name) == "SUSPENDED" or not _held(world, "member1", name),
        60,
    )
    since = time.time()
    renewals: set[float] = set()

    def settled() -> bool:
        modified = world.modified_time(beat)
        if modified is None or not _held(world, "member1", name):
            return True
        if modified > since:
            renewals.add(modified)
        return len(renewals) >= 2

    wait_until(f"{name}'s heartbeat on member2 renewed twice while SUSPENDED", settled, 60, interval=0.5)
    problems = []
    if not _held(world, "member1", name):
        problems.append(
            f"{name}: released on member1 while its old job on member2 ran on, SUSPENDED: "
            f"{_annotation(world, 'member1', name, RELEASED)!r}"
        )
    names = world.record_names(folder)
    if "heartbeat-member2.json" not in names:
        problems.append(f"{name}: member2 dropped the heartbeat of a job that said SUSPENDED: {names}")
    if [n for n in names if n.startswith("ack-") and n.endswith("-member2.json")]:
        problems.append(f"{name}: member2 acknowledged a job that said SUSPENDED: {names}")
    if world.running_job("member2", key) is None:
        problems.append(f"{name}: the old job on member2 ended before its stop was let complete")
    return problems


def _failed(check: Callable[[], None], name: str) -> list[str]:
    """``check``'s assertion, as a problem of ``name`` (none when it holds)."""
    try:
        check()
    except AssertionError as exc:
        return [f"{name}: {exc}"]
    return []


def _assert_started_after_the_old_ended(outcome: Outcome) -> None:
    """By the operators' own records (a job whose status says SUSPENDED is not RUNNING by status, but
    runs): the new job started only after the old one ended."""
    assert outcome.old.ended is not None, "the old job never ended"
    assert outcome.new.started >= outcome.old.ended, (
        f"the new job started {outcome.old.ended - outcome.new.started:.1f} s before the old one ended"
    )
