"""The tests mirror the packages (issue 48): ``tests/x/y/`` holds the tests of ``webhook/x/y/`` and each of
them imports from that package, so a reader finds a module's tests by its path and a test cannot sit in a
room it does not test. The rule is by directory, not by module name: a module renamed inside its package
keeps its tests where they are.

Beside the mirrors, ``tests/`` holds a few directories that are no package of ``webhook/`` (NOT_PACKAGES,
with why), and at its top level the tests of ``webhook/``'s top-level modules (``cli.py``, ``roles.py``,
``review.py``) and the checks of the whole repository (imports, docs, tiers, static checks), which belong
to no one package. A test file is named for what it tests, never for the work that added it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.conftest import REPO

# Directories of tests/ that mirror no package, and why they are there.
NOT_PACKAGES = {
    "support": "harnesses and fakes shared by the tests of several packages",
    "e2e": "the end-to-end tier: real kube-apiservers and Karmada (make e2e)",
    "chart": "the Helm chart under charts/, rendered and validated",
    "policies": "the Karmada customizations under policies/ (Lua), run as Karmada runs them",
    "fuzz": "fuzzing of the admission and the server, across packages",
    "faults": "storage faults injected on loopback, across packages",
    "fixtures": "files real Flink and Karmada wrote (data, no tests of its own)",
    "samples": "the sample reviews and storage the README and the commands use",
}

# Support modules that drive a package whole (serve its role, run its process, simulate its loop): a test
# that reaches its package only through one of them still tests that package.
DRIVERS = {
    "member": ("tests.support.server", "tests.support.production"),
    "fencing": ("tests.support.production", "tests.support.simulation"),
    "keeper": ("tests.support.keeper",),
}

# A file named after the work that added it says nothing of what it tests.
WORK_WORD = re.compile(
    r"^(day|issue|pass|round|phase|sprint|newcomer|history|shapes|misc|followup|regressions?|new|old|fixes)\d*$"
    r"|^\d{4,8}$"
)


def _imports(source: str) -> set[str]:
    """Every module a file imports, anywhere in it (a test may import inside a function)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def work_named(name: str) -> bool:
    return any(WORK_WORD.match(word) for word in Path(name).stem.split("_")[1:])


def layout_problems(tests: Path, webhook: Path) -> list[str]:
    """What breaks the mirror in the tree ``tests`` against the packages under ``webhook``: a directory
    that mirrors no package and is not named in NOT_PACKAGES, a test that imports nothing of the package
    its directory mirrors, a file named for work."""
    problems: list[str] = []
    for directory in sorted(p for p in tests.rglob("*") if p.is_dir() and p.name != "__pycache__"):
        relative = directory.relative_to(tests)
        if relative.parts[0] in NOT_PACKAGES or relative.parts[0].startswith("."):
            continue
        if not (webhook / relative / "__init__.py").is_file():
            problems.append(f"tests/{relative.as_posix()}/ mirrors no package of webhook/")
            continue
        package = "webhook." + ".".join(relative.parts)
        own = "tests." + ".".join(relative.parts)
        drivers = DRIVERS.get(relative.parts[0], ())
        for test in sorted(directory.glob("test_*.py")):
            imported = _imports(test.read_text())
            if not any(
                _within(m, package) or _within(m, own) or any(_within(m, d) for d in drivers)
                for m in imported
            ):
                problems.append(
                    f"tests/{relative.as_posix()}/{test.name} imports nothing of {package} "
                    f"(nor its own directory's harness): it belongs beside what it tests"
                )
    for test in sorted(tests.rglob("test_*.py")):
        if work_named(test.name):
            problems.append(
                f"tests/{test.relative_to(tests).as_posix()} is named for work, not for what it tests"
            )
    return problems


def test_the_tests_mirror_the_packages() -> None:
    assert layout_problems(REPO / "tests", REPO / "webhook") == []


