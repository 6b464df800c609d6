"""The keeper's loops: three threads over one ``Lease`` (``decide.py``), so none waits for another.

- the **lister** lists the job's ownership folder on its storage's records lane (once a poll while the
  lease is held, every retry period while it is not), each listing under a deadline of one poll;
- the **renewer** renews the heartbeat on the storage's heartbeat lane when ``decide`` says one is due,
  under the same deadline (``fencing/lanes.py``: a call is answered at its deadline, whatever the
  storage does);
- the **guard** looks for the JobManager every ``guard_seconds`` and kills it whenever it runs while the
  lease is not held: at the renew deadline, at a newer fence, and a JobManager that restarted (its
  container restarted by the kubelet) before the keeper holds the lease again.

A lister or renewer stuck on a hung storage delays neither the guard nor the other: the guard reads the
lease under a lock and needs no storage.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from webhook.common.paths import StoragePath
from webhook.fencing.layout import FOLDER, KEEPER_WRITER, Workload
from webhook.fencing.protocol import Ownership
from webhook.fencing.records import WHOLE_SECOND_TIMES, FencingStore, heartbeat_body
from webhook.fencing.renewal import retry_seconds
from webhook.keeper import metrics
from webhook.keeper.decide import (
    NEVER,
    Decision,
    Lease,
    answered,
    decide,
    inherited,
    listed,
    listing_due,
    sent,
)
from webhook.keeper.jobmanager import JobManagers, Process
from webhook.keeper.loops import Loops, written
from webhook.policy.fencing import FencingPolicy
from webhook.restore.snapshots import StorageError

log = logging.getLogger("webhook.keeper")


@dataclass(frozen=True)
class Settings:
    cluster: str
    workload: Workload
    checkpoint_dir: StoragePath
    epoch: int
    policy: FencingPolicy
    job_id: str = ""
    guard_seconds: float = 0.1

    @property
    def folder(self) -> StoragePath:
        return self.workload.folder(self.checkpoint_dir)


class Keeper(Loops):
    def __init__(
        self,
        settings: Settings,
        store: FencingStore,
        jobmanagers: JobManagers,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(settings.policy, store, jobmanagers, clock)
        self.settings = settings
        self._lease = Lease(settings.epoch)
        self._listed_at = float("-inf")
        self._held = False
        self._runs = 0
        self._inherited_at: float | None = None  # when a JobManager was found running at start

    # --- what the probes read --------------------------------------------------------------------------
    def _decide(self) -> Decision:
        with self._lock:
            lease = self._lease
            runs = self._runs
        return decide(lease, self.clock(), runs > 0, self.policy)

    # --- start -------------------------------------------------------------------------------------------
    def start(self) -> None:
        if self._off():
            return
        found = self.jobmanagers.find()
        with self._lock:
            self._runs = len(found)  # the renewer's first look must know it, before the guard's first scan
        if found:
            self._inherit(len(found))
        log.info(
            "keeper started",
            extra={
                "fields": self._fields(event="started", epoch=self.settings.epoch, jobmanagers=len(found))
            },
        )
        self._run_loops()

    def _inherit(self, running: int) -> None:
        """A JobManager runs already (the keeper's container restarted beside it): the lease counts as
        renewed a poll before its deadline at once (the guard starts with it), and the lister's first
        act may shorten that by the storage's time (``_refine``)."""
        now = self.clock()
        with self._lock:
            self._lease = inherited(
                self._lease, self.settings.cluster, Ownership(), None, now, now, self.policy
            )
            self._inherited_at = now
        log.info(
            "a JobManager runs already: the lease counts as renewed a poll before its deadline",
            extra={"fields": self._fields(event="inherited", jobmanagers=running)},
        )

    def _refine(self) -> None:
        """The heartbeat's age in storage time (its clock object, then a listing): no renewal began after
        it, so the inherited lease may only get shorter; unknown when the storage does not answer."""
        started = self._inherited_at if self._inherited_at is not None else self.clock()
        coarse = self.settings.checkpoint_dir.protocol in WHOLE_SECOND_TIMES
        try:
            clock_started = self.clock()
            metrics.REQUESTS.labels("clock").inc()
            storage_now = self.store.clock(
                self.settings.checkpoint_dir.child(FOLDER), self.policy.call_timeout
            )
            metrics.REQUESTS.labels("list").inc()
            list_started = self.clock()
            records = self.store.list(self.settings.folder, self.policy.call_timeout).ownership
        except StorageError as exc:
            log.warning(
                "the storage's time is unknown: the JobManager found keeps a poll before its deadline",
                extra={"fields": self._fields(event="inherit-unknown", error=str(exc))},
            )
            return
        told = inherited(
            Lease(self.settings.epoch), self.settings.cluster, records, storage_now, clock_started, started,
            self.policy, coarse,
        )  # fmt: skip
        with self._lock:
            if self._lease.attempted is None:  # no renewal of its own yet: the evidence can only shorten
                self._lease = replace(self._lease, renewed=min(self._lease.renewed, told.renewed))
            renewed = self._lease.renewed
        self._listed_at = list_started
        self._found(records, list_started)  # the listing vouches for renewals too
        log.info(
            "the inherited lease, by the storage's time",
            extra={
                "fields": self._fields(event="inherit-refined", renewedAgo=round(self.clock() - renewed, 3))
            },
        )

    # --- the loops -----------------------------------------------------------------------------------------
    def _lister(self) -> None:
        period = retry_seconds(self.policy)
        if self._inherited_at is not None:
            self._refine()
        while not self._stop.is_set():
            self._tick("lister")
            now = self.clock()
            with self._lock:
                superseded = self._lease.superseded is not None
            held = self.decision().holds
            if not superseded and listing_due(self._listed_at, now, held, self.policy):
                self._listed_at = now
                self._list(now)
            self._stop.wait(period)

    def _list(self, started: float) -> None:
        metrics.REQUESTS.labels("list").inc()
        try:
            records = self.store.list(self.settings.folder, self.policy.call_timeout).ownership
        except StorageError as exc:
            metrics.LISTINGS.labels("failed").inc()
            log.warning(
                "records not listed", extra={"fields": self._fields(event="list-failed", error=str(exc))}
            )
            return
        metrics.LISTINGS.labels("ok").inc()
        self._found(records, started)

    def _found(self, records: Ownership, started: float) -> None:
        with self._lock:
            before = self._lease
            self._lease = listed(self.settings.cluster, before, records, started)
            after = self._lease
        if after.superseded is not None and before.superseded is None:
            metrics.SUPERSEDED.set(1)
            fence = after.superseded
            log.error(
                "a newer fence of another cluster: the lease is never renewed again",
                extra={
                    "fields": self._fields(
                        event="superseded", fencedBy=fence.owner, fenceEpoch=fence.epoch, epoch=after.epoch
                    )
                },
            )

    def _renewer(self) -> None:
        period = retry_seconds(self.policy)
        while not self._stop.is_set():
            self._tick("renewer")
            now = self.clock()
            if self.decision().renew:
                with self._lock:
                    self._lease = sent(self._lease, now)
                self._renew(now)
                continue  # look again at once: a failed renewal waits for its retry period in ``due``
            self._stop.wait(period)

    def _renew(self, started: float) -> None:
        with self._lock:
            epoch = self._lease.epoch
        body = heartbeat_body(
            self.settings.workload, self.settings.cluster, epoch, self.settings.job_id, written()
        )
        body.update({"writer": KEEPER_WRITER, "pod": self.pod})
        metrics.REQUESTS.labels("beat").inc()
        ok = True
        try:
            self.store.beat(self.settings.folder, body, self.policy.call_timeout)
        except StorageError as exc:
            ok = False
            metrics.RENEWALS.labels("failed").inc()
            log.warning(
                "heartbeat not renewed", extra={"fields": self._fields(event="renew-failed", error=str(exc))}
            )
        else:
            metrics.RENEWALS.labels("ok").inc()
            metrics.LAST_RENEWAL.set(time.time() - (self.clock() - started))
        with self._lock:
            self._lease = answered(self._lease, started, ok)

    def _guard(self) -> None:
        while not self._stop.is_set():
            self._tick("guard")
            found = self.jobmanagers.find()
            with self._lock:
                self._runs = len(found)
            metrics.JOBMANAGER.set(len(found))
            decision = self.decision()
            self._held_changed(decision)
            if decision.stop and found:
                self._stop_jobmanager(found, decision)
            self._stop.wait(self.settings.guard_seconds)

    def _held_changed(self, decision: Decision) -> None:
        if decision.holds == self._held:
            return
        self._held = decision.holds
        metrics.HOLDS.set(1 if decision.holds else 0)
        if decision.holds:
            log.info("lease held: the JobManager may run", extra={"fields": self._fields(event="held")})
        else:
            log.error("lease lost", extra={"fields": self._fields(event="lost", reason=decision.reason)})

    def _stop_jobmanager(self, found: list[Process], decision: Decision) -> None:
        with self._lock:
            lease = self._lease
        reason = (
            "superseded" if lease.superseded else ("renew-deadline" if lease.renewed != NEVER else "not-held")
        )
        self._kill(found, reason, decision.reason, "JobManager stopped: the lease is not held")

    def _fields(self, **more: object) -> dict[str, object]:
        return {"object": str(self.settings.workload), "cluster": self.settings.cluster, **more}
