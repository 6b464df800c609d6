"""Latency and throughput of the member webhook, measured end to end over HTTPS on loopback.

``python -m bench latency [--seconds S] [--clients P] [--connections C] [--config WxT ...] [--sweep]``

The REAL server (``flink-failover serve``: gunicorn gthread, TLS from certificates made by
``flink-failover certs generate``) is driven from separate client processes that keep their
connections alive and verify the server certificate like kube-apiserver (CA bundle + service name).
Each scenario runs twice: *serial* (one connection: the time one admission takes) and *loaded* (C
connections over P processes, closed loop: throughput and latency under saturation). Every run is
bounded by time and by request count. Server, client and moto CPU are measured from /proc so that the
cost of the load generator itself is visible (both share the same cores).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench._load import LoadResult, LoadRun, LoadSpec, http_request
from bench._stack import BUCKET, JOB_10, JOB_1000, server, stack
from tests.support.objects import flink_deployment, review
from tests.support.server import RunningServer

FAILOVER = "flink-failover.io/failover"
JOB_LABEL = "flink-failover.io/job-id"


# --------------------------------------------------------------------------------------------------
# What is sent


@dataclass(frozen=True)
class Scenario:
    name: str
    body: bytes  # JSON AdmissionReview (or anything else for negative cases)
    status: int = 200
    expect: bytes = b""  # a marker that must be in every response body
    storage: str = ""  # what storage the answer needs (for the table)


def failover_labels(job_id: str) -> dict[str, str]:
    return {FAILOVER: "true", JOB_LABEL: job_id}


def scenarios(checkpoint_root: Path, with_s3: bool) -> list[Scenario]:
    """The benchmark's requests; each carries what its answer must contain."""
    noop = flink_deployment(labels={"app": "orders"})
    create_10 = flink_deployment(labels=failover_labels(JOB_10))
    create_1000 = flink_deployment(labels=failover_labels(JOB_1000))
    restored_from = f"{checkpoint_root}/{JOB_10}/chk-10"
    old = flink_deployment(
        labels=failover_labels(JOB_10),
        annotations={
            "flink-failover.io/restore-decision": "restored",
            "flink-failover.io/restored-from": restored_from,
            "flink-failover.io/restored-job-id": JOB_10,
        },
    )
    old["spec"]["job"].update({"initialSavepointPath": restored_from, "upgradeMode": "last-state"})
    update = flink_deployment(labels=failover_labels(JOB_10))  # Karmada re-applied its template: fields lost
    out = [
        Scenario("no-op", dump_json(review(noop, uid="bench-noop")), expect=b'"allowed":true}}'),
        Scenario(
            "create local 10 chk",
            dump_json(review(create_10, uid="bench-c10")),
            expect=b'"patch"',
            storage="local",
        ),
        Scenario(
            "create local 1000 chk",
            dump_json(review(create_1000, uid="bench-c1000")),
            expect=b'"patch"',
            storage="local",
        ),
        Scenario(
            "karmada re-apply UPDATE",
            dump_json(review(update, operation="UPDATE", old=old, uid="bench-update")),
            expect=b'"patch"',
        ),
    ]
    if with_s3:
        create_s3 = flink_deployment(labels=failover_labels(JOB_10), checkpoint_dir=f"s3://{BUCKET}/ckpt")
        out.append(
            Scenario(
                "create S3 (moto) 10 chk", dump_json(review(create_s3, uid="bench-s3")), 200, b'"patch"', "s3"
            )
        )
    return out


def dump_json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def measure(
    running: RunningServer,
    cases: list[Scenario],
    connections: int,
    processes: int,
    warmup: float,
    seconds: float,
    rounds: int,
) -> list[LoadResult]:
    """Each scenario measured for ``seconds`` in total, over ``rounds`` interleaved slices."""
    spec = LoadSpec(
        running.port,
        str(running.cert_dir / "ca.crt"),
        [(http_request(c.body), c.status, c.expect) for c in cases],
        connections,
        warmup,
        slice=seconds / rounds + 0.15,
        rounds=rounds,
    )
    return LoadRun(spec, processes, running.process.pid).run()


# --------------------------------------------------------------------------------------------------
# Report


def _ms(value: float) -> str:
    return f"{value * 1000:7.2f}" if not math.isnan(value) else "      -"


