"""The record schema and the pure capture step."""

from __future__ import annotations

import copy
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane import support as s
from webhook.controlplane.binding import Binding, savepoint_location
from webhook.controlplane.capture import capture, observe
from webhook.controlplane.record import (
    MAX_HISTORY,
    BindingRecord,
    ClusterRecord,
    HistoryEntry,
    HistoryType,
    RecordError,
    StoredRecord,
    read_annotation,
)

KEY = "flink-failover.io/last-known-state"
T0 = s.FIXED_NOW


def _fold(*objs: dict[str, Any]) -> BindingRecord:
    record = BindingRecord()
    for i, obj in enumerate(objs):
        record = observe(record, Binding.from_object(obj), T0 + timedelta(minutes=i))
    return record


# --- record ---


def test_record_round_trip() -> None:
    record = BindingRecord(
        clusters=(
            (
                "member1",
                ClusterRecord(job_id=s.JOB_A, job_seen="2026-11-29T14:00:00Z", savepoint="s3://b/sp"),
            ),
        ),
        placement=("member2",),
        history=(
            HistoryEntry(
                HistoryType.EVICTION, ("member1",), (), "TaintUntolerated", "2026-11-29T14:01:53Z", "Directly"
            ),
        ),
        failover_count=1,
    )
    text = record.dumps()
    assert BindingRecord.loads(text) == record
    doc = json.loads(text)
    assert doc["version"] == 1
    assert doc["clusters"]["member1"] == {
        "jobId": s.JOB_A,
        "jobSeen": "2026-11-29T14:00:00Z",
        "savepoint": "s3://b/sp",
    }
    assert doc["history"][0] == {
        "type": "Eviction",
        "from": ["member1"],
        "to": [],
        "reason": "TaintUntolerated",
        "time": "2026-11-29T14:01:53Z",
        "purgeMode": "Directly",
    }


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        '{"version": 2}',
        '{"version": 1, "clusters": []}',
        '{"version": 1, "clusters": {"m": {"jobId": 7}}}',
        '{"version": 1, "history": [{"type": "Exploded"}]}',
        '{"version": 1, "history": [{"type": "Eviction", "from": "member1"}]}',
        '{"version": 1, "failoverCount": -1}',
        '{"version": 1, "failoverCount": true}',
        '{"version": 1, "placement": [1]}',
    ],
)
def test_bad_records_are_errors_not_exceptions(text: str) -> None:
    assert isinstance(BindingRecord.loads(text), RecordError)
    stored = read_annotation({KEY: text}, KEY)
    assert stored.present and stored.error and stored.record == BindingRecord()


def test_missing_annotation() -> None:
    assert read_annotation({}, KEY) == StoredRecord()
    assert read_annotation(None, KEY) == StoredRecord()
    assert read_annotation({KEY: 5}, KEY).error


# --- capture ---


@pytest.mark.shared
def test_scen_a_sequence(shared_data: Path) -> None:
    before = s.binding(shared_data, "scenA/rb-before-failure.json")
    after = s.binding(shared_data, "scenA/rb-after-failover.json")
    final = s.binding(shared_data, "scenA/rb-final.json")
    record = _fold(before, after, final)
    assert record.cluster("member1") == ClusterRecord(job_id=s.JOB_A, job_seen="2026-11-29T15:00:00Z")
    assert record.cluster("member2") == ClusterRecord()  # status {}: nothing seen there
    assert record.placement == ("member2",)
    assert record.history == (
        HistoryEntry(
            HistoryType.EVICTION,
            ("member1",),
            ("member2",),
            "TaintUntolerated",
            "2026-11-29T14:01:53Z",
            "Directly",
        ),
        HistoryEntry(
            HistoryType.PLACEMENT,
            ("member1",),
            ("member2",),
            "TaintUntolerated",
            "2026-11-29T14:01:53Z",
            "Directly",
        ),
    )
    assert record.failover_count == 1


