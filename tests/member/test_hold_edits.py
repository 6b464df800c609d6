"""A held restore stays held through every edit but the agent's release, through the served webhook
(gunicorn, TLS, ``--cluster`` with its agent polling a member cluster's API).

Before issue 35 the UPDATE of a held object was decided from the new object's labels first: an edit
that dropped ``failover`` and ``job-id`` (a GitOps tool applying the base manifest) was admitted running;
the epoch annotation was taken from the request (lowered after a return, an old ack released the hold;
copied into a template, the CREATE fenced under it); and a FlinkBlueGreenDeployment's child, which
carries none of its parent's labels, started whenever anyone patched it.

Reaching the webhook: for an UPDATE kube-apiserver matches a webhook's objectSelector against the old
object and the new one, and calls it when either matches (k8s.io/apiserver
pkg/admission/plugin/webhook/predicates/object), so the first label-dropping UPDATE is sent by the old
object's labels; the webhook puts them back while the job is held, and the chart registers held objects
and blue/green children by matchConditions on ``oldObject`` too (tests/chart/test_cel.py).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane import fakeapi
from tests.support.objects import JOB_ID, apply, decode_patch, flink_deployment, make_checkpoints, review
from tests.support.production import agent_polled, wait_for
from tests.support.server import RunningServer, generate_certs, serve
from webhook.common.flink import FlinkResource
from webhook.fencing import copies, directories
from webhook.fencing.records import FencingStore, heartbeat_body
from webhook.policy.restore import RestorePolicy
from webhook.restore.storage.search import CheckpointStorage

P = "flink-failover.io"
FAILOVER, JOB_LABEL = f"{P}/failover", f"{P}/job-id"
HOLD, EPOCH, DECISION = f"{P}/hold", f"{P}/epoch", f"{P}/restore-decision"
ALICE = "alice"  # anyone but the agent (a person, a GitOps controller, Karmada)
BG = "/apis/flink.apache.org/v1beta1/flinkbluegreendeployments"
HOLD_TEXT = "epoch 3: waiting for member1 to stop; member1 renewed its heartbeat ..."


@dataclass
class Served:
    server: RunningServer
    member: fakeapi.RunningFake
    root: Path

    def admit(self, obj: dict[str, Any], old: dict[str, Any] | None = None, user: str = ALICE) -> Any:
        operation = "UPDATE" if old is not None else "CREATE"
        answer = self.server.client().admit(review(obj, operation=operation, old=old, user=user))
        response = answer["response"]
        assert response["allowed"] is True, response
        return apply(obj, decode_patch(response)), response.get("warnings", [])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("hold-edits")
    root = tmp / "checkpoints"
    make_checkpoints(root / JOB_ID, [1, 2])
    policy = tmp / "policy.yaml"
    policy.write_text(
        f"defaultCheckpointDir: {root}\n"
        "fencing: {leaseSeconds: 300, pollSeconds: 0.5, renewDeadlineSeconds: 100, stopMarginSeconds: 100}\n",
        encoding="utf-8",
    )
    member = fakeapi.start_member_cluster()
    try:
        kubeconfig = member.kubeconfig(tmp / "member2.kubeconfig")
        extra = ["--cluster", "member2", "--kubeconfig", str(kubeconfig), "--workers", "1"]
        with serve(generate_certs(tmp / "certs"), policy, tmp / "server.log", extra=extra) as server:
            assert wait_for(lambda: agent_polled(server))  # it vouches: nothing is held for want of it
            yield Served(server, member, root)
    finally:
        member.stop()


def held(root: Path, name: str = "orders") -> dict[str, Any]:
    """A restore the webhook admitted held at epoch 3 (the third failover), as stored."""
    path = str(root / JOB_ID / "chk-2")
    obj = flink_deployment(
        name=name,
        labels={FAILOVER: "true", JOB_LABEL: JOB_ID, "app": name},
        annotations={
            f"{P}/failover-count": "3",
            DECISION: "held",
            f"{P}/restored-from": path,
            f"{P}/restored-job-id": JOB_ID,
            EPOCH: "3",
            HOLD: HOLD_TEXT,
        },
    )
    obj["spec"]["job"].update(state="suspended", initialSavepointPath=path, upgradeMode="savepoint")
    return obj


def base_manifest(name: str = "orders") -> dict[str, Any]:
    """What a GitOps tool applies: the job as its repository has it, none of our labels or fields."""
    obj = flink_deployment(name=name, labels={"app": name})
    obj["spec"]["job"]["state"] = "running"
    return obj


def assert_still_held(after: dict[str, Any], old: dict[str, Any]) -> None:
    job, annotations = after["spec"]["job"], after["metadata"]["annotations"]
    assert job["state"] == "suspended"
    assert annotations[HOLD] == old["metadata"]["annotations"][HOLD]
    assert annotations[DECISION] == "held"
    assert annotations[EPOCH] == "3"
    # the trigger labels are back: the next UPDATE reaches the webhook by them again
    assert after["metadata"]["labels"][FAILOVER] == "true"
    assert after["metadata"]["labels"][JOB_LABEL] == JOB_ID


def _edit(old: dict[str, Any], *, labels: tuple[str, ...] = (), annotations: tuple[str, ...] = ()) -> Any:
    new = copy.deepcopy(old)
    new["spec"]["job"]["state"] = "running"
    for key in labels:
        del new["metadata"]["labels"][key]
    for key in annotations:
        del new["metadata"]["annotations"][key]
    return new


def _restored_decision(old: dict[str, Any]) -> dict[str, Any]:
    new = _edit(old)
    new["metadata"]["annotations"][DECISION] = "restored"
    return new


def _lowered_epoch(old: dict[str, Any]) -> dict[str, Any]:
    new = _edit(old)
    new["metadata"]["annotations"][EPOCH] = "1"
    return new


def _other_path(old: dict[str, Any], labels: tuple[str, ...] = (FAILOVER, JOB_LABEL)) -> dict[str, Any]:
    new = _edit(old, labels=labels)
    new["spec"]["job"]["initialSavepointPath"] = "file:///elsewhere/savepoint-3c653d-000000000000"
    return new


def _unlabelled(edit: Any) -> Any:
    def both(old: dict[str, Any]) -> dict[str, Any]:
        new = edit(old)
        for key in (FAILOVER, JOB_LABEL):
            new["metadata"]["labels"].pop(key, None)
        return new

    return both


# Removing the hold or changing the restore decision alone was already kept held by the labels the
# edit left (those two guard against a regression; the chart's backstop refuses them where the webhook
# is not called: tests/chart/test_cel.py); with the labels dropped too they started the job.
EDITS = {
    "drop-failover-and-job-id-labels": lambda old: _edit(old, labels=(FAILOVER, JOB_LABEL)),
    "remove-hold-annotation": lambda old: _edit(old, annotations=(HOLD,)),
    "remove-hold-annotation-and-labels": _unlabelled(lambda old: _edit(old, annotations=(HOLD,))),
    "change-restore-decision": _restored_decision,
    "change-restore-decision-and-drop-labels": _unlabelled(_restored_decision),
    "lower-epoch": _lowered_epoch,
    "gitops-full-replace": lambda _old: base_manifest(),
    "drop-labels-and-set-another-path": _other_path,
    "set-another-path": lambda old: _other_path(old, ()),  # before: "set explicitly", admitted running
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_edit_of_a_held_restore_keeps_it_held(served: Served, edit: str) -> None:
    old = held(served.root)
    after, warnings = served.admit(EDITS[edit](old), old)
    assert_still_held(after, old)  # before: admitted running (or, lowered, judged under epoch 1)
    assert any("stays held suspended" in w for w in warnings), warnings
    # and again: the edited object, edited once more, is still held (a second sync, a second patch)
    again, _ = served.admit(EDITS[edit](after), after)
    assert_still_held(again, after)


def test_a_held_restore_whose_labels_are_already_gone_stays_held(served: Served) -> None:
    """Stored without its trigger labels (an edit the webhook did not see): the chart's held entry sends
    its UPDATEs by its hold (tests/chart/test_cel.py), and the webhook keeps it held by the old object."""
    old = held(served.root)
    for key in (FAILOVER, JOB_LABEL):
        del old["metadata"]["labels"][key]
    after, warnings = served.admit(base_manifest(), old)
    assert after["spec"]["job"]["state"] == "suspended"  # before: no failover label, admitted running
    assert after["metadata"]["annotations"][HOLD] == HOLD_TEXT
    assert any("stays held suspended" in w for w in warnings), warnings


def test_the_agents_release_still_starts_it(served: Served) -> None:
    old = held(served.root)
    release = copy.deepcopy(old)
    release["spec"]["job"]["state"] = "running"
    release["metadata"]["annotations"][f"{P}/released"] = "ack at 2026-12-05T00:00:00Z"
    del release["metadata"]["annotations"][HOLD]
    after, _ = served.admit(release, old, user=fakeapi.DEFAULT_USER)
    assert after["spec"]["job"]["state"] == "running"
    assert after["metadata"]["annotations"][DECISION] == "restored"
    assert after["metadata"]["annotations"][EPOCH] == "3"
    forged, _ = served.admit(release, old)  # the same markers from anyone else: held
    assert_still_held(forged, old)


def test_a_template_with_a_copied_epoch_fences_under_the_failover_count(served: Served) -> None:
    """member1 runs the job and heartbeats; it acked an old restore (epoch 1). The failover CREATE is
    the third (failover-count 3) and its template carries epoch 1 copied from an earlier object: before,
    the fence was written at epoch 1, member1's old ack counted, and the job started beside it."""
    name = "payments"
    obj = flink_deployment(
        name=name,
        labels={FAILOVER: "true", JOB_LABEL: JOB_ID},
        annotations={f"{P}/failover-count": "3", EPOCH: "1"},
    )
    policy = RestorePolicy(default_checkpoint_dir=str(served.root))
    folder = directories.ownership_folder(FlinkResource.from_object(obj), policy)
    assert folder is not None
    store = FencingStore(CheckpointStorage(), "member1")
    workload = directories.workload_of(FlinkResource.from_object(obj))
    store.ack(folder, 1, "stopped for epoch 1", 10)  # then restored at 2, it runs and heartbeats
    store.beat(folder, heartbeat_body(workload, "member1", 2, JOB_ID, "2026-12-05T00:00:00Z"), 10)

    admitted, _ = served.admit(obj)
    annotations = admitted["metadata"]["annotations"]
    assert admitted["spec"]["job"]["state"] == "suspended"  # before: started, released by the old ack
    assert annotations[EPOCH] == "3"
    assert "waiting for member1" in annotations[HOLD], annotations
    fences = sorted(p.name for p in Path(folder.path).iterdir() if p.name.startswith("fence-"))
    assert fences == ["fence-000000000003-member2.json"], fences


