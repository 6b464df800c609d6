"""docs/architecture.md names only code that exists and is called (issue 24: it named
``CheckpointStorage.savepoint``, which nothing calls).

Every module path in a code span (``restore/decide.py``, ``controlplane/karmada``) must be a module of
``webhook``; the names written right after it (```restore/decide.py` `decide_restore```), and every
dotted ``Class.member`` after it in the same table cell, must be attributes of that module; and each
such name must be used somewhere in ``webhook/`` besides its own definition (a method: called as
``.name(``). Its table "Inside each package" writes each package's layers and pure modules exactly as
``tests/test_imports.py`` enforces them (``ROLE_LAYERS``, ``PURE_CORE``; issue 31).
"""

from __future__ import annotations

import importlib
import re

import pytest

from tests.conftest import REPO
from tests.test_imports import PURE_CORE, ROLE_LAYERS

DOC = REPO / "docs" / "architecture.md"
PACKAGE = REPO / "webhook"
SPAN = re.compile(r"`([^`]+)`")
MODULE = re.compile(r"^([a-z_]+(?:/[a-z_]+)*?)(?:\.py)?/?$")
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?$")
DOTTED = re.compile(r"^[A-Z][A-Za-z0-9]*\.[a-z_][a-z0-9_]*$")


def module_of(span: str) -> str | None:
    """The dotted module a span like ``restore/decide.py`` names, when it is one of ``webhook``."""
    if "/" not in span:
        return None
    found = MODULE.match(span)
    if found is None:
        return None
    parts = found.group(1).split("/")
    path = PACKAGE.joinpath(*parts)
    if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
        return "webhook." + ".".join(parts)
    return None


def references() -> list[tuple[str, str]]:
    """(module, name) for each name the document ties to a module."""
    out: list[tuple[str, str]] = []
    for line in DOC.read_text(encoding="utf-8").splitlines():
        for cell in line.split("|"):
            module = None
            previous_end = -1
            for span in SPAN.finditer(cell):
                text = span.group(1)
                named = module_of(text)
                right_after = module is not None and cell[previous_end : span.start()].strip() == ""
                if named is not None:
                    module = named
                elif module is not None and NAME.match(text) and (right_after or DOTTED.match(text)):
                    out.append((module, text))
                previous_end = span.end()
    return out


def module_spans() -> list[str]:
    """Every ``<package>/<module>.py`` span outside fenced blocks (``tests/...`` and ``docs/...`` aside)."""
    spans: list[str] = []
    fenced = False
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            spans += SPAN.findall(line)
    ours = {s for s in spans if s.endswith(".py") and "/" in s and not s.startswith(("tests/", "docs/"))}
    return sorted(ours)


SOURCE = {p: p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py") if "proto" not in p.parts}
REFERENCES = references()


def test_the_document_ties_names_to_modules() -> None:
    assert len(REFERENCES) >= 20, REFERENCES  # the parser still finds the map


@pytest.mark.parametrize("span", module_spans())
def test_every_module_named_exists(span: str) -> None:
    assert module_of(span) is not None, f"docs/architecture.md names {span}: not a module of webhook/"


@pytest.mark.parametrize(("module", "name"), REFERENCES, ids=[f"{m}:{n}" for m, n in REFERENCES])
def test_every_name_exists_and_is_used(module: str, name: str) -> None:
    target: object = importlib.import_module(module)
    for part in name.split("."):
        assert hasattr(target, part), f"docs/architecture.md names {module}.{name}, which does not exist"
        target = getattr(target, part)
    last = name.split(".")[-1]
    if "." in name:
        used = re.compile(rf"\.{re.escape(last)}\(")
    else:
        used = re.compile(rf"(?<!def )(?<!class )\b{re.escape(last)}\b")
    definition = re.compile(rf"\s*(def|class) {re.escape(last)}\b")

    def uses(line: str) -> bool:
        return bool(used.search(line)) and not definition.match(line) and not line.lstrip().startswith("#")

    users = [p for p, text in SOURCE.items() if any(uses(line) for line in text.splitlines())]
    assert users, f"docs/architecture.md names {module}.{name}, which nothing in webhook/ uses"


# --- "Inside each package": the layers and the pure modules as tests/test_imports.py enforces them -------

PARENTHESES = re.compile(r"\([^)]*\)")
BOLD = re.compile(r"\*\*`([^`]+)`\*\*")


def package_rows() -> dict[str, str]:
    """The table's rows: ``webhook.<package>`` -> its layers cell (pure modules in bold)."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## Inside each package") : text.index("## How errors travel")]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`") and cells[0].endswith("/`"):
            rows["webhook." + cells[0].strip("`/").replace("/", ".")] = cells[1]
    return rows


def layers_written(cell: str) -> tuple[frozenset[str], ...]:
    """``a`` ``b`` → ``c`` as ({a, b}, {c}): what comes before a ';' (the rest describes), words in
    parentheses left out, a subpackage (``fencing/``) by its name."""
    cell = PARENTHESES.sub("", cell.split(";")[0])
    return tuple(frozenset(s.rstrip("/") for s in SPAN.findall(part)) for part in cell.split("→"))


def pure_written(package: str, cell: str) -> set[str]:
    """The modules the cell writes in bold (``**`decide`**``): the pure ones."""
    return {f"{package}.{s.replace('/', '.')}" for s in BOLD.findall(PARENTHESES.sub("", cell))}


ROWS = package_rows()


def test_every_layered_package_has_a_row() -> None:
    assert set(ROLE_LAYERS) <= set(ROWS), sorted(set(ROLE_LAYERS) - set(ROWS))
    assert set(ROWS) - set(ROLE_LAYERS) == {"webhook.common"}  # shared code: no layers of its own


@pytest.mark.parametrize("package", list(ROLE_LAYERS))
def test_the_layers_written_are_the_ones_the_import_test_enforces(package: str) -> None:
    enforced = tuple(frozenset(layer) for layer in ROLE_LAYERS[package])
    assert layers_written(ROWS[package]) == enforced


@pytest.mark.parametrize("package", sorted(ROWS))
def test_the_pure_modules_written_are_the_import_tests_pure_core(package: str) -> None:
    pure = {m for m in PURE_CORE if m.startswith(package + ".")}
    assert pure_written(package, ROWS[package]) == pure


def test_a_row_out_of_step_is_caught() -> None:
    assert layers_written("`a` `b/` → `c` (the command); the core is `x`") == (
        frozenset({"a", "b"}),
        frozenset({"c"}),
    )
    assert layers_written(ROWS["webhook.estimator"]) != (frozenset({"options"}),)
    assert pure_written("webhook.x", "`a` → **`b`** `c`") == {"webhook.x.b"}


# --- readable in a browser (issue 48: rows of over 2,000 characters) ------------------------------------

LONGEST = 400  # characters a line may have, a table row included: the detail lives beside the code


def long_lines(text: str) -> list[str]:
    return [
        f"line {n}: {len(line)} characters"
        for n, line in enumerate(text.splitlines(), 1)
        if len(line) > LONGEST
    ]


def test_no_row_is_longer_than_a_screen() -> None:
    assert long_lines(DOC.read_text(encoding="utf-8")) == []


def test_a_long_row_is_caught() -> None:
    assert long_lines("| short | row |\n| " + "x" * LONGEST + " |\n") == [f"line 2: {LONGEST + 4} characters"]
