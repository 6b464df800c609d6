"""The fencing agent's own loop beside a hung bucket, for real, with production timings (lease 30 s, poll
5 s, renew deadline 10 s, stop margin 10 s).

The agent is the product's (``FencingAgent.run`` on its event loop, in a thread, over a fake member API);
the storages are real: local files for the healthy jobs (their heartbeats' modification times, in ns),
an S3 endpoint that accepts connections and never answers for the held copies (part 1), and moto's S3
behind a TCP proxy that is cut (part 2).

1. **Periods beside a hung bucket**: 3 healthy jobs on local storage, N restores held on the hung bucket
   (their polls and rechecks wait on it every second): the longest gap between two renewals of a healthy
   job's heartbeat (storage time), and whether any healthy job was stepped down.
2. **The holder's step-down**: a job on S3 plus N held restores on the same bucket; the proxy is cut:
   seconds from the last renewal the storage took (its LastModified) to the suspend, against the stated
   bound ``renewDeadlineSeconds + pollSeconds`` (15 s).

Issue 28 measured the previous loop (poll 1 s, renew deadline 4 s): with four held copies on a hung bucket
a healthy job on another bucket was stepped down 6.5 s after the hang; the holder's own step-down came
4.5, 6.5 and 8.5 s after its storage hung with 0, 4 and 8 held copies (the bound then: 5 s).

``python -m bench fencing_loop [--held 0,4,16,64] [--seconds 60]`` (about 6 minutes).
"""

from __future__ import annotations

import argparse
import itertools
import logging
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tests.controlplane import fakeapi
from tests.faults.loopback import blackhole
from tests.support.objects import FLINK_METADATA, JOB_ID, flink_deployment, make_checkpoints
from tests.support.s3 import moto_server, s3_options
from tests.support.tcpproxy import TcpProxy
from webhook.common.kubeclient import ClientConfig
from webhook.fencing.agent import FencingAgent
from webhook.fencing.flinkapi import FlinkApi, ThreadedApi
from webhook.fencing.runner import run_agent
from webhook.policy.restore import FencingPolicy, RestorePolicy
from webhook.restore.storage.search import CheckpointStorage

P = "flink-failover.io"
FENCING = FencingPolicy(lease_seconds=30, poll_seconds=5, renew_deadline_seconds=10, stop_margin_seconds=10)
RECORDS = "flink-failover/analytics/flinkdeployment"


def running(name: str, root: str) -> dict[str, Any]:
    obj = flink_deployment(name=name, checkpoint_dir=root)
    obj["spec"]["job"]["state"] = "running"
    obj["status"] = {"jobStatus": {"jobId": JOB_ID, "state": "RUNNING"}}
    return obj


def held(name: str, root: str) -> dict[str, Any]:
    """A restore the member webhook admitted held, waiting for member3 (which heartbeats)."""
    obj = flink_deployment(
        name=name,
        checkpoint_dir=root,
        labels={f"{P}/failover": "true", f"{P}/job-id": JOB_ID},
        annotations={
            f"{P}/failover-count": "1",
            f"{P}/epoch": "1",
            f"{P}/restore-decision": "held",
            f"{P}/hold": "epoch 1: waiting for member3 to stop; admitted held",
        },
    )
    obj["spec"]["job"]["state"] = "suspended"
    return obj


def start(agent: FencingAgent) -> tuple[threading.Event, threading.Thread]:
    stop = threading.Event()
    thread = threading.Thread(target=run_agent, args=(agent, stop), daemon=True)
    thread.start()
    return stop, thread


def agent_for(api: fakeapi.RunningFake, work: Path, policy: RestorePolicy) -> FencingAgent:
    flink = FlinkApi.connect(ClientConfig(str(api.kubeconfig(work / "member2.kubeconfig"))))
    assert isinstance(flink, FlinkApi)
    calls = ThreadedApi(flink, FENCING.call_timeout)
    return FencingAgent("member2", policy, calls, CheckpointStorage(policy.storage_options))


