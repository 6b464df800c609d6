"""The Work webhook under a fleet burst, against an API server double that answers with real latency.

A fleet of N FlinkDeployments fails over at once: Karmada moves N ResourceBindings and, 1-25 ms after
each move, sends the Work CREATE for the new cluster. The real control-plane server (gunicorn, TLS,
the chart's 1 worker x 8 threads, the capture watch running in the same process) gets both at once:
N watch events to fold and persist (one merge patch each) and N Work CREATEs, each decided on a fresh
GET of its binding. The API double answers a GET in 3 ms plus an exponential tail (mean 1 ms) and a
PATCH in 8 ms plus a tail (mean 4 ms), as a loaded kube-apiserver with etcd does; Karmada sends the
Works over 5 connections (``--concurrent-work-syncs`` / ``--concurrent-resourcebinding-syncs``).

Printed per burst: the client-observed p50 / p99 / max (the client runs in a process of its own, so
the API double and the scheduler's writes in this one do not slow it), and the server's own figure
from its audit lines (what the measurement on a real Karmada used). Where the tail came from and
what removed it: ``webhook/server/runtime.py`` and docs/performance.md. Fails when the server's p99 (its
audit lines, the figure the issue measured on a real Karmada) reaches 50 ms; the client-observed one
adds this machine's own Python TLS client and is printed beside it.

``python -m bench workburst [--jobs 100 500] [--concurrency 5]``
"""

from __future__ import annotations

import argparse
import concurrent.futures
import copy
import gc
import json
import multiprocessing
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench._procstat import cpu_seconds, machine_busy, process_tree
from bench.fleet import _burst, _percentile
from tests.controlplane import fakeapi
from tests.controlplane import recorded as r
from tests.controlplane import support as s
from tests.controlplane.server import Server
from tests.support.server import generate_certs

LATENCY = {"GET": (0.003, 0.001), "PATCH": (0.008, 0.004)}
TARGET_P99_MS = 50.0
KARMADA_CONCURRENCY = 5


def _client(url: str, ca: str, bodies: list[dict[str, Any]], concurrency: int) -> list[tuple[float, Any]]:
    """Karmada's side, in a process of its own; its collector stays out of the figures (Go's runs
    concurrently with its program, CPython's stops it; its threads do not wait 5 ms for one another)."""
    sys.setswitchinterval(0.0005)
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        return _burst(url, ca, bodies, "/mutate-work", concurrency)
    finally:
        gc.enable()


def _name(i: int) -> str:
    return f"orders-{i}-flinkdeployment"


def _bindings(jobs: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Each job's binding before the failover (running on member1) and after (scheduled to member2)."""
    before = r.binding("gracefully-race/rb-0-before-eviction.json")
    after = r.binding("gracefully-race/rb-2-scheduled-to-member2.json")
    out: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])
    for i in range(jobs):
        for template, into in ((before, out[0]), (after, out[1])):
            b = copy.deepcopy(template)
            b["metadata"]["name"] = _name(i)
            b["metadata"]["uid"] = f"uid-{i}"
            b["metadata"].pop("resourceVersion", None)
            into.append(b)
    return out


def _works(jobs: int) -> list[dict[str, Any]]:
    work = r.work_create("gracefully-race/work-create-member2.audit.json")
    bodies = []
    for i in range(jobs):
        w = copy.deepcopy(work)
        w["metadata"]["name"] = f"orders-{i}-work"
        w["metadata"]["annotations"]["resourcebinding.karmada.io/name"] = _name(i)
        bodies.append(s.admission_review(w))
    return bodies


def _server_ms(log: Path, since: int) -> list[float]:
    """The server's own time per Flink Work, from its audit lines written after byte ``since``."""
    out = []
    with log.open("rb") as handle:
        handle.seek(since)
        for raw in handle:
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            flink = isinstance(line, dict) and line.get("role") == "control-plane" and "ms" in line
            if flink and line.get("decision") not in ("not-a-flink-work", "no-manifests"):
                out.append(float(line["ms"]))
    return out


def _stats(times: list[float]) -> str:
    return (
        f"p50 {statistics.median(times):6.1f} ms  p99 {_percentile(times, 0.99):6.1f} ms  "
        f"max {max(times):6.1f} ms"
    )


