"""What the member webhook tells a person: why nothing was restored, which setting holds a bad path, and
a storage error said once."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.member.test_decisions import POLICY, answer, ckpt, labels
from tests.support.objects import JOB_ID, flink_deployment, make_checkpoints, review
from webhook.policy.restore import Fallback

__all__ = ["ckpt"]  # the fixture, shared with test_decisions

DENY = replace(POLICY, on_missing_state=Fallback.DENY)


def test_missing_job_directory_is_told_apart_from_incomplete_checkpoints(ckpt: Path) -> None:
    obj = flink_deployment(checkpoint_dir=str(ckpt), labels=labels())
    missing = answer(DENY, review(obj))["status"]["message"]
    assert f"job directory {ckpt}/{JOB_ID} does not exist" in missing
    assert "incomplete" not in missing

    make_checkpoints(ckpt / JOB_ID, [3, 4, 5, 6], without_metadata=(3, 4, 5, 6))
    incomplete = answer(DENY, review(obj))["status"]["message"]
    assert "only incomplete checkpoints" in incomplete
    assert "chk-6, chk-5, chk-4 and 1 more without _metadata" in incomplete
    assert "does not exist" not in incomplete
    assert "no restorable checkpoint" in incomplete  # the phrase operators search for stays

    suspended = answer(POLICY, review(obj))  # the warning says the same as the denial would
    assert "only incomplete checkpoints" in suspended["warnings"][0]


def test_empty_job_directory(ckpt: Path) -> None:
    (ckpt / JOB_ID).mkdir()
    obj = flink_deployment(checkpoint_dir=str(ckpt), labels=labels())
    assert f"no checkpoints in {ckpt}/{JOB_ID}" in answer(DENY, review(obj))["status"]["message"]


def test_path_errors_name_their_setting_and_the_allowed_schemes(ckpt: Path) -> None:
    obj = flink_deployment(checkpoint_dir="ftp://host/checkpoints", labels=labels())
    message = answer(POLICY, review(obj))["status"]["message"]
    assert "flinkConfiguration execution.checkpointing.dir 'ftp://host/checkpoints'" in message
    assert "allowed schemes: s3, s3a, s3p, gs, abfs, abfss, file" in message

    only_s3 = replace(POLICY, allowed_schemes=("s3",))
    message = answer(only_s3, review(flink_deployment(checkpoint_dir=str(ckpt), labels=labels())))["status"][
        "message"
    ]
    assert "flinkConfiguration execution.checkpointing.dir" in message
    assert "storage scheme 'file' is not allowed" in message and "allowed schemes: s3)" in message

    by_policy = replace(POLICY, default_checkpoint_dir="relative/dir")
    message = answer(by_policy, review(flink_deployment(labels=labels())))["status"]["message"]
    assert "restore policy defaultCheckpointDir 'relative/dir'" in message


def test_storage_error_is_said_once(ckpt: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It used to read "storage error: storage error listing ...": the listing failure and the decision
    each prefixed it."""
    import webhook.restore.storage.listings

    def reset(*_: object) -> list[str]:
        raise OSError("Connection reset by peer")

    monkeypatch.setattr(webhook.restore.storage.listings, "entry_names", reset)
    obj = flink_deployment(checkpoint_dir=str(ckpt), labels=labels())
    message = answer(POLICY, review(obj))["status"]["message"]
    assert message.count("storage error") == 1, message
    assert f"storage error: listing {ckpt}/{JOB_ID}: Connection reset by peer" in message
