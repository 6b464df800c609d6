"""A partition between Karmada and a member whose job keeps running, on Karmada v1.19.0-rc.0, with the
job's checkpoints, savepoints and fencing records on Azure Blob (Azurite, a real server of it; S3 and
Google Cloud Storage run on v1.18.2: one partition per backend keeps the tier within its budget)."""

from __future__ import annotations

import pytest

from tests.e2e import flows
from tests.e2e.scenario import World, storage_dirs


@pytest.mark.parametrize("backend", ["azure"])
def test_a_partition_never_runs_two_copies(world: World, jobs: list[str], backend: str) -> None:
    world.stack.storage(backend)  # skips (in CI: fails) when the backend's server is not installed
    checkpoints, savepoints = storage_dirs(backend)
    flows.partition(world, jobs, checkpoints, savepoints, backend)
