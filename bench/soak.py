"""Soak: mixed admission load against the real server for a long time, watching for leaks.

``python -m bench soak [--seconds 600] [--rate 300] [--connections 8] [--clients 2] [--workers 2]
[--threads 8]`` (not part of a plain ``python -m bench``: it runs for ten minutes by default).

Every request of a mix (no-op, failover CREATE on local storage with 10 and 1,000 checkpoints and on
S3 through moto, Karmada re-apply UPDATE, nothing restorable, a bad jobId, a body that is not JSON,
``GET /metrics``) must get exactly its expected answer. Each second the resident memory, open file
descriptors and threads of all gunicorn processes are read from /proc. The run fails (exit 1) on
any unexpected answer, on a worker that died or was replaced, or when growth passes the bounds:

* RSS: the highest total in the final 15 % of the run may exceed the highest total of the baseline
  window (15 % of the run after the first 10 %, once caches and thread pools are warm) by at most
  ``max(16 MiB, 10 %)``; and the least-squares slope over the second half must stay below 2 MiB/min
  (a leak of one object per request shows as a steady slope long before it fills memory);
* file descriptors and threads: the final window's highest count may exceed the baseline's highest
  by at most 4 (the storage pool and keep-alive connections are bounded; a leak grows without end).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench._load import HEALTHZ, LoadRun, LoadSpec, http_request
from bench._procstat import process_tree
from bench._stack import JOB_EMPTY, server, stack
from bench.latency import Scenario, dump_json, failover_labels, scenarios
from tests.support.objects import flink_deployment, review
from tests.support.server import SERVICE_NAME

RUN_BY_DEFAULT = False  # ten minutes: run it by name

RSS_BOUND_MIB = 16.0
RSS_BOUND_FRACTION = 0.10
SLOPE_BOUND_MIB_PER_MIN = 2.0
COUNT_BOUND = 4  # file descriptors, threads


@dataclass
class Sample:
    t: float
    rss: int  # bytes, all gunicorn processes
    fds: int
    threads: int
    pids: tuple[int, ...]


def sample(root: int, t: float) -> Sample:
    rss = fds = threads = 0
    pids = tuple(sorted(process_tree(root)))
    for pid in pids:
        with contextlib.suppress(OSError):
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss += int(line.split()[1]) * 1024
                    elif line.startswith("Threads:"):
                        threads += int(line.split()[1])
            fds += len(os.listdir(f"/proc/{pid}/fd"))
    return Sample(t, rss, fds, threads, pids)


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope (units per second)."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    var = sum((p[0] - mx) ** 2 for p in points)
    return sum((p[0] - mx) * (p[1] - my) for p in points) / var if var else 0.0


def mix(checkpoint_root: Path, with_s3: bool) -> list[tuple[bytes, int, bytes]]:
    base = {s.name: s for s in scenarios(checkpoint_root, with_s3)}
    extra = [
        Scenario(
            "nothing restorable",
            dump_json(review(flink_deployment(labels=failover_labels(JOB_EMPTY)), uid="soak-empty")),
            expect=b'"patch"',
        ),
        Scenario(
            "bad jobId",
            dump_json(review(flink_deployment(labels=failover_labels("../../etc")), uid="soak-bad")),
            expect=b'"allowed":false',
        ),
        Scenario("not JSON", b"{not json", status=400, expect=b"not JSON"),
    ]
    weights = {
        "no-op": 3,
        "create local 10 chk": 2,
        "create local 1000 chk": 1,
        "karmada re-apply UPDATE": 2,
        "create S3 (moto) 10 chk": 1,
    }
    out: list[tuple[bytes, int, bytes]] = []
    for name, weight in weights.items():
        if name in base:
            out += [(http_request(base[name].body), base[name].status, base[name].expect)] * weight
    out += [(http_request(s.body), s.status, s.expect) for s in extra]
    metrics = f"GET /metrics HTTP/1.1\r\nHost: {SERVICE_NAME}:443\r\n\r\n".encode()
    out += [(metrics, 200, b"flink_failover_admissions_total"), (HEALTHZ, 200, b"ok")]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument(
        "--rate", type=float, default=300.0, help="requests/s in total (0: as fast as possible)"
    )
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--no-s3", action="store_true")
    parser.add_argument("--json", type=Path, default=None, help="also write the samples as JSON here")
    args = parser.parse_args(argv or [])
    if not 10 <= args.seconds <= 4 * 3600 or not 1 <= args.connections <= 64:
        parser.error("--seconds must be in [10, 14400] and --connections in [1, 64]")
    print(
        f"soak: {args.seconds:g} s, {args.rate:g} req/s over {args.connections} connections, server "
        f"{args.workers}x{args.threads}; machine {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="bench-soak-") as tmp, stack(Path(tmp), not args.no_s3) as st:
        requests = mix(st.checkpoint_root, st.s3_endpoint is not None)
        with server(st, args.workers, args.threads, "server-soak.log") as running:
            root = running.process.pid
            samples: list[Sample] = []
            began = time.monotonic()

            def tick() -> None:
                samples.append(sample(root, time.monotonic() - began))
                if len(samples) % 60 == 0:
                    s = samples[-1]
                    print(
                        f"  {s.t:6.0f} s  rss {s.rss / 2**20:7.1f} MiB  fds {s.fds:4d}  "
                        f"threads {s.threads:4d}",
                        flush=True,
                    )

            tick()
            spec = LoadSpec(
                running.port,
                str(running.cert_dir / "ca.crt"),
                requests,
                args.connections,
                warmup=0.0,
                slice=args.seconds,
                rounds=0,
                rate=args.rate / args.connections if args.rate else 0.0,
            )
            result = LoadRun(spec, args.clients, root).run(on_tick=tick, tick=1.0)[0]
            tick()
            server_log = running.logs()
    return report(args, samples, result, server_log)


def report(args: argparse.Namespace, samples: list[Sample], result: object, server_log: str) -> int:
    from bench._load import LoadResult

    assert isinstance(result, LoadResult)
    failures: list[str] = []
    duration = samples[-1].t
    warm = max(10.0, 0.10 * duration)
    baseline = [s for s in samples if warm <= s.t < warm + 0.15 * duration] or samples[:1]
    final = [s for s in samples if s.t >= 0.85 * duration] or samples[-1:]
    second_half = [(s.t, s.rss / 2**20) for s in samples if s.t >= duration / 2]
    rss_slope = slope(second_half) * 60  # MiB/min

    def stats(name: str, get: object, unit: str = "", scale: float = 1.0) -> tuple[float, float]:
        assert callable(get)
        values = [get(s) / scale for s in samples]
        base_max = max(get(s) / scale for s in baseline)
        final_max = max(get(s) / scale for s in final)
        print(
            f"{name:<8} start {values[0]:9.1f}{unit}  end {values[-1]:9.1f}{unit}  "
            f"max {max(values):9.1f}{unit}"
            f"  baseline max {base_max:9.1f}{unit}  final max {final_max:9.1f}{unit}"
        )
        return base_max, final_max

    print(
        f"\n{result.done} requests in {duration:.0f} s ({result.rps:.0f}/s), {result.errors} unexpected "
        f"answers, {result.reconnects} reconnects; latency p50 {result.percentile(50) * 1000:.2f} ms, "
        f"p99 {result.percentile(99) * 1000:.2f} ms, p99.9 {result.percentile(99.9) * 1000:.2f} ms, "
        f"max {(result.latencies[-1] if result.latencies else 0) * 1000:.1f} ms"
    )
    rss_base, rss_final = stats("RSS", lambda s: s.rss, " MiB", 2**20)
    fd_base, fd_final = stats("fds", lambda s: s.fds)
    th_base, th_final = stats("threads", lambda s: s.threads)
    print(f"RSS slope over the second half: {rss_slope:+.3f} MiB/min")
    if result.errors:
        failures.append(f"{result.errors} unexpected answers, first: {result.first_error}")
    if len({s.pids for s in samples}) != 1:
        failures.append(f"server processes changed during the soak: {sorted({s.pids for s in samples})}")
    rss_bound = max(RSS_BOUND_MIB, RSS_BOUND_FRACTION * rss_base)
    if rss_final - rss_base > rss_bound:
        failures.append(f"RSS grew {rss_final - rss_base:.1f} MiB (bound {rss_bound:.1f} MiB)")
    if rss_slope > SLOPE_BOUND_MIB_PER_MIN:
        failures.append(f"RSS slope {rss_slope:.2f} MiB/min (bound {SLOPE_BOUND_MIB_PER_MIN} MiB/min)")
    if fd_final - fd_base > COUNT_BOUND:
        failures.append(f"open fds grew by {fd_final - fd_base:.0f} (bound {COUNT_BOUND})")
    if th_final - th_base > COUNT_BOUND:
        failures.append(f"threads grew by {th_final - th_base:.0f} (bound {COUNT_BOUND})")
    errors_logged = sum(1 for line in server_log.splitlines() if '"level":"error"' in line)
    print(f"server log: {errors_logged} error lines")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "samples": [[s.t, s.rss, s.fds, s.threads] for s in samples],
                    "requests": result.done,
                    "errors": result.errors,
                    "rss_slope_mib_per_min": rss_slope,
                }
            )
        )
    for failure in failures:
        print(f"FAIL: {failure}")
    print("soak: " + ("FAILED" if failures else "passed within the bounds"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
