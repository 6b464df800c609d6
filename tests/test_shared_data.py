"""A clone without ../shared/data says in one line which tests need it; CI makes them fail instead."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

TARGET = "tests/placement/test_shared_bench.py"  # one test, marked shared


def _environment() -> dict[str, str]:
    """This run's environment, less what would make the inner pytest another one (an xdist worker's)."""
    return {k: v for k, v in os.environ.items() if k != "REQUIRE_SHARED_DATA" and not k.startswith("PYTEST_")}


def _pytest(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = _environment()
    environment.update(FLINK_FAILOVER_SHARED_DATA=str(tmp_path / "absent"), **env)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", TARGET]
    return subprocess.run(command, cwd=REPO, env=environment, capture_output=True, text=True, timeout=120)


def test_missing_shared_data_is_one_summary_line(tmp_path: Path) -> None:
    result = _pytest(tmp_path)
    assert result.returncode == 5, result.stdout  # nothing left to run is not a pass either
    lines = [line for line in result.stdout.splitlines() if "tests need" in line]
    assert len(lines) == 1, result.stdout
    assert f"1 tests need {tmp_path / 'absent'} and were left out" in lines[0]
    assert TARGET in lines[0] and "REQUIRE_SHARED_DATA=1" in lines[0]
    assert "1 deselected" in result.stdout and "skipped" not in result.stdout


def test_required_shared_data_fails_the_tests_that_need_it(tmp_path: Path) -> None:
    result = _pytest(tmp_path, REQUIRE_SHARED_DATA="1")
    assert result.returncode == 1, result.stdout
    assert "shared reference data not found" in result.stdout
    assert "tests need" not in result.stdout


def test_the_workers_of_an_xdist_run_report_what_they_left_out(tmp_path: Path) -> None:
    """``make unit`` runs on pytest-xdist workers, which collect; their controller prints the line."""
    environment = _environment()
    environment.update(FLINK_FAILOVER_SHARED_DATA=str(tmp_path / "absent"))
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-n",
        "2",
        TARGET,
        "tests/test_help.py",
    ]
    result = subprocess.run(command, cwd=REPO, env=environment, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout
    lines = [line for line in result.stdout.splitlines() if "tests need" in line]
    assert len(lines) == 1 and TARGET in lines[0], result.stdout
    assert "wall clock on 2 workers" in result.stdout, result.stdout
