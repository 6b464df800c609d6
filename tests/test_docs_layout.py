"""The README's layout table and docs/architecture.md describe the tree as it is."""

from __future__ import annotations

import re

from tests.conftest import REPO


def _section(text: str, title: str) -> str:
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def test_readme_layout_names_every_package_and_only_existing_paths() -> None:
    layout = _section((REPO / "README.md").read_text(encoding="utf-8"), "Layout")
    listed = set(re.findall(r"`([\w./-]+/?)`", layout))
    packages = {f"webhook/{p.parent.name}/" for p in (REPO / "webhook").glob("*/__init__.py")}
    assert packages <= listed, sorted(packages - listed)
    paths = {p for p in listed if "/" in p or p.endswith(".py")}
    assert all((REPO / p).exists() for p in paths), sorted(p for p in paths if not (REPO / p).exists())


def test_architecture_map_points_at_files_that_exist() -> None:
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    files = set(re.findall(r"`((?:[a-z]+/)*[a-z_]+\.py)`", text))
    assert len(files) >= 10
    missing = sorted(f for f in files if not ((REPO / "webhook" / f).exists() or (REPO / f).exists()))
    assert missing == []