def burst(jobs: int, concurrency: int, work_dir: Path, server_args: tuple[str, ...]) -> tuple[float, float]:
    """One fleet burst; (client p99, server p99) in ms."""
    work_dir.mkdir(parents=True, exist_ok=True)
    running = fakeapi.start(fakeapi.FakeKarmada(latency=dict(LATENCY)))
    try:
        before, after = _bindings(jobs)
        for b in before:
            running.fake.upsert(b)
        bodies = _works(jobs)
        server = Server(
            running.kubeconfig(work_dir / "kubeconfig"),
            generate_certs(work_dir / "certs"),
            work_dir,
            "--threads",
            "8",
            *server_args,
        )
        try:
            server.wait_ready()
            # capture has folded every binding before the failover (one patch each)
            assert running.fake.wait_for(lambda: len(running.fake.patches) >= jobs, timeout=120)
            warm = _works(1)
            _burst(server.url, server.ca, warm * concurrency, "/mutate-work", concurrency)
            patches_before = len(running.fake.patches)

            def move() -> None:  # the scheduler moves the whole fleet while the Works arrive
                for b in after:
                    running.fake.upsert(b)

            with concurrent.futures.ProcessPoolExecutor(
                1, mp_context=multiprocessing.get_context("spawn")
            ) as client:
                client.submit(_client, server.url, server.ca, warm, 1).result()  # started
                time.sleep(0.2)  # its audit line is written before the burst's first
                since = server.log.stat().st_size
                mover = threading.Thread(target=move)
                # The double answers with the latency it is given, not with this process's own pauses:
                # it holds every binding twice and every event, and a full collection here took 100 ms.
                gc.collect()
                gc.freeze()
                gc.disable()
                sys.setswitchinterval(0.0005)  # the double's threads answer without GIL waits of 5 ms
                pids = process_tree(server.proc.pid)
                cpu_before, (busy_before, total_before) = cpu_seconds(pids), machine_busy()
                started = time.perf_counter()
                mover.start()
                answers = client.submit(_client, server.url, server.ca, bodies, concurrency).result()
                mover.join()
                wall = time.perf_counter() - started
                gc.enable()
                server_cpu = cpu_seconds(pids) - cpu_before
                busy_after, total_after = machine_busy()
                machine = (busy_after - busy_before) / max(1.0, total_after - total_before)
            assert all(a["allowed"] for _, a in answers)
            assert sum(1 for _, a in answers if "patch" in a) == jobs, "every Work labelled"
            running.fake.wait_for(lambda: len(running.fake.patches) >= patches_before + jobs, timeout=120)
            client = [t for t, _ in answers]
            time.sleep(0.2)  # the last audit lines reach the log file
            own = _server_ms(server.log, since)
            print(f"  {jobs} Works, {concurrency} in flight, {wall:5.2f} s, capture patched "
                  f"{len(running.fake.patches) - patches_before} bindings meanwhile; server CPU "
                  f"{server_cpu:4.2f} s ({server_cpu / wall:4.0%} of one core), "
                  f"machine {machine:4.0%} busy")  # fmt: skip
            print(f"    client-observed  {_stats(client)}")
            if own:
                print(f"    server audit     {_stats(own)}  ({len(own)} lines)")
            return _percentile(client, 0.99), _percentile(own, 0.99) if own else float("nan")
        finally:
            server.stop()
    finally:
        running.stop()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench workburst")
    parser.add_argument("--jobs", type=int, nargs="+", default=[100, 500])
    parser.add_argument("--concurrency", type=int, default=KARMADA_CONCURRENCY)
    args = parser.parse_args(argv)
    print(
        f"API double: GET {LATENCY['GET'][0] * 1000:.0f} ms + exp(mean {LATENCY['GET'][1] * 1000:.0f} ms), "
        f"PATCH {LATENCY['PATCH'][0] * 1000:.0f} ms + exp(mean {LATENCY['PATCH'][1] * 1000:.0f} ms)"
    )
    status = 0
    with tempfile.TemporaryDirectory() as tmp:
        print("Work webhook under a fleet burst (capture folding and patching the same bindings):")
        for jobs in args.jobs:
            _, server_p99 = burst(jobs, args.concurrency, Path(tmp) / str(jobs), ())
            if not server_p99 < TARGET_P99_MS:
                print(f"    server p99 over the {TARGET_P99_MS:.0f} ms target")
                status = 1
    return status
