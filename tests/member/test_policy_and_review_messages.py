"""Issue 24 items 4, 8 and 9: what a platform engineer evaluating the product met, each with the test
that failed before the change."""

from __future__ import annotations

import copy
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tests.samples.make_storage import RESTORABLE, make
from tests.support.objects import JOB_ID, flink_deployment, review
from tests.support.server import executable
from webhook.common.admission import parse_review
from webhook.member.handler import MemberHandler
from webhook.policy.restore import PolicyError, RestorePolicy, UpgradeModePolicy, policy_from_dict

SAMPLES = REPO / "tests" / "samples"
HOLD = "flink-failover.io/hold"


@pytest.fixture(scope="module", autouse=True)
def sample_storage() -> None:
    make()


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "FLINK_FAILOVER_POLICY"}
    return subprocess.run(
        [executable(), "review", *args], capture_output=True, text=True, input=stdin, cwd=REPO, env=environ
    )


def answer(policy: RestorePolicy, body: dict[str, Any]) -> dict[str, Any]:
    handler = MemberHandler.from_policy(policy)
    try:
        return handler(parse_review(body)).to_review()["response"]
    finally:
        handler.close()


def refused(doc: dict[str, Any]) -> PolicyError:
    with pytest.raises(PolicyError) as caught:
        policy_from_dict(doc)
    return caught.value


# --- 8: the policy ---------------------------------------------------------------------------------------


def test_every_bad_fencing_field_is_named_at_once() -> None:
    """Before: four bad fencing fields, one message (the first)."""
    error = refused(
        {"fencing": {"leaseSeconds": "30", "pollSeconds": 0, "onStorageError": "wait", "enabeld": True}}
    )
    fields = {e.field for e in error.errors}
    assert fields == {
        "fencing.leaseSeconds",
        "fencing.pollSeconds",
        "fencing.onStorageError",
        "fencing.enabeld",
    }, str(error)
    for field in fields:
        assert field in str(error)
    assert "fencing.enabeld: unknown field (did you mean enabled?)" in str(error)


def test_fencing_and_top_level_errors_come_together() -> None:
    error = refused({"prefer": "oldest", "fencing": {"pollSeconds": 0}})
    assert [e.field for e in error.errors] == ["prefer", "fencing.pollSeconds"]


def test_a_top_level_typo_gets_a_did_you_mean() -> None:
    assert "onMissingStat: unknown field (did you mean onMissingState?)" in str(
        refused({"onMissingStat": "deny"})
    )
    assert "nothingLikeIt: unknown field" in str(refused({"nothingLikeIt": 1}))
    assert "did you mean" not in str(refused({"nothingLikeIt": 1}))


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"s3": {"anon": "false"}}, "s3.anon: 'false' is a string; the s3 backend takes true or false"),
        ({"s3": {"use_ssl": "no"}}, "s3.use_ssl"),
        ({"s3": {"endpoint_url": 9000}}, "s3.endpoint_url"),
        ({"s3": {"max_concurrency": "10"}}, "s3.max_concurrency"),
        (
            {"gs": {"requester_pays": 1}},
            "gs.requester_pays: 1 is an integer; the gs backend takes true or false or a string",
        ),
        ({"file": {"auto_mkdir": 1}}, "file.auto_mkdir"),
        ({"s3": {"client_kwargs": "region_name=eu"}}, "s3.client_kwargs"),
    ],
)
def test_storage_options_are_typed(options: dict[str, Any], named: str) -> None:
    """Before: anon: "false" (a string, which s3fs takes as true) passed."""
    assert named in str(refused({"storageOptions": options}))


def test_well_typed_storage_options_load() -> None:
    policy = policy_from_dict(
        {
            "storageOptions": {
                "s3": {
                    "anon": False,
                    "endpoint_url": "http://minio:9000",
                    "client_kwargs": {"region_name": "eu-west-1"},
                    "max_concurrency": 4,
                    "key": None,  # null: the backend's default
                },
                "file": {"auto_mkdir": True},
            }
        }
    )
    assert policy.storage_options["s3"]["anon"] is False


def test_job_id_labels_without_the_control_planes_label_are_warned() -> None:
    from webhook.policy.load import policy_notes

    own = policy_from_dict({"jobIdLabels": ["application.karmada.io/failover-jobid"]})
    (note,) = policy_notes(own)
    assert "flink-failover.io/job-id" in note and "control plane" in note
    assert policy_notes(RestorePolicy()) == ()
    custom = policy_from_dict(
        {"prefix": "failover.example.com", "jobIdLabels": ["failover.example.com/job-id"]}
    )
    assert policy_notes(custom) == ()


def test_no_job_id_label_lists_the_labels_searched(tmp_path: Path) -> None:
    policy = RestorePolicy(default_checkpoint_dir=str(tmp_path))
    obj = flink_deployment(labels={"flink-failover.io/failover": "true", "example.com/job": JOB_ID})
    resp = answer(policy, review(obj))
    warnings = " ".join(resp.get("warnings", []))
    assert (
        "no jobId label (searched: flink-failover.io/job-id, application.karmada.io/failover-jobid"
        in warnings
    )


