"""The agent's prechecks of running jobs' newest checkpoints, in the background (which are due is
``prechecks.due``'s answer, pure). ``Prechecker`` owns their state: when each job's last one started,
which are under way, the threads they run on. Its failures are logged and counted, never a copy's
trouble; the check leaves the job's verdict (``restore/verdict.py``) as a failover lookup would.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Iterable
from dataclasses import replace

from webhook.fencing import metrics
from webhook.fencing.background import Background
from webhook.fencing.copies import Copy
from webhook.fencing.layout import Workload
from webhook.fencing.prechecks import (
    PRECHECK_BUDGET_FACTOR,
    PRECHECK_DEADLINE_SECONDS,
    PRECHECKS_AT_ONCE,
    due,
)
from webhook.fencing.starts import resume_query, resume_skipped
from webhook.policy.restore import RestorePolicy
from webhook.restore.snapshots import Snapshots
from webhook.restore.storage.backends import Deadline
from webhook.restore.storage.search import CheckpointStorage

log = logging.getLogger(__name__)


class Prechecker:
    def __init__(self, storage: CheckpointStorage) -> None:
        self.storage = storage
        self._started: dict[Workload, float] = {}  # when each job's last precheck started (monotonic)
        self._busy: set[Workload] = set()  # under way
        self._threads = concurrent.futures.ThreadPoolExecutor(PRECHECKS_AT_ONCE, "fencing-precheck")
        self._tasks = Background()

    @property
    def known(self) -> frozenset[Workload]:
        """The jobs a precheck started for that are still listed running."""
        return frozenset(self._started)

    def run_due(self, running: Iterable[Copy], listed: Iterable[Workload], policy: RestorePolicy) -> None:
        """A poll: a job gone from the listing (``listed``) leaves no time behind; the ``running`` copies
        whose precheck is due are started."""
        present = set(listed)
        for gone in self._started.keys() - present:
            del self._started[gone]
        for copy in due(running, self._started, frozenset(self._busy), _mono(), policy):
            self.start(copy, policy)

    def not_running(self, workload: Workload) -> None:
        """The copy no longer runs: once it runs again its precheck is due at once."""
        self._started.pop(workload, None)

    def start(self, copy: Copy, policy: RestorePolicy) -> None:
        """Check a running job's newest checkpoint as a failover would, in the background: the storage
        (``write_verdicts``) leaves the verdict."""
        query = resume_query(copy, policy)
        if query is None:
            return
        query = replace(query, budget=query.budget * PRECHECK_BUDGET_FACTOR)
        workload = copy.patched
        self._started[workload] = _mono()
        self._busy.add(workload)

        def check() -> Snapshots:
            deadline = Deadline(PRECHECK_DEADLINE_SECONDS)
            found = self.storage.snapshots(query, deadline)
            self.storage.settle(max(deadline.remaining(), 0.0))  # its verdict written: what "kept" counts
            return found

        async def precheck() -> None:
            loop = asyncio.get_running_loop()
            try:
                found = await loop.run_in_executor(self._threads, check)
            except Exception as exc:  # a storage error, the threads shut down (stopping), any fault of it
                metrics.VERDICTS.labels("error").inc()
                log.info("verdict not kept", extra={"fields": {"object": str(workload), "error": str(exc)}})
                return
            finally:
                self._busy.discard(workload)
            result = "unchecked" if found.unchecked else "passed-over" if found.rejected else "restorable"
            metrics.VERDICTS.labels(result).inc()
            if found.unchecked or found.rejected:  # a failover now would pass over or hold as well
                log.warning(
                    "verdict check of a running job",
                    extra={
                        "fields": {"object": str(workload), "result": result, "why": resume_skipped(found)}
                    },
                )

        self._tasks.spawn(precheck())

    async def settle(self) -> None:
        """Wait for the prechecks already started (tests that drive one pass at a time)."""
        await self._tasks.settle()

    def cancel(self) -> None:
        self._tasks.cancel()
        self._threads.shutdown(wait=False, cancel_futures=True)


def _mono() -> float:
    return asyncio.get_running_loop().time()
