"""Step-downs first: a fleet on one cluster steps down at once beside healthy jobs, production timings
(lease 30 s, poll 5 s, renew deadline 10 s, stop margin 10 s: 5 s of slack).

The agent is the product's (``FencingAgent.run`` in a thread, its ``ThreadedApi`` and storage lanes as
the runner builds them) over the fake member API, which answers a PATCH of a Flink object after 100 ms;
the storage is moto's S3 on loopback behind a proxy, two buckets of one endpoint: ``hung`` (N running
copies) and ``healthy`` (M running copies). Once every copy has renewed, the proxy stops answering any
call to ``hung`` (accepts, never answers): its N copies' renewals fail, their renew deadline passes at
the same tick, and all N must be suspended at once. Figures:

- the N step-downs: seconds from each copy's renew deadline to the API server applying its suspend
  (the stated bound is a poll, 5 s, before the lease's slack is touched; a suspend has a poll less a
  retry period, 4 s, to go through), and how many were applied within 4 s of the first;
- the M healthy copies meanwhile: the longest a copy went without a successful renewal, by the agent's
  own clock (the step-down fires at the renew deadline, 10 s), and how many were stepped down.

Issue 35 measured the previous agent: step-down patches shared ``ThreadedApi``'s four threads with lists,
rechecks and hold rewrites (at 100 ms a patch, 400 step-downs at once finished 156 within 4 s), and every
``s3://`` bucket's renewals shared one s3fs client of 10 connections with the hung bucket's calls.

``python -m bench stepdowns [--hung 500] [--healthy 200]`` (about a minute). To measure another checkout's
agent with this scenario: a folder whose ``webhook`` links to that checkout's and whose ``tests`` and
``bench`` link to this one's, on ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.controlplane import fakeapi
from tests.faults.loopback import s3_proxy
from tests.support.objects import running_deployment
from tests.support.production import wait_for
from tests.support.s3 import moto_server, s3_options
from webhook.common.kubeclient import ClientConfig
from webhook.common.paths import StoragePath
from webhook.fencing import flinkapi
from webhook.fencing.agent import FencingAgent
from webhook.fencing.flinkapi import FlinkApi, ThreadedApi
from webhook.fencing.lanes import Lanes
from webhook.fencing.layout import Workload
from webhook.fencing.records import FencingStore, heartbeat_body
from webhook.fencing.runner import run_agent
from webhook.policy.restore import FencingPolicy, RestorePolicy
from webhook.restore.storage.search import CheckpointStorage

P = "flink-failover.io"
NS = "analytics"
FENCING = FencingPolicy(lease_seconds=30, poll_seconds=5, renew_deadline_seconds=10, stop_margin_seconds=10)
PATCH_SECONDS = 0.1
RECORDS = "flink-failover/analytics/flinkdeployment"


def _calls(running: fakeapi.RunningFake, work: Path) -> ThreadedApi:
    """As the runner builds it (the stops' own client where this checkout has one)."""
    config = ClientConfig(str(running.kubeconfig(work / "member1.kubeconfig")))
    api = FlinkApi.connect(config)
    assert isinstance(api, FlinkApi)
    stops_client = getattr(flinkapi, "stops_client", None)
    if stops_client is None:
        return ThreadedApi(api, FENCING.call_timeout)
    return ThreadedApi(api, FENCING.call_timeout, stops=stops_client(config))


class Watch:
    """What the bench reads of the agent and the API server, from its own thread."""

    def __init__(self, agent: FencingAgent, fake: fakeapi.FakeKarmada) -> None:
        self.agent = agent
        self.renewed: dict[str, float] = {}  # name -> start of its last successful renewal
        self.longest: dict[str, float] = {}  # name -> longest seen without a renewal
        self.suspended: dict[str, float] = {}  # name -> when the API server applied its step-down
        # phase -> how long the healthy copies' renewals took (start to answer, as sampled: +-50 ms)
        self.renewals: dict[str, list[float]] = {"alone": [], "beside": []}
        self.phase = "alone"
        self.reasons: dict[str, str] = {}
        patch = fake.patch

        def recorded(namespace: str, name: str, body: Any, *args: Any) -> Any:
            answer = patch(namespace, name, body, *args)
            annotations = (body.get("metadata") or {}).get("annotations") or {}
            if f"{P}/stepped-down" in annotations:
                self.suspended.setdefault(name, time.monotonic())
                self.reasons.setdefault(name, str(annotations[f"{P}/stepped-down"]))
            return answer

        fake.patch = recorded  # type: ignore[method-assign,assignment]

    def sample(self) -> None:
        now = time.monotonic()
        try:
            entries = list(self.agent.renewer._entries.items())
        except RuntimeError:  # changed while copied (the agent's thread): the next sample
            return
        for workload, entry in entries:
            renewed = entry.state.renewed
            before = self.renewed.get(workload.name)
            if before is not None and renewed != before and workload.name.startswith("healthy-"):
                self.renewals[self.phase].append(now - renewed)
            self.renewed[workload.name] = renewed
            self.longest[workload.name] = max(self.longest.get(workload.name, 0.0), now - renewed)


def run(hung: int, healthy: int, work: Path, at_once: bool) -> tuple[list[str], bool]:
    """``at_once``: the bucket hangs before the agent starts, so the hung copies, first seen in one
    poll and never renewed, all come due in one tick; else it hangs once every copy has renewed (their
    renewals retried on the hung bucket meanwhile), and they come due over a few ticks."""
    import s3fs

    work.mkdir(parents=True, exist_ok=True)
    with moto_server(work / "moto.log") as moto, s3_proxy(moto) as proxy:
        direct = s3fs.S3FileSystem(skip_instance_cache=True, **s3_options(moto))
        direct.mkdir("hung")
        direct.mkdir("healthy")
        policy = RestorePolicy(
            default_checkpoint_dir="s3://healthy/checkpoints",
            storage_options={"s3": s3_options(proxy.endpoint)},
            fencing=FENCING,
        )
        running = fakeapi.start_member_cluster()
        calls = _calls(running, work)
        try:
            names = {f"hung-{i}": "s3://hung/checkpoints" for i in range(hung)}
            names |= {f"healthy-{i}": "s3://healthy/checkpoints" for i in range(healthy)}
            for i, (name, root) in enumerate(names.items()):
                running.fake.upsert(running_deployment(f"{i + 1:032x}", name=name, checkpoint_dir=root))
            running.fake.latency["PATCH"] = (PATCH_SECONDS, 0.0)
            agent = FencingAgent("member1", policy, calls, CheckpointStorage(policy.storage_options))
            watch = Watch(agent, running.fake)
            stop = threading.Event()
            thread = threading.Thread(target=run_agent, args=(agent, stop), daemon=True)
            if at_once:
                watch.phase = "beside"
                proxy.hung.add("hung")
            hang = started = time.monotonic()
            thread.start()
            if at_once:
                while time.monotonic() - hang < 2 * FENCING.renew_deadline_seconds + FENCING.poll_seconds:
                    watch.sample()
                    time.sleep(0.05)
                stop.set()
                thread.join(15)
                return _figures(watch, hung, healthy, hang)

            def all_renewed() -> bool:
                watch.sample()
                return len(watch.renewed) == len(names) and min(watch.renewed.values()) > started

            if not wait_for(all_renewed, 90):
                stop.set()
                late = sum(1 for r in watch.renewed.values() if r <= started)
                why = Counter(r.split(" for ")[0] for r in watch.reasons.values())
                return [
                    f"  not every copy renewed within 90 s: {late} of {len(names)} never; stepped down "
                    f"{len(watch.suspended)} ({dict(why)})"
                ], False
            rounds = time.monotonic()
            while time.monotonic() - rounds < 2 * FENCING.poll_seconds:  # two rounds of renewals
                watch.sample()
                time.sleep(0.05)
            watch.longest.clear()
            watch.phase = "beside"
            proxy.hung.add("hung")
            hang = time.monotonic()
            while time.monotonic() - hang < 2 * FENCING.renew_deadline_seconds + FENCING.poll_seconds:
                watch.sample()
                time.sleep(0.05)
            stop.set()
            thread.join(15)
        finally:
            calls.close()
            running.stop()
    return _figures(watch, hung, healthy, hang)


def renewal_burst(work: Path, count: int, hung: int) -> str:
    """``count`` renewals at once on the healthy bucket through the process's lanes, alone and while
    ``hung`` renewals and 20 listings wait on the hung bucket of the same endpoint (issue 35: 200 took
    1.9 s alone, 4.8 s beside a hung bucket, when every bucket's calls shared one s3fs client)."""
    import asyncio

    work.mkdir(parents=True, exist_ok=True)
    with moto_server(work / "moto.log") as moto, s3_proxy(moto) as proxy:
        for bucket in ("healthy", "hung"):
            s3fs_direct(moto).mkdir(bucket)
        storage = CheckpointStorage({"s3": s3_options(proxy.endpoint)})
        lanes = Lanes(FENCING.call_timeout)
        store = FencingStore(storage, "member1", lanes)
        body = heartbeat_body(Workload("FlinkDeployment", NS, "orders"), "member1", 1, "", "now")

        def folder(bucket: str, i: int) -> StoragePath:
            return StoragePath.parse(f"s3://{bucket}/checkpoints/{RECORDS}/c-{i}")

        async def burst() -> tuple[float, int]:
            started = time.monotonic()
            calls = (lanes.run(store.beat_call(folder("healthy", i), body)) for i in range(count))
            answers = await asyncio.gather(*calls, return_exceptions=True)
            return time.monotonic() - started, sum(isinstance(a, BaseException) for a in answers)

        async def beside() -> tuple[float, int]:
            waiting: list[asyncio.Future[Any]] = [
                asyncio.ensure_future(lanes.run(store.beat_call(folder("hung", i), body)))
                for i in range(hung)
            ]
            waiting += [
                asyncio.ensure_future(lanes.run(store.list_call(folder("hung", i)))) for i in range(20)
            ]
            await asyncio.sleep(0.5)  # the hung bucket's calls hold their threads and connections
            took = await burst()
            await asyncio.gather(*waiting, return_exceptions=True)
            return took

        asyncio.run(burst())  # the connections opened
        alone, failed_alone = asyncio.run(burst())
        proxy.hung.add("hung")
        near, failed_near = asyncio.run(beside())
        lanes.close()
    return (
        f"  {count} renewals at once on the healthy bucket: {alone:.2f} s alone ({failed_alone} failed), "
        f"{near:.2f} s beside {hung} renewals and 20 listings waiting on the hung bucket "
        f"({failed_near} failed; deadline {FENCING.call_timeout:g} s)"
    )


def s3fs_direct(endpoint: str) -> Any:
    import s3fs

    return s3fs.S3FileSystem(skip_instance_cache=True, **s3_options(endpoint))


def _figures(watch: Watch, hung: int, healthy: int, hang: float) -> tuple[list[str], bool]:
    deadline = FENCING.renew_deadline_seconds
    bound = FENCING.poll_seconds  # the suspend is through within a poll of the renew deadline
    slack = FENCING.lease_seconds - deadline - bound - FENCING.stop_margin_seconds
    names = [n for n in watch.renewed if n.startswith("hung-")]
    late = [watch.suspended[n] - (watch.renewed[n] + deadline) for n in names if n in watch.suspended]
    due = Counter(watch.renewed[n] for n in names)  # copies whose deadline passed in the same tick
    early = sum(1 for t in watch.suspended.values() if t < hang)
    healthy_down = sum(1 for n in watch.suspended if n.startswith("healthy-"))
    longest = max((s for n, s in watch.longest.items() if n.startswith("healthy-")), default=float("nan"))
    down = [watch.suspended[n] for n in names if n in watch.suspended]
    nan = float("nan")
    lines = [
        f"  {hung} copies on the hung bucket, at most {max(due.values(), default=0)} due in one tick: "
        f"{len(late)} suspended, {min(late, default=nan):.2f} to {max(late, default=nan):.2f} s "
        f"after their renew deadline (bound {bound:g} s, then {slack:g} s of slack); the last "
        f"{max(down, default=float('nan')) - hang:.1f} s after the hang; suspended before it: {early}",
        f"  {healthy} copies on the healthy bucket: longest without a renewal {longest:.2f} s "
        f"(renew deadline {deadline:g} s, poll {FENCING.poll_seconds:g} s); stepped down {healthy_down}",
        f"  their renewals, start to answer: {_spread(watch.renewals['alone'])} before the hang, "
        f"{_spread(watch.renewals['beside'])} beside it (deadline of a call {FENCING.call_timeout:g} s)",
    ]
    ok = len(late) == hung and max(late, default=float("inf")) <= bound and healthy_down == 0 and not early
    return lines, ok


def _spread(seconds: list[float]) -> str:
    if not seconds:
        return "none seen"
    ordered = sorted(seconds)
    return f"p50 {ordered[len(ordered) // 2]:.2f} s, max {ordered[-1]:.2f} s ({len(ordered)})"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench stepdowns")
    parser.add_argument("--hung", type=int, default=500, help="running copies on the bucket that hangs")
    parser.add_argument("--healthy", type=int, default=200, help="running copies on the healthy bucket")
    parser.add_argument("--hang", choices=("both", "at-start", "after-renewals", "none"), default="both")
    args = parser.parse_args(argv)
    logging.getLogger("webhook").setLevel(logging.CRITICAL)  # 500 step-downs are logged: figures here
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)  # s3fs's cancelled requests
    print(
        f"step-downs at {PATCH_SECONDS * 1000:g} ms a patch, beside a hung bucket (lease 30 s, poll 5 s, "
        "renew deadline 10 s):",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        failed = 0
        for at_once, title in (
            (True, "the bucket hangs before the agent starts: all due in one tick"),
            (False, "the bucket hangs once every copy has renewed"),
        ):
            if args.hang == "none" or (args.hang != "both" and at_once != (args.hang == "at-start")):
                continue
            print(f" {title}", flush=True)
            lines, ok = run(args.hung, args.healthy, Path(tmp) / str(at_once), at_once)
            for line in lines:
                print(line, flush=True)
            failed += not ok
        print(" renewals beside the hung bucket, through the lanes alone (no agent):", flush=True)
        print(renewal_burst(Path(tmp) / "burst", 200, args.hung), flush=True)
    return 1 if failed else 0