def test_last_state_not_applied_says_why(tmp_path: Path) -> None:
    """Before: upgradeMode: last-state silently left out without HA on an operator older than 1.10."""
    job_dir = tmp_path / JOB_ID / "chk-3"
    job_dir.mkdir(parents=True)
    from tests.support.objects import make_checkpoints

    make_checkpoints(tmp_path / JOB_ID, [3])
    policy = RestorePolicy(upgrade_mode=UpgradeModePolicy.LAST_STATE)
    obj = flink_deployment(
        checkpoint_dir=str(tmp_path),
        labels={"flink-failover.io/failover": "true", "flink-failover.io/job-id": JOB_ID},
    )
    resp = answer(policy, review(obj))
    warnings = " ".join(resp.get("warnings", []))
    assert "upgradeMode last-state not set" in warnings and "operatorVersion" in warnings, warnings
    assert "high-availability" in warnings


# --- 4: session clusters not read -------------------------------------------------------------------------


def test_a_session_job_without_a_readable_session_cluster_says_so() -> None:
    """Before: "no checkpoint directory configured (flinkConfiguration or policy defaultCheckpointDir)"."""
    obj = flink_deployment(
        kind="FlinkSessionJob",
        labels={"flink-failover.io/failover": "true", "flink-failover.io/job-id": JOB_ID},
    )
    resp = answer(RestorePolicy(), review(obj))
    warnings = " ".join(resp.get("warnings", []))
    assert "its session cluster FlinkDeployment analytics/session" in warnings
    assert "session cluster FlinkDeployment analytics/session not read" in warnings
    assert "member.readSessionClusters" in warnings


# --- 9: review ----------------------------------------------------------------------------------------------


def running(name: str, namespace: str = "analytics", job_id: str = RESTORABLE) -> dict[str, Any]:
    obj: dict[str, Any] = json.loads((SAMPLES / "failover-create.json").read_text())["request"]["object"]
    obj = copy.deepcopy(obj)
    obj["metadata"] = {"name": name, "namespace": namespace, "labels": {"app": name}}
    obj["status"] = {"jobStatus": {"jobId": job_id, "state": "RUNNING"}}
    return obj


def test_a_kubectl_list_is_reviewed_item_by_item(tmp_path: Path) -> None:
    """Before: `kubectl get flinkdeployments -o yaml` was skipped as "core/List"."""
    path = tmp_path / "list.yaml"
    listed = {"apiVersion": "v1", "kind": "List", "items": [running("orders"), running("payments")]}
    path.write_text(yaml.safe_dump(listed))
    result = run(str(path), "--as-failover", "--print-object", "-o", "yaml")
    assert result.returncode == 0, result.stderr
    docs = list(yaml.safe_load_all(result.stdout))
    assert [d["metadata"]["name"] for d in docs] == ["orders", "payments"]
    assert all(d["spec"]["job"]["initialSavepointPath"].endswith(f"{RESTORABLE}/chk-8") for d in docs)
    assert "core/List" not in result.stderr and "List" not in result.stderr


def test_one_document_that_never_ran_does_not_end_the_review(tmp_path: Path) -> None:
    """Before: exit 2 and no answer for the others."""
    fresh = running("fresh")
    del fresh["status"]
    path = tmp_path / "three.yaml"
    path.write_text(yaml.safe_dump_all([running("orders"), fresh, running("payments")]))
    result = run(str(path), "--as-failover", "--print-object", "-o", "yaml")
    assert result.returncode == 2
    assert "[2] cannot review as a failover: FlinkDeployment analytics/fresh" in result.stderr
    docs = list(yaml.safe_load_all(result.stdout))
    assert [d["metadata"]["name"] for d in docs] == ["orders", "payments"]
    assert "# [1] FlinkDeployment analytics/orders" in result.stdout
    assert "# [3] FlinkDeployment analytics/payments" in result.stdout


def test_two_objects_of_the_same_name_are_headed_apart(tmp_path: Path) -> None:
    path = tmp_path / "twice.yaml"
    path.write_text(yaml.safe_dump_all([running("orders"), running("orders")]))
    result = run(str(path), "--as-failover", "--print-object", "-o", "yaml")
    assert result.returncode == 0, result.stderr
    heads = [line for line in result.stdout.splitlines() if line.startswith("# ")]
    assert heads == ["# [1] FlinkDeployment analytics/orders", "# [2] FlinkDeployment analytics/orders"]


def test_a_carried_over_hold_is_told(tmp_path: Path) -> None:
    """Before: an UPDATE that kept a fencing hold printed nothing."""
    restored = json.loads(run(str(SAMPLES / "failover-create.json"), "--print-object").stdout)
    held = copy.deepcopy(restored)
    held["spec"]["job"]["state"] = "suspended"
    held["metadata"]["annotations"][HOLD] = "waiting for member1 to stop (fence epoch 1)"
    template = json.loads((SAMPLES / "failover-create.json").read_text())["request"]["object"]
    template["spec"]["job"]["state"] = "running"
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps(held))
    new.write_text(json.dumps(template))
    result = run(str(new), "--old", str(old), "--print-object")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["spec"]["job"]["state"] == "suspended"
    assert ": carried" in result.stderr
    assert (
        "job stays held suspended (carried over from the previous object): waiting for member1"
        in result.stderr
    )


def test_review_tells_the_policy_notes(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("jobIdLabels: [application.karmada.io/failover-jobid]\n")
    result = run(str(SAMPLES / "failover-create.json"), "--policy", str(policy))
    assert "warning: jobIdLabels does not include flink-failover.io/job-id" in result.stderr, result.stderr
