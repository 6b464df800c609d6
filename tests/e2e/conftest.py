"""The end-to-end tier: real kube-apiservers and a real Karmada, started once per Karmada version.

Without binaries (``FLINK_FAILOVER_E2E_ASSETS``) the tier is left out with one line saying why; with
``REQUIRE_SHARED_DATA=1`` (CI) its tests fail instead. A stack's processes are stopped on every exit
path; its folder (logs of every process) is kept under pytest's temporary root and named when a test of
the tier fails.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from tests.chart.conftest import ensure_binaries
from tests.e2e.assets import Assets, AssetsMissing, find_assets
from tests.e2e.guide import run_guide
from tests.e2e.kubelet import Kubelet
from tests.e2e.operator import OperatorDouble
from tests.e2e.scenario import World, checkpoint_writer, cleanup
from tests.e2e.stack import Stack, Tools, stack
from tests.e2e.timeline import Timeline
from tests.support.repo import REPO, shared_data_required
from tests.support.s3 import CREDENTIALS

E2E_DIR = Path(__file__).parent
RUNS = REPO / ".cache" / "e2e-runs"
KEEP_RUNS = 5
E2E_TIMEOUT = 1200
_SKIPPED = pytest.StashKey[str]()
_FIGURES = pytest.StashKey[list[str]]()
FIGURES: list[str] = []


def _in_tier(item: pytest.Item) -> bool:
    return Path(str(item.fspath)).is_relative_to(E2E_DIR)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tier = [item for item in items if _in_tier(item)]
    for item in tier:
        item.add_marker(pytest.mark.e2e)
        # a package's stack starts in its first test's setup (the guide's install and failover: minutes)
        item.add_marker(pytest.mark.timeout(E2E_TIMEOUT))
    if not tier:
        return
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: every one would start its own stacks
        alone = pytest.mark.skip(reason="the end-to-end tier runs in one process: make e2e (no -n)")
        for item in tier:
            item.add_marker(alone)
        return
    try:
        find_assets()
    except AssetsMissing as exc:
        if shared_data_required():
            return  # the fixture fails each test with the reason
        items[:] = [item for item in items if not _in_tier(item)]
        config.hook.pytest_deselected(items=tier)
        config.stash[_SKIPPED] = f"end-to-end tier skipped ({len(tier)} tests): {exc}"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and session.config.stash.get(_SKIPPED, ""):
        session.exitstatus = pytest.ExitCode.OK  # a tier left out for want of binaries is said, not failed


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    skipped = config.stash.get(_SKIPPED, "")
    if skipped:
        terminalreporter.write_line(skipped, yellow=True)
    if FIGURES:
        terminalreporter.section("end-to-end figures")
        for line in FIGURES:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def e2e_assets() -> Assets:
    try:
        return find_assets()
    except AssetsMissing as exc:
        pytest.fail(f"end-to-end tier needs its binaries: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def tools() -> Tools:
    folder = ensure_binaries()
    return Tools(folder / "helm", folder / "kubectl")


@contextlib.contextmanager
def _world(
    assets: Assets,
    version: str,
    folder: Path,
    tools: Tools,
    via_guide: bool,
    fencing: dict[str, float] | None = None,
    buckets: int = 1,
) -> Iterator[World]:
    with stack(assets, version, folder, tools, product=not via_guide, fencing=fencing, buckets=buckets) as st:
        write = checkpoint_writer(st)
        identity = {  # the JobManager pods' own storage identity (an IRSA role's, say), for their keepers
            "AWS_ACCESS_KEY_ID": CREDENTIALS["key"],
            "AWS_SECRET_ACCESS_KEY": CREDENTIALS["secret"],
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        operators = {
            name: OperatorDouble(
                name, st.member_api(name), write, kubelet=Kubelet(name, st.procs, identity)
            ).start()
            for name in st.karmada.members
        }
        timeline = Timeline({name: st.member_api(name) for name in st.karmada.members}).start()
        world = World(st, operators, timeline)
        if via_guide:
            world.guide = run_guide(world)
            cleanup(world, ["orders"])
        world.wait_scheduler_reaches_estimators()
        try:
            yield world
        finally:
            if world.failed:
                world.save_metrics()
            timeline.stop()
            for operator in operators.values():
                operator.stop()
                if operator.kubelet is not None:
                    operator.kubelet.stop()


def _run_folder(version: str) -> Path:
    """A folder for one stack's files and logs, outside pytest's rotating temporary root (which other runs
    prune): removed when every test on it passed, kept (the newest few) when one failed."""
    RUNS.mkdir(parents=True, exist_ok=True)
    kept = sorted(RUNS.iterdir())
    for old in kept[: max(0, len(kept) - KEEP_RUNS)]:
        shutil.rmtree(old, ignore_errors=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    folder = RUNS / f"{stamp}-{os.getpid()}-{version}"
    folder.mkdir()
    return folder


def world_for(
    version: str,
    assets: Assets,
    tools: Tools,
    via_guide: bool = False,
    fencing: dict[str, float] | None = None,
    buckets: int = 1,
) -> Generator[World]:
    """One stack for a package of scenarios (each version's package asks for its own and frees it when
    its scenarios are done, so two stacks never run at once); ``via_guide``: the product installed by
    running docs/guide-flink-on-karmada.md as written (``tests/e2e/guide.py``), its failover included;
    ``fencing``: the member role's timings instead of the tier's, ``buckets``: S3 spread over that many moto
    servers (a run at scale: bench/karmada_fleet.py)."""
    folder = _run_folder(version)
    with _world(assets, version, folder, tools, via_guide, fencing, buckets) as world:
        yield world
    if not world.failed and os.environ.get("FLINK_FAILOVER_E2E_KEEP") != "1":
        shutil.rmtree(folder, ignore_errors=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report = yield
    if report.failed and _in_tier(item):
        world = getattr(item, "funcargs", {}).get("world")
        if isinstance(world, World):
            world.failed = True
            report.sections.append(("end-to-end stack", world.where(item.name)))
    return report


__all__ = ["Stack"]
