"""One running copy at fleet scale, and a partition's timeline with the production timings.

1. **Work webhook under a burst**: 100 Flink Work CREATEs sent at once (one connection each) to the real
   control-plane server (gunicorn, TLS, the chart's 1 worker x 8 threads); each decided on a fresh GET of
   its ResourceBinding from the fake API server.
2. **Member webhook with fencing, on S3** (moto on loopback): 100 failed-over FlinkDeployments admitted at
   once by the real member server run with ``--cluster member2`` (the chart's 2 workers x 8 threads); every
   one of them still heartbeats on member1, so every one is held. Then member1's agent asks its 100 stale
   copies to stop, member1's operator double reports each stopped 6 s later, and member2's served agent
   releases all 100; both clusters' jobs are tracked by their RUNNING status for a workload running twice.
3. **Partition timeline**: one job, both agents with the production timings (poll 5 s, lease 30 s), operator
   doubles that take 6 s to stop a job, member1's job completing a checkpoint every 15 s until it stops:
   seconds of two RUNNING jobs, seconds from the old job's reported stop to the new job's release,
   checkpoints lost.

``python -m bench fleet [--jobs N]``
"""

from __future__ import annotations

import argparse
import concurrent.futures
import copy
import json
import logging
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import requests

from tests.controlplane import fakeapi
from tests.controlplane import recorded as r
from tests.controlplane import support as s
from tests.controlplane.server import Server
from tests.support.agents import Driver
from tests.support.objects import (
    FLINK_METADATA,
    apply,
    decode_patch,
    flink_deployment,
    make_checkpoints,
    review,
    running_deployment,
)
from tests.support.operator import OperatorDouble, lost_checkpoints, overlap
from tests.support.production import agent_polled, wait_for
from tests.support.s3 import moto_server, s3_options
from tests.support.server import generate_certs, serve
from webhook.common.admission import parse_review
from webhook.common.kubeclient import ClientConfig
from webhook.fencing.agent import FencingAgent
from webhook.fencing.flinkapi import FlinkApi, ThreadedApi
from webhook.fencing.runner import run_agent
from webhook.member.handler import MemberHandler
from webhook.policy.restore import FencingPolicy, RestorePolicy
from webhook.restore.storage.search import CheckpointStorage

P = "flink-failover.io"
NS = "analytics"
BUCKET = "fleet"


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


KARMADA_CONCURRENCY = (
    5  # karmada-controller-manager --concurrent-resourcebinding-syncs / --concurrent-work-syncs
)


def _burst(
    url: str, ca: str | bool, bodies: list[dict[str, Any]], path: str, concurrency: int
) -> list[tuple[float, dict[str, Any]]]:
    """Every body queued at once, sent over ``concurrency`` keep-alive connections (warmed first, as
    kube-apiserver keeps its connections): Karmada's controllers sync 5 objects at a time by default."""
    local = threading.local()

    def session() -> requests.Session:
        if not hasattr(local, "session"):
            local.session = requests.Session()
            local.session.get(url + "/healthz", verify=ca, timeout=30)
        return local.session  # type: ignore[no-any-return]

    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(lambda _: session(), range(concurrency * 4)))  # open every connection first

        def send(body: dict[str, Any]) -> tuple[float, dict[str, Any]]:
            started = time.perf_counter()
            answer = session().post(url + path, json=body, verify=ca, timeout=30)
            elapsed = (time.perf_counter() - started) * 1000
            assert answer.status_code == 200, answer.text[:300]
            return elapsed, answer.json()["response"]

        return list(pool.map(send, bodies))


def _line(label: str, times: list[float]) -> str:
    return f"  {label:34} p50 {statistics.median(times):7.1f} ms  p99 {_percentile(times, 0.99):7.1f} ms"


def work_burst(jobs: int, work_dir: Path) -> None:
    work_dir.mkdir(parents=True, exist_ok=True)
    running = fakeapi.start()
    try:
        binding = r.binding("gracefully-race/rb-2-scheduled-to-member2.json")
        work = r.work_create("gracefully-race/work-create-member2.audit.json")
        bodies = []
        for i in range(jobs):
            b = copy.deepcopy(binding)
            b["metadata"]["name"] = f"orders-{i}-flinkdeployment"
            b["metadata"].pop("resourceVersion", None)
            running.fake.upsert(b)
            w = copy.deepcopy(work)
            w["metadata"]["name"] = f"orders-{i}-work"
            w["metadata"]["annotations"]["resourcebinding.karmada.io/name"] = b["metadata"]["name"]
            bodies.append(s.admission_review(w))
        server = Server(
            running.kubeconfig(work_dir / "kubeconfig"),
            generate_certs(work_dir / "certs"),
            work_dir,
            "--threads",
            "8",
        )
        try:
            server.wait_ready()
            print(f"Work webhook, {jobs} Flink Work CREATEs at once (one fresh GET each), client-observed:")
            for concurrency in (KARMADA_CONCURRENCY, KARMADA_CONCURRENCY, 20, jobs):
                answers = _burst(server.url, server.ca, bodies, "/mutate-work", concurrency)
                assert all(a["allowed"] for _, a in answers)
                print(_line(f"{concurrency} in flight", [t for t, _ in answers]))
        finally:
            server.stop()
    finally:
        running.stop()