def _blue_green(root: Path, hold: str) -> dict[str, Any]:
    template = held(root, "checkout")
    annotations = dict(template["metadata"]["annotations"])
    if hold:
        annotations[HOLD] = hold
    else:
        del annotations[HOLD]
        template["spec"]["job"]["state"] = "running"
    return {
        "apiVersion": "flink.apache.org/v1beta1",
        "kind": "FlinkBlueGreenDeployment",
        "metadata": {**template["metadata"], "annotations": annotations},
        "spec": {"template": {"spec": template["spec"]}},
    }


def _child(parent: dict[str, Any], state: str) -> dict[str, Any]:
    child = flink_deployment(name=f"{parent['metadata']['name']}-blue")
    child["metadata"]["labels"] = {"DeploymentType": "BLUE"}  # none of the parent's (FLINK-41403)
    child["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "flink.apache.org/v1beta1",
            "kind": "FlinkBlueGreenDeployment",
            "name": parent["metadata"]["name"],
            "uid": "0f1e2d3c-0000-4000-8000-000000000001",
        }
    ]
    child["spec"] = copy.deepcopy(parent["spec"]["template"]["spec"])
    child["spec"]["job"]["state"] = state
    return child


def test_a_held_blue_green_parent_holds_its_child(served: Served) -> None:
    parent = _blue_green(served.root, HOLD_TEXT)
    served.member.server.stores[BG].upsert(parent)
    suspended = _child(parent, "suspended")
    started = _child(parent, "running")

    after, warnings = served.admit(started, suspended)
    assert after["spec"]["job"]["state"] == "suspended"  # before: started by anyone who may patch it
    assert any("checkout is held" in w and "set by" not in w for w in warnings), warnings
    assert wait_for(
        lambda: any(
            e["reason"] == "ReleaseIgnored" and "checkout is held" in e.get("note", "")
            for e in served.member.events
        )
    ), served.member.events

    by_agent, _ = served.admit(started, suspended, user=fakeapi.DEFAULT_USER)
    assert by_agent["spec"]["job"]["state"] == "running"  # the agent's release of the child


