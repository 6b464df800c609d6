"""The member role's decision table, driven through the real handler and local storage."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.support.objects import (
    JOB_ID,
    OTHER_JOB_ID,
    apply,
    decode_patch,
    flink_deployment,
    make_checkpoints,
    make_savepoint,
    review,
)
from webhook.common.admission import parse_review
from webhook.member.handler import MemberHandler
from webhook.policy.restore import Fallback, Prefer, RestorePolicy, StatePolicy, UpgradeModePolicy

FAILOVER = "flink-failover.io/failover"
JOB_LABEL = "flink-failover.io/job-id"
DECISION = "flink-failover.io/restore-decision"
RESTORED_FROM = "flink-failover.io/restored-from"
RESTORED_JOB = "flink-failover.io/restored-job-id"


def answer(policy: RestorePolicy, body: dict[str, Any]) -> dict[str, Any]:
    handler = MemberHandler.from_policy(policy)
    try:
        return handler(parse_review(body)).to_review()["response"]
    finally:
        handler.close()


def labels(job_id: str = JOB_ID) -> dict[str, str]:
    return {FAILOVER: "true", JOB_LABEL: job_id}


@pytest.fixture
def ckpt(tmp_path: Path) -> Path:
    root = tmp_path / "checkpoints"
    root.mkdir()
    return root


POLICY = RestorePolicy()


def test_no_trigger_label_is_allowed_without_patch(ckpt: Path) -> None:
    make_checkpoints(ckpt / JOB_ID, [1, 2])
    obj = flink_deployment(checkpoint_dir=str(ckpt), labels={"app": "orders"})
    resp = answer(POLICY, review(obj))
    assert resp["allowed"] is True and "patch" not in resp


def test_failover_label_false_does_not_trigger(ckpt: Path) -> None:
    obj = flink_deployment(checkpoint_dir=str(ckpt), labels={FAILOVER: "false"})
    resp = answer(POLICY, review(obj))
    assert resp["allowed"] is True and "patch" not in resp


def test_other_kind_delete_and_session_cluster_are_untouched(ckpt: Path) -> None:
    make_checkpoints(ckpt / JOB_ID, [1])
    obj = flink_deployment(checkpoint_dir=str(ckpt), labels=labels())
    deployment = dict(obj, apiVersion="apps/v1", kind="Deployment")
    assert "patch" not in answer(POLICY, review(deployment))
    assert "patch" not in answer(POLICY, review(obj, operation="DELETE"))
    assert "patch" not in answer(POLICY, review(obj, operation="CONNECT"))
    session = flink_deployment(checkpoint_dir=str(ckpt), labels=labels(), job=None)
    resp = answer(POLICY, review(session))
    assert resp["allowed"] is True and "patch" not in resp


@pytest.mark.parametrize(
    "value", ["3C653DBE4C19BB72F8EB28445541BED6", "abc", "../../etc/passwd", JOB_ID + "0", "g" * 32]
)
def test_malformed_job_id_is_denied(ckpt: Path, value: str) -> None:
    obj = flink_deployment(checkpoint_dir=str(ckpt), labels={FAILOVER: "true", JOB_LABEL: value})
    resp = answer(POLICY, review(obj))
    assert resp["allowed"] is False
    assert JOB_LABEL in resp["status"]["message"] and "32 lowercase hex" in resp["status"]["message"]


def test_highest_completed_checkpoint_is_restored(ckpt: Path) -> None:
    # chk-10 > chk-9 as integers; chk-12 is in progress (no _metadata); junk names are ignored.
    make_checkpoints(ckpt / JOB_ID, [3, 9, 10, 12], without_metadata=(12,))
    for junk in ("chk-abc", "chk--1", "chk-", "shared", "taskowned"):
        (ckpt / JOB_ID / junk).mkdir()
    obj = flink_deployment(checkpoint_dir=f"file://{ckpt}", labels=labels())
    obj["spec"]["flinkConfiguration"]["high-availability.type"] = "kubernetes"
    resp = answer(POLICY, review(obj))
    assert resp["allowed"] is True
    patched = apply(obj, decode_patch(resp))
    expected = f"file://{ckpt}/{JOB_ID}/chk-10"
    assert patched["spec"]["job"]["initialSavepointPath"] == expected
    assert (
        patched["spec"]["job"]["upgradeMode"] == "last-state"
    )  # stateless -> last-state without savepoint dir, with HA
    annotations = patched["metadata"]["annotations"]
    assert annotations[DECISION] == "restored"
    assert annotations[RESTORED_FROM] == expected
    assert annotations[RESTORED_JOB] == JOB_ID
    assert len(resp["warnings"]) == 1 and expected in resp["warnings"][0]


def test_bare_path_keeps_its_spelling_and_nested_config_is_read(ckpt: Path) -> None:
    make_checkpoints(ckpt / JOB_ID, [7])
    obj = flink_deployment(
        checkpoint_dir=str(ckpt), savepoint_dir=str(ckpt.parent / "sp"), nested_config=True
    )
    obj["metadata"]["labels"] = labels()
    patched = apply(obj, decode_patch(answer(POLICY, review(obj))))
    assert patched["spec"]["job"]["initialSavepointPath"] == f"{ckpt}/{JOB_ID}/chk-7"
    assert patched["spec"]["job"]["upgradeMode"] == "savepoint"  # savepoint dir configured


def test_deprecated_checkpoint_key_and_policy_default(ckpt: Path) -> None:
    make_checkpoints(ckpt / JOB_ID, [5])
    obj = flink_deployment(labels=labels())
    obj["spec"]["flinkConfiguration"]["state.checkpoints.dir"] = str(ckpt)
    patched = apply(obj, decode_patch(answer(POLICY, review(obj))))
    assert patched["spec"]["job"]["initialSavepointPath"].endswith("chk-5")

    obj = flink_deployment(labels=labels())  # no dir at all: the policy default applies
    policy = replace(POLICY, default_checkpoint_dir=str(ckpt))
    patched = apply(obj, decode_patch(answer(policy, review(obj))))
    assert patched["spec"]["job"]["initialSavepointPath"] == f"{ckpt}/{JOB_ID}/chk-5"


def test_create_subdir_false_lists_the_checkpoint_dir_itself(ckpt: Path) -> None:
    make_checkpoints(ckpt, [4])
    obj = flink_deployment(checkpoint_dir=str(ckpt), labels=labels())
    obj["spec"]["flinkConfiguration"]["execution.checkpointing.create-subdir"] = "false"
    patched = apply(obj, decode_patch(answer(POLICY, review(obj))))
    assert patched["spec"]["job"]["initialSavepointPath"] == f"{ckpt}/chk-4"


def test_scheme_outside_allowed_schemes_is_denied(ckpt: Path) -> None:
    obj = flink_deployment(checkpoint_dir="s3://bucket/ckpt", labels=labels())
    policy = replace(POLICY, allowed_schemes=("file",))
    resp = answer(policy, review(obj))
    assert resp["allowed"] is False and "'s3'" in resp["status"]["message"]


def test_prefer_newest_compares_metadata_times(ckpt: Path, tmp_path: Path) -> None:
    sp_root = tmp_path / "savepoints"
    make_checkpoints(ckpt / JOB_ID, [20], mtime=1_000_000)
    newer_sp = make_savepoint(sp_root, JOB_ID, mtime=2_000_000, checkpoint_id=20)  # same id: times decide
    ann = {"flink-failover.io/last-savepoint": str(newer_sp)}
    obj = flink_deployment(
        checkpoint_dir=str(ckpt), savepoint_dir=str(sp_root), labels=labels(), annotations=ann
    )
    for prefer, expected in (
        (Prefer.NEWEST, str(newer_sp)),
        (Prefer.CHECKPOINT, f"{ckpt}/{JOB_ID}/chk-20"),
        (Prefer.SAVEPOINT, str(newer_sp)),
    ):
        patched = apply(obj, decode_patch(answer(replace(POLICY, prefer=prefer), review(obj))))
        assert patched["spec"]["job"]["initialSavepointPath"] == expected, prefer
    os.utime(newer_sp / "_metadata", (500_000, 500_000))  # now the checkpoint is newer
    patched = apply(obj, decode_patch(answer(POLICY, review(obj))))
    assert patched["spec"]["job"]["initialSavepointPath"] == f"{ckpt}/{JOB_ID}/chk-20"


def test_savepoint_of_another_job_or_outside_dirs_is_ignored(ckpt: Path, tmp_path: Path) -> None:
    sp_root = tmp_path / "savepoints"
    foreign = make_savepoint(sp_root, OTHER_JOB_ID)
    elsewhere = make_savepoint(tmp_path / "elsewhere", JOB_ID)
    for path in (foreign, elsewhere):
        obj = flink_deployment(
            checkpoint_dir=str(ckpt),
            savepoint_dir=str(sp_root),
            labels=labels(),
            annotations={"flink-failover.io/last-savepoint": str(path)},
        )
        resp = answer(POLICY, review(obj))
        patched = apply(obj, decode_patch(resp))
        assert patched["spec"]["job"]["state"] == "suspended"  # nothing else to restore
        assert any("ignored last-savepoint" in w for w in resp["warnings"])


def test_failover_label_without_job_id_uses_the_reported_savepoint(ckpt: Path, tmp_path: Path) -> None:
    sp = make_savepoint(tmp_path / "savepoints", JOB_ID)
    obj = flink_deployment(
        checkpoint_dir=str(ckpt),
        savepoint_dir=str(tmp_path / "savepoints"),
        labels={FAILOVER: "true"},
        annotations={"flink-failover.io/last-savepoint": f"file://{sp}"},
    )
    patched = apply(obj, decode_patch(answer(POLICY, review(obj))))
    assert patched["spec"]["job"]["initialSavepointPath"] == f"file://{sp}"
    assert RESTORED_JOB not in patched["metadata"]["annotations"]


@pytest.mark.parametrize(
    "label", ["application.karmada.io/failover-jobid", "resourcebinding.karmada.io/failover-jobid"]
)
def test_karmada_job_id_labels_trigger(ckpt: Path, label: str) -> None:
    make_checkpoints(ckpt / JOB_ID, [2])
    obj = flink_deployment(checkpoint_dir=str(ckpt), labels={label: JOB_ID})
    patched = apply(obj, decode_patch(answer(POLICY, review(obj))))
    assert patched["spec"]["job"]["initialSavepointPath"] == f"{ckpt}/{JOB_ID}/chk-2"


def test_nothing_restorable_follows_on_missing_state(ckpt: Path) -> None:
    make_checkpoints(ckpt / JOB_ID, [1, 2], without_metadata=(1, 2))
    obj = flink_deployment(checkpoint_dir=str(ckpt), labels=labels())

    resp = answer(POLICY, review(obj))  # default: suspend
    patched = apply(obj, decode_patch(resp))
    assert resp["allowed"] is True and patched["spec"]["job"]["state"] == "suspended"
    assert patched["metadata"]["annotations"][DECISION] == "suspended"
    assert "initialSavepointPath" not in patched["spec"]["job"]
    assert resp["warnings"] and "suspended" in resp["warnings"][0]

    resp = answer(replace(POLICY, on_missing_state=Fallback.DENY), review(obj))
    assert resp["allowed"] is False and "no restorable checkpoint" in resp["status"]["message"]

    resp = answer(replace(POLICY, on_missing_state=Fallback.ALLOW), review(obj))
    patched = apply(obj, decode_patch(resp))
    assert resp["allowed"] is True and patched["metadata"]["annotations"][DECISION] == "stateless"
    assert patched["spec"]["job"].get("state") is None and resp["warnings"]


def test_missing_job_directory_is_missing_state_not_an_error(ckpt: Path) -> None:
    obj = flink_deployment(checkpoint_dir=str(ckpt), labels=labels())
    resp = answer(POLICY, review(obj))
    assert resp["allowed"] is True
    assert apply(obj, decode_patch(resp))["metadata"]["annotations"][DECISION] == "suspended"


def test_storage_error_follows_on_storage_error(ckpt: Path) -> None:
    job_dir = ckpt / JOB_ID
    job_dir.parent.mkdir(exist_ok=True)
    job_dir.write_text("not a directory")  # listing fails: the state is unknown, not absent
    obj = flink_deployment(checkpoint_dir=str(ckpt), labels=labels())
    resp = answer(POLICY, review(obj))
    assert resp["allowed"] is False and "storage error" in resp["status"]["message"]
    resp = answer(replace(POLICY, on_storage_error=Fallback.SUSPEND), review(obj))
    assert apply(obj, decode_patch(resp))["spec"]["job"]["state"] == "suspended"
    resp = answer(replace(POLICY, on_storage_error=Fallback.ALLOW), review(obj))
    assert apply(obj, decode_patch(resp))["metadata"]["annotations"][DECISION] == "stateless"


def test_upgrade_mode_and_state_policies(ckpt: Path, tmp_path: Path) -> None:
    make_checkpoints(ckpt / JOB_ID, [1])
    obj = flink_deployment(checkpoint_dir=str(ckpt), labels=labels())
    obj["spec"]["flinkConfiguration"]["high-availability"] = "kubernetes"  # the pre-1.17 spelling
    obj["spec"]["job"]["state"] = "suspended"
    cases = [
        (replace(POLICY, upgrade_mode=UpgradeModePolicy.KEEP), None, "suspended"),
        (replace(POLICY, upgrade_mode=UpgradeModePolicy.SAVEPOINT), "savepoint", "suspended"),
        (replace(POLICY, upgrade_mode=UpgradeModePolicy.LAST_STATE), "last-state", "suspended"),
        (replace(POLICY, state=StatePolicy.RUNNING), "last-state", "running"),
    ]
    for policy, mode, state in cases:
        patched = apply(obj, decode_patch(answer(policy, review(obj))))
        assert patched["spec"]["job"].get("upgradeMode") == mode, policy
        assert patched["spec"]["job"]["state"] == state
    obj["spec"]["job"]["upgradeMode"] = "savepoint"  # auto keeps a non-stateless value
    patched = apply(obj, decode_patch(answer(POLICY, review(obj))))
    assert patched["spec"]["job"]["upgradeMode"] == "savepoint"


def test_session_job_never_gets_last_state(ckpt: Path) -> None:
    make_checkpoints(ckpt / JOB_ID, [1])
    obj = flink_deployment(kind="FlinkSessionJob", checkpoint_dir=str(ckpt), labels=labels())
    patched = apply(obj, decode_patch(answer(POLICY, review(obj))))
    assert patched["spec"]["job"]["initialSavepointPath"] == f"{ckpt}/{JOB_ID}/chk-1"
    assert "upgradeMode" not in patched["spec"]["job"]


def _restored_object(ckpt: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    make_checkpoints(ckpt / JOB_ID, [8])
    template = flink_deployment(checkpoint_dir=str(ckpt), labels=labels())
    created = apply(template, decode_patch(answer(POLICY, review(template))))
    return template, created


def test_karmada_reapply_update_is_carried_over_without_storage(ckpt: Path) -> None:
    template, created = _restored_object(ckpt)
    for child in (ckpt / JOB_ID).iterdir():  # storage is gone: the carry-over must not need it
        (child / "_metadata").unlink(missing_ok=True)
    resp = answer(POLICY, review(template, operation="UPDATE", old=created))
    assert resp["allowed"] is True
    assert apply(template, decode_patch(resp)) == created


def test_update_that_kept_the_fields_needs_no_patch(ckpt: Path) -> None:
    _, created = _restored_object(ckpt)
    resp = answer(POLICY, review(created, operation="UPDATE", old=created))
    assert resp["allowed"] is True and "patch" not in resp


def test_update_of_an_object_never_restored_is_untouched(ckpt: Path) -> None:
    make_checkpoints(ckpt / JOB_ID, [8])
    obj = flink_deployment(checkpoint_dir=str(ckpt), labels=labels())
    resp = answer(POLICY, review(obj, operation="UPDATE", old=flink_deployment(checkpoint_dir=str(ckpt))))
    assert resp["allowed"] is True and "patch" not in resp


def test_suspended_hold_survives_a_reapply(ckpt: Path) -> None:
    template = flink_deployment(checkpoint_dir=str(ckpt), labels=labels())
    held = apply(template, decode_patch(answer(POLICY, review(template))))
    assert held["spec"]["job"]["state"] == "suspended"
    patched = apply(template, decode_patch(answer(POLICY, review(template, operation="UPDATE", old=held))))
    assert patched["spec"]["job"]["state"] == "suspended"
    assert patched["metadata"]["annotations"][DECISION] == "suspended"


def test_dry_run_gets_the_same_answer(ckpt: Path) -> None:
    make_checkpoints(ckpt / JOB_ID, [3])
    obj = flink_deployment(checkpoint_dir=str(ckpt), labels=labels())
    normal = answer(POLICY, review(obj, uid="same"))
    dry = answer(POLICY, review(obj, dry_run=True, uid="same"))
    assert normal == dry and "patch" in dry


def test_symlink_out_of_the_job_dir_is_never_a_restore_path(ckpt: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    make_checkpoints(outside, [99])
    make_checkpoints(ckpt / JOB_ID, [3])
    (ckpt / JOB_ID / "chk-99").symlink_to(outside / "chk-99")
    obj = flink_deployment(checkpoint_dir=str(ckpt), labels=labels())
    patched = apply(obj, decode_patch(answer(POLICY, review(obj))))
    assert patched["spec"]["job"]["initialSavepointPath"] == f"{ckpt}/{JOB_ID}/chk-3"


def test_missing_checkpoint_dir_is_a_storage_error(tmp_path: Path) -> None:
    obj = flink_deployment(checkpoint_dir=str(tmp_path / "typo"), labels=labels())
    resp = answer(POLICY, review(obj))
    assert resp["allowed"] is False and "does not exist" in resp["status"]["message"]


def test_object_being_deleted_is_never_patched(ckpt: Path) -> None:
    """The operator removes its finalizer with an UPDATE; touching that object helps nobody."""
    _, created = _restored_object(ckpt)
    template = flink_deployment(checkpoint_dir=str(ckpt), labels=labels())
    template["metadata"]["deletionTimestamp"] = "2026-11-29T15:00:00Z"
    resp = answer(POLICY, review(template, operation="UPDATE", old=created))
    assert resp["allowed"] is True and "patch" not in resp
