"""Properties of capture and the decision over arbitrary sequences of bindings Karmada could write."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.common.flink import is_job_id
from webhook.controlplane.binding import Binding
from webhook.controlplane.capture import capture, observe
from webhook.controlplane.record import BindingRecord, read_annotation
from webhook.controlplane.relocation import Relocation, decide_relocation
from webhook.policy.restore import RestorePolicy

CLUSTERS = ("member1", "member2", "member3")
JOBS = ("3c653dbe4c19bb72f8eb28445541bed6", "0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "not-a-job", "")
STATES = ("RUNNING", "RECONCILING", "FAILING", "CREATED", "")
T0 = datetime(2026, 11, 29, 14, 0, tzinfo=UTC)
LABELS = RestorePolicy().job_id_labels


def _stamp(minutes: int) -> str:
    return (T0 + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


statuses = st.dictionaries(
    st.sampled_from(CLUSTERS),
    st.one_of(
        st.just({}),
        st.builds(
            lambda job, state: {"jobStatus": {"jobId": job, "state": state}},
            st.sampled_from(JOBS),
            st.sampled_from(STATES),
        ),
    ),
    max_size=3,
)
tasks = st.lists(
    st.builds(
        lambda origin, minute, reason, mode, preserved: {
            "fromCluster": origin,
            "creationTimestamp": _stamp(minute),
            "reason": reason,
            "purgeMode": mode,
            **({"preservedLabelState": {LABELS[2]: preserved}} if preserved is not None else {}),
        },
        st.sampled_from(CLUSTERS),
        st.integers(0, 30),
        st.sampled_from(("TaintUntolerated", "ApplicationFailure")),
        st.sampled_from(("Directly", "Gracefully", "Never")),
        st.one_of(st.none(), st.sampled_from(JOBS)),
    ),
    max_size=2,
)
bindings = st.builds(
    lambda clusters, aggregated, evictions, scheduled: {
        "apiVersion": "work.karmada.io/v1alpha2",
        "kind": "ResourceBinding",
        "metadata": {"name": "orders-flinkdeployment", "namespace": "analytics", "uid": "u1"},
        "spec": {
            "resource": {
                "apiVersion": "flink.apache.org/v1beta1",
                "kind": "FlinkDeployment",
                "name": "orders",
            },
            "clusters": [{"name": c} for c in clusters],
            "gracefulEvictionTasks": evictions,
        },
        "status": {
            "aggregatedStatus": [{"clusterName": c, "status": s} for c, s in aggregated.items()],
            **({"lastScheduledTime": _stamp(scheduled)} if scheduled is not None else {}),
        },
    },
    st.lists(st.sampled_from(CLUSTERS), max_size=2, unique=True),
    statuses,
    tasks,
    st.one_of(st.none(), st.integers(0, 30)),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(bindings, min_size=1, max_size=6))
def test_capture_is_a_fixpoint_and_never_forgets(sequence: list[dict[str, Any]]) -> None:
    record = BindingRecord()
    key = "flink-failover.io/last-known-state"
    for step, obj in enumerate(sequence):
        binding = Binding.from_object(obj)
        now = T0 + timedelta(minutes=40 + step)
        folded = observe(record, binding, now)
        assert observe(folded, binding, now + timedelta(hours=1)) == folded  # no patch storm
        assert folded.failover_count >= record.failover_count
        for cluster, state in record.clusters:
            if state.good:  # a good state is replaced only by a newer good state, never dropped
                assert folded.cluster(cluster).good
        assert BindingRecord.loads(folded.dumps()) == folded
        result = capture(folded, read_annotation({key: folded.dumps()}, key), binding, now)
        assert not result.write
        record = folded


@settings(max_examples=200, deadline=None)
@given(st.lists(bindings, min_size=1, max_size=5), st.sampled_from(CLUSTERS))
def test_decisions_are_safe(sequence: list[dict[str, Any]], target: str) -> None:
    record = BindingRecord()
    for step, obj in enumerate(sequence):
        record = observe(record, Binding.from_object(obj), T0 + timedelta(minutes=40 + step))
    last = Binding.from_object(copy.deepcopy(sequence[-1]))
    decision = decide_relocation(record, last, target, LABELS, T0 + timedelta(hours=2))
    if target not in last.clusters:
        assert decision.outcome is Relocation.LEAVING and decision.injection is None
    if decision.injection is not None:
        injection = decision.injection
        assert injection.job_id == "" or is_job_id(injection.job_id)
        assert injection.source_cluster
        if injection.source_cluster == target:
            # Only a return: the newest good state ran on target before the workload left it. Once the
            # returned job runs there, the return stays visible as the failover that brought it back.
            if decision.outcome is Relocation.RELOCATING:
                assert decision.explanation.startswith("returning")
            else:
                assert decision.outcome is Relocation.RUNNING_ON_TARGET
                assert decision.newest is not None and decision.newest.cluster == target
        assert injection.failover_count >= 1
        assert injection.reason and injection.failover_time
    if decision.outcome is Relocation.RELOCATING:
        assert decision.newest is not None
        assert decision.newest.cluster not in last.clusters or decision.newest.cluster == target
    # Idempotent: the same inputs give the same answer.
    assert decide_relocation(record, last, target, LABELS, T0 + timedelta(hours=2)) == decision


def test_a_returned_job_running_on_target_keeps_the_return_as_its_failover() -> None:
    """The counterexample hypothesis once found: member1 ran K, the workload left for member2 (which never
    ran it) and came back; member1 now runs J. J runs on target, so no trigger labels; the failover that
    brought it back was a return, so its source is member1 itself, with K, count 2, the return's time."""
    job_j, job_k = JOBS[0], JOBS[1]
    tasks = [
        {"fromCluster": "member2", "creationTimestamp": _stamp(10), "reason": "TaintUntolerated"},
        {
            "fromCluster": "member1",
            "creationTimestamp": _stamp(0),
            "reason": "TaintUntolerated",
            "preservedLabelState": {LABELS[2]: job_k},
        },
    ]
    obj = {
        "apiVersion": "work.karmada.io/v1alpha2",
        "kind": "ResourceBinding",
        "metadata": {"name": "orders-flinkdeployment", "namespace": "analytics", "uid": "u1"},
        "spec": {
            "resource": {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment", "name": "o"},
            "clusters": [{"name": "member1"}],
            "gracefulEvictionTasks": tasks,
        },
        "status": {
            "aggregatedStatus": [
                {"clusterName": "member1", "status": {"jobStatus": {"jobId": job_j, "state": "RUNNING"}}}
            ]
        },
    }
    binding = Binding.from_object(obj)
    record = observe(BindingRecord(), binding, T0 + timedelta(minutes=40))
    decision = decide_relocation(record, binding, "member1", LABELS, T0 + timedelta(hours=2))
    assert decision.outcome is Relocation.RUNNING_ON_TARGET
    assert decision.newest is not None
    assert (decision.newest.cluster, decision.newest.job_id) == ("member1", job_j)
    assert decision.injection is not None
    injection = decision.injection
    assert (injection.source_cluster, injection.job_id) == ("member1", job_k)
    assert (injection.failover_count, injection.failover_time) == (2, _stamp(10))
