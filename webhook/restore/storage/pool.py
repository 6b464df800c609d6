"""Where storage lookups run, and when a storage is not asked at all: an admission waits for its lookup
at most until its deadline, and a lookup that outlives it keeps running in the background.

A storage (a bucket or host per scheme, a top-level local directory) that left a lookup running past its
deadline is not asked again until that lookup ends (storage answered or gave up): the answer is the same
storage error at once. Otherwise every admission would hold a worker thread for the whole deadline, and
when more of them wait than the server has threads, the rest queue outside the deadline (tests/faults).
Offline (``review``) each lookup runs on a daemon thread of its own, so one abandoned on a hung storage
does not hold the process after its answer is printed (a pool's threads are joined at exit: 10 s and
more).
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any

from webhook.common.paths import StoragePath
from webhook.restore.snapshots import SnapshotQuery, Snapshots, StorageError
from webhook.restore.storage.backends import Deadline, DeadlineExceeded

# Storage calls that outlive their deadline keep running in the background; the pool bounds how many.
POOL_SIZE = 32

StorageKey = tuple[str, str, str]  # (scheme, authority, top-level local directory): what one hang stalls


class LookupPool:
    """The threads storage lookups run on, and the lookups abandoned at their deadline, per storage."""

    def __init__(self, daemon: bool = False, size: int = POOL_SIZE) -> None:
        self.executor: concurrent.futures.Executor = (
            DaemonThreads()
            if daemon
            else concurrent.futures.ThreadPoolExecutor(size, thread_name_prefix="storage")
        )
        self._lock = threading.Lock()
        self._abandoned: dict[StorageKey, int] = {}  # still running past their deadline

    def lookup(
        self,
        snapshots: Callable[[SnapshotQuery, Deadline], Snapshots],
        query: SnapshotQuery,
        deadline: Deadline,
        seconds: float,
    ) -> Snapshots:
        """``snapshots(query, deadline)`` on the pool, waited for at most until ``deadline``
        (``seconds``: the whole deadline, for the message). Raises ``StorageError`` (a
        ``DeadlineExceeded`` when late or when an earlier lookup still hangs on the same storage)."""
        keys = {storage_key(p) for p in (query.job_dir, query.savepoint) if p is not None}
        asked = ", ".join(str(p) for p in (query.job_dir, query.savepoint) if p is not None)
        with self._lock:
            hung = sorted(k for k in keys if self._abandoned.get(k))
        if hung:
            raise DeadlineExceeded(
                f"storage did not answer within {seconds:g}s deadline "
                f"(an earlier lookup on {describe(hung[0])} is still waiting for it; looking up {asked})"
            )

        def late() -> DeadlineExceeded:  # built only when a deadline passed: not on every admission
            return DeadlineExceeded(
                f"storage did not answer within {seconds:g}s deadline (looking up {asked})"
            )

        future = self.executor.submit(snapshots, query, deadline)
        try:
            return future.result(timeout=max(deadline.remaining(), 0.001))
        except concurrent.futures.TimeoutError:
            if not future.cancel():
                self._abandon(future, keys)
            raise late() from None
        except DeadlineExceeded:  # noticed inside the lookup, between two of its calls: the same answer
            raise late() from None
        except StorageError:
            raise
        except Exception as exc:  # an fsspec backend failing in an unexpected way is still a storage error
            raise StorageError(f"{type(exc).__name__}: {str(exc)[:200]}") from None

    def _abandon(self, future: concurrent.futures.Future[Snapshots], keys: set[StorageKey]) -> None:
        with self._lock:
            for key in keys:
                self._abandoned[key] = self._abandoned.get(key, 0) + 1

        def finished(_: concurrent.futures.Future[Snapshots]) -> None:
            with self._lock:
                for key in keys:
                    left = self._abandoned.get(key, 0) - 1
                    if left > 0:
                        self._abandoned[key] = left
                    else:
                        self._abandoned.pop(key, None)

        future.add_done_callback(finished)  # runs at once if the lookup finished meanwhile

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)


class DaemonThreads(concurrent.futures.Executor):
    """Runs each call on a daemon thread of its own (the offline review makes a handful of lookups)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # handed to the waiting admission, as a pool would
                future.set_exception(exc)

        threading.Thread(target=run, name="storage-offline", daemon=True).start()
        return future


def storage_key(path: StoragePath) -> StorageKey:
    """What one hung storage stalls: a bucket / host per scheme (options are per scheme), or for local
    paths the top-level directory (a hung mount)."""
    top = path.path.strip("/").split("/", 1)[0] if path.protocol == "file" else ""
    return (path.scheme, path.authority, top)


def describe(key: StorageKey) -> str:
    scheme, authority, top = key
    return f"{scheme}://{authority}/{top}" if top else f"{scheme}://{authority}"
