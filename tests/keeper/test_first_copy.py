"""The lease keeper in a job's first copy, added by the served member webhook (gunicorn, TLS, ``--cluster``
with its agent polling a member cluster's API; the chart's first-copy entry sends these): the copy no
failover made, which must stop when its cluster's side is gone, gets the keeper at epoch 0 with its own
spec's checkpoint directory (the lease the fencing agent keeps for it), and nothing else of it changes."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.keeper.test_injected import EPOCH, IMAGE, P, Served, _env, _keeper, _serve, failover
from tests.support.crds import crd_validator
from tests.support.objects import decode_patch, flink_deployment
from webhook.common.paths import StoragePath
from webhook.fencing.copies import CopyState, read_copy
from webhook.fencing.layout import Workload
from webhook.keeper.inject import CONTAINER
from webhook.policy.restore import RestorePolicy


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with _serve(tmp_path_factory.mktemp("keeper-first-copy"), "v1.31.2") as served:
        yield served


def first(served: Served, name: str, namespace: str = "analytics", folder: str = "first") -> dict[str, Any]:
    """A job as its user writes it on its first cluster: none of our labels, its own checkpoint directory."""
    return flink_deployment(
        name=name,
        namespace=namespace,
        labels={"app": name},
        checkpoint_dir=f"file://{served.root}/{folder}",
    )


def test_a_first_copy_gets_the_keeper_at_epoch_0_from_its_spec_and_nothing_else(
    served: Served, validate: Any
) -> None:
    obj = first(served, "orders-first")
    response = served.answer(obj)
    assert response["allowed"] is True, response
    ops = decode_patch(response)
    # the JobManager's pod template and the heartbeat keys only: no label, no decision annotation
    assert {op["path"] for op in ops} <= {
        "/spec/jobManager/podTemplate",
        "/spec/flinkConfiguration/heartbeat.timeout",
    }
    after, _ = served.admit(obj)
    assert after["metadata"] == obj["metadata"]
    assert [f"{list(e.path)}: {e.message}" for e in validate.iter_errors(after)] == []
    keeper = _keeper(after)
    env = _env(keeper)
    assert keeper["image"] == IMAGE and keeper["restartPolicy"] == "Always"
    assert env["FLINK_FAILOVER_KEEPER_EPOCH"] == "0"  # no fence: its own newest fence in a listing wins
    assert env["FLINK_FAILOVER_KEEPER_CHECKPOINT_DIR"] == f"file://{served.root}/first"
    assert env["FLINK_FAILOVER_KEEPER_WORKLOAD"] == "FlinkDeployment/analytics/orders-first"
    (event,) = served.events("orders-first", "KeeperInjected")
    assert event["type"] == "Normal" and "epoch 0" in event["note"]
    # the fencing agent reads the same lease of it: a running copy at epoch 0, records in that directory
    seen = read_copy(after, RestorePolicy())
    assert seen.state is CopyState.RUNNING and seen.epoch == 0
    workload = Workload("FlinkDeployment", "analytics", "orders-first")
    assert seen.folder == workload.folder(StoragePath.parse(env["FLINK_FAILOVER_KEEPER_CHECKPOINT_DIR"]))


def test_karmadas_reapply_puts_it_back_and_a_moved_directory_moves_the_keeper(served: Served) -> None:
    created, _ = served.admit(first(served, "reapplied-first"))
    again, warnings = served.admit(first(served, "reapplied-first"), created)  # Karmada's template
    assert again["spec"]["jobManager"] == created["spec"]["jobManager"]
    assert any(w.startswith("lease keeper put back") and "from its spec" in w for w in warnings), warnings
    response = served.answer(copy.deepcopy(again), again)  # an UPDATE that keeps it changes nothing of it
    assert response["allowed"] is True
    assert not [op for op in decode_patch(response) if op["path"].startswith("/spec")]
    # the directory moves: the pod template changes (the JobManager's pod rolls) and the keeper follows,
    # as the agent follows the spec of a copy with no restore record
    moved, _ = served.admit(first(served, "reapplied-first", folder="moved"), again)
    assert _env(_keeper(moved))["FLINK_FAILOVER_KEEPER_CHECKPOINT_DIR"] == f"file://{served.root}/moved"
    assert read_copy(moved, RestorePolicy()).folder == Workload(
        "FlinkDeployment", "analytics", "reapplied-first"
    ).folder(StoragePath.parse(f"file://{served.root}/moved"))


def test_a_job_running_before_the_keeper_gets_it_at_its_next_write_and_is_never_wedged(
    served: Served,
) -> None:
    """A job created before this webhook added keepers gets one at its next write (saying so); one whose
    pod template keeps the keeper out is admitted without it, with a warning: refusing every write of
    it would wedge its operator. A new job with such a template is refused, as a restored one is."""
    stored = first(served, "older")
    after, warnings = served.admit(copy.deepcopy(stored), stored)
    assert _env(_keeper(after))["FLINK_FAILOVER_KEEPER_EPOCH"] == "0"
    assert any(w.startswith("lease keeper added to analytics/older") for w in warnings), warnings
    served.events("older", "KeeperInjected")
    blocked = first(served, "host-pid")
    blocked["spec"]["jobManager"]["podTemplate"] = {"spec": {"hostPID": True}}
    after, warnings = served.admit(copy.deepcopy(blocked), blocked)
    assert CONTAINER not in str(after["spec"]["jobManager"])
    assert any("hostPID is true" in w for w in warnings), warnings
    response = served.answer(first(served, "host-pid-new") | {"spec": blocked["spec"]})
    assert response["allowed"] is False and response["status"]["code"] == 403
    assert "hostPID is true" in response["status"]["message"]


def test_what_has_no_lease_or_is_not_a_first_copy_is_left_as_it_is(served: Served) -> None:
    # the policy's switch: left out, saying what that costs
    off, _ = served.admit(first(served, "nightly", namespace="batch"))
    assert "podTemplate" not in off["spec"]["jobManager"]
    (event,) = served.events("nightly", "KeeperOff")
    assert "stopped only by this cluster's fencing agent" in event["note"]
    # a session cluster runs no job of its own: it gets the keeper of its fenced session jobs instead
    # (docs/keeper.md "FlinkSessionJobs"; tests/keeper/test_session_inject.py)
    session = first(served, "sessions")
    del session["spec"]["job"]
    guarded, _ = served.admit(session)
    assert _env(_keeper(guarded))["FLINK_FAILOVER_KEEPER_MODE"] == "session"
    # a stale copy the agent stopped stays as it is (its own entry keeps it stopped)
    stale = first(served, "stale")
    stale["metadata"]["labels"][f"{P}/fenced"] = "4"
    stale["spec"]["job"]["state"] = "suspended"
    kept, _ = served.admit(copy.deepcopy(stale), stale)
    assert "podTemplate" not in kept["spec"]["jobManager"]
    # a blue/green child: its parent's template carries the keeper
    child = first(served, "bg-blue")
    child["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "flink.apache.org/v1beta1",
            "kind": "FlinkBlueGreenDeployment",
            "name": "bg",
            "uid": "1",
        }
    ]
    assert decode_patch(served.answer(copy.deepcopy(child), child)) == []


def test_a_first_blue_green_deployment_gets_it_in_its_template(served: Served, shared_data: Path) -> None:
    crds = shared_data / "crds" / "flink-operator-1.15.0"
    (obj, *_rest) = yaml.safe_load_all((crds / "example-bluegreen-laststate.yaml").read_text())
    obj["metadata"] = {"name": "bg-first", "namespace": "analytics"}
    conf = obj["spec"]["template"]["spec"]["flinkConfiguration"]
    conf["state.checkpoints.dir"] = f"file://{served.root}/bg"
    after, _ = served.admit(copy.deepcopy(obj))
    validate = crd_validator(crds / "flinkbluegreendeployments.flink.apache.org-v1.yml", "v1beta1")
    assert [f"{list(e.path)}: {e.message}" for e in validate.iter_errors(after)] == []
    assert after["metadata"] == obj["metadata"]
    pod = after["spec"]["template"]["spec"]["jobManager"]["podTemplate"]["spec"]
    (keeper,) = [c for c in pod["initContainers"] if c["name"] == CONTAINER]
    env = _env(keeper)
    assert env["FLINK_FAILOVER_KEEPER_WORKLOAD"] == "FlinkBlueGreenDeployment/analytics/bg-first"
    assert env["FLINK_FAILOVER_KEEPER_EPOCH"] == "0"
    assert env["FLINK_FAILOVER_KEEPER_CHECKPOINT_DIR"] == f"file://{served.root}/bg"
    again, _ = served.admit(copy.deepcopy(obj), after)  # Karmada re-applies: the template as it was
    assert again["spec"]["template"] == after["spec"]["template"]


def test_kubernetes_1_28_with_native_sidecars_declared_gets_the_keeper(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """serve --native-sidecars on (chart member.keeper.nativeSidecars): a 1.28 cluster whose platform
    enabled SidecarContainers runs the keeper, whatever /version says (the end-to-end tier's 1.28.4)."""
    with _serve(tmp_path_factory.mktemp("keeper-1-28-on"), "v1.28.4", sidecars="on") as old:
        after, _ = old.admit(first(old, "gated"))
        assert _env(_keeper(after))["FLINK_FAILOVER_KEEPER_EPOCH"] == "0"


def test_a_restored_copy_whose_trigger_labels_an_edit_drops_keeps_its_restores_keeper(served: Served) -> None:
    """A GitOps tool applying the base manifest drops the trigger labels (and the sidecar): the trigger
    entries still send it by its old labels, and the copy it becomes keeps the keeper of its restore (the
    epoch and record on the object, as the agent reads it), as every later write of it does."""
    created, _ = served.admit(failover("relabelled"))
    assert created["metadata"]["annotations"][EPOCH] == "3"
    edited = copy.deepcopy(created)
    edited["metadata"]["labels"] = {"app": "relabelled"}
    del edited["spec"]["jobManager"]["podTemplate"]
    after, _ = served.admit(edited, created)
    assert after["spec"]["jobManager"] == created["spec"]["jobManager"]
    assert _env(_keeper(after))["FLINK_FAILOVER_KEEPER_EPOCH"] == "3"
    later, _ = served.admit(copy.deepcopy(edited), after)  # no label on either version: the first-copy path
    assert later["spec"]["jobManager"] == created["spec"]["jobManager"]
