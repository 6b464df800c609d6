"""One lookup's storage requests: counted against the policy's budget, chained into round trips, and run
on daemon threads (a lookup abandoned at its deadline never holds a process at exit)."""

from __future__ import annotations

import concurrent.futures
import gc
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from webhook.restore.snapshots import Trips
from webhook.restore.verdict import budget_units

Listing = dict[str, tuple[int | None, datetime | None]]  # name -> (size, modified); files only


class Unchecked(Exception):
    """The lookup's request budget ran out before a candidate was checked."""


class Ledger:
    """One lookup's storage requests, and how deep the chain of requests made one after another is."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.requests = 0
        self.heads = 0  # of the requests, HEADs of single files (the budget counts them by the hundred)
        self.probes = 0  # requests that found a chk-N without _metadata (in progress): not checking
        self.deepest = 0
        self.lock = threading.Lock()

    def spend(self, pages: int, depth: int) -> None:
        with self.lock:
            self.requests += pages
            self.deepest = max(self.deepest, depth)

    def headed(self, depth: int) -> None:
        with self.lock:
            self.requests += 1
            self.heads += 1
            self.deepest = max(self.deepest, depth)

    def probed(self, requests: int) -> None:
        with self.lock:
            self.probes += requests

    def check(self, what: str) -> None:
        """Stop before checking ``what`` when the requests spent checking snapshots reached the
        budget (finding the directories of checkpoints in progress is not checking one)."""
        with self.lock:
            over = budget_units(self.requests - self.heads - self.probes, self.heads) >= self.budget
        if over:
            raise Unchecked(
                f"{what} was not checked: the lookup made its {self.budget} storage requests "
                "(policy verifyBudget)"
            )

    def trips(self) -> Trips:
        with self.lock:
            return Trips(self.deepest, self.requests)


class Cursor:
    """Where one line of work stands in its lookup: how many requests it waited for one after another."""

    def __init__(self, ledger: Ledger, depth: int = 0) -> None:
        self.ledger = ledger
        self.depth = depth

    def fork(self) -> Cursor:
        return Cursor(self.ledger, self.depth)

    def step(self, pages: int = 1) -> None:
        self.depth += pages
        self.ledger.spend(pages, self.depth)

    def head(self) -> None:
        """One HEAD of a single file."""
        self.depth += 1
        self.ledger.headed(self.depth)

    def join(self, *others: Cursor) -> None:
        self.depth = max([self.depth, *(o.depth for o in others)])


class DaemonPool:
    """A fixed set of daemon threads: a lookup abandoned at its deadline never holds a process at exit
    (a ThreadPoolExecutor's threads are joined), and threads are made again in a forked worker."""

    def __init__(self, size: int, name: str) -> None:
        self.size = size
        self.name = name
        self._pid = -1
        self._queue: queue.SimpleQueue[tuple[concurrent.futures.Future[Any], Callable[[], Any]]]
        self._lock = threading.Lock()

    def submit(self, fn: Callable[[], Any]) -> concurrent.futures.Future[Any]:
        with self._lock:
            if self._pid != os.getpid():
                self._pid = os.getpid()
                self._queue = queue.SimpleQueue()
                for i in range(self.size):
                    threading.Thread(
                        target=self._work, args=(self._queue,), name=f"{self.name}-{i}", daemon=True
                    ).start()
            future: concurrent.futures.Future[Any] = concurrent.futures.Future()
            self._queue.put((future, fn))
        return future

    @staticmethod
    def _work(work: queue.SimpleQueue[tuple[concurrent.futures.Future[Any], Callable[[], Any]]]) -> None:
        while True:
            future, fn = work.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as exc:  # handed to whoever waits, as an executor would
                future.set_exception(exc)


# Storage requests of all lookups of a process (leaves: a request each, never waiting on another) and
# the lines of one lookup that run beside each other (branches: wait on leaves only).
REQUESTS = DaemonPool(64, "storage-request")
BRANCHES = DaemonPool(16, "storage-branch")


_pause_lock = threading.Lock()
_pauses = 0  # lines of work inside ``collection_paused`` that paused the collector
_resume = False  # whether the collector was on when the first of them paused it
_paused_at = 0.0  # when it did (monotonic)
# A pause lasts no longer than this for lines of work that join it: overlapping lookups of a busy
# worker never keep the collector off for long (a lookup that starts later runs with it on).
MAX_PAUSE_SECONDS = 1.0


@contextmanager
def collection_paused() -> Iterator[None]:
    """No cyclic garbage collection while a lookup reads a large ``_metadata`` and the files it names:
    100,000 named files are some 400,000 objects that live until the check ends, and the collector
    walked them again and again as they were made (~0.2 s of 0.5 s naming them, measured). Nothing of
    that is a cycle; the collector is on again as the last line of work that paused it leaves (as it
    was), and one that comes ``MAX_PAUSE_SECONDS`` into a pause runs with it on."""
    global _pauses, _resume, _paused_at
    with _pause_lock:
        joined = _pauses == 0 or time.monotonic() - _paused_at <= MAX_PAUSE_SECONDS
        if joined:
            if _pauses == 0:
                _resume, _paused_at = gc.isenabled(), time.monotonic()
                gc.disable()
            _pauses += 1
    try:
        yield
    finally:
        if joined:
            with _pause_lock:
                _pauses -= 1
                if _pauses == 0 and _resume:
                    gc.enable()
