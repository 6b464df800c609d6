"""One meaning per word (issue 48): a public class name is defined in one module of ``webhook/`` only.

A reader who meets ``Lookup`` or ``Plan`` should not have to ask which one: the fifth pass found
``Plan`` meaning fencing's effects and storage requests, ``Lookup`` a storage lookup and an estimator
memo, "verdict" the confirmed-files record and a recheck schedule. Types are the words of the model, so
each public class name (and each module name saying "verdict") is checked to mean one thing; functions
named alike in different rooms (``decide``, ``run``) are read through their module and are not.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from tests.conftest import REPO

PACKAGE = REPO / "webhook"
GENERATED = ("proto",)  # protoc's output names Karmada's messages, not ours


def class_homes(package: Path) -> dict[str, list[str]]:
    """Each public top-level class name of ``package`` and the modules that define one by that name."""
    homes: dict[str, list[str]] = defaultdict(list)
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package)
        if any(part in GENERATED for part in relative.parts):
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                homes[node.name].append(relative.as_posix())
    return homes


def two_meanings(package: Path) -> list[str]:
    """Every public class name defined in more than one module, and every module other than
    ``restore/verdict.py`` whose name says "verdict" (the confirmed-files record's word)."""
    found = [f"{name}: {', '.join(where)}" for name, where in class_homes(package).items() if len(where) > 1]
    found += [
        f"{path.relative_to(package).as_posix()}: 'verdict' is restore/verdict.py's record"
        for path in sorted(package.rglob("*verdict*.py"))
        if path.relative_to(package).as_posix() != "restore/verdict.py"
    ]
    return found


def test_each_public_class_name_means_one_thing() -> None:
    assert two_meanings(PACKAGE) == []


def test_the_words_the_fifth_pass_found_twice_are_gone() -> None:
    homes = class_homes(PACKAGE)
    assert "Plan" not in homes and "HoldVerdict" not in homes and "SessionCluster" not in homes
    assert homes["Lookup"] == ["restore/storage/listings.py"]


def test_a_name_defined_twice_is_caught(tmp_path: Path) -> None:
    (tmp_path / "fencing").mkdir()
    (tmp_path / "restore").mkdir()
    (tmp_path / "fencing" / "decide.py").write_text("class Plan:\n    pass\n", encoding="utf-8")
    (tmp_path / "restore" / "verdict.py").write_text("class Plan:\n    pass\nclass _Own:\n    pass\n")
    (tmp_path / "fencing" / "verdicts.py").write_text("X = 1\n", encoding="utf-8")
    assert two_meanings(tmp_path) == [
        "Plan: fencing/decide.py, restore/verdict.py",
        "fencing/verdicts.py: 'verdict' is restore/verdict.py's record",
    ]
