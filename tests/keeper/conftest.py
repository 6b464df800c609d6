"""What the keeper's tests share: the operator's FlinkDeployment CRD (1.15.0) as the API server applies it,
and moto's S3 behind a TCP proxy that can be cut."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.backends import Running
from tests.support.crds import crd_validator
from tests.support.tcpproxy import TcpProxy


@pytest.fixture(scope="module")
def validate(shared_data: Path) -> Any:
    crd = shared_data / "crds" / "flink-operator-1.15.0" / "flinkdeployments.flink.apache.org-v1.yml"
    return crd_validator(crd, "v1beta1")


@pytest.fixture
def proxied_s3(storage_servers: object) -> Iterator[tuple[Running, TcpProxy]]:
    running = storage_servers("s3")  # type: ignore[operator]
    proxy = TcpProxy(running.port)
    try:
        yield running, proxy
    finally:
        proxy.close()
