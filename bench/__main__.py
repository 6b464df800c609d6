"""``python -m bench [NAME ...] [-- ARGS]`` or ``python -m bench NAME --opt ...``.

A benchmark registers by existing: add ``bench/<name>.py`` with ``main() -> int | None`` (non-zero fails).
A module whose ``main`` takes one parameter gets the remaining command-line arguments (``argv``) when it
is the only one named, e.g. ``python -m bench soak --seconds 60``. A module that sets
``RUN_BY_DEFAULT = False`` (the long soak) runs only when named.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
from pathlib import Path


def available() -> list[str]:
    folder = Path(__file__).resolve().parent
    return sorted(m.name for m in pkgutil.iter_modules([str(folder)]) if not m.name.startswith("_"))


def main(argv: list[str]) -> int:
    split = next((i for i, a in enumerate(argv) if a.startswith("-")), len(argv))
    names, options = argv[:split], argv[split:]
    if options and options[0] == "--":
        options = options[1:]
    if options and len(names) != 1:
        print("options need exactly one benchmark name: python -m bench soak --seconds 60", file=sys.stderr)
        return 2
    explicit = bool(names)
    names = names or available()
    unknown = [n for n in names if n not in available()]
    if unknown:
        print(f"unknown benchmark {unknown[0]!r}; available: {', '.join(available())}", file=sys.stderr)
        return 2
    status = 0
    for name in names:
        module = importlib.import_module(f"bench.{name}")
        if not hasattr(module, "main"):
            continue
        if not explicit and not getattr(module, "RUN_BY_DEFAULT", True):
            print(f"== bench {name}: skipped (run it by name: python -m bench {name}) ==", flush=True)
            continue
        print(f"== bench {name} ==", flush=True)
        takes_args = len(inspect.signature(module.main).parameters) >= 1
        result = module.main(options) if takes_args else module.main()
        status = status or int(result or 0)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
