"""A partition between Karmada and a member whose job keeps running, on Karmada v1.18.2, with the job's
checkpoints, savepoints and fencing records on S3 (moto) and on Google Cloud Storage (gcp-storage-emulator),
each a real server of it (Azure Blob's run is on v1.19: tests/e2e/v1_19/test_partition.py). The S3 run cuts
off, beside the FlinkDeployment, a FlinkSessionJob whose checkpoint directory is set only on its session
cluster (issue 45): one cut, both failed over."""

from __future__ import annotations

import pytest

from tests.e2e import flows
from tests.e2e.scenario import World, storage_dirs


@pytest.mark.parametrize(
    ("backend", "with_session_job"), [("s3", True), ("gcs", False)], ids=["s3+sessionjob", "gcs"]
)
def test_a_partition_never_runs_two_copies(
    world: World, jobs: list[str], backend: str, with_session_job: bool
) -> None:
    world.stack.storage(backend)  # skips (in CI: fails) when the backend's server is not installed
    checkpoints, savepoints = storage_dirs(backend)
    flows.partition(world, jobs, checkpoints, savepoints, backend, with_session_job)
