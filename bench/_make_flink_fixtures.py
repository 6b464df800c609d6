"""Make the real-Flink fixtures of tests/fixtures/flink/: ``python -m bench._make_flink_fixtures``.

Runs ``bench/_flink_job.py make`` under each Flink environment (FLINK_PYTHON, else ``.venv-flink`` and
``.venv-flink1``: see bench/flink_restore.py) for each variant named (``python -m
bench._make_flink_fixtures sources unaligned``; none named: the first three below), writing into
``/tmp/flink-failover-fixture/<version>-<variant>/`` (the path Flink then writes into every handle),
and keeps of each tree only what is small: every ``_metadata`` file as Flink wrote it, and
``files.tsv`` naming every other file with its size (the tests make those files again, of that size,
wherever they put the tree: tests/support/flinktrees.py). ``tree.json`` records the jobId, the root
Flink wrote into the handles, the savepoints by format and the Flink version.

Each variant runs 12 s from its first completed checkpoint: checkpoints every 2 s (3 retained),
parallelism 2, two keyed operators,
``state.storage.fs.memory-threshold: 0`` (every state handle is a file, none inlined), one canonical
and one native savepoint.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
JOB = REPO / "bench" / "_flink_job.py"
OUT = REPO / "tests" / "fixtures" / "flink"
WORK = Path("/tmp/flink-failover-fixture")
COMMON = ["--seconds", "12", "--parallelism", "2", "--operators", "2", "--memory-threshold", "0"]
VARIANTS: dict[str, list[str]] = {
    "rocksdb-incremental": ["--backend", "rocksdb", "--incremental"],
    "rocksdb-file-merging": ["--backend", "rocksdb", "--incremental", "--file-merging"],
    "hashmap-files": ["--backend", "hashmap"],
    # Issue 36: one more kind of handle each (bench/_flink_job.py says what each shape holds).
    "sources": ["--backend", "hashmap", "--shape", "sources"],  # a source's operator state
    "sources-file-merging": ["--backend", "rocksdb", "--incremental", "--file-merging", "--shape", "sources"],
    "unaligned": ["--backend", "hashmap", "--shape", "backpressure", "--unaligned"],  # + coordinator state
    "changelog": ["--backend", "hashmap", "--changelog"],
    "finished": ["--backend", "hashmap", "--shape", "finished"],
    "masterhook": ["--backend", "hashmap", "--shape", "masterhook"],  # a master state (a Java map's hook)
}
# Restored in CLAIM mode: in NO_CLAIM mode (the default) the first checkpoint after restoring a
# changelog checkpoint fails the job (Flink 2.3.0: "ChangelogStateBackend does not support enforcing a
# full snapshot. If you are restoring in NO_CLAIM mode, please consider choosing CLAIM mode.").
RESTORE = {"changelog": ["--claim"]}
# A job some of whose tasks finished takes no savepoint (Flink refuses one); the others take both.
SAVEPOINTS = {"finished": ""}
# Made when no variant is named (the others by name, in the Flink environments FLINK_PYTHON names).
ORIGINAL = ("rocksdb-incremental", "rocksdb-file-merging", "hashmap-files")


def _pythons() -> list[str]:
    raw = os.environ.get("FLINK_PYTHON", "")
    if raw:
        return [p for p in raw.split(",") if p]
    found = [REPO / ".venv-flink" / "bin" / "python", REPO / ".venv-flink1" / "bin" / "python"]
    return [str(p) for p in found if p.exists()]


def _version(python: str) -> str:
    code = "from importlib.metadata import version; print(version('apache-flink'))"
    return subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def options(variant: str) -> list[str]:
    """The job's options of ``variant`` (without the run's length): a restore takes the same."""
    common = [a for i, a in enumerate(COMMON) if "--seconds" not in COMMON[max(i - 1, 0) : i + 1]]
    return [*common, *VARIANTS[variant]]


def make(python: str, variant: str) -> Path:
    version = _version(python)
    name = f"{version}-{variant}"
    tree = WORK / name
    shutil.rmtree(tree, ignore_errors=True)
    args = [python, str(JOB), "make", "--out", str(tree), *COMMON, *VARIANTS[variant]]
    args += ["--savepoints", SAVEPOINTS.get(variant, "canonical,native")]
    done = subprocess.run(args, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{name}: {done.stderr[-2000:]}")
    result = json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])
    if result.get("status") != "RUNNING":
        raise RuntimeError(f"{name}: the job was {result.get('status')} at the end of its run")
    keep = OUT / name
    shutil.rmtree(keep, ignore_errors=True)
    rows = []
    for path in sorted(p for p in tree.rglob("*") if p.is_file()):
        rel = path.relative_to(tree)
        if path.name == "_metadata":
            (keep / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, keep / rel)
        else:
            rows.append(f"{rel}\t{path.stat().st_size}")
    (keep / "files.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    savepoints = {k: v.rstrip("/").rsplit("/", 1)[-1] for k, v in result["savepoints"].items()}
    info = {
        "flink": version,
        "variant": variant,
        "jobId": result["jobId"],
        "root": tree.as_uri().replace("file:///", "file:/"),  # Flink writes file:/ with one slash
        "savepoints": savepoints,
        "made": " ".join(["bench/_flink_job.py make", *COMMON, *VARIANTS[variant]]),
    }
    (keep / "tree.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return keep


def main(argv: list[str]) -> int:
    wanted = argv or list(ORIGINAL)
    unknown = [v for v in wanted if v not in VARIANTS]
    if unknown:
        print(f"unknown variant {unknown[0]!r}; known: {', '.join(VARIANTS)}", file=sys.stderr)
        return 2
    for python in _pythons():
        for variant in wanted:
            print(make(python, variant), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