def test_a_child_of_a_parent_that_is_not_held_starts(served: Served) -> None:
    parent = _blue_green(served.root, "")
    parent["metadata"]["name"] = "invoices"
    served.member.server.stores[BG].upsert(parent)
    after, warnings = served.admit(_child(parent, "running"), _child(parent, "suspended"))
    assert after["spec"]["job"]["state"] == "running" and not warnings


def test_the_agent_judges_a_hold_under_its_own_fence_not_the_annotation(tmp_path: Path) -> None:
    """The return case: member2 restored at epoch 3 (its fence), member1 runs again after acking epoch 1
    and heartbeats now. An object whose epoch annotation says 1 (lowered where no webhook kept it) was
    released by that old ack; judged under member2's own fence it waits for member1."""
    from datetime import UTC, datetime, timedelta

    from webhook.fencing.decide import Times, decide
    from webhook.fencing.effects import Action
    from webhook.fencing.protocol import Ack, Fence, Heartbeat, Ownership
    from webhook.policy.restore import FencingPolicy

    obj = held(tmp_path)
    obj["metadata"]["annotations"][EPOCH] = "1"
    policy = RestorePolicy(default_checkpoint_dir=str(tmp_path), fencing=FencingPolicy(lease_seconds=300))
    copy_ = copies.read_copy(obj, policy)
    assert copy_.state is copies.CopyState.HELD and copy_.epoch == 1
    now = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)
    records = Ownership(
        heartbeats=(Heartbeat("member1", now - timedelta(seconds=5)),),
        fences=(
            Fence("member2", 1, now - timedelta(hours=2)),
            Fence("member2", 3, now - timedelta(minutes=1)),
        ),
        acks=(Ack("member1", 1, now - timedelta(hours=1)),),
    )
    plan = decide("member2", copy_, records, Times(mono=0.0, renewed=0.0, storage_now=now), policy.fencing)
    assert plan.action is Action.HELD, plan  # before: released, cause ack
    assert "epoch 3: waiting for member1" in plan.detail


