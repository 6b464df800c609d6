"""One ``chk-N`` reader for the whole product (``common/checkpoints.py``): only the spelling Flink
writes names a checkpoint, wherever a name is read (issue 48: the fencing agent's release read
``chk-007`` as checkpoint 7 while the restore's lookup passed it over)."""

from __future__ import annotations

import pytest

from webhook.common.checkpoints import checkpoint_number, checkpoint_numbers
from webhook.common.flink import snapshot_job
from webhook.common.flink_reads import TARGET_CANNOT_READ, unloadable
from webhook.restore.outcome import RestoreDecision, RestoreOutcome

REFUSED = ["chk-007", "chk-", "chk-1a", "chk--1", "chk-00", "chk-99\n", "chk- 1", "CHK-1", "chk-" + "9" * 19]
ACCEPTED = [("chk-0", 0), ("chk-12", 12), ("chk-7", 7), ("chk-" + "9" * 18, int("9" * 18))]
JOB = "0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize("name", REFUSED)
def test_a_name_flink_does_not_write_is_no_checkpoint(name: str) -> None:
    assert checkpoint_number(name) is None
    assert checkpoint_numbers([name]) == []


@pytest.mark.parametrize(("name", "number"), ACCEPTED)
def test_flinks_own_spelling_is_read(name: str, number: int) -> None:
    assert checkpoint_number(name) == number


def test_a_listing_gives_each_number_once_highest_first() -> None:
    assert checkpoint_numbers(["chk-2", "chk-10", "chk-007", "shared", "chk-2", "chk-0"]) == [10, 2, 0]


@pytest.mark.parametrize("name", REFUSED)
def test_every_reader_refuses_the_same_names(name: str) -> None:
    """The Flink status reader (whose job a path is), the lookup's reasons read back, the fencing
    agent's release (is the newest checkpoint older than the one admitted?)."""
    from webhook.fencing.starts import newest_known

    assert snapshot_job(f"s3://b/ckpt/{JOB}/{name}") == ""
    assert unloadable(f"{name}: Flink 1.20 {TARGET_CANNOT_READ} too new") is None
    found = RestoreDecision(RestoreOutcome.RESTORED, "newest", path=f"s3://b/ckpt/{JOB}/chk-5")
    # An admitted name that is no checkpoint says nothing of age: the path found is kept.
    assert newest_known(found, None, f"s3://b/ckpt/{JOB}/{name}") == found.path


@pytest.mark.parametrize(("name", "number"), ACCEPTED[:2])
def test_every_reader_reads_the_same_names(name: str, number: int) -> None:
    from webhook.fencing.starts import Unresolved, newest_known

    assert snapshot_job(f"s3://b/ckpt/{JOB}/{name}") == JOB
    told = unloadable(f"{name}: Flink 1.20 {TARGET_CANNOT_READ} too new")
    assert told is not None and told.checkpoint_id == number
    found = RestoreDecision(RestoreOutcome.RESTORED, "newest", path=f"s3://b/ckpt/{JOB}/chk-{number - 1}")
    older = newest_known(found, None, f"s3://b/ckpt/{JOB}/{name}")
    assert isinstance(older, Unresolved) if number > 0 else older == found.path
