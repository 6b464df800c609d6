"""Storage calls whose deadlines hold (``fencing/lanes.py``), against an S3 endpoint that accepts
connections and never answers, and against a lane whose threads are busy.

Issue 28 measured, before: once 16 calls to a hung bucket were outstanding new ones were refused at
once, and the outstanding ones stayed unanswered from about 12 s to at least 28 s after the hang, with a
3 s read timeout configured. Two causes: calls queued behind the hung ones on the lane's 4 threads, each
taking its whole botocore retry budget (a listing: 10.5 s), and an S3 PUT that waits for ``100 Continue``
for ever, whatever ``read_timeout`` says (measured: still waiting after 300 s), so its thread never came
back and the lane stayed full after the storage healed.

Issue 35 (step-downs first): step-down patches queued on ``ThreadedApi``'s four threads behind lists,
rechecks and hold rewrites (at 100 ms a patch, 400 step-downs at once finished 156 within 4 s), and every
``s3://`` bucket's renewals shared one s3fs client of 10 connections with every other call (200 renewals:
1.9 s alone, 4.8 s beside a hung bucket). Now the patches that stop a job have threads and a client of
their own, and heartbeats a lane and a filesystem instance of their own per storage, each bounded.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.controlplane import fakeapi
from tests.faults.loopback import blackhole, s3_proxy
from tests.support.objects import running_deployment
from tests.support.production import wait_for
from tests.support.s3 import moto_server, s3_options
from webhook.common.kubeclient import ApiFailure, ClientConfig
from webhook.common.paths import StoragePath
from webhook.fencing import lanes as lanes_module
from webhook.fencing.agent import FencingAgent
from webhook.fencing.copies import read_copy
from webhook.fencing.effects import Stop
from webhook.fencing.flinkapi import API_THREADS, STOP_THREADS, FlinkApi, ThreadedApi, stops_client
from webhook.fencing.lanes import HEARTBEAT_THREADS, THREADS_PER_LANE, Call, Lanes
from webhook.fencing.layout import Workload
from webhook.fencing.protocol import Fence
from webhook.fencing.records import FencingStore, heartbeat_body
from webhook.policy.restore import RestorePolicy
from webhook.restore.storage.backends import DeadlineExceeded
from webhook.restore.storage.search import CheckpointStorage

HUNG = StoragePath.parse("s3://hung-bucket/checkpoints/flink-failover/analytics/flinkdeployment/orders")


def test_a_write_to_a_hung_bucket_fails_at_its_deadline_and_gives_its_thread_back() -> None:
    with blackhole() as port:
        storage = CheckpointStorage(
            {"s3": {"endpoint_url": f"http://127.0.0.1:{port}", "key": "k", "secret": "s"}}
        )
        lanes = Lanes(1.0)
        store = FencingStore(storage, "member1", lanes)
        body = heartbeat_body(Workload("FlinkDeployment", "analytics", "orders"), "member1", 1, "", "now")
        calls = [store.beat_call(HUNG, body) for _ in range(3)] + [store.list_call(HUNG)]

        async def all_at_once() -> list[BaseException | None]:
            answers = await asyncio.gather(*(lanes.run(c) for c in calls), return_exceptions=True)
            return [a if isinstance(a, BaseException) else None for a in answers]

        answers = asyncio.run(all_at_once())
        assert all(isinstance(a, DeadlineExceeded) for a in answers), answers
        # fsspec's own timeout cancelled the requests: nothing is left outstanding on the lane (before:
        # the PUTs waited for 100 Continue for ever and held the lane's threads).
        assert wait_for(lambda: lanes.outstanding(HUNG) == 0, 30), lanes.outstanding(HUNG)
        with pytest.raises(DeadlineExceeded):
            store.beat(HUNG, body, timeout=0.5)  # a blocking caller (the webhook) the same
        assert wait_for(lambda: lanes.outstanding(HUNG) == 0, 30)
        lanes.close()


def test_a_call_still_queued_at_its_deadline_never_runs() -> None:
    gate = threading.Event()
    ran: list[str] = []
    lanes = Lanes(5.0, executors=lambda lane: concurrent.futures.ThreadPoolExecutor(1))
    path = StoragePath.parse("s3://bucket/x")
    busy = lanes.submit(Call(path, "the first", lambda left: gate.wait(10)), 10)
    with pytest.raises(DeadlineExceeded, match=r"no answer within 0\.2s"):
        lanes.call(Call(path, "the queued one", lambda left: ran.append("queued")), timeout=0.2)
    gate.set()
    busy.result(5)
    lanes.call(Call(path, "after", lambda left: ran.append("after")), timeout=5)
    assert ran == ["after"]  # dropped where it waited: it never reached the storage late
    lanes.close()


def test_a_lane_whose_every_thread_is_stuck_past_its_deadline_refuses_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A backend that cannot be interrupted (local files on a hung mount) keeps its threads: once all of
    them are past their deadline, calls fail at once; another storage's lane is untouched."""
    monkeypatch.setattr(lanes_module, "THREADS_PER_LANE", 2)
    release = threading.Event()
    lanes = Lanes(0.1)
    hung = StoragePath.parse("/hung-mount/checkpoints")  # two lanes: two mounts (nothing is touched there)
    other = StoragePath.parse("/other-mount/checkpoints")
    for _ in range(2):
        lanes.submit(Call(hung, "stuck", lambda left: release.wait(30)), 0.1)
    assert wait_for(lambda: lanes.stuck(hung) == 2)
    with pytest.raises(DeadlineExceeded, match="2 of them past their deadline"):
        lanes.call(Call(hung, "next", lambda left: "never"))
    assert lanes.call(Call(other, "elsewhere", lambda left: "answered")) == "answered"
    release.set()
    assert wait_for(lambda: lanes.outstanding(hung) == 0)
    assert lanes.call(Call(hung, "healed", lambda left: "answered")) == "answered"
    lanes.close()


