"""``python -m bench [NAME ...]``: run ``bench.NAME.main()`` for each name, or for every module in bench/.

A benchmark registers by existing: add ``bench/<name>.py`` with ``main() -> int | None`` (non-zero fails).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def available() -> list[str]:
    folder = Path(__file__).resolve().parent
    return sorted(m.name for m in pkgutil.iter_modules([str(folder)]) if not m.name.startswith("_"))


def main(argv: list[str]) -> int:
    names = argv or available()
    unknown = [n for n in names if n not in available()]
    if unknown:
        print(f"unknown benchmark {unknown[0]!r}; available: {', '.join(available())}", file=sys.stderr)
        return 2
    status = 0
    for name in names:
        module = importlib.import_module(f"bench.{name}")
        if not hasattr(module, "main"):
            continue
        print(f"== bench {name} ==", flush=True)
        result = module.main()
        status = status or int(result or 0)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