def _agent(name: str, policy: RestorePolicy, running: fakeapi.RunningFake, path: Path) -> FencingAgent:
    api = ThreadedApi(_flink_api(running, path), policy.fencing.call_timeout)
    return FencingAgent(name, policy, api, CheckpointStorage(policy.storage_options))


def _flink_api(running: fakeapi.RunningFake, path: Path) -> FlinkApi:
    api = FlinkApi.connect(ClientConfig(str(running.kubeconfig(path))))
    assert isinstance(api, FlinkApi)
    return api


def member_fleet(jobs: int, work_dir: Path) -> None:
    import s3fs

    with moto_server(work_dir / "moto.log") as endpoint:
        options = s3_options(endpoint)
        fs = s3fs.S3FileSystem(skip_instance_cache=True, **options)
        fs.mkdir(BUCKET)
        root = f"s3://{BUCKET}/checkpoints"
        job_ids = [f"{i:032x}" for i in range(1, jobs + 1)]
        fs.pipe(
            {f"{BUCKET}/checkpoints/{j}/chk-{n}/_metadata": FLINK_METADATA for j in job_ids for n in (1, 2)}
        )
        policy = RestorePolicy(
            default_checkpoint_dir=root,
            storage_options={"s3": options},
            fencing=FencingPolicy(lease_seconds=30, poll_seconds=5),
        )
        m1, m2 = fakeapi.start_member_cluster(), fakeapi.start_member_cluster()
        never = float("inf")  # no checkpoints in the fleet: the figures here are the admissions and releases
        op1 = OperatorDouble(m1.fake, 6.0, lambda _job, _n: None, checkpoint_seconds=never).start()
        op2 = OperatorDouble(m2.fake, 6.0, lambda _job, _n: None, checkpoint_seconds=never).start()
        try:
            for i, job in enumerate(job_ids):
                m1.fake.upsert(running_deployment(job, name=f"orders-{i}"))
                op1.adopt(NS, f"orders-{i}", job, 2)
            first = Driver(_agent("member1", policy, m1, work_dir / "m1"))
            started = time.perf_counter()
            assert {st.action for st in first.tick()} == {"heartbeat"}
            first_poll = time.perf_counter() - started
            first.close()
            agent1 = _agent("member1", policy, m1, work_dir / "m1")
            policy_file = work_dir / "policy.yaml"
            policy_file.write_text(
                f"defaultCheckpointDir: {root}\nstorageOptions: {{s3: {json.dumps(options)}}}\n"
                "fencing: {leaseSeconds: 30, pollSeconds: 5}\n"
            )
            objs = [
                flink_deployment(
                    name=f"orders-{i}",
                    labels={f"{P}/failover": "true", f"{P}/job-id": job},
                    annotations={f"{P}/failover-count": "1"},
                )
                for i, job in enumerate(job_ids)
            ]
            certs = generate_certs(work_dir / "member-certs")
            ca = str(certs / "ca.crt")
            reviews = [review(o) for o in objs]
            # One at a time first (other names, same jobs): what one admission costs, fenced or not.
            serial = []
            for i, o in enumerate(objs[:20]):
                renamed = copy.deepcopy(o)
                renamed["metadata"]["name"] = f"serial-{i}"
                serial.append(review(renamed))
            with serve(certs, policy_file, work_dir / "plain.log", extra=["--workers", "2"]) as plain:
                url = f"https://127.0.0.1:{plain.port}"
                baseline_serial = [t for t, _ in _burst(url, ca, serial, "/mutate", 1)]
                baseline = [t for t, _ in _burst(url, ca, reviews, "/mutate", KARMADA_CONCURRENCY)]
            kubeconfig = str(m2.kubeconfig(work_dir / "m2"))
            extra = ["--cluster", "member2", "--kubeconfig", kubeconfig, "--workers", "2"]
            with serve(certs, policy_file, work_dir / "member.log", extra=extra) as server:
                assert wait_for(lambda: agent_polled(server))  # it vouches for the restores from here on
                url = f"https://127.0.0.1:{server.port}"
                fenced_serial = [t for t, _ in _burst(url, ca, serial, "/mutate", 1)]
                answers = _burst(url, ca, reviews, "/mutate", KARMADA_CONCURRENCY)
                times = [t for t, _ in answers]
                held = 0
                for obj, (_, answer) in zip(objs, answers, strict=True):
                    admitted = apply(obj, decode_patch(answer))
                    held += admitted["spec"]["job"]["state"] == "suspended"
                    m2.fake.upsert(admitted)
                twice = _watch_for_twice(m1, m2, jobs, agent1)
                both = _overlap(op1, op2)
                twice += f"; seconds of two RUNNING jobs (by status), summed over the fleet: {both:.2f}"
                print(
                    f"member webhook with fencing on S3, {jobs} failed-over CREATEs at once, client-observed:"
                )
                print(_line("1 in flight, fencing off", baseline_serial))
                print(_line("1 in flight, fencing (held)", fenced_serial))
                print(_line(f"{KARMADA_CONCURRENCY} in flight, fencing off", baseline))
                print(_line(f"{KARMADA_CONCURRENCY} in flight, fencing (held {held}/{jobs})", times))
                print(f"  member1's agent: first poll over {jobs} copies {first_poll:.2f} s; {twice}")
        finally:
            op1.stop()
            op2.stop()
            m1.stop()
            m2.stop()


