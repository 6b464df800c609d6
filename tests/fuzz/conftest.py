"""A small real member server (1 worker x 4 threads, TLS) for hostile input over HTTPS."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.objects import JOB_ID, make_checkpoints
from tests.support.server import RunningServer, generate_certs, serve

WORKERS, THREADS = 1, 4


@pytest.fixture(scope="session")
def fuzz_certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate_certs(tmp_path_factory.mktemp("fuzz-certs"))


@pytest.fixture(scope="session")
def fuzz_server(fuzz_certs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    work = tmp_path_factory.mktemp("fuzz-server")
    root = work / "checkpoints"
    make_checkpoints(root / JOB_ID, [1, 2])
    policy = work / "policy.yaml"
    policy.write_text(
        "apiVersion: flink-failover.io/v1alpha1\nkind: RestorePolicy\n"
        f"defaultCheckpointDir: {root}\ndeadlineSeconds: 2\n"
    )
    extra = ["--workers", str(WORKERS), "--threads", str(THREADS)]
    with serve(fuzz_certs, policy, work / "server.log", extra=extra) as server:
        yield server
