"""Storage calls with a deadline that holds, two small pools per storage, so one hung bucket delays only
its own jobs. The member webhook's fencing calls and the agent's share one ``Lanes`` per process.

Per storage: a lane for the records (listings, fences, stop marks, acks, clocks, resolves;
``THREADS_PER_LANE`` threads) and one for the heartbeats (renewals and their removal: ``HEARTBEAT_THREADS``
threads, and a filesystem instance of their own with as many connections, ``records.FencingStore``), so a
renewal never waits behind a poll's listings of its own storage, nor for a connection another storage's
hung calls hold (every fencing call of a scheme shares fsspec's one instance: on S3 10 connections).

A caller is answered at its deadline at the latest, whatever the storage does: a call that has not
started by then is dropped (it never runs behind the hung calls that held up its lane), and one that is
running is left to finish on its lane's thread while the caller gets ``DeadlineExceeded``. What bounds
the thread too: every call is handed the seconds it has left, and the records pass them to an async
fsspec backend (s3fs, gcsfs, adlfs) as its ``timeout``, which cancels the request itself. Without it an
S3 PUT to an endpoint that accepts and never answers waited for ``100 Continue`` for ever (measured:
over 300 s, whatever ``read_timeout`` said), and a listing took 10.5 s (two attempts of a 3 s read
timeout with backoff): sixteen such calls filled a lane and the rest waited 12-28 s behind them.

A lane whose every thread is held by a call past its deadline (a backend that cannot be interrupted:
local files on a hung mount, HDFS) refuses new calls at once, and so does one with ``MAX_OUTSTANDING``
calls not answered yet; a burst of calls to a storage that answers (a fleet's poll) just queues.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from webhook.common.paths import StoragePath
from webhook.restore.snapshots import StorageError
from webhook.restore.storage.backends import DeadlineExceeded

T = TypeVar("T")

THREADS_PER_LANE = 8
HEARTBEAT_THREADS = 16  # per storage: a fleet's renewals of one poll go through in well under a poll
HEARTBEATS = "heartbeats"  # the heartbeat lane's name (its filesystem instance is keyed by it too)
MAX_OUTSTANDING = 1024  # per lane: a backstop on memory; the deadlines keep the queue short

Executors = Callable[[str], concurrent.futures.Executor]


def lane_of(path: StoragePath) -> str:
    """The storage a path is on: an object store's bucket, or a local path's top two folders (mounts)."""
    if path.authority:
        return f"{path.scheme}://{path.authority}"
    top = "/".join(path.path.split("/")[:3])
    return f"{path.scheme}://{top}"


@dataclass(frozen=True)
class Call(Generic[T]):
    """One storage call: where (its storage), what (for the error), and the work, which is handed the
    seconds left before its deadline; ``heartbeat``: it runs on the storage's heartbeat lane."""

    path: StoragePath
    what: str
    fn: Callable[[float], T]
    heartbeat: bool = False


def _key(call: Call[Any]) -> str:
    """The lane a call runs on: its storage's records lane, or its heartbeat lane."""
    storage = lane_of(call.path)
    return f"{storage} {HEARTBEATS}" if call.heartbeat else storage


def _size(lane: str) -> int:
    return HEARTBEAT_THREADS if lane.endswith(" " + HEARTBEATS) else THREADS_PER_LANE


def _threads(lane: str) -> concurrent.futures.Executor:
    prefix = "fencing-beat" if lane.endswith(" " + HEARTBEATS) else "fencing-io"
    return concurrent.futures.ThreadPoolExecutor(_size(lane), thread_name_prefix=prefix)