@pytest.mark.shared
def test_observe_is_a_fixpoint_and_capture_patches_only_on_change(shared_data: Path) -> None:
    for name in (
        "scenA/rb-before-failure.json",
        "scenA/rb-after-failover.json",
        "scenB-graceful/rb-after-failover.json",
        "scenD-appfailover/rb-after-failover.json",
    ):
        binding = Binding.from_object(s.binding(shared_data, name))
        once = observe(BindingRecord(), binding, T0)
        assert observe(once, binding, T0 + timedelta(hours=1)) == once
        first = capture(BindingRecord(), StoredRecord(), binding, T0)
        assert first.write
        stored = read_annotation({KEY: first.record.dumps()}, KEY)
        assert not capture(first.record, stored, binding, T0 + timedelta(hours=1)).write


@pytest.mark.shared
def test_nothing_to_record_means_no_patch(shared_data: Path) -> None:
    final = Binding.from_object(s.binding(shared_data, "scenA/rb-final.json"))
    result = capture(BindingRecord(), StoredRecord(), final, T0)
    assert result.record.placement == ("member2",)  # a placement alone is worth keeping
    bare = copy.deepcopy(s.binding(shared_data, "scenA/rb-final.json"))
    bare["spec"]["clusters"] = []
    assert not capture(BindingRecord(), StoredRecord(), Binding.from_object(bare), T0).write


@pytest.mark.shared
def test_corrupt_stored_record_is_overwritten(shared_data: Path) -> None:
    binding = Binding.from_object(s.binding(shared_data, "scenA/rb-before-failure.json"))
    stored = read_annotation({KEY: "{broken"}, KEY)
    result = capture(stored.record, stored, binding, T0)
    assert result.write and result.record.cluster("member1").job_id == s.JOB_A


@pytest.mark.shared
def test_only_running_jobs_are_good_states(shared_data: Path) -> None:
    rb = s.binding(shared_data, "scenA/rb-before-failure.json")
    record = _fold(s.set_statuses(copy.deepcopy(rb), {"member1": s.flink_status(s.JOB_A, "RECONCILING")}))
    assert record.cluster("member1") == ClusterRecord(observed_job_id=s.JOB_A, observed_state="RECONCILING")
    record = observe(record, Binding.from_object(rb), T0 + timedelta(minutes=5))
    assert record.cluster("member1").job_id == s.JOB_A
    assert record.cluster("member1").job_seen == "2026-11-29T15:05:00Z"
    assert record.cluster("member1").observed_job_id == ""  # it ran: nothing pending any more
    # The good job leaving RUNNING (and coming back) keeps it, and changes nothing: no patch.
    for state in ("FAILING", "RESTARTING", "RUNNING"):
        flapping = s.set_statuses(copy.deepcopy(rb), {"member1": s.flink_status(s.JOB_A, state)})
        assert observe(record, Binding.from_object(flapping), T0 + timedelta(minutes=6)) == record
    # A new job that has not run yet is pending beside the good one.
    next_job = s.set_statuses(copy.deepcopy(rb), {"member1": s.flink_status(s.JOB_B, "CREATED")})
    state = observe(record, Binding.from_object(next_job), T0 + timedelta(minutes=7)).cluster("member1")
    assert (state.job_id, state.observed_job_id, state.observed_state) == (s.JOB_A, s.JOB_B, "CREATED")
    # A RUNNING status whose jobId is not a jobId is not a good state.
    odd = s.set_statuses(copy.deepcopy(rb), {"member2": s.flink_status("not-a-job-id")})
    assert not observe(BindingRecord(), Binding.from_object(odd), T0).cluster("member2").good


