"""The end-to-end tier's gates, as ``make test`` meets them: without binaries it is said in one line
and passes (CI fails instead); on xdist workers it is skipped (each worker would start its own stacks).
Nothing here starts a stack: every case is decided at collection."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO

TARGET = "tests/e2e/v1_19/test_placement.py"


def _pytest(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    unset = ("REQUIRE_SHARED_DATA", "FLINK_FAILOVER_E2E_ASSETS")
    environment = {k: v for k, v in os.environ.items() if k not in unset and not k.startswith("PYTEST_")}
    environment.update(env)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, TARGET]
    return subprocess.run(command, cwd=REPO, env=environment, capture_output=True, text=True, timeout=300)


def test_without_binaries_the_tier_is_one_line_and_passes() -> None:
    result = _pytest()
    assert result.returncode == 0, result.stdout
    lines = [line for line in result.stdout.splitlines() if "end-to-end tier skipped" in line]
    assert len(lines) == 1, result.stdout
    assert "FLINK_FAILOVER_E2E_ASSETS is not set" in lines[0] and "docs/development.md" in lines[0]


def test_without_binaries_ci_fails_the_tier() -> None:
    result = _pytest("-x", REQUIRE_SHARED_DATA="1")
    assert result.returncode == 1, result.stdout
    assert "end-to-end tier needs its binaries" in result.stdout, result.stdout
    assert "end-to-end tier skipped" not in result.stdout


def test_on_xdist_workers_the_tier_is_skipped_with_the_reason() -> None:
    result = _pytest("-n", "2", "-rs", FLINK_FAILOVER_E2E_ASSETS=str(REPO / "absent-assets"))
    assert result.returncode == 0, result.stdout
    assert "4 skipped" in result.stdout, result.stdout
    assert "the end-to-end tier runs in one process: make e2e" in result.stdout, result.stdout


def test_make_test_runs_both_tiers_and_fails_when_either_did() -> None:
    plan = subprocess.run(
        ["make", "-n", "test"], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "make --no-print-directory unit || unit=$?" in plan
    assert "make --no-print-directory e2e || e2e=$?" in plan
    assert "[ $unit = 0 ] && [ $e2e = 0 ]" in plan