def _overlap(op1: OperatorDouble, op2: OperatorDouble) -> float:
    return sum(overlap([a], [b]) for a in op1.jobs for b in op2.jobs if a.key == b.key)


def _watch_for_twice(
    m1: fakeapi.RunningFake, m2: fakeapi.RunningFake, jobs: int, agent1: FencingAgent
) -> str:
    """Sample both clusters every 50 ms while member1's agent polls and member2's served agent releases."""
    stop = threading.Event()
    worst = 0

    def state(fake: fakeapi.FakeKarmada, i: int) -> str:
        obj = fake.objects.get((NS, f"orders-{i}"))
        return "" if obj is None else str(obj["spec"]["job"].get("state", "running"))

    started = time.monotonic()
    poller = threading.Thread(target=run_agent, args=(agent1, stop), daemon=True)
    poller.start()
    released = 0
    try:
        while time.monotonic() - started < 180:
            with m1.fake.cond, m2.fake.cond:
                both = sum(
                    state(m1.fake, i) == "running" and state(m2.fake, i) == "running" for i in range(jobs)
                )
                released = sum(state(m2.fake, i) == "running" for i in range(jobs))
            worst = max(worst, both)
            if released == jobs:
                break
            time.sleep(0.05)
    finally:
        stop.set()
        poller.join(10)
    took = time.monotonic() - started
    return f"released {released}/{jobs} in {took:.1f} s; most workloads running on both at once: {worst}"


def partition_timeline(work_dir: Path) -> None:
    root = work_dir / "partition"
    job = "3c653dbe4c19bb72f8eb28445541bed6"
    make_checkpoints(root / job, [1])
    policy = RestorePolicy(default_checkpoint_dir=str(root), fencing=FencingPolicy(lease_seconds=30))
    m1, m2 = fakeapi.start_member_cluster(), fakeapi.start_member_cluster()

    def writer(job_id: str, n: int) -> None:
        make_checkpoints(root / job_id, [n])

    op1 = OperatorDouble(m1.fake, 6.0, writer, checkpoint_seconds=15).start()
    op2 = OperatorDouble(m2.fake, 6.0, writer, checkpoint_seconds=15).start()
    stop = threading.Event()
    try:
        m1.fake.upsert(running_deployment(job))
        op1.adopt(NS, "orders", job, 1)
        agents = [
            _agent(name, policy, fake, work_dir / f"p-{name}")
            for name, fake in (("member1", m1), ("member2", m2))
        ]
        threads = [threading.Thread(target=run_agent, args=(a, stop), daemon=True) for a in agents]
        for t in threads:
            t.start()
        time.sleep(20)  # member1 heartbeats; one checkpoint more
        handler = MemberHandler.from_policy(policy, cluster="member2")
        obj = flink_deployment(
            labels={f"{P}/failover": "true", f"{P}/job-id": job}, annotations={f"{P}/failover-count": "1"}
        )
        t0 = time.monotonic()
        answer = handler(parse_review(review(obj))).to_review()["response"]
        admitted = apply(obj, decode_patch(answer))
        m2.fake.upsert(admitted)
        assert wait_for(lambda: bool(op2.jobs), 180), "the new job never started"
        old, new = op1.jobs[0], op2.jobs[0]
        assert old.ended is not None
        print(
            "partition, production timings (poll 5 s, lease 30 s), operator stop 6 s, checkpoint every 15 s:"
        )
        print(f"  two RUNNING jobs (by status): {overlap(op1.jobs, op2.jobs):.2f} s")
        print(
            f"  member1's job reported stopped {old.ended - t0:.1f} s after the restore was admitted (held)"
        )
        print(f"  member2's job RUNNING {new.started - old.ended:.1f} s after member1's was reported stopped")
        started = admitted["spec"]["job"]["initialSavepointPath"].rsplit("/", 1)[1]
        print(f"  admitted with {started}, started from {new.started_from.rsplit('/', 1)[1]}")
        print(f"  checkpoints member1 completed after that: {len(lost_checkpoints(op1.jobs, new))} (lost)")
        handler.close()
    finally:
        stop.set()
        op1.stop()
        op2.stop()
        m1.stop()
        m2.stop()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench fleet")
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--skip-partition", action="store_true", help="skip the 1-minute partition timeline")
    args = parser.parse_args(argv)
    logging.getLogger("webhook").setLevel(logging.ERROR)  # the in-process agents' lines: figures only here
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        work_burst(args.jobs, work / "cp")
        member_fleet(args.jobs, work)
        if not args.skip_partition:
            partition_timeline(work)
    return 0