def test_every_directory_not_a_package_is_still_there() -> None:
    """A name left in NOT_PACKAGES after its directory went would let a new directory of that name in."""
    assert sorted(p.name for p in (REPO / "tests").iterdir() if p.name in NOT_PACKAGES) == sorted(
        NOT_PACKAGES
    )


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.fixture
def house(tmp_path: Path) -> tuple[Path, Path]:
    """A small tree laid out right: two packages, a subpackage, their mirrors, a harness, support dirs."""
    _tree(
        tmp_path,
        {
            "webhook/__init__.py": "",
            "webhook/fencing/__init__.py": "",
            "webhook/fencing/agent.py": "",
            "webhook/restore/__init__.py": "",
            "webhook/restore/storage/__init__.py": "",
            "tests/__init__.py": "",
            "tests/test_imports.py": "",
            "tests/fencing/__init__.py": "",
            "tests/fencing/test_agent.py": "from webhook.fencing.agent import FencingAgent\n",
            "tests/fencing/test_handover.py": "from tests.fencing import test_agent as harness\n",
            "tests/fencing/test_loop.py": "from tests.support.simulation import World\n",
            "tests/restore/__init__.py": "",
            "tests/restore/test_decide.py": "def test_x():\n    from webhook.restore import decide\n",
            "tests/restore/storage/__init__.py": "",
            "tests/restore/storage/test_search.py": "import webhook.restore.storage.search\n",
            "tests/support/__init__.py": "",
            "tests/e2e/v1_19/test_placement.py": "",
        },
    )
    return tmp_path / "tests", tmp_path / "webhook"


def test_a_tree_laid_out_right_passes(house: tuple[Path, Path]) -> None:
    assert layout_problems(*house) == []


def test_a_directory_that_mirrors_no_package_is_caught(house: tuple[Path, Path]) -> None:
    tests, webhook = house
    _tree(tests, {"fencng/test_agent.py": "from webhook.fencing.agent import FencingAgent\n"})
    _tree(tests, {"restore/cache/test_memo.py": "from webhook.restore import decide\n"})
    assert layout_problems(tests, webhook) == [
        "tests/fencng/ mirrors no package of webhook/",
        "tests/restore/cache/ mirrors no package of webhook/",
    ]


@pytest.mark.parametrize(
    ("path", "source"),
    [
        ("fencing/test_verdicts.py", "from webhook.restore.verdict import Verdict\n"),
        ("restore/storage/test_decide.py", "from webhook.restore.decide import decide_restore\n"),
        ("restore/test_agent.py", "from tests.fencing.test_agent import Site\n"),
        ("restore/test_served.py", "from tests.support.server import serve\n"),
        ("fencing/test_nothing.py", "import json\n"),
    ],
)
def test_a_test_beside_a_package_it_does_not_test_is_caught(
    house: tuple[Path, Path], path: str, source: str
) -> None:
    tests, webhook = house
    _tree(tests, {path: source})
    assert layout_problems(tests, webhook) == [
        f"tests/{path} imports nothing of webhook.{'.'.join(Path(path).parent.parts)} "
        "(nor its own directory's harness): it belongs beside what it tests"
    ]


@pytest.mark.parametrize(
    "name",
    [
        "test_day_one.py",
        "test_day2.py",
        "test_newcomer.py",
        "test_history.py",
        "test_issue17.py",
        "test_20261208.py",
    ],
)
def test_a_file_named_for_work_is_refused(house: tuple[Path, Path], name: str) -> None:
    tests, webhook = house
    _tree(tests, {f"fencing/{name}": "from webhook.fencing import agent\n"})
    assert layout_problems(tests, webhook) == [
        f"tests/fencing/{name} is named for work, not for what it tests"
    ]


@pytest.mark.parametrize(
    "name", ["test_snapshot_choice.py", "test_chart_install.py", "test_keeper_handover.py"]
)
def test_a_file_named_for_its_subject_passes(name: str) -> None:
    assert not work_named(name)
