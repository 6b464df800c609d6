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
from webhook.fencing import copies
from webhook.fencing.records import FencingStore, heartbeat_body
from webhook.restore.policy import RestorePolicy
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
    folder = copies.ownership_folder(FlinkResource.from_object(obj), policy)
    assert folder is not None
    store = FencingStore(CheckpointStorage(), "member1")
    workload = copies.workload_of(FlinkResource.from_object(obj))
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

    from webhook.fencing.decide import Action, Times, decide
    from webhook.fencing.protocol import Ack, Fence, Heartbeat, Ownership
    from webhook.restore.policy import FencingPolicy

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
    plan = decide("member2", copy_, records, Times(0.0, 0.0, now), policy.fencing)
    assert plan.action is Action.HELD, plan  # before: released, cause ack
    assert "epoch 3: waiting for member1" in plan.detail


def test_a_copied_epoch_on_a_copy_this_cluster_never_restored_does_not_shield_it(tmp_path: Path) -> None:
    """An original copy (never failed over, no restore decision) whose manifest carries ``epoch: 5``
    copied from elsewhere: member2's restore fenced at epoch 1, so it is stale and stops. Before, its
    annotation made it newer than every fence up to 5, and both ran."""
    from datetime import UTC, datetime

    from webhook.fencing.decide import Action, Times, decide
    from webhook.fencing.protocol import Fence, Ownership

    obj = flink_deployment(annotations={EPOCH: "5"})
    obj["spec"]["job"]["state"] = "running"
    obj["status"] = {"jobStatus": {"jobId": JOB_ID, "state": "RUNNING"}}
    policy = RestorePolicy(default_checkpoint_dir=str(tmp_path))
    copy_ = copies.read_copy(obj, policy)
    assert copy_.state is copies.CopyState.RUNNING and copy_.epoch == 0
    now = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)
    plan = decide(
        "member1", copy_, Ownership(fences=(Fence("member2", 1, now),)), Times(0.0, 0.0, now), policy.fencing
    )
    assert plan.action is Action.STOPPING, plan