@pytest.mark.parametrize(
    ("job_status", "expected"),
    [
        (
            {
                "savepointInfo": {
                    "lastSavepoint": {"location": "s3://bucket/sp/savepoint-3c653d-0123456789ab"}
                }
            },
            "s3://bucket/sp/savepoint-3c653d-0123456789ab",
        ),
        (
            {"upgradeSavepointPath": "s3p://bucket/sp/savepoint-3c653d-0123456789ab"},
            "s3p://bucket/sp/savepoint-3c653d-0123456789ab",
        ),
        (
            {"upgradeSavepointPath": "/flink/sp/savepoint-3c653d-0123456789ab"},
            "/flink/sp/savepoint-3c653d-0123456789ab",
        ),
        ({"upgradeSavepointPath": ""}, ""),
        ({"upgradeSavepointPath": "savepoint pending"}, ""),
        ({"upgradeSavepointPath": "ftp://x/y"}, ""),
        (
            {
                "savepointInfo": {"lastSavepoint": {"location": "gs://b/new"}},
                "upgradeSavepointPath": "gs://b/old",
            },
            "gs://b/new",
        ),
        (
            {"savepointInfo": {"lastSavepoint": {"location": None}}, "upgradeSavepointPath": "gs://b/old"},
            "gs://b/old",
        ),
        ({}, ""),
    ],
)
def test_savepoint_location(job_status: dict[str, Any], expected: str) -> None:
    assert savepoint_location(job_status) == expected


@pytest.mark.shared
def test_savepoint_is_recorded_per_cluster(shared_data: Path) -> None:
    rb = s.binding(shared_data, "scenA/rb-before-failure.json")
    s.set_statuses(
        rb, {"member1": s.flink_status(s.JOB_A, savepoint="s3://bucket/sp/savepoint-3c653d-0123456789ab")}
    )
    state = _fold(rb).cluster("member1")
    assert state.savepoint == "s3://bucket/sp/savepoint-3c653d-0123456789ab" and state.savepoint_seen


@pytest.mark.shared
def test_reschedule_without_a_task_counts_as_a_failover(shared_data: Path) -> None:
    before = s.binding(shared_data, "scenA/rb-before-failure.json")
    moved = s.set_clusters(copy.deepcopy(before), "member2")
    record = _fold(before, moved)
    assert record.failover_count == 1
    assert record.history[-1].reason == "Rescheduled"
    # Scaling out (nothing left) is recorded but is no failover.
    wider = s.set_clusters(copy.deepcopy(moved), "member2", "member3")
    assert observe(record, Binding.from_object(wider), T0).failover_count == 1


@pytest.mark.shared
def test_eviction_seen_between_placements_is_counted_once(shared_data: Path) -> None:
    """Karmada removes the cluster and adds the task first; the scheduler picks the new cluster later."""
    before = s.binding(shared_data, "scenA/rb-before-failure.json")
    evicting = s.set_tasks(s.set_clusters(copy.deepcopy(before)), s.task("member1", "2026-11-29T14:01:53Z"))
    evicting["spec"]["clusters"] = []
    rescheduled = s.set_clusters(copy.deepcopy(evicting), "member2")
    task_gone = s.set_tasks(copy.deepcopy(rescheduled))
    record = _fold(before, evicting, rescheduled, task_gone)
    assert record.failover_count == 1
    assert [e.type for e in record.history] == [HistoryType.EVICTION, HistoryType.PLACEMENT]
    # Capture away while the task existed: the move is still explained by the eviction it saw earlier.
    record = _fold(before, evicting, task_gone)
    assert record.failover_count == 1 and record.history[-1].reason == "TaintUntolerated"


@pytest.mark.shared
def test_history_is_bounded_but_the_count_is_not(shared_data: Path) -> None:
    rb = s.binding(shared_data, "scenA/rb-before-failure.json")
    record = _fold(rb)
    clusters = ["member1", "member2"]
    for i in range(MAX_HISTORY + 10):
        src, dst = clusters[i % 2], clusters[(i + 1) % 2]
        created = (T0 + timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        moved = s.set_tasks(s.set_clusters(copy.deepcopy(rb), dst), s.task(src, created))
        record = observe(record, Binding.from_object(moved), T0 + timedelta(minutes=i))
        record = observe(record, Binding.from_object(moved), T0 + timedelta(minutes=i, seconds=30))
    assert len(record.history) == MAX_HISTORY
    assert record.failover_count == MAX_HISTORY + 10
    assert len(record.dumps()) < 16 * 1024