def periods(work: Path, held_copies: int, seconds: float) -> str:
    root = work / f"local-{held_copies}"
    root.mkdir()
    with blackhole() as port:
        policy = RestorePolicy(
            default_checkpoint_dir=str(root),
            storage_options={"s3": {"endpoint_url": f"http://127.0.0.1:{port}", "key": "k", "secret": "s"}},
            fencing=FENCING,
        )
        api = fakeapi.start_member_cluster()
        try:
            for i in range(3):
                make_checkpoints(root / JOB_ID, [1])
                api.fake.upsert(running(f"healthy-{i}", str(root)))
            for i in range(held_copies):
                api.fake.upsert(held(f"held-{i}", "s3://hung/checkpoints"))
            stop, thread = start(agent_for(api, work, policy))
            beats = [root / RECORDS / f"healthy-{i}" / "heartbeat-member2.json" for i in range(3)]
            seen: list[list[int]] = [[] for _ in beats]
            started = time.monotonic()
            while time.monotonic() - started < seconds:
                for i, beat in enumerate(beats):
                    try:
                        stamp = beat.stat().st_mtime_ns
                    except FileNotFoundError:
                        continue
                    if not seen[i] or seen[i][-1] != stamp:
                        seen[i].append(stamp)
                time.sleep(0.05)
            stop.set()
            thread.join(15)
            stepped = [
                o
                for o in api.fake.objects.values()
                if "healthy" in o["metadata"]["name"] and o["spec"]["job"].get("state") == "suspended"
            ]
        finally:
            api.stop()
    gaps = [(b - a) / 1e9 for stamps in seen for a, b in itertools.pairwise(stamps)]
    renewals = min(len(s) for s in seen)
    longest = max(gaps, default=float("nan"))
    return (
        f"  {held_copies:3} held on the hung bucket: healthy heartbeats renewed {renewals} times in "
        f"{seconds:g} s, longest gap {longest:.2f} s (poll {FENCING.poll_seconds:g} s); "
        f"healthy jobs stepped down: {len(stepped)}"
    )


def step_down(work: Path, endpoint: str, held_copies: int) -> str:
    import s3fs

    bucket = f"loop-{held_copies}"
    direct = s3fs.S3FileSystem(skip_instance_cache=True, **s3_options(endpoint))
    direct.mkdir(bucket)
    for n in (1, 2):
        direct.pipe(f"{bucket}/checkpoints/{JOB_ID}/chk-{n}/_metadata", FLINK_METADATA)
    for i in range(held_copies):  # member3 still runs the old copies: they stay held
        direct.pipe(f"{bucket}/checkpoints/{RECORDS}/held-{i}/heartbeat-member3.json", b"{}")
    proxy = TcpProxy(int(endpoint.rsplit(":", 1)[1]))
    root = f"s3://{bucket}/checkpoints"
    policy = RestorePolicy(
        default_checkpoint_dir=root, storage_options={"s3": s3_options(proxy.endpoint)}, fencing=FENCING
    )
    api = fakeapi.start_member_cluster()
    try:
        api.fake.upsert(running("orders", root))
        for i in range(held_copies):
            api.fake.upsert(held(f"held-{i}", root))
        beat = f"{bucket}/checkpoints/{RECORDS}/orders/heartbeat-member2.json"

        def renewed() -> float | None:
            try:
                return float(direct.info(beat, refresh=True)["LastModified"].timestamp())
            except FileNotFoundError:
                return None

        stop, thread = start(agent_for(api, work, policy))
        deadline = time.monotonic() + 60
        first = None
        while time.monotonic() < deadline:  # two renewals seen: the loop is in its stride
            now = renewed()
            if first is None:
                first = now
            elif now is not None and now != first:
                break
            time.sleep(0.1)
        time.sleep(2.5)  # cut mid-period
        last = renewed()
        proxy.cut()
        cut = time.time()
        down = None
        while time.time() - cut < 60:
            annotations = api.fake.get("analytics", "orders")["metadata"].get("annotations") or {}
            if f"{P}/stepped-down" in annotations:
                down = time.time()
                break
            time.sleep(0.05)
        later = renewed()
        stop.set()
        thread.join(15)
    finally:
        api.stop()
        proxy.close()
    if down is None or last is None:
        return f"  {held_copies:3} held: never stepped down"
    if later is not None and later > last:
        last = later  # a renewal in flight at the cut still landed
    bound = FENCING.renew_deadline_seconds + FENCING.poll_seconds
    return (
        f"  {held_copies:3} held on its bucket: suspended {down - last:5.2f} s after the last renewal the "
        f"storage took ({down - cut:5.2f} s after the cut); bound {bound:g} s"
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench fencing_loop")
    parser.add_argument(
        "--held", default="0,4,16,64", help="held copies on the hung bucket (comma-separated)"
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="how long part 1 watches each case")
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.held.split(",")]
    logging.getLogger("webhook").setLevel(logging.ERROR)  # every pending poll is logged: the figures are here
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)  # s3fs's cancelled requests at the cut
    failed = 0
    with tempfile.TemporaryDirectory() as tmp, moto_server(Path(tmp) / "moto.log") as endpoint:
        print("1. heartbeats of healthy jobs beside held copies on a hung bucket:", flush=True)
        for n in counts:
            line = periods(Path(tmp), n, args.seconds)
            print(line, flush=True)
            failed += "stepped down: 0" not in line
        print("2. the holder of a hung bucket steps down:", flush=True)
        for n in counts:
            line = step_down(Path(tmp), endpoint, n)
            print(line, flush=True)
            failed += "never" in line
    return 1 if failed else 0
