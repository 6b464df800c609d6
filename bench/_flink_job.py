"""A small keyed-state Flink job that writes real checkpoints and savepoints, and restores from a path.

Run by the Python of an environment with ``apache-flink`` (PyPI: 1.20.x or 2.x) and a Java 17 runtime
(Debian: ``apt-get install openjdk-17-jre-headless``; ``--shape masterhook`` needs ``javac`` too:
``openjdk-17-jdk-headless``), NOT the project's own environment::

    python bench/_flink_job.py make --out DIR [--seconds 18]
        # DIR/ck/<jobId>/chk-N/_metadata (a checkpoint every 2 s, 3 retained, kept on cancel)
        # DIR/sp/savepoint-<6 hex>-<12 hex>/_metadata (one savepoint, taken two thirds of the way)
        # the print sink writes each count (+I[k, n], +U[k, n]); then one JSON line {"jobId": ...}
    python bench/_flink_job.py restore --path PATH --out DIR [--seconds 8]
        # the same job started from PATH (2.x: execution.state-recovery.path; 1.x:
        # execution.savepoint.path); prints the same

Options of both commands (the defaults are the trees of ``../shared/data/flink-real/``)::

    --backend hashmap|rocksdb   --incremental        --parallelism N      --operators 1|2
    --memory-threshold SIZE     (state.storage.fs.memory-threshold: "0" writes every handle to a file)
    --file-merging              (execution.checkpointing.file-merging.enabled, Flink 1.20+)
    --savepoints canonical,native   (make: one savepoint of each format named, spread over the run)
    --shape counts|sources|backpressure|finished|masterhook   (which job; counts is the default, below)
    --unaligned                 (unaligned checkpoints, at once: in-flight buffers become channel state)
    --changelog                 (the changelog state backend, its log files under DIR/changelog)

The shapes beside ``counts``, each to put one more kind of handle into ``_metadata``:

- ``sources``: the same counts over a ``datagen`` source with a ``sequence`` field (4 rows/s, 1 to
  400: Flink's generator keeps what is left of the sequence in its state): operator state (a legacy
  source's ListState in Flink 1.20 to 2.3);
- ``backpressure``: a FLIP-27 ``NumberSequenceSource`` at full speed into a keyed count into a
  ``blackhole`` sink: coordinator state, split state as operator state, and with ``--unaligned`` the
  buffers in flight between them as channel state;
- ``finished``: the counts and, in the same job, a bounded ``datagen`` (8 rows) into a ``print`` sink,
  whose tasks finish while the job runs: the checkpoints after that hold finished operators;
- ``masterhook``: the counts with the rows of ``datagen`` passed through a Java identity map
  (``bench/flink_hooks/MasterHookMap.java``, compiled here with ``javac`` against this Flink's jars
  into a jar of a temporary directory) implementing ``WithMasterCheckpointHook``: its hook writes a
  master state into every checkpoint (identifier ``flink-failover-masterhook``, the checkpoint id as 8
  bytes) and, on a restore, prints ``{"masterHook": ..., "checkpoint": N, "restored": N}`` and fails
  the restore unless it was handed the state of the checkpoint restored.

``restore`` runs with ``restart-strategy.type: none`` (a restore that fails fails the job) and reports the
job's status before it cancels (``"status": "RUNNING"`` when the restore held); ``--claim`` restores in
CLAIM mode, which a changelog checkpoint needs.

The job: ``datagen`` at 4 rows/s with a random key 1..3, ``SELECT k, COUNT(*) ... GROUP BY k`` (keyed
state), parallelism 1, local mini-cluster; with ``--operators 2`` a second keyed aggregation counts the
keys per count (``SELECT c, COUNT(*) FROM (...) GROUP BY c``), so two operators hold keyed state. The
keyed counts after a restore go on from the restored values instead of starting from 1: that is what
``bench/flink_restore.py`` checks. The trees in ``../shared/data/flink-real/`` were made this way, those
of tests/fixtures/flink/ by ``bench/_make_flink_fixtures.py``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

HOOKS = Path(__file__).resolve().parent / "flink_hooks"


def _version() -> tuple[int, ...]:
    from importlib.metadata import version

    return tuple(int(p) for p in version("apache-flink").split(".")[:2])


def _environment(checkpoints: Path, savepoints: Path, args: argparse.Namespace, restore: str = "") -> Any:
    from pyflink.common import Configuration
    from pyflink.table import EnvironmentSettings, TableEnvironment

    conf = Configuration()
    conf.set_string("parallelism.default", str(args.parallelism))
    conf.set_string("state.backend.type", args.backend)
    if args.incremental:
        conf.set_string("execution.checkpointing.incremental", "true")
        conf.set_string("state.backend.incremental", "true")
    if args.memory_threshold:
        conf.set_string("execution.checkpointing.memory-threshold", args.memory_threshold)
        conf.set_string("state.storage.fs.memory-threshold", args.memory_threshold)
    if args.file_merging:
        conf.set_string("execution.checkpointing.file-merging.enabled", "true")
    if args.unaligned:
        conf.set_string("execution.checkpointing.unaligned.enabled", "true")
        conf.set_string("execution.checkpointing.unaligned", "true")
        conf.set_string("execution.checkpointing.aligned-checkpoint-timeout", "0 s")
    if args.changelog:
        conf.set_string("state.changelog.enabled", "true")
        conf.set_string("state.changelog.storage", "filesystem")
        conf.set_string("dstl.dfs.base-path", (checkpoints.parent / "changelog").resolve().as_uri())
        conf.set_string("state.changelog.periodic-materialize.interval", "4 s")
    if args.shape == "finished":
        conf.set_string("execution.checkpointing.checkpoints-after-tasks-finish.enabled", "true")
        conf.set_string("execution.checkpointing.checkpoints-after-tasks-finish", "true")
    if args.command == "restore":
        conf.set_string("restart-strategy.type", "none")
    conf.set_string("execution.checkpointing.interval", "2 s")
    conf.set_string("state.checkpoints.num-retained", "3")
    conf.set_string("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION")
    conf.set_string("execution.checkpointing.dir", checkpoints.resolve().as_uri())
    conf.set_string("state.checkpoints.dir", checkpoints.resolve().as_uri())
    conf.set_string("execution.checkpointing.savepoint-dir", savepoints.resolve().as_uri())
    conf.set_string("state.savepoints.dir", savepoints.resolve().as_uri())
    if restore:
        key = "execution.state-recovery.path" if _version() >= (2, 0) else "execution.savepoint.path"
        conf.set_string(key, restore)
        if args.claim:  # Flink owns the restored checkpoint (the changelog backend needs it: see --claim)
            mode = (
                "execution.state-recovery.claim-mode"
                if _version() >= (2, 0)
                else "execution.savepoint-restore-mode"
            )
            conf.set_string(mode, "CLAIM")
    settings = EnvironmentSettings.new_instance().in_streaming_mode().with_configuration(conf).build()
    if args.shape in ("backpressure", "masterhook"):  # a DataStream in the job: a StreamTableEnvironment
        from pyflink.datastream import StreamExecutionEnvironment
        from pyflink.table import StreamTableEnvironment

        stream = StreamExecutionEnvironment.get_execution_environment(conf)
        if args.shape == "masterhook":
            stream.add_jars(_hook_jar(Path(args.jars)).as_uri())
        tables = StreamTableEnvironment.create(stream, settings)
        tables.stream = stream  # the source is added to this one
        return tables
    return TableEnvironment.create(settings)


def _hook_jar(into: Path) -> Path:
    """``bench/flink_hooks/*.java`` compiled against the jars of the Flink running here, as a jar in
    ``into``."""
    import pyflink

    classes = into / "classes"
    lib = Path(pyflink.__file__).resolve().parent / "lib"
    sources = sorted(str(p) for p in HOOKS.glob("*.java"))
    subprocess.run(["javac", "-cp", f"{lib}/*", "-d", str(classes), *sources], check=True)
    jar = into / "flink-failover-hooks.jar"
    with zipfile.ZipFile(jar, "w") as out:
        out.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
        for each in sorted(classes.rglob("*.class")):
            out.write(each, str(each.relative_to(classes)))
    return jar


def _hooked(env: Any) -> None:
    """The view ``src``: the rows of ``gen`` through the Java map whose master hook writes a master state
    (``bench/flink_hooks/MasterHookMap.java``)."""
    from pyflink.datastream import DataStream
    from pyflink.java_gateway import get_gateway

    rows = env.to_data_stream(env.from_path("gen"))._j_data_stream
    hook = get_gateway().jvm.flinkfailover.bench.MasterHookMap()
    env.create_temporary_view("src", env.from_data_stream(DataStream(rows.map(hook, rows.getType()))))


def _counts(env: Any, shape: str, operators: int) -> str:
    """Create the source and sink tables of ``shape``; the INSERT that counts."""
    sink = "blackhole" if shape == "backpressure" else "print"
    env.execute_sql(f"CREATE TABLE snk (k INT, c BIGINT) WITH ('connector' = '{sink}')")
    if shape == "backpressure":
        from pyflink.common import WatermarkStrategy
        from pyflink.datastream.connectors.number_seq import NumberSequenceSource

        source = env.stream.from_source(
            NumberSequenceSource(1, 2**62), WatermarkStrategy.no_watermarks(), "numbers"
        )
        env.create_temporary_view("numbers", env.from_data_stream(source))
        env.execute_sql("CREATE TEMPORARY VIEW src AS SELECT CAST(MOD(f0, 3) + 1 AS INT) AS k FROM numbers")
    elif shape == "sources":
        env.execute_sql(
            "CREATE TABLE gen (n BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '4', "
            "'fields.n.kind' = 'sequence', 'fields.n.start' = '1', 'fields.n.end' = '400')"
        )
        env.execute_sql("CREATE TEMPORARY VIEW src AS SELECT CAST(MOD(n, 3) + 1 AS INT) AS k FROM gen")
    elif shape == "masterhook":
        env.execute_sql(
            "CREATE TABLE gen (k INT) WITH ('connector' = 'datagen', 'rows-per-second' = '4', "
            "'fields.k.kind' = 'random', 'fields.k.min' = '1', 'fields.k.max' = '3')"
        )
        _hooked(env)
    else:
        env.execute_sql(
            "CREATE TABLE src (k INT) WITH ('connector' = 'datagen', 'rows-per-second' = '4', "
            "'fields.k.kind' = 'random', 'fields.k.min' = '1', 'fields.k.max' = '3')"
        )
    counts = "SELECT k, COUNT(*) AS c FROM src GROUP BY k"
    if operators > 1:  # a second keyed aggregation over the first one's counts: (count, keys with it)
        counts = f"SELECT CAST(c AS INT) AS k, COUNT(*) AS c FROM ({counts}) GROUP BY c"
    return f"INSERT INTO snk {counts}"


def _status(client: Any) -> str:
    """The job's status ("RUNNING", "FAILED", ...); "ENDED" when the local mini-cluster has already shut
    down (it does when its only job ends)."""
    try:
        return str(client.get_job_status().result()).rsplit(".", 1)[-1]
    except Exception:
        return "ENDED"


def _run(
    env: Any,
    seconds: float,
    formats: list[str],
    savepoints: Path,
    operators: int = 1,
    shape: str = "counts",
    checkpoints: Path = Path("."),
) -> dict[str, Any]:
    """Run the job for ``seconds``; the print sink writes each count to the JVM's stdout (``+I[k, n]``,
    ``+U[k, n]``), which this process shares. A print sink keeps no state of its own: a collecting sink
    would restore its own buffer offsets from the snapshot and fail (Flink's collect sink is not made
    for restores)."""
    insert = _counts(env, shape, operators)
    if shape == "finished":  # a second, bounded pipeline in the same job: its tasks finish
        env.execute_sql(
            "CREATE TABLE few (n BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '8', "
            "'fields.n.kind' = 'sequence', 'fields.n.start' = '1', 'fields.n.end' = '8')"
        )
        env.execute_sql(
            "CREATE TABLE done (n BIGINT) WITH ('connector' = 'print', 'print-identifier' = 'done')"
        )
        both = env.create_statement_set()
        both.add_insert_sql(insert)
        both.add_insert_sql("INSERT INTO done SELECT n FROM few")
        result = both.execute()
    else:
        result = env.execute_sql(insert)
    client = result.get_job_client()
    out: dict[str, Any] = {"jobId": str(client.get_job_id()), "savepoint": "", "savepoints": {}}
    # The run's time counts from the first completed checkpoint: on a loaded machine the tasks take
    # a while to start, and a run that ends before any checkpoint keeps nothing.
    first = time.monotonic()
    while not any(checkpoints.glob(f"{out['jobId']}/chk-*/_metadata")) and time.monotonic() - first < 300:
        if _status(client) in ("FAILED", "CANCELED", "FINISHED", "ENDED"):
            break  # a restore that failed: no checkpoint will come
        time.sleep(0.5)
    started = time.monotonic()
    for i, name in enumerate(formats):
        # Spread over the run, the first two thirds of the way (one format: at two thirds, as before).
        at = seconds * 2 / 3 if len(formats) == 1 else seconds * (i + 1) / (len(formats) + 1)
        time.sleep(max(0.0, at - (time.monotonic() - started)))
        # The Java client's two-argument form (Flink 1.15+; 2.x has only this one).
        from pyflink.java_gateway import get_gateway

        kind = getattr(get_gateway().jvm.org.apache.flink.core.execution.SavepointFormatType, name.upper())
        target = savepoints.resolve().as_uri()
        path = str(client._j_job_client.triggerSavepoint(target, kind).get())
        out["savepoint"] = out["savepoint"] or path
        out["savepoints"][name] = path
    time.sleep(max(0.0, seconds - (time.monotonic() - started)))
    out["status"] = _status(client)
    if out["status"] == "RUNNING":
        client.cancel().result()  # the retained checkpoints stay
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("make")
    make.add_argument("--out", type=Path, required=True)
    make.add_argument("--seconds", type=float, default=18.0)
    make.add_argument("--savepoints", default="canonical")
    restore = sub.add_parser("restore")
    restore.add_argument("--out", type=Path, required=True)
    restore.add_argument("--path", required=True)
    restore.add_argument("--seconds", type=float, default=8.0)
    # A changelog checkpoint restored in NO_CLAIM mode (the default) fails the first checkpoint after it
    # ("ChangelogStateBackend does not support enforcing a full snapshot", Flink 2.3.0, measured).
    restore.add_argument("--claim", action="store_true")
    for each in (make, restore):
        each.add_argument("--backend", choices=("hashmap", "rocksdb"), default="hashmap")
        each.add_argument("--incremental", action="store_true")
        each.add_argument("--parallelism", type=int, default=1)
        each.add_argument("--operators", type=int, choices=(1, 2), default=1)
        each.add_argument("--memory-threshold", default="")
        each.add_argument("--file-merging", action="store_true")
        each.add_argument(
            "--shape",
            choices=("counts", "sources", "backpressure", "finished", "masterhook"),
            default="counts",
        )
        each.add_argument("--unaligned", action="store_true")
        each.add_argument("--changelog", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="flink-failover-jars-") as jars:  # the hook's jar (masterhook)
        args.jars = jars
        return _main(args)


def _main(args: argparse.Namespace) -> int:
    checkpoints, savepoints = args.out / "ck", args.out / "sp"
    checkpoints.mkdir(parents=True, exist_ok=True)
    savepoints.mkdir(parents=True, exist_ok=True)
    if args.command == "make":
        env = _environment(checkpoints, savepoints, args)
        formats = [f for f in args.savepoints.split(",") if f]
        done = _run(env, args.seconds, formats, savepoints, args.operators, args.shape, checkpoints)
    else:
        env = _environment(checkpoints, savepoints, args, args.path)
        done = _run(env, args.seconds, [], savepoints, args.operators, args.shape, checkpoints)
    print(json.dumps(done), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
