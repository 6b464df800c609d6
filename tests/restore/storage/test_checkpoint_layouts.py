"""Every shape within the budget (issue 36): file merging at parallelism 128 (a folder per operator and
subtask under ``shared/``, one per TaskManager under ``taskowned/``) and S3 entropy injection (each
file in a folder of its own) are restored with ``verify: files`` and the default ``verifyBudget``, not
held; a file missing from either shape still passes the checkpoint over. Before, each folder was one
listing: 136 and 150 folders passed the budget of 100 and the job was always held."""

from __future__ import annotations

import pytest

from tests.support.backends import BACKEND_NAMES, Running
from tests.support.jobtrees import JOB, checkpoint, chosen, lookup, names, remove
from tests.support.objects import apply, decode_patch, flink_deployment, review
from webhook.common.admission import parse_review
from webhook.member.handler import MemberHandler
from webhook.policy.restore import RestorePolicy
from webhook.restore.storage.search import CheckpointStorage

PARALLELISM = 128
TASK_MANAGERS = 8
OPERATOR = "20ba6b65f97481d5570070de90e4e791"


def merged(job_dir: str) -> list[str]:
    """The files of a file-merging checkpoint as Flink 1.20+ names their folders: one file per subtask
    folder and per TaskManager folder."""
    files = [
        f"{job_dir}/shared/job_{JOB}_op_{OPERATOR}_{i}_{PARALLELISM}/{name}"
        for i, name in enumerate(names(PARALLELISM))
    ]
    files += [
        f"{job_dir}/taskowned/job_{JOB}_tm_tm-{k}/{name}" for k, name in enumerate(names(TASK_MANAGERS))
    ]
    return files


@pytest.mark.parametrize("storage_backend", BACKEND_NAMES, indirect=True)
def test_file_merging_at_parallelism_128_is_restored_in_a_few_requests(storage_backend: Running) -> None:
    job_dir = f"{storage_backend.bucket('merging')}/ck/{JOB}"
    files = merged(job_dir)
    checkpoint(storage_backend, job_dir, 1, files[:-20])
    checkpoint(storage_backend, job_dir, 2, files)
    storage = CheckpointStorage(storage_backend.storage_options())
    found = lookup(storage, job_dir)
    assert chosen(found) == f"{job_dir}/chk-2" and not found.unchecked
    # the job directory (and its verdict, absent), shared/ and taskowned/ each by one prefix listing,
    # chk-2's folder and _metadata
    assert found.trips.requests == 6
    remove(storage_backend, files[123])  # named by chk-2 only
    found = lookup(storage, job_dir)
    assert chosen(found) == f"{job_dir}/chk-1"
    assert f"_123_{PARALLELISM}/" in found.rejected[0] and "is missing" in found.rejected[0]


@pytest.mark.parametrize("storage_backend", ["s3", "file"], indirect=True)
def test_entropy_injection_is_restored_by_heads(storage_backend: Running) -> None:
    """``s3.entropy.key``: the _metadata lies under the checkpoint directory without the entropy, each
    state file below a random prefix of its own (``s3://bkt/<entropy>/ck/<jobId>/...``)."""
    bucket = storage_backend.bucket("entropy")
    job_dir = f"{bucket}/ck/{JOB}"
    files = [f"{bucket}/{i * 7919 % 65536:04x}/ck/{JOB}/shared/{name}" for i, name in enumerate(names(150))]
    checkpoint(storage_backend, job_dir, 1, files)
    storage = CheckpointStorage(storage_backend.storage_options())
    found = lookup(storage, job_dir)
    assert chosen(found) == f"{job_dir}/chk-1" and not found.unchecked
    assert found.trips.requests == 4 + len(files)  # a HEAD each: 2 of the budget's 100
    remove(storage_backend, files[33])
    found = lookup(storage, job_dir)
    assert (
        found.checkpoint is None and "1 of the 152 files its _metadata names is missing" in found.rejected[0]
    )


@pytest.mark.parametrize("storage_backend", ["s3"], indirect=True)
def test_an_admission_with_the_entropy_key_in_its_checkpoint_directory_restores(
    storage_backend: Running,
) -> None:
    """``execution.checkpointing.dir: s3://bkt/_entropy_/ck`` with ``s3.entropy.key: _entropy_``: the
    ``_metadata`` is where the key is removed. Before, the job directory was looked for below
    ``_entropy_/`` and the job was found to have no checkpoints."""
    bucket = storage_backend.bucket("entropy")
    job_dir = f"{bucket}/ck/{JOB}"
    files = [f"{bucket}/{i:04x}/ck/{JOB}/shared/{name}" for i, name in enumerate(names(5))]
    checkpoint(storage_backend, job_dir, 1, files)
    obj = flink_deployment(
        checkpoint_dir=f"{bucket}/_entropy_/ck",
        labels={"flink-failover.io/failover": "true", "flink-failover.io/job-id": JOB},
    )
    obj["spec"]["flinkConfiguration"]["s3.entropy.key"] = "_entropy_"
    obj["spec"]["flinkVersion"] = "v2_3"  # the _metadata is format 6, which 2.1+ reads
    handler = MemberHandler.from_policy(RestorePolicy(storage_options=storage_backend.storage_options()))
    try:
        response = handler(parse_review(review(obj))).to_review()["response"]
    finally:
        handler.close()
    job = apply(obj, decode_patch(response))["spec"]["job"]
    assert job.get("initialSavepointPath") == f"{job_dir}/chk-1", response.get("warnings")