# --- issue 35: step-downs first ----------------------------------------------------------------------

FLINK_LIST = "GET /apis/flink.apache.org/v1beta1/flinkdeployments"


def _calls(running: fakeapi.RunningFake, work: Path, timeout: float) -> ThreadedApi:
    config = ClientConfig(str(running.kubeconfig(work / "kubeconfig")))
    api = FlinkApi.connect(config)
    assert isinstance(api, FlinkApi)
    return ThreadedApi(api, timeout, stops=stops_client(config))


@pytest.mark.parametrize("what", ["step-down", "stop"])
def test_a_step_down_or_stop_goes_through_while_every_other_api_thread_waits_on_a_list(
    tmp_path: Path, what: str
) -> None:
    """The API server answers the agent's lists after 30 s (beyond the client's 10 s timeout): every one
    of ``ThreadedApi``'s general threads is held by one. Before, the patch queued behind them and failed
    at its deadline; now it has threads and connections of its own."""
    running = fakeapi.start_member_cluster()
    policy = RestorePolicy(default_checkpoint_dir=str(tmp_path))
    calls = _calls(running, tmp_path, policy.fencing.call_timeout)
    try:
        running.fake.upsert(running_deployment())
        running.fake.latency["LIST"] = (30.0, 0.0)
        agent = FencingAgent("member1", policy, calls, CheckpointStorage())
        copy = read_copy({**running.fake.get("analytics", "orders"), "kind": "FlinkDeployment"}, policy)

        async def scenario() -> str | None:
            lists = [asyncio.ensure_future(calls.list_kind("FlinkDeployment")) for _ in range(API_THREADS)]
            while sum(r.startswith(FLINK_LIST) for r in running.fake.requests) < API_THREADS:
                await asyncio.sleep(0.02)  # every general thread is waiting on the API server
            if what == "step-down":
                done = await agent.patcher.step_down(copy, "renew deadline passed")
                problem = None if done else "not stepped down"
            else:
                fence = Fence("member2", 2, datetime.now(UTC))
                problem = await agent._apply(copy, Stop(fence), 0.0)
            for waiting in lists:
                waiting.cancel()
            return problem

        assert asyncio.run(scenario()) is None
        job = running.fake.get("analytics", "orders")["spec"]["job"]
        assert job["state"] == "suspended"
    finally:
        calls.close()
        running.stop()


def test_a_renewal_does_not_wait_for_the_connections_a_hung_bucket_holds(tmp_path: Path) -> None:
    """Two buckets on one S3 endpoint; calls to one are never answered. Listings of the hung bucket hold
    every connection of the client the scheme shares (s3fs: 10); a renewal on the healthy bucket still
    goes through, on its storage's own filesystem instance. Before, it waited for a connection and
    failed at its deadline."""
    import s3fs

    with moto_server(tmp_path / "moto.log") as moto, s3_proxy(moto) as proxy:
        direct = s3fs.S3FileSystem(skip_instance_cache=True, **s3_options(moto))
        direct.mkdir("healthy")
        direct.mkdir("hung")
        proxy.hung.add("hung")
        slow = {"read_timeout": 60, "connect_timeout": 2, "retries": {"max_attempts": 1}}
        storage = CheckpointStorage({"s3": {**s3_options(proxy.endpoint), "config_kwargs": slow}})
        # botocore rewrites the retries it is given when it connects: the instance the scheme's calls
        # share is the one made after that (fsspec caches instances by their options)
        storage.filesystem(StoragePath.parse("s3://healthy/x")).ls("healthy")
        shared = storage.filesystem(StoragePath.parse("s3://hung/checkpoints"))
        listers = [
            threading.Thread(target=_listing, args=(shared, "hung/checkpoints"), daemon=True)
            for _ in range(12)
        ]
        for lister in listers:
            lister.start()
        assert wait_for(lambda: proxy.held >= 10, 30), proxy.held  # the shared client's every connection
        lanes = Lanes(5.0)
        store = FencingStore(storage, "member1", lanes)
        folder = StoragePath.parse("s3://healthy/checkpoints/flink-failover/analytics/flinkdeployment/orders")
        assert storage.filesystem(folder) is shared  # what every other fencing call of the scheme uses
        body = heartbeat_body(Workload("FlinkDeployment", "analytics", "orders"), "member1", 1, "", "now")
        store.beat(folder, body, timeout=3.0)
        assert direct.exists(f"{folder.fs_path}/heartbeat-member1.json")
        heartbeats = storage.filesystem(folder, lanes_module.HEARTBEATS, HEARTBEAT_THREADS)
        assert heartbeats is not storage.filesystem(folder)
        assert heartbeats is not storage.filesystem(StoragePath.parse("s3://hung/x"), lanes_module.HEARTBEATS)
        proxy.release.set()
        for lister in listers:
            lister.join(30)
        lanes.close()


