"""Issue 17: what a platform engineer hit on their own objects, and the restore cases real clusters have.

Each test names its item; each failed before the change it covers.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tests.faults.loopback import blackhole
from tests.samples.make_storage import RESTORABLE, make
from tests.support.objects import (
    FLINK_METADATA,
    JOB_ID,
    apply,
    decode_patch,
    flink_deployment,
    make_checkpoints,
    make_savepoint,
    review,
)
from tests.support.server import executable
from webhook.common.admission import parse_review
from webhook.common.flink import FlinkResource
from webhook.member.handler import MemberHandler
from webhook.policy.restore import PolicyError, RestorePolicy, UpgradeModePolicy, policy_from_dict
from webhook.restore.decide import Parent
from webhook.restore.metadata import metadata_problem

SAMPLES = REPO / "tests" / "samples"
CKPT = "file:///tmp/flink-failover-samples/checkpoints"
FAILOVER = "flink-failover.io/failover"
JOB_LABEL = "flink-failover.io/job-id"
LABELS = {FAILOVER: "true", JOB_LABEL: JOB_ID}


@pytest.fixture(scope="module", autouse=True)
def sample_storage() -> None:
    make()


@pytest.fixture
def ckpt(tmp_path: Path) -> Path:
    root = tmp_path / "checkpoints"
    root.mkdir()
    return root


def run(*args: str, stdin: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "FLINK_FAILOVER_POLICY"}
    return subprocess.run(
        [executable(), "review", *args],
        capture_output=True,
        text=True,
        input=stdin,
        cwd=REPO,
        env=environ,
        timeout=timeout,
    )


def answer(policy: RestorePolicy, body: dict[str, Any], handler: MemberHandler | None = None) -> Any:
    handler = handler or MemberHandler.from_policy(policy)
    try:
        return handler(parse_review(body))
    finally:
        handler.close()


def sample_object(name: str = "failover-create.json") -> dict[str, Any]:
    obj: dict[str, Any] = json.loads((SAMPLES / name).read_text())["request"]["object"]
    return obj


# --- Broken 3: review --diff glues a changed last line to the next one -------------------------------


def test_diff_of_a_changed_last_line_keeps_every_line_apart(tmp_path: Path) -> None:
    obj = sample_object()
    job = obj["spec"].pop("job")
    obj["spec"]["job"] = {k: v for k, v in job.items() if k != "upgradeMode"} | {"upgradeMode": "stateless"}
    path = tmp_path / "fd.json"
    path.write_text(json.dumps(obj))
    for output in ("yaml", "json"):
        result = run(str(path), "--diff", "-o", output)
        assert result.returncode == 0, result.stderr
        assert result.stdout.endswith("\n")
        lines = result.stdout.splitlines()
        if output == "yaml":  # upgradeMode is the object's last line, and it changes
            assert "-    upgradeMode: stateless" in lines and "+    upgradeMode: last-state" in lines
        before = yaml.safe_dump(obj, sort_keys=False) if output == "yaml" else json.dumps(obj, indent=2)
        removed = [line[1:] for line in lines if line.startswith("-") and not line.startswith("---")]
        assert removed and all(line in before.splitlines() for line in removed), removed


# --- Friction 8: warnings in every output form, numbered answers, --as-failover ----------------------


def test_diff_and_print_object_tell_the_warnings() -> None:
    for form in ("--diff", "--print-object"):
        result = run(str(SAMPLES / "nothing-restorable.json"), form)
        assert result.returncode == 0, result.stderr
        assert "warning: job held suspended: no restorable checkpoint" in result.stderr, result.stderr
    restored = run(str(SAMPLES / "failover-create.json"), "--diff")
    assert f"warning: restoring from checkpoint {CKPT}/{RESTORABLE}/chk-8" in restored.stderr


def running_job(tmp_path: Path) -> Path:
    """What `kubectl get flinkdeployment -o yaml` shows of a running job before any failover."""
    obj = sample_object()
    obj["metadata"]["labels"] = {"app": "orders"}
    obj["metadata"]["annotations"] = {}
    obj["metadata"].update(uid="8b2f0c52-0c1a-4f7e-9d55-3a1c9a0e7d10", resourceVersion="123456")
    obj["status"] = {
        "jobStatus": {
            "jobId": RESTORABLE,
            "state": "RUNNING",
            "savepointInfo": {"lastSavepoint": {"location": ""}},
        },
        "lifecycleState": "STABLE",
    }
    path = tmp_path / "running.yaml"
    path.write_text(yaml.safe_dump(obj))
    return path


def test_as_failover_shows_what_a_failover_would_do_to_a_running_job(tmp_path: Path) -> None:
    path = running_job(tmp_path)
    plain = run(str(path), "--print-object")
    assert "skipped: no failover label" in plain.stderr  # what the pre-install check used to say
    result = run(str(path), "--as-failover", "--print-object", "-o", "yaml")
    assert result.returncode == 0, result.stderr
    admitted = yaml.safe_load(result.stdout)
    assert admitted["spec"]["job"]["initialSavepointPath"] == f"{CKPT}/{RESTORABLE}/chk-8"
    assert admitted["metadata"]["labels"][JOB_LABEL] == RESTORABLE
    assert "status" not in admitted and "resourceVersion" not in admitted["metadata"]
    fresh = yaml.safe_load(path.read_text())
    del fresh["status"]
    unusable = run("-", "--as-failover", stdin=json.dumps(fresh))
    assert unusable.returncode == 2 and "needs a job that ran: no status.jobStatus.jobId" in unusable.stderr


def test_an_update_left_alone_says_so_once(tmp_path: Path) -> None:
    """Item 13: "allowed unchanged (unchanged)"."""
    restored = json.loads(run(str(SAMPLES / "failover-create.json"), "--print-object").stdout)
    path = tmp_path / "same.json"
    path.write_text(json.dumps(restored))
    result = run(str(path), "--old", str(path))
    assert result.returncode == 0, result.stderr
    assert "allowed unchanged\n" in result.stderr and "(unchanged)" not in result.stderr


# --- Friction 10: offline review does not wait for storage that hangs --------------------------------


def test_review_exits_once_answered_while_storage_hangs(tmp_path: Path) -> None:
    """The lookup would hang for 10 minutes (read timeout 600 s on a port that never answers); review
    answers at its 1 s deadline and exits without joining it (before: a subprocess timeout)."""
    with blackhole() as port:
        policy = tmp_path / "policy.yaml"
        options = {
            "endpoint_url": f"http://127.0.0.1:{port}",
            "key": "k",
            "secret": "s",
            "config_kwargs": {"read_timeout": 600, "retries": {"max_attempts": 1}},
        }
        policy.write_text(
            yaml.safe_dump(
                {"deadlineSeconds": 1, "storageOptions": {"s3": options}, "onStorageError": "deny"}
            )
        )
        obj = flink_deployment(checkpoint_dir="s3://bucket/ckpt", labels=LABELS)
        result = run("-", "--policy", str(policy), stdin=json.dumps(obj), timeout=60)
    response = json.loads(result.stdout)["response"]
    assert response["allowed"] is False and response["status"]["code"] == 503  # item 13: not 403
    message = response["status"]["message"]
    assert "storage did not answer within 1s deadline" in message
    assert f"s3://bucket/ckpt/{JOB_ID}" in message  # the storage is named


# --- Restore case 4: an empty or truncated _metadata is not a checkpoint -----------------------------


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"", "empty (0 bytes)"),
        (FLINK_METADATA[:6], "truncated (6 bytes)"),
        (FLINK_METADATA[:8], "truncated (8 bytes)"),
        (b"PK\x03\x04 a zip file, not metadata", "not a Flink metadata file (starts with 0x504b0304"),
        (bytes.fromhex("4960672d00000000") + b"body", "no valid Flink metadata version (0)"),
    ],
)
def test_a_checkpoint_whose_metadata_is_not_flinks_is_skipped(ckpt: Path, content: bytes, why: str) -> None:
    make_checkpoints(ckpt / JOB_ID, [4, 5])
    (ckpt / JOB_ID / "chk-5" / "_metadata").write_bytes(content)
    assert why in metadata_problem(content[:8], len(content))
    obj = flink_deployment(checkpoint_dir=str(ckpt), labels=LABELS)
    resp = answer(RestorePolicy(), review(obj))
    patched = apply(obj, decode_patch(resp.to_review()["response"]))
    assert patched["spec"]["job"]["initialSavepointPath"] == f"{ckpt}/{JOB_ID}/chk-4"
    assert any("skipped chk-5: _metadata" in w and why in w for w in resp.warnings), resp.warnings
    assert "skipped chk-5: _metadata" in resp.audit.reason and why in resp.audit.reason  # audit says why


def test_only_broken_metadata_holds_the_job_and_says_why(ckpt: Path) -> None:
    make_checkpoints(ckpt / JOB_ID, [7])
    (ckpt / JOB_ID / "chk-7" / "_metadata").write_bytes(b"")
    sp = make_savepoint(ckpt.parent / "savepoints", JOB_ID)
    (sp / "_metadata").write_bytes(b"\x00" * 3)
    obj = flink_deployment(
        checkpoint_dir=str(ckpt),
        savepoint_dir=str(ckpt.parent / "savepoints"),
        labels=LABELS,
        annotations={"flink-failover.io/last-savepoint": str(sp)},
    )
    resp = answer(RestorePolicy(), review(obj))
    assert resp.decision == "suspended"
    assert "skipped chk-7: _metadata is empty (0 bytes)" in resp.audit.reason
    assert f"skipped savepoint {sp}: _metadata is truncated (3 bytes)" in resp.audit.reason
    assert metadata_problem(FLINK_METADATA[:8], len(FLINK_METADATA)) == ""


# --- Restore case 6: never an upgradeMode the target operator refuses --------------------------------


def test_auto_never_chooses_last_state_without_ha_unless_the_operator_accepts_it(ckpt: Path) -> None:
    make_checkpoints(ckpt / JOB_ID, [1])
    obj = flink_deployment(checkpoint_dir=str(ckpt), labels=LABELS)

    def mode(policy: RestorePolicy, o: dict[str, Any]) -> Any:
        return apply(o, decode_patch(answer(policy, review(o)).to_review()["response"]))["spec"]["job"].get(
            "upgradeMode"
        )

    assert mode(RestorePolicy(), obj) is None  # before: last-state, refused by operators < 1.10
    assert mode(RestorePolicy(upgrade_mode=UpgradeModePolicy.LAST_STATE), obj) is None
    assert mode(policy_from_dict({"operatorVersion": "1.10"}), obj) == "last-state"
    assert mode(policy_from_dict({"operatorVersion": "1.9.0"}), obj) is None
    with_ha = copy.deepcopy(obj)
    with_ha["spec"]["flinkConfiguration"]["high-availability.type"] = "kubernetes"
    assert mode(RestorePolicy(), with_ha) == "last-state"
    with_ha["spec"]["flinkConfiguration"]["high-availability.type"] = "NONE"
    assert mode(RestorePolicy(), with_ha) is None


@pytest.mark.parametrize(
    ("value", "words"),
    [(1.1, "not a version"), ("one", "not a version"), ("1.6", "older than 1.7")],
)
def test_operator_version_is_validated(value: Any, words: str) -> None:
    with pytest.raises(PolicyError, match=words):
        policy_from_dict({"operatorVersion": value})


# --- Restore case 5: a FlinkSessionJob's checkpoint directory lives in its session cluster ------------


def session_job(**kwargs: Any) -> dict[str, Any]:
    obj = flink_deployment(kind="FlinkSessionJob", labels=LABELS, **kwargs)
    obj["spec"]["deploymentName"] = "session-cluster"
    return obj


def session_cluster(checkpoint_dir: str) -> dict[str, Any]:
    cluster = flink_deployment(name="session-cluster", checkpoint_dir=checkpoint_dir, job=None)
    return cluster


def test_session_job_reads_its_checkpoint_dir_from_the_session_cluster(ckpt: Path) -> None:
    make_checkpoints(ckpt / JOB_ID, [3])
    cluster = FlinkResource.from_object(session_cluster(str(ckpt)))
    asked: list[tuple[str, str]] = []

    def lookup(namespace: str, name: str, _timeout: float) -> Parent:
        asked.append((namespace, name))
        return Parent(cluster)

    obj = session_job()
    handler = MemberHandler.from_policy(RestorePolicy(), lookup)
    resp = answer(RestorePolicy(), review(obj), handler)
    assert asked == [("analytics", "session-cluster")]
    patched = apply(obj, decode_patch(resp.to_review()["response"]))
    assert patched["spec"]["job"]["initialSavepointPath"] == f"{ckpt}/{JOB_ID}/chk-3"
    assert resp.audit.fields()["checkpointDirFrom"] == (
        "session cluster FlinkDeployment analytics/session-cluster "
        "flinkConfiguration execution.checkpointing.dir"
    )
    # Without the lookup (before): nothing restorable, the job held.
    assert answer(RestorePolicy(), review(obj)).decision == "suspended"


def test_session_cluster_unreadable_or_missing(ckpt: Path) -> None:
    obj = session_job()
    failing = MemberHandler.from_policy(RestorePolicy(), lambda *_: Parent(None, "403 Forbidden"))
    refused = answer(RestorePolicy(), review(obj), failing)
    assert refused.allowed is False and refused.code == 503
    assert "cannot read the session cluster FlinkDeployment analytics/session-cluster: 403" in refused.message
    make_checkpoints(ckpt / JOB_ID, [2])
    policy = RestorePolicy(default_checkpoint_dir=str(ckpt))
    missing = MemberHandler.from_policy(policy, lambda *_: Parent(None))
    resp = answer(policy, review(obj), missing)
    assert resp.decision == "restored" and any("not found" in w for w in resp.warnings)
    assert resp.audit.fields()["checkpointDirFrom"] == "restore policy defaultCheckpointDir"


def test_review_objects_stand_in_for_the_session_cluster(ckpt: Path, tmp_path: Path) -> None:
    make_checkpoints(ckpt / JOB_ID, [6])
    objects = tmp_path / "clusters.yaml"
    objects.write_text(yaml.safe_dump_all([session_cluster(f"file://{ckpt}")]))
    job = tmp_path / "job.json"
    job.write_text(json.dumps(session_job()))
    result = run(str(job), "--objects", str(objects), "--print-object")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["spec"]["job"]["initialSavepointPath"] == f"file://{ckpt}/{JOB_ID}/chk-6"
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}))
    bad = run(str(job), "--objects", str(wrong))
    assert bad.returncode == 2 and "is not a FlinkDeployment" in bad.stderr


def test_policy_replace_keeps_operator_version() -> None:
    assert replace(policy_from_dict({"operatorVersion": "v1.11.2"})).operator_version == (1, 11)


def test_a_held_job_is_logged_as_a_warning(ckpt: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Item 10: the audit line of a job held suspended is a warning (before: info, like a no-op)."""
    import logging

    from webhook.member.handler import internal_error
    from webhook.server.config import Endpoint
    from webhook.server.instrument import instrumented

    handler = MemberHandler.from_policy(RestorePolicy())
    answer_of = instrumented(Endpoint("/mutate", "member", handler, internal_error))
    try:
        with caplog.at_level(logging.INFO, logger="webhook.admission"):
            held = answer_of(parse_review(review(flink_deployment(checkpoint_dir=str(ckpt), labels=LABELS))))
            answer_of(parse_review(review(flink_deployment(checkpoint_dir=str(ckpt)))))
    finally:
        handler.close()
    assert held.decision == "suspended"
    assert [r.levelname for r in caplog.records if r.name == "webhook.admission"] == ["WARNING", "INFO"]
