"""Fixtures for the control-plane tests that run the real server against the fake Karmada API."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.controlplane import fakeapi
from tests.support.server import generate_certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = generate_certs(tmp_path_factory.mktemp("certs"))
    assert (out / "tls.crt").is_file() and (out / "tls.key").is_file() and (out / "ca.crt").is_file()
    return out


@pytest.fixture
def karmada(tmp_path: Path) -> Iterator[fakeapi.RunningFake]:
    server = fakeapi.start()
    yield server
    server.stop()
