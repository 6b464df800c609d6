"""Real Flink in the loop: the path the product chooses restores in real Flink and the keyed state goes on.

``python -m bench flink_restore`` (not in ``make test`` nor the default ``make bench``: each version
starts a JVM three times, about 2 minutes). Needs, beside the project's environment, one environment
per Flink version with ``apache-flink`` from PyPI and a Java 17 runtime (Debian's openjdk-17)::

    python3.11 -m venv .venv-flink  && .venv-flink/bin/pip install apache-flink==2.3.0
    python3.11 -m venv .venv-flink1 && .venv-flink1/bin/pip install apache-flink==1.20.5
    FLINK_PYTHON=.venv-flink/bin/python,.venv-flink1/bin/python python -m bench flink_restore

(without FLINK_PYTHON those two paths are used when they exist). For each version:

1. ``bench/_flink_job.py make`` runs a keyed count for 18 s: checkpoints every 2 s (3 retained) and
   one savepoint two thirds of the way;
2. the trees are copied (``shutil.copytree``: every modification time is reset, as by ``cp -r``, a
   bucket restore or replication) and the product decides on the copy (``decide_restore`` over
   ``CheckpointStorage``, the member's own code): it must choose the checkpoint with the highest id;
3. real Flink restores that path (``bench/_flink_job.py restore``) and every key's first count must go
   on from the restored state (more than 1, at most what the first run had counted);
4. the checkpoints are removed from the copy: the product must find the job's own savepoint by listing
   its savepoint directory, and real Flink restores it with the state going on as well.

Then the same job on RocksDB with incremental checkpoints, parallelism 2, every handle a file
(``state.storage.fs.memory-threshold: 0``), one canonical and one native savepoint (issue 29):

5. the product chooses the newest checkpoint, checked to every file it names, and Flink restores it
   (in the tree Flink wrote: a copy's handles would still name the first tree's files by full path);
6. a shared file only the newest checkpoint names is deleted (a lifecycle rule, a replica behind): the
   product skips it naming the file and chooses the one before, which Flink restores;
7. the newest checkpoint's ``_metadata`` is cut to half (a copy cut short): skipped, the one before
   chosen (Flink restores it in step 6 already);
8. the job's whole ``shared/`` folder is removed: every checkpoint is skipped and the product chooses
   the newest savepoint, the native one (self-contained), which Flink restores.

``python -m bench flink_restore --fixtures [NAME ...]`` (``make flink-fixtures-check``) restores instead
the fixtures of tests/fixtures/flink/ from the trees ``bench/_make_flink_fixtures.py`` left under
``/tmp/flink-failover-fixture/`` (each file at the path its handles name), each by the Flink that wrote
it (the environment of that version among FLINK_PYTHON and ``.venv-flink*``):

9. the product chooses the fixture's newest checkpoint (``decide_restore``, checked to every file it
   names) and that Flink restores it with the job's own options (``restart-strategy.type: none``: a
   restore that fails fails the job): the job must still be running after 6 s, and the counts it
   prints go on from the restored state; a master hook's fixture (``masterhook``) must also have had its
   hook handed the master state of the checkpoint chosen (the hook prints what it got, and fails the
   restore on anything else).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from webhook.common.flink import FlinkResource
from webhook.policy.restore import RestorePolicy
from webhook.restore.decide import decide_restore
from webhook.restore.outcome import RestoreOutcome
from webhook.restore.storage.backends import Deadline
from webhook.restore.storage.search import CheckpointStorage

RUN_BY_DEFAULT = False
REPO = Path(__file__).resolve().parent.parent
JOB = REPO / "bench" / "_flink_job.py"


def _pythons() -> list[str]:
    raw = os.environ.get("FLINK_PYTHON", "")
    if raw:
        return [p for p in raw.split(",") if p]
    found = [REPO / ".venv-flink" / "bin" / "python", REPO / ".venv-flink1" / "bin" / "python"]
    return [str(p) for p in found if p.exists()]


def _flink(python: str, *args: str) -> tuple[list[dict[str, Any]], float]:
    started = time.monotonic()
    done = subprocess.run([python, str(JOB), *args], capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{python} {JOB.name} {args[0]} failed: {done.stderr[-2000:]}")
    lines: list[dict[str, Any]] = []
    for line in done.stdout.splitlines():
        row = _ROW.search(line)
        if row:
            lines.append({"key": int(row.group(1)), "count": int(row.group(2))})
        elif line.startswith("{"):
            lines.append(json.loads(line))
    return lines, time.monotonic() - started


_ROW = re.compile(r"\+[IU]\[(\d+), (\d+)\]")


def _version(python: str) -> str:
    code = "from importlib.metadata import version; print(version('apache-flink'))"
    return subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def _choose(root: Path, job_id: str, told: list[str] | None = None) -> str:
    obj = {
        "apiVersion": "flink.apache.org/v1beta1",
        "kind": "FlinkDeployment",
        "metadata": {
            "name": "bench",
            "namespace": "bench",
            "labels": {"flink-failover.io/failover": "true", "flink-failover.io/job-id": job_id},
        },
        "spec": {
            "flinkConfiguration": {
                "execution.checkpointing.dir": (root / "ck").as_uri(),
                "execution.checkpointing.savepoint-dir": (root / "sp").as_uri(),
            },
            "job": {"jarURI": "local:///job.jar", "upgradeMode": "savepoint"},
        },
    }
    storage = CheckpointStorage()
    decision = decide_restore(
        "CREATE",
        FlinkResource.from_object(obj),
        None,
        RestorePolicy(),
        lambda q: storage.snapshots(q, Deadline(10)),
    )
    if decision.outcome is not RestoreOutcome.RESTORED:
        raise AssertionError(f"nothing chosen: {decision.reason}")
    if told is not None:
        told.append(decision.reason)
    return decision.path


def _counts(lines: list[dict[str, Any]]) -> tuple[dict[int, int], dict[int, int]]:
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for line in lines:
        if "key" in line:
            first.setdefault(line["key"], line["count"])
            last[line["key"]] = line["count"]
    return first, last


ROCKSDB = ["--backend", "rocksdb", "--incremental", "--parallelism", "2", "--memory-threshold", "0"]


def _restore(
    python: str, path: str, before: dict[int, int], out: Path, options: tuple[str, ...] = ()
) -> tuple[dict[int, int], float]:
    lines, seconds = _flink(python, "restore", "--path", path, "--out", str(out), "--seconds", "8", *options)
    first, _ = _counts(lines)
    for key, count in first.items():
        if not 1 < count <= before.get(key, 0) + 1:
            raise AssertionError(f"key {key} restarted at {count} after restoring {path} (before: {before})")
    return first, seconds


def one_version(python: str) -> int:
    version = _version(python)
    with tempfile.TemporaryDirectory(prefix="flink-restore-") as tmp:
        made = Path(tmp) / "made"
        lines, make_s = _flink(python, "make", "--out", str(made), "--seconds", "18")
        job_id = lines[-1]["jobId"]
        _, before = _counts(lines)
        headers = {
            str(p.parent.relative_to(made)): p.read_bytes()[:16].hex()
            for p in sorted(made.rglob("_metadata"))
        }
        copy = Path(tmp) / "copy"
        shutil.copytree(made / "ck", copy / "ck")  # times reset
        shutil.copytree(made / "sp", copy / "sp")
        highest = max(int(h[16:32], 16) for h in headers.values())
        chosen = _choose(copy, job_id)
        if not chosen.endswith(f"/chk-{highest}"):
            raise AssertionError(f"chose {chosen}, the highest checkpoint id is {highest}")
        first_ck, restore_ck_s = _restore(python, chosen, before, Path(tmp) / "r1")
        shutil.rmtree(copy / "ck" / job_id)
        (copy / "ck" / job_id).mkdir()
        from_savepoint = _choose(copy, job_id)
        if "/sp/savepoint-" not in from_savepoint:
            raise AssertionError(f"without checkpoints the product chose {from_savepoint}")
        first_sp, restore_sp_s = _restore(python, from_savepoint, before, Path(tmp) / "r2")
    print(f"Flink {version}: job {job_id}")
    for where, header in headers.items():
        print(f"  {where}: _metadata starts {header}")
    print(f"  counted before the failover (last per key): {dict(sorted(before.items()))}  [{make_s:.1f} s]")
    print(f"  chosen {chosen.rsplit('/', 1)[-1]}; first counts after restoring it:")
    print(f"    {dict(sorted(first_ck.items()))}  [{restore_ck_s:.1f} s: JVM start, restore, 8 s of run]")
    print(f"  without checkpoints: chosen {from_savepoint.rsplit('/', 1)[-1]}; first counts after it:")
    print(f"    {dict(sorted(first_sp.items()))}  [{restore_sp_s:.1f} s]")
    return 0


def rocksdb(python: str) -> int:
    """Steps 5-8: RocksDB incremental checkpoints, checked to their files, restored by real Flink."""
    from webhook.restore.metadata import Metadata, read_metadata

    version = _version(python)
    with tempfile.TemporaryDirectory(prefix="flink-restore-rocksdb-") as tmp:
        made = Path(tmp) / "made"
        lines, make_s = _flink(
            python,
            "make",
            "--out",
            str(made),
            "--seconds",
            "18",
            "--savepoints",
            "canonical,native",
            *ROCKSDB,
        )
        job_id = lines[-1]["jobId"]
        _, before = _counts(lines)
        # In place, not copied: the handles name their files by full path, so a copy's checkpoints
        # would still name (and Flink still read) the files written here.
        copy = made
        job = copy / "ck" / job_id
        ids = sorted((int(p.name[4:]) for p in job.glob("chk-*") if (p / "_metadata").exists()), reverse=True)
        top, below = ids[0], ids[1]
        chosen = _choose(copy, job_id)
        if not chosen.endswith(f"/chk-{top}"):
            raise AssertionError(f"chose {chosen}, the newest checkpoint is chk-{top}")
        first_top, top_s = _restore(python, chosen, before, Path(tmp) / "r1", tuple(ROCKSDB))

        def shared_of(n: int) -> set[str]:
            read = read_metadata((job / f"chk-{n}" / "_metadata").read_bytes())
            assert isinstance(read, Metadata), read
            return {f.path.rsplit("/", 1)[-1] for f in read.files if "/shared/" in f.path}

        only_top = sorted(shared_of(top) - shared_of(below))
        if not only_top:
            raise AssertionError(f"chk-{top} names no shared file chk-{below} does not")
        kept = (job / "shared" / only_top[0]).read_bytes()
        (job / "shared" / only_top[0]).unlink()
        told: list[str] = []
        after_delete = _choose(copy, job_id, told)
        if not after_delete.endswith(f"/chk-{below}") or only_top[0] not in told[-1]:
            raise AssertionError(f"with {only_top[0]} gone chose {after_delete}: {told}")
        first_below, below_s = _restore(python, after_delete, before, Path(tmp) / "r2", tuple(ROCKSDB))
        (job / "shared" / only_top[0]).write_bytes(kept)
        meta = job / f"chk-{top}" / "_metadata"
        whole = meta.read_bytes()
        meta.write_bytes(whole[: len(whole) // 2])
        told_cut: list[str] = []
        after_cut = _choose(copy, job_id, told_cut)
        if not after_cut.endswith(f"/chk-{below}") or "_metadata ends at byte" not in told_cut[-1]:
            raise AssertionError(f"with chk-{top} cut chose {after_cut}: {told_cut}")
        meta.write_bytes(whole)
        shutil.rmtree(job / "shared")
        told_sp: list[str] = []
        from_savepoint = _choose(copy, job_id, told_sp)
        if "/sp/savepoint-" not in from_savepoint:
            raise AssertionError(f"without shared files chose {from_savepoint}")
        first_sp, sp_s = _restore(python, from_savepoint, before, Path(tmp) / "r3", tuple(ROCKSDB))
    print(f"Flink {version}, RocksDB incremental, parallelism 2: job {job_id}  [{make_s:.1f} s]")
    print(f"  counted before the failover (last per key): {dict(sorted(before.items()))}")
    print(f"  chosen chk-{top} (newest, every named file there); first counts after it:")
    print(f"    {dict(sorted(first_top.items()))}  [{top_s:.1f} s]")
    print(f"  {only_top[0]} (named by chk-{top} only) deleted: chosen chk-{below}; skipped as")
    print(f"    {told[-1].split('skipped ', 1)[-1][:300]}")
    print(f"    first counts after it: {dict(sorted(first_below.items()))}  [{below_s:.1f} s]")
    print(f"  chk-{top}/_metadata cut to half: chosen chk-{below}; skipped as")
    print(f"    {told_cut[-1].split('skipped ', 1)[-1][:300]}")
    print(f"  shared/ removed: chosen {from_savepoint.rsplit('/', 1)[-1]}; first counts after it:")
    print(f"    {dict(sorted(first_sp.items()))}  [{sp_s:.1f} s]")
    return 0


def fixture(name: str, pythons: dict[str, str]) -> int:
    """Step 9: the tree ``bench/_make_flink_fixtures.py`` kept of fixture ``name`` (at the root its
    handles name) restored by the Flink that wrote it, from the checkpoint the product chooses."""
    from bench._make_flink_fixtures import RESTORE, WORK, options
    from tests.support.flinktrees import tree

    each = tree(name)
    made = WORK / name
    if not (made / "ck" / each.job_id).is_dir():
        print(f"  {name}: not run: {made} is not the tree of this fixture (make it again)")
        return 1
    python = pythons.get(each.flink)
    if python is None:
        print(f"  {name}: not run: no Flink {each.flink} environment")
        return 1
    top = each.checkpoints()[0]
    told: list[str] = []
    chosen = _choose(made, each.job_id, told)
    if not chosen.endswith(f"/chk-{top}"):
        raise AssertionError(f"{name}: chose {chosen}, the newest checkpoint is chk-{top}: {told}")
    with tempfile.TemporaryDirectory(prefix="flink-restore-fixture-") as tmp:
        args = (
            "restore",
            "--path",
            chosen,
            "--out",
            tmp,
            "--seconds",
            "6",
            *options(str(each.info["variant"])),
            *RESTORE.get(str(each.info["variant"]), []),
        )
        lines, seconds = _flink(python, *args)
    status = next((line.get("status") for line in lines if "status" in line), "")
    if status != "RUNNING":
        raise AssertionError(f"{name}: Flink {each.flink} restoring chk-{top}: the job was {status}")
    # Two keyed operators (every fixture): the second counts the keys per count of the first, so the
    # keys printed are the first operator's counts, which go on from the restored state (an empty
    # restore would print counts 1, 2, 3 again).
    first, _ = _counts(lines)
    if first and min(first) <= 1:
        raise AssertionError(f"{name}: the counts started again after restoring chk-{top}: {first}")
    after = (
        f"first counts after it: {dict(sorted(first.items()))}" if first else "no counts printed (blackhole)"
    )
    hooks = [line for line in lines if "masterHook" in line]
    if each.info["variant"] == "masterhook":
        if not any(h.get("checkpoint") == h.get("restored") == top for h in hooks):
            raise AssertionError(f"{name}: the master hook was not handed chk-{top}'s state: {hooks}")
        told = ", ".join(f"master hook {h['masterHook']} handed state {h['restored']}" for h in hooks)
        after += f"; {told}"
    print(
        f"  {name}: Flink {each.flink} restored chk-{top} (the product's choice), {after}  [{seconds:.1f} s]"
    )
    return 0


def fixtures(names: list[str]) -> int:
    """``python -m bench flink_restore --fixtures [NAME ...]``: step 9 for the fixtures named, by name
    (``2.3.0-unaligned``) or variant (``unaligned``: each of its trees still where
    bench/_make_flink_fixtures.py made it); none named: every such tree."""
    from bench._make_flink_fixtures import WORK
    from tests.support.flinktrees import trees

    pythons = {_version(p): p for p in _pythons()}
    for extra in sorted(REPO.glob(".venv-flink*/bin/python")):
        pythons.setdefault(_version(str(extra)), str(extra))
    kept = [t for t in trees() if (WORK / t.name / "ck" / t.job_id).is_dir()]
    wanted = [t.name for t in kept if not names or t.name in names or t.info["variant"] in names]
    wanted += [n for n in names if n not in {str(t.info["variant"]) for t in trees()} and n not in wanted]
    status = 0
    for name in wanted:
        try:
            status = fixture(name, pythons) or status
        except (AssertionError, RuntimeError) as exc:
            print(f"FAILED {name}: {exc}", file=sys.stderr)
            status = 1
    return status


def main(argv: list[str] | None = None) -> int:
    argv = argv or []
    if argv[:1] == ["--fixtures"]:
        return fixtures(argv[1:])
    pythons = _pythons()
    if not pythons:
        print("not run: no Flink environment (FLINK_PYTHON, or .venv-flink: see bench/flink_restore.py)")
        return 1
    status = 0
    for python in pythons:
        try:
            status = one_version(python) or status
            status = rocksdb(python) or status
        except (AssertionError, RuntimeError) as exc:
            print(f"FAILED with {python}: {exc}", file=sys.stderr)
            status = 1
    return status
