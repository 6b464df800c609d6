"""Suite-wide fixtures: where the shared reference data lives, and how its absence is treated."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def shared_data_dir() -> Path:
    """../shared/data beside the checkout, or FLINK_FAILOVER_SHARED_DATA."""
    env = os.environ.get("FLINK_FAILOVER_SHARED_DATA")
    return Path(env) if env else REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = shared_data_dir()
    if not path.is_dir():
        message = f"shared reference data not found at {path} (set FLINK_FAILOVER_SHARED_DATA)"
        if os.environ.get("REQUIRE_SHARED_DATA") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return path
