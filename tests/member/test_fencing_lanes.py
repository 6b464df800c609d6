"""Storage calls whose deadlines hold (``member/fencing/lanes.py``), against an S3 endpoint that accepts
connections and never answers, and against a lane whose threads are busy.

Issue 28 measured, before: once 16 calls to a hung bucket were outstanding new ones were refused at
once, and the outstanding ones stayed unanswered from about 12 s to at least 28 s after the hang, with a
3 s read timeout configured. Two causes: calls queued behind the hung ones on the lane's 4 threads, each
taking its whole botocore retry budget (a listing: 10.5 s), and an S3 PUT that waits for ``100 Continue``
for ever, whatever ``read_timeout`` says (measured: still waiting after 300 s), so its thread never came
back and the lane stayed full after the storage healed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

import pytest

from tests.faults.loopback import blackhole
from tests.support.production import wait_for
from webhook.common.paths import StoragePath
from webhook.member.fencing import lanes as lanes_module
from webhook.member.fencing.lanes import Call, Lanes
from webhook.member.fencing.layout import Workload
from webhook.member.fencing.records import FencingStore, heartbeat_body
from webhook.member.storage import CheckpointStorage, DeadlineExceeded

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