def test_a_copied_epoch_on_a_copy_this_cluster_never_restored_does_not_shield_it(tmp_path: Path) -> None:
    """An original copy (never failed over, no restore decision) whose manifest carries ``epoch: 5``
    copied from elsewhere: member2's restore fenced at epoch 1, so it is stale and stops. Before, its
    annotation made it newer than every fence up to 5, and both ran."""
    from datetime import UTC, datetime

    from webhook.fencing.decide import Times, decide
    from webhook.fencing.effects import Action
    from webhook.fencing.protocol import Fence, Ownership

    obj = flink_deployment(annotations={EPOCH: "5"})
    obj["spec"]["job"]["state"] = "running"
    obj["status"] = {"jobStatus": {"jobId": JOB_ID, "state": "RUNNING"}}
    policy = RestorePolicy(default_checkpoint_dir=str(tmp_path))
    copy_ = copies.read_copy(obj, policy)
    assert copy_.state is copies.CopyState.RUNNING and copy_.epoch == 0
    now = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)
    plan = decide(
        "member1",
        copy_,
        Ownership(fences=(Fence("member2", 1, now),)),
        Times(mono=0.0, renewed=0.0, storage_now=now),
        policy.fencing,
    )
    assert plan.action is Action.STOPPING, plan


# --- issue 45: what the restore recorded is what later decisions read --------------------------------
KARMADA = "system:serviceaccount:karmada-cluster:karmada-impersonator"  # who creates the objects


def _refused(served: Served, new: dict[str, Any], old: dict[str, Any], user: str = ALICE) -> str:
    answer = served.server.client().admit(review(new, operation="UPDATE", old=old, user=user))
    response = answer["response"]
    assert response["allowed"] is False, response
    return str(response["status"]["message"])


def _moved_dir(old: dict[str, Any]) -> dict[str, Any]:
    new = _edit(old)
    new["spec"]["flinkConfiguration"]["execution.checkpointing.dir"] = "file:///elsewhere/checkpoints"
    return new


def _relabelled(old: dict[str, Any]) -> dict[str, Any]:
    new = copy.deepcopy(old)
    new["metadata"]["labels"][JOB_LABEL] = "b" * 32
    return new


def _without_job(old: dict[str, Any]) -> dict[str, Any]:
    new = copy.deepcopy(old)
    del new["spec"]["job"]
    return new


