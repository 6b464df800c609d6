"""Dependencies where they are used (issue 31): every library ``webhook/`` imports is declared, a runtime
dependency only when the server or a command needs it at run time, an extra's only where that extra is
named (imported inside the function that needs it, with a message naming the extra), and the test tools
(jsonschema among them) in ``dev`` alone.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions

from tests.conftest import REPO

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
# An extra's library may be imported only in these modules, inside a function (the extra is optional).
EXTRA_USERS = {
    "review": {"webhook/commands/review.py", "webhook/commands/review_answers.py"},
    # the JSON-only gcsfs class for a gs endpoint other than Google's, imported when such a policy asks for it
    "gcs": {"webhook/restore/storage/backends.py"},
}
# Runtime dependencies no module imports by name: fsspec loads them for a scheme (s3://).
LOADED_BY_NAME = {"s3fs": "fsspec's backend for s3, s3a and s3p"}


def _name(requirement: str) -> str:
    found = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert found is not None, requirement
    return found.group(0).lower().replace("_", "-")


RUNTIME = {_name(r) for r in PROJECT["dependencies"]}
EXTRAS = {
    extra: {_name(r) for r in reqs if not r.startswith("flink-failover")}
    for extra, reqs in PROJECT["optional-dependencies"].items()
}
DISTRIBUTIONS = {k: {d.lower() for d in v} for k, v in packages_distributions().items()}


def _distribution(module: str) -> str:
    """The distribution that installs ``module`` (``google.protobuf`` is protobuf's, whatever else
    shares the ``google`` namespace)."""
    if module.startswith("google.protobuf"):
        return "protobuf"
    top = module.split(".")[0]
    found = DISTRIBUTIONS.get(top, set())
    assert len(found) == 1, (module, found)
    return next(iter(found)).replace("_", "-")


def third_party_imports() -> list[tuple[str, str, bool]]:
    """(file, module, at module level) for every import of a library outside the standard library."""
    out = []
    for path in sorted((REPO / "webhook").rglob("*.py")):
        if "proto" in path.parts:
            continue  # protoc's output imports protobuf and grpc, both runtime dependencies
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top_level = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            else:
                continue
            for name in names:
                if name.split(".")[0] not in sys.stdlib_module_names | {"webhook", "__future__"}:
                    out.append((str(path.relative_to(REPO)), name, id(node) in top_level))
    return out


IMPORTS = third_party_imports()


def test_every_library_imported_is_declared_where_it_is_used() -> None:
    wrong = []
    for file, module, top in IMPORTS:
        dist = _distribution(module)
        if dist in RUNTIME:
            continue
        extras = [extra for extra, names in EXTRAS.items() if dist in names and extra != "dev"]
        allowed = any(file in EXTRA_USERS.get(extra, set()) for extra in extras)
        if not (allowed and not top):
            wrong.append(f"{file} imports {module} ({dist}): not a runtime dependency")
    assert wrong == []


def test_every_runtime_dependency_is_used() -> None:
    imported = {_distribution(module) for _, module, _ in IMPORTS}
    assert RUNTIME - imported == set(LOADED_BY_NAME)


def test_the_test_tools_are_not_runtime_dependencies() -> None:
    assert {"jsonschema", "jsonpatch", "pytest"}.isdisjoint(RUNTIME)
    assert "jsonschema" in EXTRAS["dev"] and EXTRAS["review"] == {"jsonpatch"}
