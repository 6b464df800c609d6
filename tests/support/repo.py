"""Where the checkout is, and where the shared reference data beside it lives."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent


def shared_data_dir() -> Path:
    """../shared/data beside the checkout, or FLINK_FAILOVER_SHARED_DATA."""
    env = os.environ.get("FLINK_FAILOVER_SHARED_DATA")
    return Path(env) if env else REPO.parent / "shared" / "data"


def shared_data_required() -> bool:
    """CI sets REQUIRE_SHARED_DATA=1: tests that need the data then fail instead of being left out."""
    return os.environ.get("REQUIRE_SHARED_DATA") == "1"