MOVES = {
    # before: the agent read the records in the new folder and released with no-heartbeat
    "checkpoint-dir": (_moved_dir, "checkpoint directory"),
    # before: the new value was kept and the release resolved under it
    "job-id-label": (_relabelled, f"label {JOB_LABEL}"),
    # before: skipped as a session cluster, then put back running and admitted running
    "spec-job-removed": (_without_job, "removes spec.job"),
}


@pytest.mark.parametrize("move", sorted(MOVES))
def test_an_edit_that_moves_a_held_copys_state_or_owner_is_refused(served: Served, move: str) -> None:
    old = held(served.root)
    edit, named = MOVES[move]
    message = _refused(served, edit(old), old)
    assert named in message, message
    # it says how to get out: put it back, release the hold, or abandon the restore
    assert "Put it back" in message and "flink-failover release analytics/orders" in message, message
    assert "delete the object" in message, message
    # the agent itself is never refused (it changes none of these; its release goes through)
    after, _ = served.admit(_relabelled(old), old, user=fakeapi.DEFAULT_USER)
    assert after["spec"]["job"]["state"] == "suspended"


def test_the_record_is_the_old_objects_whatever_the_request_says(served: Served) -> None:
    old = held(served.root)
    record = '{"jobId":"' + JOB_ID + '","kind":"FlinkDeployment","v":1}'
    old["metadata"]["annotations"][f"{P}/restore-record"] = record
    forged = _edit(old)
    forged["metadata"]["annotations"][f"{P}/restore-record"] = record.replace(JOB_ID, "b" * 32)
    after, _ = served.admit(forged, old)
    assert after["metadata"]["annotations"][f"{P}/restore-record"] == record
    removed = _edit(old, annotations=(f"{P}/restore-record",))
    again, _ = served.admit(removed, old)
    assert again["metadata"]["annotations"][f"{P}/restore-record"] == record


def _heartbeat_of_member1(served: Served, obj: dict[str, Any]) -> None:
    policy = RestorePolicy(default_checkpoint_dir=str(served.root))
    folder = directories.ownership_folder(FlinkResource.from_object(obj), policy)
    assert folder is not None
    workload = directories.workload_of(FlinkResource.from_object(obj))
    FencingStore(CheckpointStorage(), "member1").beat(
        folder, heartbeat_body(workload, "member1", 0, JOB_ID, "2026-12-05T00:00:00Z"), 10
    )


def test_a_release_the_template_carries_is_never_a_request(served: Served) -> None:
    """Before: the CREATE emptied it, Karmada's next re-apply brought it back and it was recorded as a
    release asked by Karmada's identity: the agent released while member1's heartbeat was seconds old."""
    name = "ledger"
    obj = flink_deployment(
        name=name,
        labels={FAILOVER: "true", JOB_LABEL: JOB_ID},
        annotations={f"{P}/failover-count": "1", f"{P}/release": "true"},
    )
    obj["spec"]["job"]["state"] = "running"
    _heartbeat_of_member1(served, obj)
    created, _ = served.admit(obj, user=KARMADA)
    annotations = created["metadata"]["annotations"]
    assert created["spec"]["job"]["state"] == "suspended" and annotations[HOLD]
    assert annotations[f"{P}/release"] == ""  # emptied at CREATE
    # Karmada re-applies its template: release "true" again, from the identity that created it
    reapplied = copy.deepcopy(obj)
    after, warnings = served.admit(reapplied, created, user=KARMADA)
    assert after["spec"]["job"]["state"] == "suspended"
    assert not after["metadata"]["annotations"].get(f"{P}/release-requested-by"), after["metadata"]
    assert any("template" in w and "ignored" in w for w in warnings), warnings
    assert wait_for(
        lambda: any(
            e["reason"] == "ReleaseIgnored" and "template" in e.get("note", "") for e in served.member.events
        )
    ), served.member.events
    # a person asks after the hold: recorded, naming them
    asked = copy.deepcopy(after)
    asked["metadata"]["annotations"][f"{P}/release"] = "true"
    by_alice, _ = served.admit(asked, after, user=ALICE)
    assert by_alice["metadata"]["annotations"][f"{P}/release-requested-by"] == ALICE


