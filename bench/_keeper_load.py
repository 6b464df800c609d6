"""The storage traffic of a fleet's other keepers, for ``bench keeper``: each simulated job's folder holds
its fence and its heartbeat, and once a poll the job's folder is listed and its heartbeat PUT (what one
keeper sends: a ListObjectsV2 of its folder and a PutObject of ``heartbeat-<cluster>.json``), each job at
its own phase of the poll, open loop (a request is due on its schedule whatever the store's latency, as
each keeper sends its own). A request that ends later than one poll after it was due is one the keeper
would have failed (its deadline is a poll).

The requests are plain HTTP on kept-alive connections, with a SigV4 header whose signature nobody checks
(moto does not), from ``WORKERS`` threads in a process of their own, so the generator's CPU is neither
the keepers' nor the bench's; their latency counts from when each was due, so a backlog waiting for a
free thread counts as the store's (the store is the one too slow then), and one still waiting a poll
after it was due is not sent (its keeper's deadline has passed: a failure), so a store slower than the
fleet serves what it can and the rest fails, instead of a backlog growing for ever. What it cannot be is
1,000 clients: at most ``WORKERS`` requests wait at the store at once, where 1,000 keepers would all
queue there (a store too slow for the fleet then fails every keeper, the measured ones too, not only the
others).
"""

from __future__ import annotations

import heapq
import http.client
import json
import multiprocessing
import queue
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

WORKERS = 64


@dataclass(frozen=True)
class Request:
    due: float  # wall clock
    call: str  # "list" | "beat"
    seconds: float  # from due to the answer's end
    ok: bool  # answered 200 within a poll of when it was due
    answered: bool = False  # sent and answered 200, however late


