"""Storage calls with a deadline, one small pool per storage, so one hung bucket delays only its own jobs.

fsspec calls cannot be interrupted, so a call that does not answer in time is left to finish on its
lane's thread while the caller gets ``DeadlineExceeded`` at once. A lane whose threads are all stuck
refuses new calls straight away instead of queueing them behind the hung ones.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from typing import TypeVar

from webhook.common.paths import StoragePath
from webhook.member.restore import StorageError
from webhook.member.storage import DeadlineExceeded

T = TypeVar("T")

THREADS_PER_LANE = 4
MAX_OUTSTANDING = 16  # per lane: beyond this the storage is taken as hung and calls fail at once


def lane_of(path: StoragePath) -> str:
    """The storage a path is on: an object store's bucket, or a local path's top two folders (mounts)."""
    if path.authority:
        return f"{path.scheme}://{path.authority}"
    top = "/".join(path.path.split("/")[:3])
    return f"{path.scheme}://{top}"


class Lanes:
    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._pools: dict[str, concurrent.futures.ThreadPoolExecutor] = {}
        self._outstanding: dict[str, int] = {}
        self._lock = threading.Lock()

    def call(self, path: StoragePath, what: str, fn: Callable[[], T]) -> T:
        lane = lane_of(path)
        with self._lock:
            busy = self._outstanding.get(lane, 0)
            if busy >= MAX_OUTSTANDING:
                raise DeadlineExceeded(f"{what}: {lane} has {busy} calls still unanswered (storage hangs?)")
            pool = self._pools.get(lane)
            if pool is None:
                pool = concurrent.futures.ThreadPoolExecutor(
                    THREADS_PER_LANE, thread_name_prefix="fencing-io"
                )
                self._pools[lane] = pool
            self._outstanding[lane] = busy + 1
        future = pool.submit(fn)
        future.add_done_callback(lambda _f: self._done(lane))
        try:
            return future.result(timeout=self.timeout)
        except concurrent.futures.TimeoutError:
            raise DeadlineExceeded(f"{what}: no answer within {self.timeout:g}s") from None
        except StorageError:
            raise
        except Exception as exc:  # a backend failing in an unexpected way is still a storage error
            raise StorageError(f"{what}: {type(exc).__name__}: {str(exc)[:200]}") from None

    def _done(self, lane: str) -> None:
        with self._lock:
            self._outstanding[lane] -= 1

    def close(self) -> None:
        with self._lock:
            pools = list(self._pools.values())
        for pool in pools:
            pool.shutdown(wait=False, cancel_futures=True)
