from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import RunningServer, generate_certs, serve


@pytest.fixture(scope="session")
def cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def checkpoint_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("checkpoints")


@pytest.fixture(scope="module")
def member_server(
    cert_dir: Path, checkpoint_root: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    work = tmp_path_factory.mktemp("server")
    policy = work / "policy.yaml"
    policy.write_text(
        "apiVersion: flink-failover.io/v1alpha1\nkind: RestorePolicy\n"
        f"defaultCheckpointDir: {checkpoint_root}\ndeadlineSeconds: 2\n"
    )
    with serve(cert_dir, policy, work / "server.log") as server:
        yield server