def test_a_job_that_declares_no_state_is_not_held(served: Served) -> None:
    """Before: every stateless job without a checkpoint directory (19 of the operator's 25 example jobs)
    was suspended at CREATE, and every later UPDATE put state: suspended back."""
    obj = flink_deployment(
        name="wordcount", labels={FAILOVER: "true"}, annotations={f"{P}/failover-count": "1"}
    )
    obj["spec"]["job"].update(state="running", upgradeMode="stateless")
    answer = served.server.client().admit(review(obj, user=KARMADA))["response"]
    # the served policy has a defaultCheckpointDir: this job keeps its state there, so it is restored
    assert answer["allowed"] is True
    from webhook.member.handler import MemberHandler

    handler = MemberHandler.from_policy(RestorePolicy(), daemon_lookups=True)
    try:
        from webhook.common.admission import parse_review

        response = handler(parse_review(review(obj))).to_review()["response"]
    finally:
        handler.close()
    after = apply(obj, decode_patch(response))
    assert after["spec"]["job"]["state"] == "running", after
    assert after["metadata"]["annotations"][DECISION] == "stateless"
    assert any("declares no state" in w for w in response.get("warnings", [])), response


def _suspended_for_want_of_state(name: str) -> dict[str, Any]:
    obj = flink_deployment(
        name=name,
        labels={FAILOVER: "true", JOB_LABEL: "c" * 32},
        annotations={f"{P}/failover-count": "1", DECISION: "suspended", f"{P}/restored-job-id": "c" * 32},
    )
    obj["spec"]["job"].update(state="suspended", upgradeMode="savepoint")
    return obj


def test_a_job_held_for_want_of_state_starts_the_ways_its_warning_says(served: Served) -> None:
    """Before: 'set spec.job.initialSavepointPath or state: running by hand' — setting running was
    reverted, and so was release: "true"; a path set by hand started it, and the next re-applied
    template (without the path) suspended it again."""
    old = _suspended_for_want_of_state("audit")
    reapplied = copy.deepcopy(old)
    reapplied["spec"]["job"]["state"] = "running"
    kept, warnings = served.admit(reapplied, old, user=KARMADA)
    assert kept["spec"]["job"]["state"] == "suspended"
    assert any("flink-failover release" in w and "initialSavepointPath" in w for w in warnings), warnings

    asked = copy.deepcopy(reapplied)
    asked["metadata"]["annotations"][f"{P}/release"] = "true"
    started, _ = served.admit(asked, old, user=ALICE)
    assert started["spec"]["job"]["state"] == "running"
    annotations = started["metadata"]["annotations"]
    assert annotations[DECISION] == "stateless" and ALICE in annotations[f"{P}/released"]
    assert wait_for(
        lambda: any(
            e["reason"] == "StartedByHand" and ALICE in e.get("note", "") for e in served.member.events
        )
    ), served.member.events
    after_sync, _ = served.admit(reapplied, started, user=KARMADA)  # Karmada re-applies: stays running
    assert after_sync["spec"]["job"]["state"] == "running"

    path = str(served.root / JOB_ID / "chk-2")
    given = copy.deepcopy(reapplied)
    given["spec"]["job"]["initialSavepointPath"] = path
    restored, _ = served.admit(given, old, user=ALICE)
    assert restored["spec"]["job"]["state"] == "running"
    assert restored["metadata"]["annotations"][DECISION] == "restored"
    assert restored["metadata"]["annotations"][f"{P}/restored-from"] == path
    synced, _ = served.admit(reapplied, restored, user=KARMADA)  # the template has no path: kept
    assert synced["spec"]["job"]["initialSavepointPath"] == path
    assert synced["spec"]["job"]["state"] == "running"


def test_a_held_parents_child_may_not_leave_it(served: Served) -> None:
    """Before: removing the child's ownerReferences (or pointing them at a parent that does not exist)
    made it a child of nobody, and it started while its parent was held."""
    parent = _blue_green(served.root, HOLD_TEXT)
    parent["metadata"]["name"] = "refunds"
    served.member.server.stores[BG].upsert(parent)
    suspended = _child(parent, "suspended")
    orphan = _child(parent, "running")
    del orphan["metadata"]["ownerReferences"]
    message = _refused(served, orphan, suspended)
    assert "ownerReferences" in message and "refunds" in message, message
    elsewhere = _child(parent, "running")
    elsewhere["metadata"]["ownerReferences"][0]["name"] = "no-such-parent"
    assert "refunds" in _refused(served, elsewhere, suspended)
    still = _child(parent, "suspended")
    del still["metadata"]["ownerReferences"]
    assert "ownerReferences" in _refused(served, still, suspended)
