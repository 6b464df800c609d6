"""The three failovers that started a job from empty state on a real Karmada v1.18.2, replayed.

Recordings: tests/fixtures/karmada-observed/ (gracefully-race, return-to-previous, eviction-task-stamp;
each folder's README has the millisecond timeline). Every time below is a receive time from them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import jsonpatch

from tests.controlplane import fakeapi
from tests.controlplane import recorded as r
from tests.controlplane import support as s
from webhook.common.admission import review
from webhook.common.kubeclient import ClientConfig
from webhook.controlplane.audit import WorkAudit
from webhook.controlplane.binding import Binding
from webhook.controlplane.capture import observe
from webhook.controlplane.handler import WorkHandler, internal_error
from webhook.controlplane.karmada import KarmadaApi
from webhook.controlplane.lookup import BindingCache, BindingLookupResult, Entry, Found, FreshLookup
from webhook.controlplane.record import BindingRecord, HistoryType
from webhook.controlplane.relocation import Relocation, decide_relocation
from webhook.policy.restore import RestorePolicy

P = "flink-failover.io/"
J_RACE = "7b53faafa334fcbcb8092450d29784f6"  # orders-c on member1
J_HOME = "19d073578ceb25b2cdfc76aba64510ab"  # orders-d on member1, before it left
J_NEVER = "47700028077177541df3226b38cef301"  # orders-d on member2, never RUNNING
POLICY = RestorePolicy().contract
LABELS = POLICY.job_id_labels


@dataclass
class Fixed:
    """A lookup that hands the webhook one binding and the record it is to start from."""

    binding: Mapping[str, Any]
    record: BindingRecord

    def lookup(self, namespace: str, name: str) -> BindingLookupResult:
        return Found(Binding.from_object(self.binding), self.record, "api")

    def cached(self, namespace: str, name: str) -> None:
        return None  # the recorded timeline is judged on the binding as read fresh


def admit(
    binding: Mapping[str, Any],
    record: BindingRecord,
    work: dict[str, Any],
    now: datetime,
    operation: str = "CREATE",
    old: dict[str, Any] | None = None,
) -> tuple[dict[str, str], dict[str, str], dict[str, Any], str]:
    """(our labels, our annotations, the Work as patched, the decision) for one Work admission."""
    handler = WorkHandler(Fixed(binding, record), POLICY, clock=lambda: now)
    _request, response = review(s.admission_review(work, operation, old), handler, internal_error)
    assert response.allowed, response.message
    patched = jsonpatch.apply_patch(work, response.patch) if response.patch else copy.deepcopy(work)
    meta = s.flink_metadata(patched)
    ours = lambda m: {k[len(P) :]: v for k, v in m.items() if k.startswith(P)}  # noqa: E731
    return ours(meta.get("labels", {})), ours(meta.get("annotations", {})), patched, response.decision


def fold(record: BindingRecord, steps: list[r.Step]) -> BindingRecord:
    for step in steps:
        record = observe(record, Binding.from_object(step.obj), step.moment)
    return record


# --- the replay is faithful -------------------------------------------------------------------------


def test_replayed_objects_match_the_recorded_full_objects() -> None:
    checks = {
        "gracefully-race": (
            r.binding("gracefully-race/rb-0-before-eviction.json"),
            {
                "2350": "gracefully-race/rb-1-evicted-not-yet-rescheduled.json",
                "2352": "gracefully-race/rb-2-scheduled-to-member2.json",
            },
        ),
        "return-to-previous": (
            r.binding("return-to-previous/rb-1-before-first-failover.json"),
            {
                "2738": "return-to-previous/rb-2-after-first-failover.json",
                "2814": "return-to-previous/rb-3-member2-never-ran.json",
                "2836": "return-to-previous/rb-4-after-second-failover.json",
            },
        ),
    }
    for folder, (start, files) in checks.items():
        steps = {step.obj["metadata"]["resourceVersion"]: step.obj for step in r.replay(folder, start)}
        for version, relative in files.items():
            got, want = Binding.from_object(steps[version]), Binding.from_object(r.binding(relative))
            assert (got.clusters, got.tasks, got.generation) == (want.clusters, want.tasks, want.generation)
            assert [(o.cluster, o.job_id, o.state) for o in got.statuses] == [
                (o.cluster, o.job_id, o.state) for o in want.statuses
            ]
            assert (got.last_scheduled, got.scheduler_observed_generation) == (
                want.last_scheduled,
                want.scheduler_observed_generation,
            )


# --- 1. Gracefully: the Work arrives before any watch has the move ----------------------------------


def race() -> tuple[BindingRecord, list[r.Step], dict[str, Any]]:
    """The record capture held when the Work CREATE arrived (07:15:00.024), every step, and the Work."""
    start = r.binding("gracefully-race/rb-0-before-eviction.json")
    steps = r.replay("gracefully-race", start)
    record = observe(
        BindingRecord(), Binding.from_object(r.running_before(start, "member1")), r.at("07:14:41.600")
    )
    # Capture had seen the eviction (07:14:59.991) and not yet the scheduler's move (07:15:00.010).
    seen = [step for step in steps if step.moment <= r.at("07:14:59.991")]
    return fold(record, seen), steps, r.work_create("gracefully-race/work-create-member2.audit.json")


def test_gracefully_stale_cache_said_leaving_the_fresh_binding_injects() -> None:
    record, _steps, work = race()
    stale = r.binding("gracefully-race/rb-1-evicted-not-yet-rescheduled.json")
    now = r.at("07:15:00.027")
    # What the webhook answered from its cache on the real run: nothing, the job started empty.
    answer = decide_relocation(
        observe(record, Binding.from_object(stale), now), Binding.from_object(stale), "member2", LABELS, now
    )
    assert answer.outcome is Relocation.LEAVING and answer.injection is None
    # The binding as the API server held it when the Work CREATE came in.
    fresh = r.binding("gracefully-race/rb-2-scheduled-to-member2.json")
    labels, annotations, _, decision = admit(fresh, record, work, now)
    assert decision == "injected"
    assert labels == {"failover": "true", "job-id": J_RACE}
    assert annotations["source-cluster"] == "member1"
    assert annotations["reason"] == "ApplicationFailure"
    assert annotations["failover-count"] == "1"


def test_gracefully_every_later_reapply_keeps_the_labels_time_and_count() -> None:
    record, steps, work = race()
    now = r.at("07:15:00.027")
    first_labels, first_annotations, patched, _ = admit(
        r.binding("gracefully-race/rb-2-scheduled-to-member2.json"), record, work, now
    )
    # Karmada re-applies the template (without our labels) after each later change, the task's stamp
    # included; capture has folded every step by then.
    for step in steps:
        if step.moment <= r.at("07:15:00.010"):
            continue
        record = observe(record, Binding.from_object(step.obj), step.moment)
        labels, annotations, _, decision = admit(
            step.obj, record, work, step.moment, operation="UPDATE", old=patched
        )
        assert decision == "injected", step.received
        assert (labels, annotations) == (first_labels, first_annotations), step.received
    stamped = r.binding("eviction-task-stamp/appfailover-gracefully-rb-2-task-stamped.json")
    record = observe(record, Binding.from_object(stamped), r.at("07:15:00.230"))
    labels, annotations, _, _ = admit(stamped, record, work, r.at("07:15:00.300"), "UPDATE", patched)
    assert (labels, annotations) == (first_labels, first_annotations)
    assert record.failover_count == 1


# --- 2. Return to a cluster the job ran on before -----------------------------------------------------


def round_trip(member2_runs: bool = False) -> tuple[BindingRecord, dict[str, Any], dict[str, Any]]:
    start = r.binding("return-to-previous/rb-1-before-first-failover.json")
    steps = r.replay("return-to-previous", start)
    if member2_runs:  # the variant where the job on member2 did run (and got a new jobId)
        for step in steps:
            for entry in step.obj["status"]["aggregatedStatus"]:
                job = entry.get("status", {}).get("jobStatus")
                if entry["clusterName"] == "member2" and job:
                    job["state"] = "RUNNING"
    record = observe(BindingRecord(), Binding.from_object(start), r.at("07:17:11.034"))
    # Capture had everything up to the scheduler's move back (07:17:27.208): the Work came 5 ms later.
    record = fold(record, [step for step in steps if step.moment < r.at("07:17:27.208")])
    fresh = next(step.obj for step in steps if step.obj["metadata"]["resourceVersion"] == "2836")
    return record, fresh, r.work_create("return-to-previous/work-create-member1-return.audit.json")


def test_return_to_previous_cluster_where_the_job_ran_before_injects_that_job() -> None:
    record, fresh, work = round_trip()
    assert record.cluster("member1").job_id == J_HOME  # seen on member1, before the workload left it
    labels, annotations, _, decision = admit(fresh, record, work, r.at("07:17:27.216"))
    assert decision == "injected"
    assert labels == {"failover": "true", "job-id": J_HOME}
    assert annotations["source-cluster"] == "member1"
    assert annotations["failover-count"] == "2"
    assert annotations["reason"] == "TaintUntolerated"
    # The recorded binding itself, as the API server returned it, gives the same answer.
    labels2, annotations2, _, _ = admit(
        r.binding("return-to-previous/rb-4-after-second-failover.json"), record, work, r.at("07:17:27.216")
    )
    assert (labels2, annotations2) == (labels, annotations)


def test_return_after_the_job_ran_on_the_other_cluster_injects_the_newer_job() -> None:
    record, fresh, work = round_trip(member2_runs=True)
    labels, annotations, _, _ = admit(fresh, record, work, r.at("07:17:27.216"))
    assert labels == {"failover": "true", "job-id": J_NEVER}
    assert annotations["source-cluster"] == "member2"
    assert annotations["failover-count"] == "2"


def test_return_while_the_old_job_still_runs_there_is_not_a_restore() -> None:
    """Purge mode Gracefully: the Work on member1 lingers and its job keeps RUNNING while member2 tries."""
    record, fresh, work = round_trip()
    still = copy.deepcopy(fresh)
    still["status"]["aggregatedStatus"].append(
        {"applied": True, "clusterName": "member1", "health": "Healthy", "status": s.flink_status(J_HOME)}
    )
    labels, annotations, _, decision = admit(still, record, work, r.at("07:17:27.216"), operation="UPDATE")
    assert decision == "running-on-target" and labels == {}
    assert annotations["source-cluster"] == "member2"  # the failover that brought it back stays visible


def test_return_once_the_restored_job_runs_stops_the_labels_keeps_the_annotations() -> None:
    record, fresh, work = round_trip()
    now = r.at("07:17:27.216")
    labels, first, patched, _ = admit(fresh, record, work, now)
    assert labels["job-id"] == J_HOME
    record = observe(record, Binding.from_object(fresh), r.at("07:17:27.208"))  # capture sees the move
    restored = "0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d"
    later = s.set_statuses(copy.deepcopy(fresh), {"member1": s.flink_status(restored)})
    s.set_tasks(later)
    record = observe(record, Binding.from_object(later), r.at("07:17:40.000"))
    labels, annotations, _, decision = admit(later, record, work, r.at("07:17:41"), "UPDATE", patched)
    assert decision == "running-on-target" and labels == {}
    # The same failover, although member1's slot in the record now holds the restored job.
    assert annotations == first
    assert record.cluster("member1").job_id == restored


# --- 3. One eviction, one count -------------------------------------------------------------------------


def test_a_task_seen_before_and_after_its_stamp_is_one_eviction() -> None:
    for example, cluster in (("appfailover-gracefully", "member1"), ("taint-directly", "member1")):
        unstamped = r.binding(f"eviction-task-stamp/{example}-rb-1-task-without-creationTimestamp.json")
        stamped = r.binding(f"eviction-task-stamp/{example}-rb-2-task-stamped.json")
        assert "creationTimestamp" not in unstamped["spec"]["gracefulEvictionTasks"][0]
        first_seen = r.at("07:00:00.100")
        record = observe(BindingRecord(placement=(cluster,)), Binding.from_object(unstamped), first_seen)
        after = observe(record, Binding.from_object(stamped), r.at("07:00:00.400"))
        evictions = [e for e in after.history if e.type is HistoryType.EVICTION]
        assert len(evictions) == 1, example
        # Dated when first seen; the stamp does not move it.
        assert evictions[0].time == "2026-12-01T07:00:00.100Z"
        assert after.failover_count == 1, example
        # Seen in the other order (capture saw only the stamped one) it is still one.
        only_stamped = observe(BindingRecord(placement=(cluster,)), Binding.from_object(stamped), first_seen)
        assert only_stamped.failover_count == 1
        # Folding again changes nothing: no patch at a later event.
        assert observe(after, Binding.from_object(stamped), r.at("07:00:09")) == after


def test_a_new_task_from_the_same_cluster_is_a_new_eviction() -> None:
    stamped = r.binding("eviction-task-stamp/taint-directly-rb-2-task-stamped.json")
    record = observe(BindingRecord(placement=("member1",)), Binding.from_object(stamped), r.at("07:04:05"))
    later = copy.deepcopy(stamped)
    later["spec"]["gracefulEvictionTasks"][0]["creationTimestamp"] = "2026-12-01T07:30:00Z"
    again = observe(record, Binding.from_object(later), r.at("07:30:01"))
    assert again.failover_count == record.failover_count + 1
    fresh_unstamped = copy.deepcopy(stamped)
    del fresh_unstamped["spec"]["gracefulEvictionTasks"][0]["creationTimestamp"]
    assert observe(record, Binding.from_object(fresh_unstamped), r.at("07:30:01")).failover_count == 2


def test_a_move_is_dated_when_it_happened_not_by_a_stale_last_scheduled_time() -> None:
    record, steps, _ = race()
    move = next(step for step in steps if step.obj["metadata"]["resourceVersion"] == "2352")
    assert move.obj["status"]["lastScheduledTime"] == "2026-12-01T07:14:40Z"  # the previous schedule's
    placed = observe(record, Binding.from_object(move.obj), move.moment)
    moves = [e for e in placed.history if e.type is HistoryType.PLACEMENT]
    assert moves[-1].to_clusters == ("member2",) and moves[-1].time == "2026-12-01T07:15:00.010Z"


def test_a_later_failover_replaces_what_the_previous_one_left_on_the_work() -> None:
    """The old Work carries the first failover's annotations (count 1): the return (count 2) overwrites
    them instead of keeping them as a re-apply of the same failover would."""
    record, fresh, work = round_trip()
    old = copy.deepcopy(work)
    old["spec"]["workload"]["manifests"][0]["metadata"].setdefault("annotations", {}).update(
        {
            P + "source-cluster": "member9",
            P + "failover-count": "1",
            P + "failover-time": "2026-01-01T00:00:00Z",
        }
    )
    _, annotations, _, _ = admit(fresh, record, old, r.at("07:17:27.216"), "UPDATE", old)
    assert annotations["source-cluster"] == "member1" and annotations["failover-count"] == "2"
    assert annotations["failover-time"] != "2026-01-01T00:00:00Z"


def test_without_a_fresh_binding_only_a_safe_update_is_answered_from_the_cache(tmp_path: Path) -> None:
    record, fresh, work = round_trip()
    running_job = "0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d"
    fresh_record = observe(record, Binding.from_object(fresh), r.at("07:17:27.208"))
    later = s.set_tasks(s.set_statuses(copy.deepcopy(fresh), {"member1": s.flink_status(running_job)}))
    settled = observe(fresh_record, Binding.from_object(later), r.at("07:17:40"))
    server = fakeapi.start()
    try:
        server.fake.upsert(later)
        api = KarmadaApi.connect(
            ClientConfig(kubeconfig=str(server.kubeconfig(tmp_path / "kc")), request_timeout=5)
        )
        assert isinstance(api, KarmadaApi)
        cache = BindingCache()
        lookup = FreshLookup(cache, api, POLICY)
        handler = WorkHandler(lookup, POLICY, clock=lambda: r.at("07:17:41"))

        def answer(operation: str) -> Any:
            server.fake.fail_next_gets = 1
            return review(
                s.admission_review(work, operation, work if operation == "UPDATE" else None),
                handler,
                internal_error,
            )[1]

        # No cache entry: refused either way, so that Karmada retries.
        assert [answer(op).code for op in ("CREATE", "UPDATE")] == [503, 503]
        # The cache shows the restored job running on member1 since the return: a re-applied Work
        # (UPDATE) can be answered from it; a CREATE still cannot.
        binding = Binding.from_object(later)
        cache.put(Entry(binding, settled))
        update = answer("UPDATE")
        assert update.allowed and update.decision == "running-on-target"
        assert (
            isinstance(update.audit, WorkAudit) and update.audit.manifests[0].binding_from == "cache-fallback"
        )
        assert answer("CREATE").code == 503
        # The cache still at the move back (no job has run there since): refused.
        cache.put(Entry(Binding.from_object(fresh), fresh_record))
        assert answer("UPDATE").code == 503
    finally:
        server.stop()