class Lanes:
    """``timeout``: the deadline of a call that names none. ``executors`` makes one lane's pool from its
    name (``s3://bucket``, ``s3://bucket heartbeats``; tests hand in a simulated storage's); ``clock`` is
    the monotonic clock deadlines are measured on."""

    def __init__(
        self,
        timeout: float,
        executors: Executors = _threads,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timeout = timeout
        self._executors = executors
        self._clock = clock
        self._pools: dict[str, concurrent.futures.Executor] = {}
        self._outstanding: dict[str, int] = {}
        self._running: dict[str, dict[int, float]] = {}  # lane -> running call -> its deadline
        self._lock = threading.Lock()

    def call(self, call: Call[T], timeout: float | None = None) -> T:
        """Run ``call`` and wait for it at most its deadline (for callers that block: the webhook)."""
        seconds = self.timeout if timeout is None else timeout
        future = self._submit(call, self._clock() + seconds, seconds)
        try:
            return future.result(timeout=max(seconds, 0.001))
        except concurrent.futures.TimeoutError:
            future.cancel()  # not started yet: it never will be
            raise DeadlineExceeded(f"{call.what}: no answer within {seconds:g}s") from None
        except concurrent.futures.CancelledError:
            raise DeadlineExceeded(f"{call.what}: not started within {seconds:g}s") from None
        except Exception as exc:
            raise _storage_error(call, exc) from None

    async def run(self, call: Call[T], timeout: float | None = None) -> T:
        """``call`` for the agent's event loop: the loop never waits on a lane's thread."""
        seconds = self.timeout if timeout is None else timeout
        future = self._submit(call, self._clock() + seconds, seconds)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), max(seconds, 0.001))
        except TimeoutError:  # wait_for cancelled it: a call still queued is dropped
            raise DeadlineExceeded(f"{call.what}: no answer within {seconds:g}s") from None
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():  # the agent is stopping
                raise
            raise DeadlineExceeded(f"{call.what}: dropped (lanes closed)") from None
        except Exception as exc:
            raise _storage_error(call, exc) from None

    def submit(self, call: Call[T], timeout: float) -> concurrent.futures.Future[T]:
        """Start ``call`` and return at once (the webhook starts its fence while it resolves the
        checkpoint); whoever waits for the future cancels it at its deadline."""
        return self._submit(call, self._clock() + timeout, timeout)

    def _submit(self, call: Call[T], expires: float, seconds: float) -> concurrent.futures.Future[T]:
        lane = _key(call)
        clock = self._clock
        with self._lock:
            busy = self._outstanding.get(lane, 0)
            stuck = sum(1 for deadline in self._running.get(lane, {}).values() if deadline < clock())
            if stuck >= _size(lane) or busy >= MAX_OUTSTANDING:
                raise DeadlineExceeded(
                    f"{call.what}: {lane} has {busy} calls unanswered, {stuck} of them past their deadline "
                    "(storage hangs?)"
                )
            pool = self._pools.get(lane)
            if pool is None:
                pool = self._pools[lane] = self._executors(lane)
            self._outstanding[lane] = busy + 1
        running = self._running.setdefault(lane, {})

        def started() -> T:
            left = expires - clock()
            if left <= 0:
                raise DeadlineExceeded(f"{call.what}: waited {seconds:g}s behind earlier calls to {lane}")
            token = id(threading.current_thread())
            with self._lock:
                running[token] = expires
            try:
                return call.fn(left)
            finally:
                with self._lock:
                    running.pop(token, None)

        try:
            future = pool.submit(started)
        except RuntimeError:  # closed: the process is stopping, and a poll still under way asks
            self._done(lane)
            raise DeadlineExceeded(f"{call.what}: dropped (lanes closed)") from None
        future.add_done_callback(lambda _f: self._done(lane))  # also when cancelled
        return future

    def _done(self, lane: str) -> None:
        with self._lock:
            self._outstanding[lane] -= 1

    def outstanding(self, path: StoragePath) -> int:
        """Calls to ``path``'s storage not answered yet, on both its lanes (the agent's status shows it)."""
        with self._lock:
            return sum(self._outstanding.get(lane, 0) for lane in _lanes(path))

    def stuck(self, path: StoragePath) -> int:
        """Calls to ``path``'s storage still running past their deadline (threads it holds)."""
        now = self._clock()
        with self._lock:
            running = [d for lane in _lanes(path) for d in self._running.get(lane, {}).values()]
        return sum(1 for deadline in running if deadline < now)

    def threads(self) -> int:
        """Threads the lanes may run at most (each lane's pool is fixed): bounded by the storages."""
        with self._lock:
            return sum(_size(lane) for lane in self._pools)

    def close(self) -> None:
        with self._lock:
            pools = list(self._pools.values())
        for pool in pools:
            pool.shutdown(wait=False, cancel_futures=True)


def _lanes(path: StoragePath) -> tuple[str, str]:
    storage = lane_of(path)
    return storage, f"{storage} {HEARTBEATS}"


def _storage_error(call: Call[Any], exc: BaseException) -> StorageError:
    if isinstance(exc, StorageError):
        return exc
    return StorageError(f"{call.what}: {type(exc).__name__}: {str(exc)[:200]}")


_shared: Lanes | None = None
_shared_lock = threading.Lock()


def process_lanes(timeout: float) -> Lanes:
    """The lanes of this process: the member webhook's fencing calls and the agent's (one gunicorn
    worker runs both) wait on the same pools, so a storage the agent has found hung is refused to the
    webhook at once too. Made on first use, after the server's workers have forked."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = Lanes(timeout)
        return _shared