def seed(port: int, bucket: str, folders: Sequence[str], body: bytes, fence: bytes) -> None:
    """The bucket and, in each folder (``bucket``-relative, no trailing slash), a fence and a heartbeat."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    _send(connection, "PUT", f"/{bucket}")
    for folder in folders:
        _send(connection, "PUT", f"/{bucket}/{folder}/fence-000000000000-member1.json", fence)
        _send(connection, "PUT", f"/{bucket}/{folder}/heartbeat-member1.json", body)
    connection.close()


# moto reads the access key from a SigV4 header and checks no signature; without one it refuses an
# anonymous overwrite of an object (403)
HEADERS = {
    "Authorization": "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/s3/aws4_request, "
    "SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=" + "0" * 64,
    "x-amz-date": "20260101T000000Z",
    "x-amz-content-sha256": "UNSIGNED-PAYLOAD",
}


def _send(connection: http.client.HTTPConnection, method: str, url: str, body: bytes | None = None) -> int:
    connection.request(method, url, body=body, headers=HEADERS)
    answer = connection.getresponse()
    answer.read()
    return answer.status


def _run(
    port: int, bucket: str, folders: list[str], body: bytes, poll: float, out: Any, stop: Any, ready: Any
) -> None:
    todo: queue.SimpleQueue[tuple[float, str, str] | None] = queue.SimpleQueue()
    done: list[Request] = []
    lock = threading.Lock()

    def work() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2 * poll)
        while (item := todo.get()) is not None:
            due, call, folder = item
            late = time.monotonic() - due
            wall_due = time.time() - late
            if late > poll:  # the keeper would have given up on it: not sent, failed
                with lock:
                    done.append(Request(wall_due, call, late, False))
                continue
            status = 0
            try:
                if call == "list":
                    status = _send(
                        connection,
                        "GET",
                        f"/{bucket}?list-type=2&prefix={folder}/&delimiter=%2F&encoding-type=url",
                    )
                else:
                    status = _send(connection, "PUT", f"/{bucket}/{folder}/heartbeat-member1.json", body)
            except (OSError, http.client.HTTPException):
                connection.close()
            seconds = time.monotonic() - due
            with lock:
                done.append(
                    Request(wall_due, call, seconds, status == 200 and seconds <= poll, status == 200)
                )

    threads = [threading.Thread(target=work, daemon=True) for _ in range(WORKERS)]
    for thread in threads:
        thread.start()
    start = time.monotonic()
    # each job at its own phase of the poll (keepers start when their pods do)
    heap = [(start + poll * i / len(folders), i) for i in range(len(folders))]
    heapq.heapify(heap)
    ready.set()
    while not stop.is_set():
        due, i = heap[0]
        pause = due - time.monotonic()
        if pause > 0:
            stop.wait(min(pause, 0.05))
            continue
        heapq.heapreplace(heap, (due + poll, i))
        todo.put((due, "list", folders[i]))
        todo.put((due, "beat", folders[i]))
    # the backlog the store left behind: due and never sent; those already a poll late count as failed
    now, wall = time.monotonic(), time.time()
    with lock:
        while True:
            try:
                item = todo.get_nowait()
            except queue.Empty:
                break
            if item is not None and now - item[0] > poll:
                done.append(Request(wall - (now - item[0]), item[1], now - item[0], False))
    for _ in threads:
        todo.put(None)
    for thread in threads:
        thread.join(2 * poll)
    with lock:
        out.put(([(r.due, r.call, r.seconds, r.ok, r.answered) for r in done], time.process_time()))


@dataclass
class Load:
    """What the generator did: its requests (filter them to a window) and its CPU seconds."""

    requests: list[Request]
    cpu_seconds: float


@contextmanager
def fleet_load(port: int, bucket: str, folders: list[str], body: bytes, poll: float) -> Iterator[list[Load]]:
    """The traffic of ``folders``' keepers against the S3 server on ``port`` until the block ends; the
    list yielded holds the ``Load`` once it has."""
    context = multiprocessing.get_context("spawn")
    out, stop, ready = context.Queue(), context.Event(), context.Event()
    process = context.Process(
        target=_run,
        args=(port, bucket, folders, body, poll, out, stop, ready),
        name="keeper-load",
        daemon=True,
    )
    process.start()
    if not ready.wait(60):
        process.kill()
        raise RuntimeError("the load generator did not start within 60 s")
    result: list[Load] = []
    try:
        yield result
    finally:
        stop.set()
        try:
            raw, cpu = out.get(timeout=4 * poll + 30)
            result.append(Load([Request(*r) for r in raw], cpu))
        except queue.Empty:
            pass
        process.join(10)
        if process.is_alive():
            process.kill()


def summary(requests: Sequence[Request], since: float, until: float) -> dict[str, Any]:
    """Per call: requests due in [since, until), how many a keeper would have failed, how many the store
    answered however late (under overload: its capacity), latency quantiles."""
    found: dict[str, Any] = {}
    for call in ("list", "beat"):
        due = [r for r in requests if r.call == call and since <= r.due < until]
        window = sorted(r.seconds for r in due)
        if not window:
            continue
        found[call] = {
            "count": len(window),
            "failed": sum(1 for r in due if not r.ok),
            "answered": sum(1 for r in due if r.answered),
            "p50": window[len(window) // 2],
            "p99": window[min(len(window) - 1, int(len(window) * 0.99))],
            "max": window[-1],
        }
    return found


def heartbeat_like(folder: str) -> bytes:
    """A body the size of a keeper's heartbeat (``heartbeat_body`` plus writer and pod)."""
    body = {
        "cluster": "member1",
        "epoch": 0,
        "jobId": "0" * 32,
        "pod": f"{folder.rsplit('/', 1)[-1]}-6d9f7c8b5d-x2k4q",
        "workload": "FlinkDeployment/bench/" + folder.rsplit("/", 1)[-1],
        "writer": "keeper",
        "written": "2026-01-01T00:00:00.000+00:00",
    }
    return (json.dumps(body, sort_keys=True) + "\n").encode()
