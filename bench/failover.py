"""What deciding on fresh state costs, and how quiet capture is, on the recorded Karmada failovers.

1. Work webhook latency through the real control-plane server (gunicorn, TLS, one keep-alive client):
   a Flink Work CREATE (one GET of its ResourceBinding from the API server, then the decision) beside a
   Work without a Flink workload (no API call). The API server is the local fake (tests/controlplane),
   so the GET costs what a loopback HTTP round trip costs; a real kube-apiserver adds its own time.
2. Capture patches per failover: the recorded writes of each failover (tests/fixtures/karmada-observed)
   written to the fake API as fast as Karmada wrote them, the capture loop watching; every merge patch
   it sends is counted, and those identical to the previous one.

``python -m bench failover [--admissions N]``
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import requests

from tests.controlplane import fakeapi
from tests.controlplane import recorded as r
from tests.controlplane import support as s
from tests.controlplane.loop import KEY, Loop
from tests.controlplane.server import Server
from tests.support.server import generate_certs

NS = "analytics"


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def latency(admissions: int, work_dir: Path) -> None:
    running = fakeapi.start()
    try:
        start = r.binding("gracefully-race/rb-2-scheduled-to-member2.json")
        running.fake.upsert(start)
        work = r.work_create("gracefully-race/work-create-member2.audit.json")
        other = {
            **work,
            "spec": {
                "workload": {
                    "manifests": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}]
                }
            },
        }
        server = Server(
            running.kubeconfig(work_dir / "kubeconfig"), generate_certs(work_dir / "certs"), work_dir
        )
        try:
            server.wait_ready()
            session = requests.Session()
            rows = []
            for label, body in (
                ("Flink Work CREATE (GET + decide)", work),
                ("other Work (no API call)", other),
            ):
                review = s.admission_review(body)
                times = []
                gets_before = sum(1 for q in running.fake.requests if "/namespaces/" in q)
                for _ in range(admissions):
                    started = time.perf_counter()
                    answer = session.post(
                        server.url + "/mutate-work", json=review, verify=server.ca, timeout=10
                    )
                    times.append((time.perf_counter() - started) * 1000)
                    assert answer.status_code == 200 and answer.json()["response"]["allowed"]
                gets = sum(1 for q in running.fake.requests if "/namespaces/" in q) - gets_before
                rows.append((label, statistics.median(times), _percentile(times, 0.99), gets / admissions))
            print(f"{'admission':36} {'p50 ms':>8} {'p99 ms':>8} {'GETs/admission':>15}")
            for label, p50, p99, gets in rows:
                print(f"{label:36} {p50:8.2f} {p99:8.2f} {gets:15.2f}")
        finally:
            server.stop()
    finally:
        running.stop()


def patches(work_dir: Path) -> None:
    scenarios: list[tuple[str, str, dict[str, Any]]] = [
        (
            "gracefully-race",
            "orders-c-flinkdeployment",
            r.running_before(r.binding("gracefully-race/rb-0-before-eviction.json"), "member1"),
        ),
        (
            "return-to-previous",
            "orders-d-flinkdeployment",
            r.binding("return-to-previous/rb-1-before-first-failover.json"),
        ),
    ]
    columns = ("failovers", "writes", "patches", "identical", "per failover")
    print(f"{'recording':20} " + " ".join(f"{c:>12}" for c in columns))
    for folder, name, start in scenarios:
        running = fakeapi.start()
        try:
            first = r.load(f"{folder}/rb-watch-events.json")[0]["received"]
            start, steps = r.replay_now(folder, start, first)
            running.fake.upsert(start)
            with Loop(running, work_dir / folder) as loop:
                assert loop.caught_up()
                before = len(running.fake.patches)
                for step in steps:  # as fast as Karmada wrote them: events queue behind each patch
                    running.fake.upsert(step.obj)
                assert loop.caught_up()
                time.sleep(0.5)
                assert loop.caught_up()
                bodies = [
                    b["metadata"]["annotations"][KEY]
                    for _, n, b in running.fake.patches[before:]
                    if n == name
                ]
                identical = sum(1 for a, b in itertools.pairwise(bodies) if a == b)
                record = loop.record(NS, name)
                count = max(1, record.failover_count)
                per = len(bodies) / count
                cells = (record.failover_count, len(steps), len(bodies), identical)
                print(f"{folder:20} " + " ".join(f"{c:12d}" for c in cells) + f" {per:12.1f}")
        finally:
            running.stop()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench failover")
    parser.add_argument("--admissions", type=int, default=500)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work_dir = Path(tmp)
        (work_dir / "gracefully-race").mkdir()
        (work_dir / "return-to-previous").mkdir()
        patches(work_dir)
        latency(args.admissions, work_dir)
    return 0
