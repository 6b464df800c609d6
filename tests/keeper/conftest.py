"""What the keeper's tests share: the operator's FlinkDeployment CRD (1.15.0) as the API server applies it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.crds import crd_validator


@pytest.fixture(scope="module")
def validate(shared_data: Path) -> Any:
    crd = shared_data / "crds" / "flink-operator-1.15.0" / "flinkdeployments.flink.apache.org-v1.yml"
    return crd_validator(crd, "v1beta1")