def table(title: str, rows: list[tuple[Scenario, LoadResult]]) -> str:
    base = rows[0][1]
    lines = [
        title,
        f"{'scenario':<25}{'req/s':>7}{'p50 ms':>8}{'p99 ms':>8}{'p99.9':>8}"
        f"{'p50x':>6}{'p99x':>6}{'p999x':>6}{'rps x':>6}{'n':>7}{'err':>4}"
        f"{'srv cpu':>8}{'ms/req':>7}{'moto':>6}{'busy':>6}",
    ]
    for scenario, r in rows:
        p50, p99 = r.percentile(50), r.percentile(99)
        per_request = r.server_cpu / r.rps * 1000 if r.rps else math.nan
        lines.append(
            f"{scenario.name:<25}{r.rps:7.0f}{_ms(p50):>8}{_ms(p99):>8}{_ms(r.percentile(99.9)):>8}"
            f"{_ratio(p50, base.percentile(50)):>6}{_ratio(p99, base.percentile(99)):>6}"
            f"{_ratio(r.percentile(99.9), base.percentile(99.9)):>6}"
            f"{_ratio(r.rps, base.rps):>6}{r.done:7d}{r.errors:4d}"
            f"{r.server_cpu:8.2f}{per_request:7.2f}{r.moto_cpu:6.2f}{r.machine_busy:6.0%}"
        )
    return "\n".join(lines)


def _ratio(a: float, b: float) -> str:
    if not b or math.isnan(a) or math.isnan(b):
        return "-"
    return f"{a / b:.2f}"


def parse_config(text: str) -> tuple[int, int]:
    workers, _, threads = text.lower().partition("x")
    return int(workers), int(threads)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench latency", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="measured seconds per scenario and mode")
    parser.add_argument("--rounds", type=int, default=4, help="interleaved slices per scenario")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds before each")
    parser.add_argument("--connections", type=int, default=16, help="keep-alive connections when loaded")
    parser.add_argument("--clients", type=int, default=2, help="client processes sharing the connections")
    parser.add_argument(
        "--config", action="append", default=[], help="WORKERSxTHREADS, repeatable (default 2x8)"
    )
    parser.add_argument("--sweep", action="store_true", help="also try 1x8 2x4 2x8 3x4 1x16 4x4")
    parser.add_argument("--no-s3", action="store_true", help="skip the moto scenario")
    parser.add_argument("--serial-only", action="store_true")
    parser.add_argument("--loaded-only", action="store_true")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures as JSON here")
    args = parser.parse_args(argv or [])
    if args.seconds <= 0 or args.seconds > 120 or args.connections < 1 or args.connections > 256:
        parser.error("--seconds must be in (0, 120] and --connections in [1, 256]")
    configs = [parse_config(c) for c in args.config] or [(2, 8)]
    if args.sweep:
        configs = [(1, 8), (2, 4), (2, 8), (3, 4), (1, 16), (4, 4)]
    print(
        f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start; "
        f"python {sys.version.split()[0]}; each scenario measured {args.seconds:g} s in {args.rounds} slices "
        f"after {args.warmup:g} s warm-up",
        flush=True,
    )
    failed = False
    figures: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-latency-") as tmp, stack(Path(tmp), not args.no_s3) as st:
        cases = scenarios(st.checkpoint_root, st.s3_endpoint is not None)
        for workers, threads in configs:
            with server(st, workers, threads, f"server-{workers}x{threads}.log") as running:
                modes = []
                if not args.loaded_only:
                    modes.append(("serial", 1, 1))
                if not args.serial_only:
                    modes.append(("loaded", args.connections, args.clients))
                for mode, conns, procs in modes:
                    results = measure(running, cases, conns, procs, args.warmup, args.seconds, args.rounds)
                    rows = list(zip(cases, results, strict=True))
                    for case, result in rows:
                        if result.errors:
                            failed = True
                            print(f"  {case.name}: {result.errors} errors, first: {result.first_error}")
                        figures.append(
                            {
                                "config": f"{workers}x{threads}",
                                "mode": mode,
                                "connections": conns,
                                "scenario": case.name,
                                "rps": round(result.rps, 1),
                                "p50_ms": round(result.percentile(50) * 1000, 3),
                                "p99_ms": round(result.percentile(99) * 1000, 3),
                                "p999_ms": round(result.percentile(99.9) * 1000, 3),
                                "requests": result.done,
                                "errors": result.errors,
                                "server_cpu": round(result.server_cpu, 2),
                                "client_cpu": round(result.client_cpu, 2),
                                "moto_cpu": round(result.moto_cpu, 2),
                                "machine_busy": round(result.machine_busy, 2),
                            }
                        )
                    title = (
                        f"\n-- {workers} workers x {threads} threads, {mode}: {conns} keep-alive "
                        f"connection(s) from {min(procs, conns)} client process(es), "
                        f"client cpu {results[0].client_cpu:.2f} cores --"
                    )
                    print(table(title, rows), flush=True)
    print(
        "\ncolumns: p50x/p99x/p999x/rps x = ratio to the no-op in the same run; srv cpu / moto = cores used "
        "by the gunicorn processes / moto while the scenario was measured; ms/req = server CPU per "
        "admission; busy = share of all cores busy on the machine (including other work); scenarios "
        "are interleaved in --rounds slices so that background load hits them alike"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