def _listing(fs: object, path: str) -> None:
    # answered by the proxy's release with a closed connection: not what is measured
    with contextlib.suppress(Exception):
        fs.ls(path, refresh=True)  # type: ignore[attr-defined]


def test_the_lanes_threads_are_fixed_per_storage_and_kind() -> None:
    """A burst of 200 calls on each lane of two storages: each lane runs at most its own threads (the
    rest queue), whatever the burst."""
    gate = threading.Event()
    lanes = Lanes(30.0)
    paths = [StoragePath.parse(f"s3://bucket-{i}/checkpoints") for i in range(2)]
    before = set(threading.enumerate())
    futures = [
        lanes.submit(Call(p, "call", lambda left: gate.wait(30), heartbeat=beat), 30)
        for p in paths
        for beat in (True, False)
        for _ in range(200)
    ]

    def made(prefix: str) -> int:
        return sum(1 for t in threading.enumerate() if t not in before and t.name.startswith(prefix))

    assert wait_for(
        lambda: made("fencing-beat") == 2 * HEARTBEAT_THREADS and made("fencing-io") == 2 * THREADS_PER_LANE
    )
    assert lanes.threads() == 2 * (HEARTBEAT_THREADS + THREADS_PER_LANE)
    assert lanes.outstanding(paths[0]) == 400
    gate.set()
    concurrent.futures.wait(futures, 30)
    assert made("fencing-beat") == 2 * HEARTBEAT_THREADS  # no more were made for the queued calls
    lanes.close()


def test_the_stops_threads_and_connections_are_fixed(tmp_path: Path) -> None:
    """100 stops at once at 200 ms a patch: every one answered, on ``STOP_THREADS`` threads and a client
    that keeps as many connections."""
    running = fakeapi.start_member_cluster()
    calls = _calls(running, tmp_path, 30.0)
    try:
        for i in range(100):
            running.fake.upsert(running_deployment(name=f"orders-{i}"))
        running.fake.latency["PATCH"] = (0.2, 0.0)
        before = set(threading.enumerate())
        body = {"metadata": {"annotations": {"flink-failover.io/stepped-down": "test"}}}

        async def burst() -> list[object]:
            return await asyncio.gather(
                *(
                    calls.patch("FlinkDeployment", "analytics", f"orders-{i}", body, stops=True)
                    for i in range(100)
                )
            )

        answers = asyncio.run(burst())
        assert not [a for a in answers if isinstance(a, ApiFailure)]
        made = [t for t in threading.enumerate() if t not in before and t.name.startswith("fencing-stop")]
        assert len(made) == STOP_THREADS
        pool = calls.stops.objects.api_client.rest_client.pool_manager
        assert pool.connection_pool_kw["maxsize"] == STOP_THREADS
    finally:
        calls.close()
        running.stop()


def test_the_webhook_builds_the_heartbeats_client_of_its_default_storage_before_its_first_admission(
    tmp_path: Path,
) -> None:
    """The heartbeat lane's client is the webhook's too (a fenced admission's heartbeat): built at start,
    as the lookups' is, not on the first admission's path (an s3fs client: 0.2-0.3 s)."""
    with moto_server(tmp_path / "moto.log") as moto:
        storage = CheckpointStorage({"s3": s3_options(moto)})
        FencingStore(storage, "member1").warm("s3://fleet/checkpoints")
        heartbeats = storage.filesystem(StoragePath.parse("s3://fleet/x"), lanes_module.HEARTBEATS)
        assert getattr(heartbeats, "_s3", None) is not None  # s3fs's client, made by connect()
        other = storage.filesystem(StoragePath.parse("s3://other/x"), lanes_module.HEARTBEATS)
        assert getattr(other, "_s3", None) is None


def test_a_call_after_the_lanes_closed_is_a_deadline_not_a_crash_of_the_poll() -> None:
    """A poll under way while the process stops asked a closed lane, and the agent logged "fencing poll
    failed" with a RuntimeError from the executor; now the call fails as any dropped call does."""
    path = StoragePath.parse("s3://bucket/checkpoints")
    lanes = Lanes(5.0)
    assert lanes.call(Call(path, "before", lambda left: "answered")) == "answered"
    lanes.close()
    with pytest.raises(DeadlineExceeded, match="lanes closed"):
        lanes.call(Call(path, "after", lambda left: "never"))
    with pytest.raises(DeadlineExceeded, match="lanes closed"):
        asyncio.run(lanes.run(Call(path, "polled", lambda left: "never")))
    assert lanes.outstanding(path) == 0
