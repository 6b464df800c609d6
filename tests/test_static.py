"""Static checks run with the suite, so a green CI also means lint-, format- and type-clean.

`make lint` runs the same tools plus pip-audit (which needs the network for its vulnerability data).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

BIN = Path(sys.executable).parent
PATHS = ["webhook", "tests", "bench"]


@pytest.mark.parametrize(
    "command",
    [
        [str(BIN / "ruff"), "check", *PATHS],
        [str(BIN / "ruff"), "format", "--check", *PATHS],
        [str(BIN / "mypy")],
        [str(BIN / "bandit"), "-q", "-c", "pyproject.toml", "-r", "webhook"],
    ],
    ids=["ruff-check", "ruff-format", "mypy-strict", "bandit"],
)
def test_static_check_passes(command: list[str]) -> None:
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
