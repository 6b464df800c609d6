"""Suite-wide fixtures: where the shared reference data lives, and how its absence is treated.

Tests that read ``../shared/data`` (upstream CRDs, recorded Karmada objects, the shared benchmark) are
marked ``shared`` or take the ``shared_data`` fixture. In a clone without that folder they are left out
with one summary line saying which and why; with REQUIRE_SHARED_DATA=1 they run and fail.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from hypothesis import settings

from tests.support.backends import MissingServer, Running, by_name
from tests.support.repo import REPO, shared_data_dir, shared_data_required
from tests.support.server import RunningServer, generate_certs, serve

__all__ = ["REPO", "shared_data_dir"]

_LEFT_OUT = pytest.StashKey[list[str]]()
_STARTED = pytest.StashKey[float]()
_TIERS: dict[str, float] = {}  # tier -> seconds spent in its tests (setup, call and teardown)
_WORKERS: set[str] = set()  # pytest-xdist's workers, when the run has them

# Property tests draw the same examples on every run (seeded by the test's name) and never depend on the
# example database: a submission cannot fail by chance. HYPOTHESIS_PROFILE=explore draws fresh examples
# for hunting counterexamples by hand; a failure found that way becomes an explicit test.
settings.register_profile("deterministic", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", database=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))


def _missing_message(path: Path) -> str:
    return f"shared reference data not found at {path} (set FLINK_FAILOVER_SHARED_DATA)"


def needs_shared_data(item: pytest.Item) -> bool:
    return item.get_closest_marker("shared") is not None or "shared_data" in getattr(item, "fixturenames", ())


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_STARTED] = time.monotonic()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if shared_data_dir().is_dir() or shared_data_required():
        return
    left_out = [item for item in items if needs_shared_data(item)]
    if left_out:
        items[:] = [item for item in items if not needs_shared_data(item)]
        config.hook.pytest_deselected(items=left_out)
    config.stash[_LEFT_OUT] = [item.nodeid for item in left_out]
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is not None:  # a pytest-xdist worker: its controller prints the summary
        workeroutput["left_out"] = config.stash[_LEFT_OUT]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodeready(node: object) -> None:
    _WORKERS.add(str(getattr(node, "gateway").id))  # noqa: B009 (xdist's WorkerController)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    left_out = getattr(node, "workeroutput", {}).get("left_out", [])
    config: pytest.Config = getattr(node, "config")  # noqa: B009
    known = config.stash.get(_LEFT_OUT, [])
    config.stash[_LEFT_OUT] = known + [nodeid for nodeid in left_out if nodeid not in known]


def tier_of(nodeid: str) -> str:
    return "end-to-end" if nodeid.startswith("tests/e2e/") else "unit"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    tier = tier_of(report.nodeid)
    _TIERS[tier] = _TIERS.get(tier, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if _TIERS:  # the budgets (docs/development.md): unit tier within 8 minutes, end-to-end within 15
        spent = ", ".join(f"{tier} tier {seconds / 60:.1f} min" for tier, seconds in sorted(_TIERS.items()))
        wall = (time.monotonic() - config.stash.get(_STARTED, time.monotonic())) / 60
        workers = f" on {len(_WORKERS)} workers" if _WORKERS else ""
        line = f"time in tests: {spent} of test time; {wall:.1f} min wall clock{workers}"
        terminalreporter.write_line(line)
    left_out = config.stash.get(_LEFT_OUT, [])
    if not left_out:
        return
    files = sorted({nodeid.split("::")[0] for nodeid in left_out})
    terminalreporter.write_line(
        f"{len(left_out)} tests need {shared_data_dir()} and were left out (not found; "
        f"REQUIRE_SHARED_DATA=1 makes them fail): {', '.join(files)}",
        yellow=True,
    )


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = shared_data_dir()
    if not path.is_dir():
        message = _missing_message(path)
        if shared_data_required():
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def storage_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], Running]]:
    """The storage servers of tests/support/backends.py, each started once per worker when a test first
    asks for it by name and stopped at the end; one whose program is missing skips (REQUIRE_SHARED_DATA=1:
    fails) every test that asks for it, with the one-line reason."""
    started: dict[str, Running | MissingServer] = {}
    with ExitStack() as stack:

        def server(name: str) -> Running:
            if name not in started:
                try:
                    workdir = tmp_path_factory.mktemp(f"storage-{name}")
                    started[name] = stack.enter_context(by_name(name).start(workdir))
                except MissingServer as exc:
                    started[name] = exc
            found = started[name]
            if isinstance(found, MissingServer):
                if shared_data_required():
                    pytest.fail(str(found))
                pytest.skip(str(found))
            return found

        yield server


@pytest.fixture
def storage_backend(request: pytest.FixtureRequest, storage_servers: Callable[[str], Running]) -> Running:
    """The running server of the backend named by the test's parameter:
    ``@pytest.mark.parametrize("storage_backend", BACKEND_NAMES, indirect=True)``."""
    return storage_servers(request.param)


# The member role served for real (gunicorn, TLS) on a local checkpoint root: tests of the member webhook,
# of the server (tests/server/) and of the commands (tests/test_command_errors.py) share it.
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
