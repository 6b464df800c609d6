"""Work webhook decisions on objects recorded from real Karmada v1.18.2 failovers, and variants of them."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane import support as s
from tests.support import objects
from webhook.common.admission import parse_review, review
from webhook.common.flink import started_from
from webhook.controlplane.binding import Binding
from webhook.controlplane.capture import observe
from webhook.controlplane.handler import WorkHandler, internal_error
from webhook.controlplane.lookup import BindingLookupResult
from webhook.controlplane.record import BindingRecord
from webhook.member.handler import MemberHandler
from webhook.policy.restore import RestorePolicy

pytestmark = pytest.mark.shared

LABEL_FAILOVER = "flink-failover.io/failover"
LABEL_JOB = "flink-failover.io/job-id"
SOURCE = "flink-failover.io/source-cluster"
TIME = "flink-failover.io/failover-time"
COUNT = "flink-failover.io/failover-count"
REASON = "flink-failover.io/reason"
SAVEPOINT = "flink-failover.io/last-savepoint"
STARTED_FROM = "flink-failover.io/started-from"


def captured(shared: Path, *bindings: dict[str, Any]) -> str:
    """The record the capture loop would have stored after seeing ``bindings`` in order, each seen a
    few seconds after Karmada last changed it (its lastScheduledTime or newest eviction task)."""
    record = BindingRecord()
    moment = datetime.min.replace(tzinfo=UTC)
    for obj in bindings:
        s.validate_binding(shared, obj)
        stamps = [obj["status"].get("lastScheduledTime", "")]
        stamps += [t["creationTimestamp"] for t in obj["spec"].get("gracefulEvictionTasks", [])]
        changed = max(datetime.fromisoformat(t.replace("Z", "+00:00")) for t in stamps if t)
        moment = max(moment + timedelta(seconds=1), changed + timedelta(seconds=5))
        record = observe(record, Binding.from_object(obj), moment)
    return record.dumps()


@pytest.fixture
def scen_a(shared_data: Path) -> dict[str, Any]:
    return {
        "before": s.binding(shared_data, "scenA/rb-before-failure.json"),
        "after": s.binding(shared_data, "scenA/rb-after-failover.json"),
        "final": s.binding(shared_data, "scenA/rb-final.json"),
        "work2": s.flink_work(shared_data, "scenA/works-member2-final.json", "orders-flinkdeployment"),
        "work1": s.flink_work(
            shared_data, "scenA/works-member1-before-failure.json", "orders-flinkdeployment"
        ),
    }


# --- cluster failover ---


def test_cluster_failover_directly_while_the_task_exists(shared_data: Path, scen_a: dict[str, Any]) -> None:
    got = s.answer([scen_a["after"]], scen_a["work2"])
    assert got.decision == "injected"
    assert got.labels == {LABEL_FAILOVER: "true", LABEL_JOB: s.JOB_A}
    assert got.annotations == {
        SOURCE: "member1",
        TIME: "2026-11-29T14:01:53Z",  # the eviction task's creationTimestamp
        COUNT: "1",
        REASON: "TaintUntolerated",
    }
    s.validate_work(shared_data, got.work)


def test_task_expired_before_the_work_was_created_needs_the_record(
    shared_data: Path, scen_a: dict[str, Any]
) -> None:
    """scenA: member1 stayed down, the member2 Work came after the task expired; Karmada injected nothing."""
    final = scen_a["final"]
    assert "gracefulEvictionTasks" not in final["spec"]
    assert [e["clusterName"] for e in final["status"]["aggregatedStatus"]] == ["member2"]
    # Without what capture stored earlier nothing in the binding says where the job ran.
    assert not s.answer([final], scen_a["work2"]).injected

    record = captured(shared_data, scen_a["before"], scen_a["after"])
    got = s.answer([s.set_record(final, record)], scen_a["work2"])
    assert got.decision == "injected"
    assert got.labels[LABEL_JOB] == s.JOB_A
    assert got.annotations[SOURCE] == "member1"
    assert got.annotations[REASON] == "TaintUntolerated"
    assert got.annotations[TIME] == "2026-11-29T14:01:53Z"
    assert got.annotations[COUNT] == "1"


def test_gracefully_keeps_the_old_cluster_stale_status(shared_data: Path) -> None:
    rb = s.binding(shared_data, "scenB-graceful/rb-after-failover.json")
    work = s.flink_work(
        shared_data, "scenB-graceful/works-member2-after-failover.json", "orders-grace-flinkdeployment"
    )
    assert rb["spec"]["gracefulEvictionTasks"][0]["purgeMode"] == "Gracefully"
    got = s.answer([rb], work)
    assert got.labels == {LABEL_FAILOVER: "true", LABEL_JOB: "a31b89ec42b1f335258909778303fcfc"}
    assert got.annotations[SOURCE] == "member1"
    assert got.annotations[TIME] == "2026-11-29T14:09:13Z"


def test_taint_with_only_the_preserved_label(shared_data: Path) -> None:
    """scenA3: member1's entry is already gone from aggregatedStatus; the task's preserved label is all."""
    rb = s.binding(shared_data, "scenA3-taint/rb-after-failover.json")
    work = s.flink_work(
        shared_data, "scenA3-taint/works-member2-after-failover.json", "orders-taint-flinkdeployment"
    )
    got = s.answer([rb], work)
    assert got.labels[LABEL_JOB] == "fc7fce4860f65c315b1dfa67267da151"
    assert got.annotations[SOURCE] == "member1"
    # Karmada's own label stays untouched beside ours.
    labels = s.flink_metadata(got.work)["labels"]
    assert labels["application.karmada.io/cluster-failover-jobid"] == "fc7fce4860f65c315b1dfa67267da151"


# --- application failover and purge modes ---


def test_application_failover(shared_data: Path, scen_a: dict[str, Any]) -> None:
    rb = s.binding(shared_data, "scenD-appfailover/rb-after-failover.json")
    work = s.work_for(scen_a["work2"], "member2")
    work["metadata"]["annotations"]["resourcebinding.karmada.io/name"] = "orders-app-flinkdeployment"
    s.validate_work(shared_data, work)
    got = s.answer([rb], work)
    assert got.labels[LABEL_JOB] == "1127e5e2ae706c014bdd6b0de37fc6af"
    assert got.annotations[REASON] == "ApplicationFailure"
    assert got.annotations[TIME] == "2026-11-29T14:19:13Z"


@pytest.mark.parametrize("purge_mode", ["Directly", "Gracefully", "Never"])
def test_every_purge_mode_injects(shared_data: Path, scen_a: dict[str, Any], purge_mode: str) -> None:
    rb = s.binding(shared_data, "scenD-appfailover/rb-after-failover.json")
    rb["spec"]["failover"]["application"]["purgeMode"] = purge_mode
    rb["spec"]["failover"]["application"].pop("statePreservation")  # no Karmada preservation at all
    s.set_tasks(
        rb,
        s.task(
            "member1",
            "2026-11-29T14:19:13Z",
            reason="ApplicationFailure",
            purge_mode=purge_mode,
            before=["member1"],
        ),
    )
    # The failing job is still reported (stale or, with Never, still there) on member1.
    s.set_statuses(rb, {"member1": s.flink_status(s.JOB_B, "RECONCILING"), "member2": {}})
    before = copy.deepcopy(rb)
    s.set_clusters(before, "member1")
    s.set_tasks(before)
    s.set_statuses(before, {"member1": s.flink_status(s.JOB_B)})
    s.set_record(rb, captured(shared_data, before, rb))
    s.validate_binding(shared_data, rb)
    work = s.work_for(scen_a["work2"], "member2")
    work["metadata"]["annotations"]["resourcebinding.karmada.io/name"] = "orders-app-flinkdeployment"
    got = s.answer([rb], work)
    assert got.labels == {LABEL_FAILOVER: "true", LABEL_JOB: s.JOB_B}
    assert got.annotations[REASON] == "ApplicationFailure"


def test_no_task_left_and_no_record_but_stale_status(shared_data: Path, scen_a: dict[str, Any]) -> None:
    """A move without any eviction task left (reschedule, or task gone): the stale status is enough."""
    rb = s.set_tasks(scen_a["after"])
    s.validate_binding(shared_data, rb)
    got = s.answer([rb], scen_a["work2"])
    assert got.labels[LABEL_JOB] == s.JOB_A
    assert got.annotations[REASON] == "Rescheduled"
    assert got.annotations[TIME] == rb["status"]["lastScheduledTime"]
    assert got.annotations[COUNT] == "1"


# --- consecutive failovers ---


def _chain(shared_data: Path, scen_a: dict[str, Any], preserved_on_b: bool) -> list[dict[str, Any]]:
    base = scen_a["before"]
    key = "application.karmada.io/cluster-failover-jobid"
    a = copy.deepcopy(base)
    ab = s.set_statuses(
        s.set_tasks(
            s.set_clusters(copy.deepcopy(base), "member2", scheduled="2026-11-29T14:01:53Z"),
            s.task("member1", "2026-11-29T14:01:53Z", preserved={key: s.JOB_A}),
        ),
        {"member1": s.flink_status(s.JOB_A), "member2": {}},
    )
    b_starting = s.set_statuses(
        s.set_tasks(copy.deepcopy(ab)), {"member2": s.flink_status(s.JOB_B, "RECONCILING")}
    )
    bc = s.set_statuses(
        s.set_tasks(
            s.set_clusters(copy.deepcopy(b_starting), "member3", scheduled="2026-11-29T14:20:00Z"),
            s.task("member2", "2026-11-29T14:20:00Z", preserved={key: s.JOB_B} if preserved_on_b else None),
        ),
        {"member2": s.flink_status(s.JOB_B, "RECONCILING"), "member3": {}},
    )
    for obj in (a, ab, b_starting, bc):
        s.validate_binding(shared_data, obj)
    return [a, ab, b_starting, bc]


@pytest.mark.parametrize("preserved_on_b", [True, False])
def test_consecutive_failovers_where_b_never_ran(
    shared_data: Path, scen_a: dict[str, Any], preserved_on_b: bool
) -> None:
    chain = _chain(shared_data, scen_a, preserved_on_b)
    last = s.set_record(copy.deepcopy(chain[-1]), captured(shared_data, *chain))
    got = s.answer([last], s.work_for(scen_a["work2"], "member3"))
    assert got.labels == {LABEL_FAILOVER: "true", LABEL_JOB: s.JOB_A}  # A's job: B never ran one
    assert got.annotations[SOURCE] == "member1"
    assert got.annotations[COUNT] == "2"
    assert got.annotations[TIME] == "2026-11-29T14:20:00Z"  # the latest failover
    assert got.annotations[REASON] == "TaintUntolerated"


def test_consecutive_failovers_where_b_ran(shared_data: Path, scen_a: dict[str, Any]) -> None:
    chain = _chain(shared_data, scen_a, preserved_on_b=True)
    b_ran = s.set_statuses(copy.deepcopy(chain[2]), {"member2": s.flink_status(s.JOB_B)})
    last = s.set_record(copy.deepcopy(chain[-1]), captured(shared_data, *chain[:3], b_ran, chain[3]))
    got = s.answer([last], s.work_for(scen_a["work2"], "member3"))
    assert got.labels[LABEL_JOB] == s.JOB_B
    assert got.annotations[SOURCE] == "member2"


# --- Karmada's preserved label ---


@pytest.fixture
def taint_case(shared_data: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    rb = s.binding(shared_data, "scenA3-taint/rb-after-failover.json")
    work = s.flink_work(
        shared_data, "scenA3-taint/works-member2-after-failover.json", "orders-taint-flinkdeployment"
    )
    labels = work["spec"]["workload"]["manifests"][0]["metadata"]["labels"]
    labels.pop("application.karmada.io/cluster-failover-jobid")  # as Karmada sends it without preservation
    return rb, work


@pytest.mark.parametrize(
    ("preserved", "expected"),
    [
        (
            {"application.karmada.io/cluster-failover-jobid": "fc7fce4860f65c315b1dfa67267da151"},
            "fc7fce4860f65c315b1dfa67267da151",
        ),
        (
            {"resourcebinding.karmada.io/failover-jobid": "fc7fce4860f65c315b1dfa67267da151"},
            "fc7fce4860f65c315b1dfa67267da151",
        ),
        (None, ""),
        ({}, ""),
        ({"application.karmada.io/cluster-failover-jobid": "FC7FCE4860F65C315B1DFA67267DA151"}, ""),
        ({"application.karmada.io/cluster-failover-jobid": "<no value>"}, ""),
        ({"application.karmada.io/cluster-failover-jobid": "RUNNING"}, ""),
        ({"example.com/job": "fc7fce4860f65c315b1dfa67267da151"}, ""),
    ],
)
def test_preserved_label_present_absent_or_not_a_job_id(
    shared_data: Path, taint_case: tuple[dict[str, Any], dict[str, Any]], preserved: Any, expected: str
) -> None:
    rb, work = taint_case
    s.set_tasks(rb, s.task("member1", "2026-11-29T14:08:07Z", preserved=preserved))
    s.validate_binding(shared_data, rb)
    got = s.answer([rb], work)
    if expected:
        assert got.decision == "injected"
        assert got.labels == {LABEL_FAILOVER: "true", LABEL_JOB: expected}
    else:  # an eviction to member2 but no good state known: the failover label and annotations only
        assert got.decision == "failover-only"
        assert got.labels == {LABEL_FAILOVER: "true"}
    assert got.annotations[SOURCE] == "member1"
    assert got.annotations[REASON] == "TaintUntolerated"
    assert got.annotations[TIME] == "2026-11-29T14:08:07Z"


def test_preserved_label_only_counts_under_the_policys_keys(
    taint_case: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    rb, work = taint_case
    policy = RestorePolicy(
        job_id_labels=("flink-failover.io/job-id", "resourcebinding.karmada.io/failover-jobid")
    )
    got = s.answer([rb], work, policy=policy)
    assert got.labels == {LABEL_FAILOVER: "true"}


def test_job_id_unknown_when_the_failed_cluster_never_reported_a_job(
    shared_data: Path, scen_a: dict[str, Any]
) -> None:
    rb = s.set_statuses(scen_a["after"], {"member1": {}})
    rb["spec"]["gracefulEvictionTasks"][0].pop("preservedLabelState")
    s.validate_binding(shared_data, rb)
    got = s.answer([rb], scen_a["work2"])
    assert got.decision == "failover-only"
    assert got.labels == {LABEL_FAILOVER: "true"}
    assert got.annotations == {
        SOURCE: "member1",
        TIME: "2026-11-29T14:01:53Z",
        COUNT: "1",
        REASON: "TaintUntolerated",
    }


def test_job_seen_only_in_a_non_running_state_is_not_a_good_state(
    shared_data: Path, scen_a: dict[str, Any]
) -> None:
    rb = s.set_statuses(scen_a["after"], {"member1": s.flink_status(s.JOB_A, "CREATED")})
    rb["spec"]["gracefulEvictionTasks"][0].pop("preservedLabelState")
    got = s.answer([rb], scen_a["work2"])
    assert got.labels == {LABEL_FAILOVER: "true"}


# --- when to stop, and Works that are none of our business ---


def test_restored_job_already_running_on_target(shared_data: Path) -> None:
    after = s.binding(shared_data, "scenA3-taint/rb-after-failover.json")
    running = s.binding(shared_data, "scenA3-taint/rb-after-running.json")
    before = s.set_tasks(s.set_clusters(copy.deepcopy(after), "member1"))
    s.set_statuses(before, {"member1": s.flink_status("fc7fce4860f65c315b1dfa67267da151")})
    work = s.flink_work(
        shared_data, "scenA3-taint/works-member2-after-running.json", "orders-taint-flinkdeployment"
    )
    # While member2 has not run yet: inject (UPDATE included).
    during = s.set_record(copy.deepcopy(after), captured(shared_data, before, after))
    assert (
        s.answer([during], work, operation="UPDATE").labels[LABEL_JOB] == "fc7fce4860f65c315b1dfa67267da151"
    )
    # Once member2 reports RUNNING with its new jobId: stop, with or without the record having seen it.
    assert s.answer(
        [s.set_record(copy.deepcopy(running), captured(shared_data, before, after))], work
    ).decision == ("running-on-target")
    with_record = s.set_record(copy.deepcopy(running), captured(shared_data, before, after, running))
    got = s.answer([with_record], work, operation="UPDATE")
    assert got.decision == "running-on-target"
    # The trigger labels go; the failover that brought the job here stays visible on the object.
    assert not got.labels
    assert got.annotations[SOURCE] == "member1"
    assert got.annotations[COUNT] == "1"
    assert got.annotations[REASON] == "TaintUntolerated"
    assert all(
        op["path"].rsplit("~1", 1)[-1] in ("source-cluster", "failover-time", "failover-count", "reason")
        for op in got.patch
    )


def test_a_left_cluster_reporting_a_new_job_later_does_not_restart_injection(shared_data: Path) -> None:
    """member1 comes back after the failover and its old object reports a (new) RUNNING job for a while."""
    before = s.binding(shared_data, "scenB-graceful/rb-after-failover.json")
    s.set_tasks(s.set_clusters(before, "member1", scheduled="2026-11-29T14:08:00Z"))
    s.set_statuses(before, {"member1": s.flink_status("a31b89ec42b1f335258909778303fcfc")})
    after = s.binding(shared_data, "scenB-graceful/rb-after-failover.json")
    running = s.set_statuses(
        s.set_tasks(copy.deepcopy(after)),
        {"member1": s.flink_status("a31b89ec42b1f335258909778303fcfc"), "member2": s.flink_status(s.JOB_B)},
    )
    back = s.set_statuses(
        copy.deepcopy(running), {"member1": s.flink_status(s.JOB_C), "member2": s.flink_status(s.JOB_B)}
    )
    work = s.flink_work(
        shared_data, "scenB-graceful/works-member2-after-failover.json", "orders-grace-flinkdeployment"
    )
    got = s.answer(
        [s.set_record(copy.deepcopy(back), captured(shared_data, before, after, running, back))],
        work,
        operation="UPDATE",
    )
    assert got.decision == "running-on-target" and not got.labels
    # While member2 had not run yet, the same sequence did inject member1's job.
    early = s.answer([s.set_record(copy.deepcopy(after), captured(shared_data, before, after))], work)
    assert early.labels[LABEL_JOB] == "a31b89ec42b1f335258909778303fcfc"


def test_work_for_the_cluster_being_left(shared_data: Path) -> None:
    rb = s.binding(shared_data, "scenB-graceful/rb-after-failover.json")
    work = s.flink_work(
        shared_data, "scenB-graceful/works-member2-after-failover.json", "orders-grace-flinkdeployment"
    )
    old_work = s.work_for(work, "member1")
    for operation in ("CREATE", "UPDATE"):
        got = s.answer([rb], old_work, operation=operation)
        assert got.decision == "leaving"
        assert not got.patch


def test_an_added_cluster_is_no_relocation(shared_data: Path, scen_a: dict[str, Any]) -> None:
    """Placement widened from member1 to member1+member2 (the job keeps running on member1)."""
    widened = "2026-11-29T14:05:00Z"
    rb = s.set_clusters(copy.deepcopy(scen_a["before"]), "member1", "member2", scheduled=widened)
    s.validate_binding(shared_data, rb)
    record = captured(shared_data, scen_a["before"], rb)
    got = s.answer([s.set_record(rb, record)], scen_a["work2"])
    assert got.decision == "no-failover" and not got.patch


def test_work_for_an_unrelated_kind(shared_data: Path, scen_a: dict[str, Any]) -> None:
    others = s.other_works(shared_data, "scenA/works-member2-final.json")
    assert others, "the recorded list holds Namespace / RBAC Works too"
    for work in others:
        s.validate_work(shared_data, work)
        wire = _wire([scen_a["after"]], work)
        assert wire["response"]["allowed"] is True
        assert "patch" not in wire["response"]


def test_work_outside_an_execution_namespace(scen_a: dict[str, Any]) -> None:
    work = copy.deepcopy(scen_a["work2"])
    work["metadata"]["namespace"] = "analytics"
    assert "patch" not in _wire([scen_a["after"]], work)["response"]


def _wire(bindings: list[dict[str, Any]], work: dict[str, Any]) -> dict[str, Any]:
    policy = RestorePolicy()
    from webhook.controlplane.offline import static_lookup

    handler = WorkHandler(
        static_lookup(bindings, policy.contract), policy.contract, clock=lambda: s.FIXED_NOW
    )
    request, response = review(s.admission_review(work), handler, internal_error)
    return response.to_review(request.api_version)


# --- idempotence and patch hygiene ---


def test_update_is_idempotent_and_karmada_resends_are_labelled_again(scen_a: dict[str, Any]) -> None:
    first = s.answer([scen_a["after"]], scen_a["work2"])
    again = s.answer([scen_a["after"]], first.work, operation="UPDATE")
    assert again.decision == "unchanged"
    assert not again.patch
    # Karmada re-sends its template without our labels (template change, restart): same labels again.
    resent = s.answer(
        [scen_a["after"]], scen_a["work2"], operation="UPDATE", now=s.FIXED_NOW + timedelta(hours=1)
    )
    assert resent.labels == first.labels and resent.annotations == first.annotations


def test_patch_applies_when_the_manifest_has_no_labels_or_metadata(scen_a: dict[str, Any]) -> None:
    work = copy.deepcopy(scen_a["work2"])
    manifest = work["spec"]["workload"]["manifests"][0]
    del manifest["metadata"]["labels"]
    del manifest["metadata"]["annotations"]
    got = s.answer([scen_a["after"]], work)
    assert got.labels[LABEL_JOB] == s.JOB_A and got.annotations[SOURCE] == "member1"
    paths = [op["path"] for op in got.patch]
    assert paths == [
        "/spec/workload/manifests/0/metadata/labels",
        "/spec/workload/manifests/0/metadata/annotations",
    ]

    del manifest["metadata"]
    got = s.answer([scen_a["after"]], work)
    assert got.labels[LABEL_JOB] == s.JOB_A and got.annotations[COUNT] == "1"


def test_only_the_flink_manifest_is_touched(scen_a: dict[str, Any], shared_data: Path) -> None:
    work = copy.deepcopy(scen_a["work2"])
    namespace_manifest = s.other_works(shared_data, "scenA/works-member2-final.json")[0]["spec"]["workload"][
        "manifests"
    ][0]
    work["spec"]["workload"]["manifests"].insert(0, namespace_manifest)
    got = s.answer([scen_a["after"]], work)
    assert {op["path"].split("/")[4] for op in got.patch} == {"1"}
    assert got.work["spec"]["workload"]["manifests"][0] == namespace_manifest


def test_binding_found_by_name_when_the_work_lacks_its_annotations(scen_a: dict[str, Any]) -> None:
    work = copy.deepcopy(scen_a["work2"])
    del work["metadata"]["annotations"]["resourcebinding.karmada.io/name"]
    del work["metadata"]["annotations"]["resourcebinding.karmada.io/namespace"]
    assert s.answer([scen_a["after"]], work).labels[LABEL_JOB] == s.JOB_A


def test_unknown_binding_is_allowed_without_patch(scen_a: dict[str, Any]) -> None:
    got = s.answer([], scen_a["work2"])
    assert got.decision == "binding-not-found" and not got.patch


def test_internal_error_refuses_a_flink_work_retriably_and_allows_any_other(
    scen_a: dict[str, Any], shared_data: Path
) -> None:
    class Broken:
        def lookup(self, namespace: str, name: str) -> BindingLookupResult:
            raise RuntimeError("boom")

        def cached(self, namespace: str, name: str) -> None:
            return None

    policy = RestorePolicy()
    handler = WorkHandler(Broken(), policy.contract)
    request, response = review(s.admission_review(scen_a["work2"]), handler, internal_error)
    wire = response.to_review(request.api_version)["response"]
    assert wire["allowed"] is False and "patch" not in wire
    assert wire["status"]["code"] == 503 and wire["status"]["reason"] == "ServiceUnavailable"
    assert "RuntimeError: boom" in wire["status"]["message"]
    assert response.decision == "error"
    # A Work without a Flink workload never depends on us: allowed even when the handler breaks.
    for other in s.other_works(shared_data, "scenA/works-member2-final.json"):
        request, response = review(s.admission_review(other), handler, internal_error)
        assert response.to_review(request.api_version)["response"] == {"uid": "uid-1", "allowed": True}


def test_dry_run_and_delete_have_no_effect(scen_a: dict[str, Any]) -> None:
    policy = RestorePolicy()
    from webhook.controlplane.offline import static_lookup

    handler = WorkHandler(
        static_lookup([scen_a["after"]], policy.contract), policy.contract, clock=lambda: s.FIXED_NOW
    )
    body = s.admission_review(scen_a["work2"], operation="DELETE")
    _, response = review(body, handler, internal_error)
    assert response.allowed and not response.patch
    body = s.admission_review(scen_a["work2"])
    body["request"]["dryRun"] = True
    _, response = review(body, handler, internal_error)
    assert response.patch  # same answer as without dryRun; the webhook has no side effects to skip


def test_custom_prefix(scen_a: dict[str, Any]) -> None:
    policy = RestorePolicy(prefix="failover.example.com")
    got = s.answer([scen_a["after"]], scen_a["work2"], policy=policy)
    meta = s.flink_metadata(got.work)
    assert meta["labels"]["failover.example.com/job-id"] == s.JOB_A
    assert meta["annotations"]["failover.example.com/source-cluster"] == "member1"


# --- the state a job started from (issue 23) ---


def _started(job_id: str, path: str, first_deployment: bool = True) -> dict[str, Any]:
    """A RUNNING status whose last reconciled spec started the job from ``path``, as operator 1.15
    writes it (a JSON string, the spec beside its resource_metadata)."""
    status = s.flink_status(job_id)
    spec = {"spec": {"job": {"initialSavepointPath": path, "upgradeMode": "savepoint", "state": "running"}}}
    spec["resource_metadata"] = {
        "apiVersion": "flink.apache.org/v1beta1",
        "firstDeployment": first_deployment,
    }
    status["reconciliationStatus"] = {"state": "DEPLOYED", "lastReconciledSpec": json.dumps(spec)}
    return status


def test_consecutive_failovers_carry_what_b_started_from_to_c(
    shared_data: Path, scen_a: dict[str, Any], tmp_path: Path
) -> None:
    """A -> B -> C with B never checkpointing: the control plane records what B started from (its own
    status) and C restores exactly that, through the member role, with the lineage in its warning."""
    ck = tmp_path / "ck"
    a_chk = ck / s.JOB_A / "chk-11"
    a_chk.mkdir(parents=True)
    (a_chk / "_metadata").write_bytes(objects.flink_metadata(11))  # complete, as Flink reads it
    chain = _chain(shared_data, scen_a, preserved_on_b=True)
    b_ran = s.set_statuses(copy.deepcopy(chain[2]), {"member2": _started(s.JOB_B, str(a_chk))})
    last = s.set_record(copy.deepcopy(chain[-1]), captured(shared_data, *chain[:3], b_ran, chain[3]))
    got = s.answer([last], s.work_for(scen_a["work2"], "member3"))
    assert got.labels[LABEL_JOB] == s.JOB_B
    assert got.annotations[STARTED_FROM] == str(a_chk)

    (manifest,) = (
        copy.deepcopy(m)
        for m in got.work["spec"]["workload"]["manifests"]
        if str(m.get("apiVersion", "")).startswith("flink.apache.org/")
    )
    manifest["spec"]["flinkConfiguration"] = {"execution.checkpointing.dir": str(ck)}
    handler = MemberHandler.from_policy(RestorePolicy())
    try:
        resp = handler(parse_review(objects.review(manifest))).to_review()["response"]
    finally:
        handler.close()
    restored = objects.apply(manifest, objects.decode_patch(resp))
    assert restored["spec"]["job"]["initialSavepointPath"] == str(a_chk)
    assert any(f"job {s.JOB_B} completed nothing restorable" in w for w in resp["warnings"])


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (_started("b" * 32, "s3://bkt/ck/" + "a" * 32 + "/chk-11"), "s3://bkt/ck/" + "a" * 32 + "/chk-11"),
        # upgraded since: the initialSavepointPath of its first deployment is no longer where it started
        (_started("b" * 32, "s3://bkt/ck/" + "a" * 32 + "/chk-11", first_deployment=False), ""),
    ],
)
def test_started_from_is_read_from_the_jobs_own_status(status: dict[str, Any], expected: str) -> None:
    assert started_from("FlinkDeployment", status) == expected


def test_an_upgrade_savepoint_is_what_the_next_job_started_from_not_the_jobs_own() -> None:
    upgrade = "s3://bkt/sp/savepoint-aaaaaa-0123456789ab"
    status = _started("b" * 32, "s3://bkt/ck/old/chk-1", first_deployment=False)
    status["jobStatus"]["upgradeSavepointPath"] = upgrade
    assert started_from("FlinkDeployment", status) == upgrade
    status["jobStatus"]["jobId"] = "a" * 32  # the stop savepoint of the job itself, before its upgrade
    assert started_from("FlinkDeployment", status) == ""
