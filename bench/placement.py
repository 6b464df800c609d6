"""Component-fit placement benchmark: our sets and time beside Karmada v1.18.2's on the shared instances.

Instances are generated into a temporary folder by the shared generator; Karmada's figures are read from
the shared README at run time. Also compares our answer with the exact optimum on small random instances.
Exit status 1 if any row has fewer sets than Karmada, an invalid witness, or sets above the upper bound.
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.exact import exact_sets
from tests.support.karmada_figures import WORKLOADS, KarmadaRow, read_karmada_figures
from tests.support.witness import witness_problems
from webhook.placement.cluster import load_cluster_file
from webhook.placement.components import load_workload
from webhook.placement.estimate import estimate
from webhook.placement.fields import load_documents
from webhook.placement.firstfit import first_fit
from webhook.placement.model import Cluster, Component, Node, Taint, Toleration
from webhook.placement.prepare import prepare

REPO = Path(__file__).resolve().parent.parent
RUNS = 5  # median of 5, like the Karmada figures


def shared_bench_dir() -> Path:
    env = os.environ.get("FLINK_FAILOVER_SHARED_BENCH")
    return Path(env) if env else REPO.parent / "shared" / "bench"


def generate(into: Path) -> None:
    script = shared_bench_dir() / "make_placement_instances.py"
    subprocess.run([sys.executable, str(script), str(into)], check=True, stdout=subprocess.DEVNULL)


@dataclass
class Row:
    instance: str
    workload: str
    nodes: int
    sets: int
    upper: int
    ms: float
    cpu_ms: float
    karmada_sets: int
    karmada_ms: float
    first_fit: int
    ok: bool
    note: str


def run_row(
    instance: str, clusters: list[Cluster], workload: str, comps: tuple[Component, ...], k: KarmadaRow
) -> Row:
    total_sets = total_upper = total_ff = 0
    total_ms = total_cpu = 0.0
    problems: list[str] = []
    for cluster in clusters:
        times = []
        result = estimate(cluster, comps)  # warm-up, as for the Karmada figures
        cpu = []
        for _ in range(RUNS):
            started = time.process_time()
            result = estimate(cluster, comps)
            cpu.append((time.process_time() - started) * 1000.0)
            times.append(result.elapsed_ms)
        total_ms += statistics.median(times)
        total_cpu += statistics.median(cpu)
        total_sets += result.sets
        total_upper += result.upper_bound
        total_ff += result.first_fit_sets
        bad = witness_problems(cluster, comps, result.sets, result.assignment)
        if bad:
            problems.append(f"{cluster.name}: invalid witness: {bad[0]}")
        if result.sets > result.upper_bound:
            problems.append(f"{cluster.name}: sets above upper bound")
        want = k.per_cluster.get(cluster.name, (k.sets, 0.0))[0] if len(clusters) > 1 else k.sets
        if result.sets < want:
            problems.append(f"{cluster.name}: {result.sets} sets < Karmada's {want}")
    nodes = sum(len(c.nodes) for c in clusters)
    return Row(
        instance,
        workload,
        nodes,
        total_sets,
        total_upper,
        total_ms,
        total_cpu,
        k.sets,
        k.ms,
        total_ff,
        not problems,
        "; ".join(problems),
    )


def _random_instance(rng: random.Random) -> tuple[Cluster, tuple[Component, ...]]:
    """Tiny clusters with labels, taints, a GPU resource and pod limits; 2-3 components that share nodes."""
    nodes = []
    for i in range(rng.randint(1, 5)):
        taints = (Taint("dedicated", "flink"),) if rng.random() < 0.3 else ()
        free = {"cpu": rng.randint(0, 12) * 500, "memory": rng.randint(0, 24), "pods": rng.randint(1, 10)}
        if rng.random() < 0.4:
            free["nvidia.com/gpu"] = rng.randint(0, 2)
        nodes.append(Node(f"n{i}", free, {"pool": rng.choice(["a", "b"])}, taints))
    comps = []
    for j in range(rng.randint(2, 3)):
        requests = {"cpu": rng.randint(1, 10) * 250, "memory": rng.randint(1, 12)}
        if rng.random() < 0.2:
            requests["nvidia.com/gpu"] = 1
        selector = {"pool": rng.choice(["a", "b"])} if rng.random() < 0.3 else {}
        tolerations = (Toleration("dedicated", "Equal", "flink", "NoSchedule"),) if rng.random() < 0.5 else ()
        comps.append(Component(f"c{j}", rng.randint(1, 4), requests, selector, tolerations))
    return Cluster("random", tuple(nodes)), tuple(comps)


def random_comparison(count: int = 300, seed: int = 5) -> tuple[int, int, int, int, int, float]:
    """(instances, ours == exact, first fit == exact, ours > first fit, invalid witnesses, ms each)."""
    rng = random.Random(seed)
    same = ff_same = better = invalid = 0
    spent = 0.0
    for _ in range(count):
        cluster, comps = _random_instance(rng)
        started = time.perf_counter()
        ours = estimate(cluster, comps)
        spent += time.perf_counter() - started
        best = exact_sets(cluster, comps)
        ff = first_fit(prepare(cluster, comps), best + 1)[0]
        same += ours.sets == best
        ff_same += ff == best
        better += ours.sets > ff
        invalid += (
            bool(witness_problems(cluster, comps, ours.sets, ours.assignment)) or ours.sets > ours.upper_bound
        )
    return count, same, ff_same, better, invalid, spent * 1000.0 / count


def main() -> int:
    shared = shared_bench_dir()
    readme = shared / "README.md"
    if not readme.is_file():
        print(f"shared bench not found at {shared} (set FLINK_FAILOVER_SHARED_BENCH)", file=sys.stderr)
        return 1
    karmada = read_karmada_figures(readme)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="placement-bench-") as tmp:
        folder = Path(tmp)
        generate(folder)
        for instance in (
            "clusters-100.yaml",
            "clusters-1000.yaml",
            "clusters-10000.yaml",
            "clusters-20x500.yaml",
        ):
            clusters = load_cluster_file(folder / instance)  # parsing is not timed, as for Karmada
            for workload in WORKLOADS:
                comps = load_workload(load_documents(folder / f"workload-{workload}.yaml")[0])
                rows.append(run_row(instance, clusters, workload, comps, karmada[(instance, workload)]))
                if os.environ.get("BENCH_VERBOSE"):
                    print(_format_row(rows[-1]), flush=True)
    print("Component-fit placement vs Karmada v1.18.2's accurate estimator (Go, median of 5).")
    print(f"Ours: Python, one core; median of {RUNS} runs of wall time (elapsedMs) and of CPU time, which")
    print("other jobs on a shared machine disturb less. 20x500 rows sum the 20 clusters.")
    header = (
        "instance",
        "workload",
        "nodes",
        "sets",
        "upper",
        "ours ms",
        "ours CPU ms",
        "Karmada sets",
        "Karmada ms",
        "speed-up",
        "check",
    )
    table = [header] + [_cells(r) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print(
            "  ".join(
                c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    for r in rows:
        if not r.ok:
            print(f"FAIL {r.instance} {r.workload}: {r.note}")
    count, same, ff_same, better, invalid, ms = random_comparison()
    print()
    print("Small random instances (1-5 nodes, 2-3 components on shared nodes;")
    print("taints, selectors, GPUs and pod limits) against the exact optimum:")
    print(f"  instances                     {count}")
    print(f"  ours == exact optimum         {same}")
    print(f"  Karmada first fit == optimum  {ff_same}")
    print(f"  ours > Karmada first fit      {better}")
    print(f"  invalid witness / above bound {invalid}")
    print(f"  ours, mean ms per instance    {ms:.3f}")
    failed = any(not r.ok for r in rows) or invalid > 0
    return 1 if failed else 0


def _cells(r: Row) -> tuple[str, ...]:
    ratio = r.karmada_ms / r.ms if r.ms > 0 else 0.0
    speed = f"{ratio:.1f}x" if ratio >= 1 else f"{ratio:.2f}x"
    return (
        r.instance,
        r.workload,
        f"{r.nodes:,}",
        str(r.sets),
        str(r.upper),
        f"{r.ms:.1f}",
        f"{r.cpu_ms:.1f}",
        str(r.karmada_sets),
        f"{r.karmada_ms:.1f}",
        speed,
        "ok" if r.ok else "FAIL",
    )


def _format_row(r: Row) -> str:
    return " ".join(_cells(r))


if __name__ == "__main__":
    sys.exit(main())
